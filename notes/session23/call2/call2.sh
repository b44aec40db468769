# Session 23, call 2 (main + the compressed GEMV's P = 2, bulk slices; no carry): the GPU test of the compressed
# GEMV (P = 2 configs added), then `sweep --engine z --styles 2` on o and the unpooler, then qkv_gate, m = 1, 8, 16.
export PYTHONPATH=. PYTHONUNBUFFERED=1
S=$(date +%s)
sha256sum dist/submission.py | cut -c1-16
timeout -s INT 220 python3 -m pytest -q -x tests/test_gpu.py -k compressed > $OUT/gpu_z.txt 2>&1
echo "test rc=$? t=$(( $(date +%s)-S ))"; tail -4 $OUT/gpu_z.txt
timeout -s INT 200 python3 -m generator sweep --engine z --styles 2 --layers o --layers unpooler --m 1 --m 8 --m 16 --json $OUT/zsweep_p2_a.json --write $OUT/ztable_p2_a.yaml > $OUT/zsweep_p2_a.txt 2>&1
echo "sweep a rc=$? t=$(( $(date +%s)-S ))"; tail -8 $OUT/zsweep_p2_a.txt
timeout -s INT $(( 580 - ($(date +%s)-S) )) python3 -m generator sweep --engine z --styles 2 --layers qkv_gate --m 1 --m 8 --m 16 --json $OUT/zsweep_p2_b.json --write $OUT/ztable_p2_b.yaml > $OUT/zsweep_p2_b.txt 2>&1
echo "sweep b rc=$? t=$(( $(date +%s)-S ))"; tail -5 $OUT/zsweep_p2_b.txt
