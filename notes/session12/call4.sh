# Session 12, call 4 (carry [".whl"]): the TMA GEMV on 12-bit tiles (Z = 1) on the H200 third version (decoded into shared memory for SS wgmma; exceptions per K tile from the x box):
# its GPU test (every layer, Z = 0 and 1, NaN-poisoned, both distributions), then TTABLE swept with Z on the
# plain layers at m = 1, 8, 16, 32.
set -u
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl
export PYTHONPATH=.:/tmp/site PYTHONUNBUFFERED=1
S=$(date +%s)
timeout -s INT 260 python3 -m pytest -q -x tests/test_gpu.py -k "tma_gemv" > $OUT/gpu_tma_test.txt 2>&1
echo "gpu tma test rc=$? t=$(( $(date +%s)-S ))"; tail -15 $OUT/gpu_tma_test.txt
timeout -s INT $(( 560 - ($(date +%s) - S) )) python3 -m generator sweep --engine tma --reps 20 \
    --layers qkv_gate --layers pooler --layers o --layers unpooler --m 1 --m 8 --m 16 --m 32 \
    --json $OUT/sweep_tma.json > $OUT/sweep_tma.txt 2>&1
echo "sweep rc=$? t=$(( $(date +%s)-S ))"; tail -22 $OUT/sweep_tma.txt; cp tables/ttable.yaml $OUT/
