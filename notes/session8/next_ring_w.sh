# Prepared in session 8 for the next device call, on branch ring-w (compiled locally without spills, never run on
# a GPU): styles 6, 7 (three and four weight register sets, one x set; 4, 5 are the same loop at depth 2, whose
# PTX is unchanged by the rewrite up to register names). Do deeper rings of smaller trips beat DOUBLE_W's U = 2?
#  1. sweep --styles 6 --styles 7 on every layer (each candidate checked against float64 on a NaN-poisoned
#     output; current entries kept unless beaten by 2 %), build, bench against session 8's call 4;
#  2. if an entry changed: a second call with `pytest tests/test_gpu.py` and `generator verify` on that file.
set -u
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl
export PYTHONPATH=.:/tmp/site PYTHONUNBUFFERED=1
S=$(date +%s)
timeout -s INT 380 python3 -m generator sweep --styles 6 --styles 7 --reps 20 --layers qkv_gate --layers pooler \
    --layers o --layers unpooler --layers router --json $OUT/sweep_ring.json > $OUT/sweep_ring.txt 2>&1
echo "sweep rc=$? t=$(( $(date +%s)-S ))"
grep -v "^\s*$" $OUT/sweep_ring.txt | tail -22; cp tables/ctable.yaml $OUT/ctable.yaml
python3 -m generator build > /dev/null 2>&1; echo "build rc=$? t=$(( $(date +%s)-S ))"
timeout -s INT $(( 590 - ($(date +%s) - S) )) python3 -m generator bench --json $OUT/bench.json \
    --compare notes/session8/call4_bench.json > $OUT/bench.txt 2>&1; echo "bench rc=$? t=$(( $(date +%s)-S ))"
grep -v "^\s*$" $OUT/bench.txt | head -48
