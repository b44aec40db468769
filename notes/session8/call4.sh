# Session 8, call 4: DOUBLE (P = 1, 3) at NB <= 2 may now take 112 data registers (U = 2, NB = 2, R = 2 compiled
# without spills): sweep those styles at m = 16 against the current entries (kept unless beaten by 2 %), build
# with what it picks, then the judge's checks on that file: every GPU test, verify, bench against session 7.
set -u
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl
export PYTHONPATH=.:/tmp/site PYTHONUNBUFFERED=1
S=$(date +%s)
timeout -s INT 200 python3 -m generator sweep --styles 1 --styles 3 --m 16 --reps 20 --layers qkv_gate \
    --layers pooler --layers o --layers unpooler --json $OUT/sweep_d.json > $OUT/sweep_d.txt 2>&1
echo "sweep rc=$? t=$(( $(date +%s)-S ))"
grep -v "^\s*$" $OUT/sweep_d.txt | tail -6; cp tables/ctable.yaml $OUT/ctable.yaml
python3 -m generator build > /dev/null 2>&1; echo "build rc=$? t=$(( $(date +%s)-S ))"
timeout -s INT 200 python3 -m pytest -q tests/test_gpu.py > $OUT/gpu_tests.txt 2>&1; echo "gpu tests rc=$? t=$(( $(date +%s)-S ))"
tail -3 $OUT/gpu_tests.txt
timeout -s INT 150 python3 -m generator verify > $OUT/verify.txt 2>&1; echo "verify rc=$? t=$(( $(date +%s)-S ))"
tail -3 $OUT/verify.txt
timeout -s INT $(( 595 - ($(date +%s) - S) )) python3 -m generator bench --json $OUT/bench.json \
    --compare notes/session7/call1_bench.json > $OUT/bench.txt 2>&1; echo "bench rc=$? t=$(( $(date +%s)-S ))"
grep -v "^\s*$" $OUT/bench.txt | head -48
