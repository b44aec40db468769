# Session 14, call 11 (carry [".whl"]): half tiles (C = 3) with up to 3 wgmma groups in flight. TTABLE swept on the
# four plain layers, the file built from it, verify, bench, then the TMA GEMV's GPU test with the time left.
set -u
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl
export PYTHONPATH=.:/tmp/site PYTHONUNBUFFERED=1
S=$(date +%s)
timeout -s INT 200 python3 -m generator sweep --engine tma --reps 20 \
    --layers qkv_gate --layers pooler --layers o --layers unpooler --m 1 --m 8 --m 16 --m 32 \
    --json $OUT/sweep_tma.json > $OUT/sweep_tma.txt 2>&1
echo "sweep rc=$? t=$(( $(date +%s)-S ))"; grep -v "^launch failed" $OUT/sweep_tma.txt | tail -18; cp tables/ttable.yaml $OUT/
python3 -m generator build > /dev/null 2>&1; echo "build rc=$? t=$(( $(date +%s)-S ))"; grep -m1 "inputs sha256" dist/submission.py
cp dist/submission.py $OUT/
timeout -s INT 110 python3 -m generator verify > $OUT/verify.txt 2>&1; echo "verify rc=$? t=$(( $(date +%s)-S ))"
tail -2 $OUT/verify.txt
timeout -s INT 130 python3 -m generator bench --json $OUT/bench.json > $OUT/bench.txt 2>&1
echo "bench rc=$? t=$(( $(date +%s)-S ))"; grep -E "^(qkv_gate|o |pooler|unpooler|router) +(1|8|16|32) " $OUT/bench.txt; grep "launch floor\|geometric" $OUT/bench.txt
timeout -s INT $(( 585 - ($(date +%s) - S) )) python3 -m pytest -q -x tests/test_gpu.py -k "tma_gemv" > $OUT/gpu_tma_test.txt 2>&1
echo "gpu tma test rc=$? t=$(( $(date +%s)-S ))"; tail -3 $OUT/gpu_tma_test.txt
