# Session 8, call 2: pipelining styles 4, 5 (DOUBLE_W: two weight sets, one x set; branch double-w).
# sweep --styles 4 --styles 5 (each candidate checked on a NaN-poisoned output; current entries kept unless
# beaten by 2 %), build with what it picks, bench against session 7's call 1.
set -u
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl
export PYTHONPATH=.:/tmp/site PYTHONUNBUFFERED=1
S=$(date +%s)
timeout -s INT 380 python3 -m generator sweep --styles 4 --styles 5 --reps 20 --layers qkv_gate --layers pooler \
    --layers o --layers unpooler --layers router --json $OUT/sweep_w.json > $OUT/sweep_w.txt 2>&1
echo "sweep rc=$? t=$(( $(date +%s)-S ))"
grep -v "^\s*$" $OUT/sweep_w.txt | tail -22; cp tables/ctable.yaml $OUT/ctable.yaml
python3 -m generator build > /dev/null 2>&1; echo "build rc=$? t=$(( $(date +%s)-S ))"
timeout -s INT $(( 590 - ($(date +%s) - S) )) python3 -m generator bench --json $OUT/bench.json \
    --compare notes/session7/call1_bench.json > $OUT/bench.txt 2>&1; echo "bench rc=$? t=$(( $(date +%s)-S ))"
grep -v "^\s*$" $OUT/bench.txt | head -48
