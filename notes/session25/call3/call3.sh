# Session 25, call 3 (main, no carry). The compressed GEMV's exceptions now travel as patch words in each K group's
# header (the first three) and an overflow table (the rest, nearly always empty): 1) its GPU test (both
# distributions, every plain layer, K splits of both kinds, poisoned outputs; heavy o exercises the overflow);
# 2) ab on o against the tables' engines, and the z entries of pooler / unpooler; 3) the z sweep on o.
export PYTHONPATH=. PYTHONUNBUFFERED=1
S=$(date +%s)
timeout -s INT 240 python3 -m pytest -q -x tests/test_gpu.py -k "compressed" > $OUT/test_gpu_z.txt 2>&1
echo "test rc=$? t=$(( $(date +%s)-S ))"; tail -3 $OUT/test_gpu_z.txt
timeout -s INT 200 python3 -m generator ab --rounds 8 \
  o:1:z:8,1,1,0,1,0 o:1:gemv:8,1,2,1,2,0 o:8:z:8,1,1,0,1,0 o:8:gemv:8,1,4,0,2,0 \
  o:16:z:8,1,1,0,1,0 o:16:z:8,1,1,0,2,0 o:16:tma:1,8,0 pooler:1:z:8,1,4,0,1,0 pooler:8:z:8,1,4,0,1,0 \
  unpooler:16:z:8,1,2,0,2,0 > $OUT/ab_patches.txt 2>&1
echo "ab rc=$? t=$(( $(date +%s)-S ))"; tail -16 $OUT/ab_patches.txt
timeout -s INT 150 python3 -m generator sweep --engine z --layers o --m 1 --m 8 --m 16 --write $OUT/ztable_o.yaml \
  > $OUT/sweep_z_o.txt 2>&1
echo "sweep rc=$? t=$(( $(date +%s)-S ))"; tail -12 $OUT/sweep_z_o.txt
