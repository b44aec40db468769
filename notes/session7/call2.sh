# Session 7, call 2: sweep the new ring styles (P = 4, 5) against every shape's current CTABLE entry, rebuild
# with the table it writes, then the GPU tests, verify and bench of that file.
set -u
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl
export PYTHONPATH=.:/tmp/site PYTHONUNBUFFERED=1
S=$(date +%s)
timeout -s INT 300 python3 -m generator sweep --styles 4 --styles 5 --reps 20 --json $OUT/sweep_rings.json \
    > $OUT/sweep_rings.txt 2>&1; echo "sweep rc=$? t=$(( $(date +%s)-S ))"; cat $OUT/sweep_rings.txt | grep -v "^\s*$" | tail -25
cp tables/ctable.yaml $OUT/ctable.yaml
python3 -m generator build > /dev/null 2>&1; echo "build rc=$? t=$(( $(date +%s)-S ))"
timeout -s INT 150 python3 -m pytest -q tests/test_gpu.py > $OUT/gpu_tests.txt 2>&1; echo "gpu tests rc=$? t=$(( $(date +%s)-S ))"; tail -3 $OUT/gpu_tests.txt
timeout -s INT 100 python3 -m generator verify > $OUT/verify.txt 2>&1; echo "verify rc=$? t=$(( $(date +%s)-S ))"; tail -2 $OUT/verify.txt
timeout -s INT $(( 585 - ($(date +%s) - S) )) python3 -m generator bench --json $OUT/bench.json \
    --compare notes/session7/call1_bench.json > $OUT/bench.txt 2>&1; echo "bench rc=$? t=$(( $(date +%s)-S ))"
grep -v "^\s*$" $OUT/bench.txt | head -70
