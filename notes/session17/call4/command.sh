# Session 17, call 4 (main as it lands, carry [".whl"]): the landed dist/submission.py itself (sha256 7bf9087c...,
# never run on the H200 before: it differs from session 16's verified file in two comments), checked as it is:
# build --check, verify, every GPU test, bench.
set -u
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl
export PYTHONPATH=.:/tmp/site PYTHONUNBUFFERED=1
S=$(date +%s)
sha256sum dist/submission.py | cut -c1-16; python3 -m generator build --check 2>&1 | tail -1
timeout -s INT 120 python3 -m generator verify > $OUT/verify.txt 2>&1; echo "verify rc=$? t=$(( $(date +%s)-S ))"; tail -1 $OUT/verify.txt
timeout -s INT 100 python3 -m generator bench --json $OUT/bench.json > $OUT/bench.txt 2>&1
echo "bench rc=$? t=$(( $(date +%s)-S ))"; grep -E "^(qkv_gate|o |pooler|unpooler|router) +(1|8|16|32) " $OUT/bench.txt; grep "launch floor\|geometric" $OUT/bench.txt
timeout -s INT $(( 395 - ($(date +%s) - S) )) python3 -m pytest -q tests/test_gpu.py > $OUT/gpu_tests.txt 2>&1
echo "gpu tests rc=$? t=$(( $(date +%s)-S ))"; tail -3 $OUT/gpu_tests.txt
