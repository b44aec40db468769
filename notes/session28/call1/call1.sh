# Session 28, call 1: the TMA GEMV with x resident (C = 4, branch `xres`): x copied by address into shared memory
# at launch instead of a tensor-map box per slot. Checked against float64 and timed beside the entries (ab), then
# the GPU tests (their first run since session 27's refactor of the compressed-GEMV tests).
export PYTHONPATH=. PYTHONUNBUFFERED=1
S=$(date +%s)
sha256sum dist/submission.py | cut -c1-16
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader
timeout -s INT 330 python3 -m generator ab --rounds 8 \
  o:16:tma:1,8,0 o:16:tma:1,8,4 o:16:tma:1,4,4 o:16:tma:1,16,4 o:16:tma:2,8,4 o:16:z:8,1,1,0,1,0 \
  o:32:tma:1,8,0 o:32:tma:1,8,4 o:9:tma:1,8,4 o:5:tma:1,8,4 o:1:tma:1,8,4 o:8:tma:1,8,4 o:8:z:8,1,1,0,1,0 \
  unpooler:16:tma:1,12,0 unpooler:16:tma:1,8,4 > $OUT/ab_xres.txt 2>&1
echo "ab rc=$? t=$(( $(date +%s)-S ))"; tail -20 $OUT/ab_xres.txt
timeout -s INT 200 python3 -m pytest -q tests/test_gpu.py > $OUT/test_gpu.txt 2>&1
echo "gpu tests rc=$? t=$(( $(date +%s)-S ))"; tail -5 $OUT/test_gpu.txt
