# Prepared in session 9 for the next device call (on main, carry [".whl"]): retune the entries that still use the
# semaphore split-K (C = 0) now that C = 1 is a push into rank 0's shared memory (notes/README.md, Session 9):
# router m = 32 on the register GEMV, and the TMA GEMV at m = 16, 32 on qkv_gate, pooler, router (TTABLE keeps
# an entry only where it beats CTABLE's choice by >= 2 %). Every candidate is checked against float64 on a
# NaN-poisoned output. Then build and bench against this session's call 3. ~7 min; next_check.sh follows if a
# table changed.
set -u
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl
export PYTHONPATH=.:/tmp/site PYTHONUNBUFFERED=1
S=$(date +%s)
timeout -s INT 200 python3 -m generator sweep --reps 20 --layers router --m 32 --json $OUT/sweep_router32.json \
    > $OUT/sweep_router32.txt 2>&1; echo "sweep router rc=$? t=$(( $(date +%s)-S ))"; tail -3 $OUT/sweep_router32.txt
timeout -s INT 180 python3 -m generator sweep --engine tma --reps 20 --layers qkv_gate --layers pooler --layers router \
    --m 16 --m 32 --json $OUT/sweep_tma.json > $OUT/sweep_tma.txt 2>&1; echo "sweep tma rc=$? t=$(( $(date +%s)-S ))"
tail -8 $OUT/sweep_tma.txt; cp tables/ctable.yaml tables/ttable.yaml $OUT/; git diff --stat tables/
python3 -m generator build > /dev/null 2>&1; echo "build rc=$? t=$(( $(date +%s)-S ))"; cp dist/submission.py $OUT/
timeout -s INT $(( 585 - ($(date +%s) - S) )) python3 -m generator bench --json $OUT/bench.json \
    --compare notes/session9/call3_bench.json > $OUT/bench.txt 2>&1; echo "bench rc=$? t=$(( $(date +%s)-S ))"
grep -v "^\s*$" $OUT/bench.txt | sed -n '/old us/,$p'
