# Session 10, call 2 (no wheels needed): the file call 1's tables build (dist/, identical to call 1's apart from
# the inputs hash) through the GPU tests and verify; then lprobe.py (rank 0 leads the cluster split-K).
set -u
export PYTHONPATH=. PYTHONUNBUFFERED=1
S=$(date +%s)
grep -m1 "inputs sha256" dist/submission.py
timeout -s INT 200 python3 -m pytest -q tests/test_gpu.py > $OUT/gpu_tests.txt 2>&1
echo "gpu tests rc=$? t=$(( $(date +%s)-S ))"; tail -2 $OUT/gpu_tests.txt
timeout -s INT 150 python3 -m generator verify > $OUT/verify.txt 2>&1; echo "verify rc=$? t=$(( $(date +%s)-S ))"
tail -2 $OUT/verify.txt
timeout -s INT $(( 580 - ($(date +%s) - S) )) python3 notes/session10/lprobe.py time $OUT/lprobe.json 2>&1 | tee $OUT/lprobe.txt
echo "lprobe t=$(( $(date +%s)-S ))"
