# Session 24, call 2 (branch z-tail, no carry). Call 1: the compressed GEMV's exception pass cost 0.47 us of
# o m = 1's 9.62 (x gathered from global memory after the loop). z-tail parks x in shared memory as the warps
# consume it (P = 0, o's tile), so the pass reads x there. 1) the compressed GEMV's GPU test (both distributions,
# every plain layer, K splits of both kinds, poisoned outputs); 2) ab on o against the tables' engines (pooler's
# z entry too: its kernel's registers moved, no x tile there); 3) the z sweep on o.
export PYTHONPATH=. PYTHONUNBUFFERED=1
S=$(date +%s)
timeout -s INT 240 python3 -m pytest -q -x tests/test_gpu.py -k "compressed" > $OUT/test_gpu_z.txt 2>&1
echo "test rc=$? t=$(( $(date +%s)-S ))"; tail -3 $OUT/test_gpu_z.txt
timeout -s INT 200 python3 -m generator ab --rounds 8 \
  o:1:z:8,1,1,0,1,0 o:1:gemv:8,1,2,1,2,0 o:8:z:8,1,1,0,1,0 o:8:gemv:8,1,4,0,2,0 \
  o:16:z:8,1,1,0,1,0 o:16:z:8,1,1,0,2,0 o:16:tma:1,8,0 pooler:1:z:8,1,4,0,1,0 > $OUT/ab_ztail.txt 2>&1
echo "ab rc=$? t=$(( $(date +%s)-S ))"; tail -14 $OUT/ab_ztail.txt
timeout -s INT 200 python3 -m generator sweep --engine z --layers o --m 1 --m 8 --m 16 --write $OUT/ztable_o.yaml \
  > $OUT/sweep_z_o.txt 2>&1
echo "sweep rc=$? t=$(( $(date +%s)-S ))"; tail -12 $OUT/sweep_z_o.txt
