# Session 14, call 10 (carry [".whl"]): the TMA GEMV's half tiles (C = 3) on main's tree. TTABLE swept with C = 3
# available (every config checked against float64 by the sweep), the file built from what the sweep wrote, verify,
# the GPU test of the TMA GEMV (C = 3 configs on every plain layer; the extension is cached by then), bench.
set -u
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl
export PYTHONPATH=.:/tmp/site PYTHONUNBUFFERED=1
S=$(date +%s)
timeout -s INT 290 python3 -m generator sweep --engine tma --reps 20 \
    --layers qkv_gate --layers pooler --layers o --layers unpooler --m 1 --m 8 --m 16 --m 32 \
    --json $OUT/sweep_tma.json > $OUT/sweep_tma.txt 2>&1
echo "sweep rc=$? t=$(( $(date +%s)-S ))"; grep -v "^launch failed" $OUT/sweep_tma.txt | tail -19; cp tables/ttable.yaml $OUT/
python3 -m generator build > /dev/null 2>&1; echo "build rc=$? t=$(( $(date +%s)-S ))"; grep -m1 "inputs sha256" dist/submission.py
cp dist/submission.py $OUT/
timeout -s INT 110 python3 -m generator verify > $OUT/verify.txt 2>&1; echo "verify rc=$? t=$(( $(date +%s)-S ))"
tail -2 $OUT/verify.txt
timeout -s INT 60 python3 -m pytest -q -x tests/test_gpu.py -k "tma_gemv" > $OUT/gpu_tma_test.txt 2>&1
echo "gpu tma test rc=$? t=$(( $(date +%s)-S ))"; tail -3 $OUT/gpu_tma_test.txt
timeout -s INT $(( 592 - ($(date +%s) - S) )) python3 -m generator bench --json $OUT/bench.json > $OUT/bench.txt 2>&1
echo "bench rc=$? t=$(( $(date +%s)-S ))"; grep -E "^(qkv_gate|o |pooler|unpooler|router) +(1|8|16|32) " $OUT/bench.txt; grep "launch floor\|geometric" $OUT/bench.txt
