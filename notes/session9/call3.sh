# Session 9, call 3 (branch push-reduce): the cluster split-K (C = 1) of all three GEMVs rewritten as a push into
# rank 0's shared-memory inbox (st.async + one mbarrier, common.cuh), after tprobe showed the TMA GEMV's split-K
# tail costing 1.7-1.9 us. GPU tests first (every engine, C = 1 configs included); only if they pass: sweep the
# router's CTABLE (its m = 1..16 entries are C = 1) and TTABLE on qkv_gate / pooler / router m = 16, 32 (every
# candidate checked against float64 on a NaN-poisoned output), build, verify, bench against session 8's call 4.
set -u
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl
export PYTHONPATH=.:/tmp/site PYTHONUNBUFFERED=1
S=$(date +%s)
left() { echo $(( $1 - ($(date +%s) - S) )); }
timeout -s INT 200 python3 -m pytest -q tests/test_gpu.py > $OUT/gpu_tests.txt 2>&1; rc=$?
echo "gpu tests rc=$rc t=$(( $(date +%s)-S ))"; tail -3 $OUT/gpu_tests.txt
if [ $rc -ne 0 ]; then grep -m5 -E "Error|assert|FAILED" $OUT/gpu_tests.txt; exit 1; fi
timeout -s INT 100 python3 -m generator sweep --reps 20 --layers router --json $OUT/sweep_router.json \
    > $OUT/sweep_router.txt 2>&1; echo "sweep router rc=$? t=$(( $(date +%s)-S ))"; tail -5 $OUT/sweep_router.txt
timeout -s INT 70 python3 -m generator sweep --engine tma --reps 20 --layers qkv_gate --layers pooler --layers router \
    --m 16 --m 32 --json $OUT/sweep_tma.json > $OUT/sweep_tma.txt 2>&1; echo "sweep tma rc=$? t=$(( $(date +%s)-S ))"
tail -7 $OUT/sweep_tma.txt; cp tables/ctable.yaml tables/ttable.yaml $OUT/
python3 -m generator build > $OUT/build.txt 2>&1; echo "build rc=$? t=$(( $(date +%s)-S ))"; tail -2 $OUT/build.txt
timeout -s INT 130 python3 -m generator verify > $OUT/verify.txt 2>&1; echo "verify rc=$? t=$(( $(date +%s)-S ))"
tail -2 $OUT/verify.txt; grep -m1 "inputs sha256" dist/submission.py; cp dist/submission.py $OUT/
timeout -s INT $(left 470) python3 -m generator bench --json $OUT/bench.json \
    --compare notes/session8/call4_bench.json > $OUT/bench.txt 2>&1; echo "bench rc=$? t=$(( $(date +%s)-S ))"
grep -v "^\s*$" $OUT/bench.txt | head -48
