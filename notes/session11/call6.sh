# Session 11, call 6 (carry [".whl"]; the session's last ~300 s of device time): TTABLE swept with C = 0 / 1 / 2
# on every layer at m = 1..32, build, verify, then the GPU tests with whatever time is left.
set -u
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl
export PYTHONPATH=.:/tmp/site PYTHONUNBUFFERED=1
S=$(date +%s)
timeout -s INT 160 python3 -m generator sweep --engine tma --reps 20 --m 1 --m 8 --m 16 --m 32 \
    --json $OUT/sweep_tma.json > $OUT/sweep_tma.txt 2>&1
echo "sweep rc=$? t=$(( $(date +%s)-S ))"; tail -21 $OUT/sweep_tma.txt; cp tables/ttable.yaml $OUT/
python3 -m generator build > /dev/null 2>&1; echo "build rc=$? t=$(( $(date +%s)-S ))"; grep -m1 "inputs sha256" dist/submission.py
timeout -s INT 125 python3 -m generator verify > $OUT/verify.txt 2>&1; echo "verify rc=$? t=$(( $(date +%s)-S ))"
tail -2 $OUT/verify.txt
timeout -s INT $(( 262 - ($(date +%s) - S) )) python3 -m pytest -q tests/test_gpu.py > $OUT/gpu_tests.txt 2>&1
echo "gpu tests rc=$? t=$(( $(date +%s)-S ))"; tail -2 $OUT/gpu_tests.txt
