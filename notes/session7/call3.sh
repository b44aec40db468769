# Session 7, call 3: sweep the x-in-shared-memory styles (P = 4, 5) against the current CTABLE entries on the
# shapes that miss issue 4's bar (plus o / unpooler m = 16, 32, which cuBLAS serves), rebuild with the table
# the sweeps write (a challenger must beat the current entry by 2 %), then the GPU tests, verify and bench.
set -u
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl
export PYTHONPATH=.:/tmp/site PYTHONUNBUFFERED=1
S=$(date +%s)
timeout -s INT 230 python3 -m generator sweep --styles 4 --styles 5 --reps 20 --layers qkv_gate --layers o \
    --layers router --m 8 --m 16 --m 32 --json $OUT/sweep_a.json > $OUT/sweep.txt 2>&1; echo "sweep a rc=$? t=$(( $(date +%s)-S ))"
timeout -s INT 100 python3 -m generator sweep --styles 4 --styles 5 --reps 20 --layers pooler --layers unpooler \
    --m 16 --m 32 --json $OUT/sweep_b.json >> $OUT/sweep.txt 2>&1; echo "sweep b rc=$? t=$(( $(date +%s)-S ))"
grep -v "^\s*$" $OUT/sweep.txt | grep -v "^layer" | tail -16
cp tables/ctable.yaml $OUT/ctable.yaml; git diff --stat tables/ctable.yaml
python3 -m generator build > /dev/null 2>&1; echo "build rc=$? t=$(( $(date +%s)-S ))"
timeout -s INT 130 python3 -m pytest -q tests/test_gpu.py > $OUT/gpu_tests.txt 2>&1; echo "gpu tests rc=$? t=$(( $(date +%s)-S ))"; tail -3 $OUT/gpu_tests.txt
timeout -s INT 110 python3 -m generator verify > $OUT/verify.txt 2>&1; echo "verify rc=$? t=$(( $(date +%s)-S ))"; tail -2 $OUT/verify.txt
timeout -s INT $(( 590 - ($(date +%s) - S) )) python3 -m generator bench --json $OUT/bench.json \
    --compare notes/session7/call1_bench.json > $OUT/bench.txt 2>&1; echo "bench rc=$? t=$(( $(date +%s)-S ))"
grep -v "^\s*$" $OUT/bench.txt | head -70
