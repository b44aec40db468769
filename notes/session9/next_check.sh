# Prepared in session 9: after next_sweeps.sh changed a table (copy its ctable.yaml / ttable.yaml into tables/ and
# rebuild here first), the file those tables build on the H200: GPU tests, verify, and a second bench. ~6 min.
set -u
export PYTHONPATH=. PYTHONUNBUFFERED=1
S=$(date +%s)
grep -m1 "inputs sha256" dist/submission.py
timeout -s INT 220 python3 -m pytest -q tests/test_gpu.py > $OUT/gpu_tests.txt 2>&1
echo "gpu tests rc=$? t=$(( $(date +%s)-S ))"; tail -2 $OUT/gpu_tests.txt
timeout -s INT 150 python3 -m generator verify > $OUT/verify.txt 2>&1; echo "verify rc=$? t=$(( $(date +%s)-S ))"
tail -2 $OUT/verify.txt
timeout -s INT $(( 585 - ($(date +%s) - S) )) python3 -m generator bench --json $OUT/bench.json \
    --compare notes/session9/call3_bench.json > $OUT/bench.txt 2>&1; echo "bench rc=$? t=$(( $(date +%s)-S ))"
grep -v "^\s*$" $OUT/bench.txt | sed -n '/old us/,$p'
