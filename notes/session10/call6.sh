# Session 10, call 6 (carry [".whl"]): the plain GEMV with uneven K splits (any S up to K/32). Sweep the router at
# m = 32 (S = 6: 16 clusters of 6 fit at once, 8 does not: call5_occ.txt), build, GPU tests (a new one for uneven
# splits, both reductions, every layer, NaN-poisoned), verify, bench against call 4's bench_b.
set -u
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl
export PYTHONPATH=.:/tmp/site PYTHONUNBUFFERED=1
S=$(date +%s)
timeout -s INT 170 python3 -m generator sweep --reps 20 --layers router --m 32 --json $OUT/sweep_router32.json \
    > $OUT/sweep_router32.txt 2>&1; echo "sweep rc=$? t=$(( $(date +%s)-S ))"; tail -3 $OUT/sweep_router32.txt
cp tables/ctable.yaml $OUT/; git diff --stat tables/
python3 -m generator build > /dev/null 2>&1; echo "build rc=$? t=$(( $(date +%s)-S ))"; grep -m1 "inputs sha256" dist/submission.py
timeout -s INT 170 python3 -m pytest -q tests/test_gpu.py > $OUT/gpu_tests.txt 2>&1
echo "gpu tests rc=$? t=$(( $(date +%s)-S ))"; tail -2 $OUT/gpu_tests.txt
timeout -s INT 130 python3 -m generator verify > $OUT/verify.txt 2>&1; echo "verify rc=$? t=$(( $(date +%s)-S ))"
tail -2 $OUT/verify.txt
timeout -s INT $(( 500 - ($(date +%s) - S) )) python3 -m generator bench --json $OUT/bench.json \
    --compare notes/session10/call4_bench_b.json > $OUT/bench.txt 2>&1; echo "bench rc=$? t=$(( $(date +%s)-S ))"
grep -v "^\s*$" $OUT/bench.txt | sed -n '/old us/,$p' | grep -E "^(qkv_gate|o |pooler|unpooler|router|geomean)" | awk '$2<=32 || /geomean/'
