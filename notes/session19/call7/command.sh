# Session 19, call 7 (branch ring-depths; carry [".whl"]): the file with one list of TMA ring depths (host code
# only: every kernel's SASS is byte-identical to main's): build --check, verify, the TMA GPU test, then bench in
# what is left of the device budget.
set -u
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl
export PYTHONPATH=.:/tmp/site PYTHONUNBUFFERED=1
S=$(date +%s)
sha256sum dist/submission.py | cut -c1-16; python3 -m generator build --check 2>&1 | tail -1
timeout -s INT 150 python3 -m generator verify > $OUT/verify.txt 2>&1; echo "verify rc=$? t=$(( $(date +%s)-S ))"; tail -1 $OUT/verify.txt
timeout -s INT 130 python3 -m pytest -q tests/test_gpu.py -k tma > $OUT/gpu_tests.txt 2>&1
echo "gpu tests rc=$? t=$(( $(date +%s)-S ))"; tail -1 $OUT/gpu_tests.txt
timeout -s INT $(( 345 - ($(date +%s) - S) )) python3 -m generator bench --json $OUT/bench.json > $OUT/bench.txt 2>&1
echo "bench rc=$? t=$(( $(date +%s)-S ))"; grep -E "^(qkv_gate|o |pooler|unpooler|router) +(1|8|16|32) " $OUT/bench.txt; grep "launch floor\|geometric" $OUT/bench.txt
