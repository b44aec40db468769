# Session 8, call 3: the file built from branch double-w with call 2's table, checked as the judge would:
# every GPU test, verify (every shape, both weight distributions, graph replays), then bench against session 7.
set -u
export PYTHONPATH=. PYTHONUNBUFFERED=1
S=$(date +%s)
timeout -s INT 240 python3 -m pytest -q tests/test_gpu.py > $OUT/gpu_tests.txt 2>&1; echo "gpu tests rc=$? t=$(( $(date +%s)-S ))"
tail -4 $OUT/gpu_tests.txt
timeout -s INT 200 python3 -m generator verify > $OUT/verify.txt 2>&1; echo "verify rc=$? t=$(( $(date +%s)-S ))"
tail -4 $OUT/verify.txt
timeout -s INT $(( 590 - ($(date +%s) - S) )) python3 -m generator bench --json $OUT/bench.json \
    --compare notes/session7/call1_bench.json > $OUT/bench.txt 2>&1; echo "bench rc=$? t=$(( $(date +%s)-S ))"
grep -v "^\s*$" $OUT/bench.txt | head -48
