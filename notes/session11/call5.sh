# Session 11, call 5 (carry [".whl"]): the TMA GEMV's cluster reduction scattered over the S ranks (each owns
# 128/S consumer threads of the tile). Sweep TTABLE on every layer at m = 1..32, build, verify, bench against
# call 3, then the GPU tests.
set -u
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl
export PYTHONPATH=.:/tmp/site PYTHONUNBUFFERED=1
S=$(date +%s)
timeout -s INT 220 python3 -m generator sweep --engine tma --reps 20 --m 1 --m 8 --m 16 --m 32 \
    --json $OUT/sweep_tma.json > $OUT/sweep_tma.txt 2>&1
echo "sweep rc=$? t=$(( $(date +%s)-S ))"; tail -21 $OUT/sweep_tma.txt; cp tables/ttable.yaml $OUT/
python3 -m generator build > /dev/null 2>&1; echo "build rc=$? t=$(( $(date +%s)-S ))"; grep -m1 "inputs sha256" dist/submission.py
timeout -s INT 130 python3 -m generator verify > $OUT/verify.txt 2>&1; echo "verify rc=$? t=$(( $(date +%s)-S ))"
tail -2 $OUT/verify.txt
timeout -s INT 130 python3 -m generator bench --json $OUT/bench.json \
    --compare notes/session11/call3_bench.json > $OUT/bench.txt 2>&1; echo "bench rc=$? t=$(( $(date +%s)-S ))"
grep -v "^\s*$" $OUT/bench.txt | sed -n '/old us/,$p' | grep -E "^(qkv_gate|o |pooler|unpooler|router|geomean)" | awk '$2<=32 || /geomean/'
grep -E "launch floor" $OUT/bench.txt | head -1
timeout -s INT $(( 580 - ($(date +%s) - S) )) python3 -m pytest -q tests/test_gpu.py > $OUT/gpu_tests.txt 2>&1
echo "gpu tests rc=$? t=$(( $(date +%s)-S ))"; tail -2 $OUT/gpu_tests.txt
