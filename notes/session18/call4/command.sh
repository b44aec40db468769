# Session 18, call 4 (main; carry [".whl"]): the landed file as it is (STAGES = 14 merged; qkv_gate m = 32 at
# (1, 14, 3)): every GPU test, verify, bench.
set -u
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl
export PYTHONPATH=.:/tmp/site PYTHONUNBUFFERED=1
S=$(date +%s)
sha256sum dist/submission.py | cut -c1-16; grep -m1 "inputs sha256" dist/submission.py
timeout -s INT 170 python3 -m pytest -q tests/test_gpu.py > $OUT/gpu_tests.txt 2>&1
echo "gpu tests rc=$? t=$(( $(date +%s)-S ))"; tail -2 $OUT/gpu_tests.txt
timeout -s INT 140 python3 -m generator verify > $OUT/verify.txt 2>&1; echo "verify rc=$? t=$(( $(date +%s)-S ))"; tail -1 $OUT/verify.txt
timeout -s INT $(( 540 - ($(date +%s) - S) )) python3 -m generator bench --json $OUT/bench.json > $OUT/bench.txt 2>&1
echo "bench rc=$? t=$(( $(date +%s)-S ))"; grep -E "^(qkv_gate|o |pooler|unpooler|router) +(1|8|16|32) " $OUT/bench.txt; grep "launch floor\|geometric" $OUT/bench.txt
