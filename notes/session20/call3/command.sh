# Session 20, call 3 (branch half-n64 with the merged wgmma as the rule, no switch; carry [".whl"]): build --check,
# verify, the TMA GPU test, bench; then ab of the half-tile ring depths at m = 32 (12 against 14 slots).
set -u
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl
export PYTHONPATH=.:/tmp/site PYTHONUNBUFFERED=1
S=$(date +%s)
sha256sum dist/submission.py | cut -c1-16; python3 -m generator build --check 2>&1 | tail -1
timeout -s INT 150 python3 -m generator verify > $OUT/verify.txt 2>&1; echo "verify rc=$? t=$(( $(date +%s)-S ))"; tail -1 $OUT/verify.txt
timeout -s INT 130 python3 -m pytest -q tests/test_gpu.py -k tma > $OUT/gpu_tests.txt 2>&1
echo "gpu tests rc=$? t=$(( $(date +%s)-S ))"; tail -1 $OUT/gpu_tests.txt
timeout -s INT 150 python3 -m generator bench --json $OUT/bench.json > $OUT/bench.txt 2>&1
echo "bench rc=$? t=$(( $(date +%s)-S ))"; grep -E "^(qkv_gate|o |pooler|unpooler|router) +(1|8|16|32) " $OUT/bench.txt; grep "launch floor\|geometric" $OUT/bench.txt
timeout -s INT 100 python3 -m generator ab --rounds 5 qkv_gate:32:tma:1,14,3 qkv_gate:32:tma:1,12,3 \
  pooler:32:tma:1,12,3 pooler:32:tma:1,14,3 > $OUT/ab_depths.txt 2>&1
echo "ab rc=$? t=$(( $(date +%s)-S ))"; grep -v Warning $OUT/ab_depths.txt | tail -6
