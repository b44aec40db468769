# Session 22, call 5 (branch red-split, no carry): the file to land, router m = 17..32 on C = 2
# ([8, 16, 1, 1, 1, 2]). verify (every shape, both distributions, graph replays), bench against notes/bench.json,
# then the GPU test of every tabulated GEMV config.
export PYTHONPATH=. PYTHONUNBUFFERED=1
S=$(date +%s)
sha256sum dist/submission.py | cut -c1-16
timeout -s INT 200 python3 -m generator verify > $OUT/verify.txt 2>&1
echo "verify rc=$? t=$(( $(date +%s)-S ))"; tail -4 $OUT/verify.txt
timeout -s INT 170 python3 -m generator bench --json $OUT/bench.json --compare notes/bench.json > $OUT/bench.txt 2>&1
echo "bench rc=$? t=$(( $(date +%s)-S ))"; grep -E "^(qkv_gate|o |pooler|unpooler|router) +(1|8|16|32) " $OUT/bench.txt; grep "launch floor\|geometric" $OUT/bench.txt
timeout -s INT 120 python3 -m pytest -q -x tests/test_gpu.py -k tabulated > $OUT/gpu_tabulated.txt 2>&1
echo "test rc=$? t=$(( $(date +%s)-S ))"; tail -2 $OUT/gpu_tabulated.txt
