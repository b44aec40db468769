# Session 16, call 3 (carry [".whl"]): main as it lands (round-unrolled ring merged, C = 4 removed, TTABLE from
# call 1): the committed dist/submission.py checked against its sources, verify, bench, then every GPU test.
set -u
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl
export PYTHONPATH=.:/tmp/site PYTHONUNBUFFERED=1
S=$(date +%s)
python3 -m generator build --check > $OUT/build_check.txt 2>&1; echo "build --check rc=$?"; grep -m1 "inputs sha256" dist/submission.py
sha256sum dist/submission.py | tee $OUT/submission.sha256
timeout -s INT 110 python3 -m generator verify > $OUT/verify.txt 2>&1; echo "verify rc=$? t=$(( $(date +%s)-S ))"
tail -2 $OUT/verify.txt
timeout -s INT 120 python3 -m generator bench --json $OUT/bench.json > $OUT/bench.txt 2>&1
echo "bench rc=$? t=$(( $(date +%s)-S ))"; grep -E "^(qkv_gate|o |pooler|unpooler|router) +(1|8|16|32) " $OUT/bench.txt; grep "launch floor\|geometric" $OUT/bench.txt
timeout -s INT $(( 575 - ($(date +%s) - S) )) python3 -m pytest -q tests/test_gpu.py > $OUT/gpu_tests.txt 2>&1
echo "gpu tests rc=$? t=$(( $(date +%s)-S ))"; tail -4 $OUT/gpu_tests.txt
