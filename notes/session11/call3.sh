# Session 11, call 3 (carry [".whl"]): main with bulk weight copies in the TMA GEMV. Sweep TTABLE where the TMA
# GEMV can matter (qkv_gate m = 1..32, pooler m = 16, 32), build, verify, bench against session 10's call 4b,
# then the GPU tests.
set -u
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl
export PYTHONPATH=.:/tmp/site PYTHONUNBUFFERED=1
S=$(date +%s)
timeout -s INT 200 python3 -m generator sweep --engine tma --reps 20 --layers qkv_gate --layers pooler \
    --m 1 --m 8 --m 16 --m 32 --json $OUT/sweep_tma.json > $OUT/sweep_tma.txt 2>&1
echo "sweep rc=$? t=$(( $(date +%s)-S ))"; tail -9 $OUT/sweep_tma.txt; cp tables/ttable.yaml $OUT/
python3 -m generator build > /dev/null 2>&1; echo "build rc=$? t=$(( $(date +%s)-S ))"; grep -m1 "inputs sha256" dist/submission.py
timeout -s INT 130 python3 -m generator verify > $OUT/verify.txt 2>&1; echo "verify rc=$? t=$(( $(date +%s)-S ))"
tail -2 $OUT/verify.txt
timeout -s INT 130 python3 -m generator bench --json $OUT/bench.json \
    --compare notes/session10/call4_bench_b.json > $OUT/bench.txt 2>&1; echo "bench rc=$? t=$(( $(date +%s)-S ))"
grep -v "^\s*$" $OUT/bench.txt | sed -n '/old us/,$p' | grep -E "^(qkv_gate|o |pooler|unpooler|router|geomean)" | awk '$2<=32 || /geomean/'
grep -E "launch floor|geomean" $OUT/bench.txt | head -3
timeout -s INT $(( 585 - ($(date +%s) - S) )) python3 -m pytest -q tests/test_gpu.py > $OUT/gpu_tests.txt 2>&1
echo "gpu tests rc=$? t=$(( $(date +%s)-S ))"; tail -2 $OUT/gpu_tests.txt
