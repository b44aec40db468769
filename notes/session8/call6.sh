# Session 8, call 6: the final dist/ (call 4's file plus a comment in CUDA_SRC) checked again: verify, GPU tests.
set -u
export PYTHONPATH=. PYTHONUNBUFFERED=1
S=$(date +%s)
timeout -s INT 200 python3 -m generator verify > $OUT/verify.txt 2>&1; echo "verify rc=$? t=$(( $(date +%s)-S ))"
tail -2 $OUT/verify.txt; head -1 dist/submission.py; grep -m1 "inputs sha256" dist/submission.py
timeout -s INT $(( 330 - ($(date +%s) - S) )) python3 -m pytest -q tests/test_gpu.py > $OUT/gpu_tests.txt 2>&1
echo "gpu tests rc=$? t=$(( $(date +%s)-S ))"; tail -2 $OUT/gpu_tests.txt
