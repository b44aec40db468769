# Session 23, call 4 (main, no carry; dist sha 0ef4f89d1306b8d7, the file calls 1 and 3 verified and benched):
# every GPU test on the landed file, the tabulated-config test included (it hit its 120 s limit in session 22).
export PYTHONPATH=. PYTHONUNBUFFERED=1
S=$(date +%s)
sha256sum dist/submission.py | cut -c1-16
timeout -s INT 420 python3 -m pytest -q -rA tests/test_gpu.py > $OUT/gpu_tests.txt 2>&1
echo "tests rc=$? t=$(( $(date +%s)-S ))"; grep -E "PASSED|FAILED|ERROR|passed|failed" $OUT/gpu_tests.txt | tail -12
