# Next session (carry [".whl"]), on branch stages-14: 14-slot rings for the half tiles at m = 32 (16 KB slots: 14
# fit in 225 KB where 12 did before), and the first GPU run of `generator ab`. Same-process A/B of 12 against 14
# slots, then the tma sweep on the four plain layers at m = 16 and 32, the file built from it, every GPU test,
# verify and bench. Merge only if the sweep reports 0 wrong and the GPU tests pass.
set -u
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl
export PYTHONPATH=.:/tmp/site PYTHONUNBUFFERED=1
S=$(date +%s)
for L in qkv_gate pooler; do
  timeout -s INT 150 python3 -m generator ab --rounds 6 $L:32:tma:1,12,3 $L:32:tma:1,14,3 $L:16:tma:1,16,3 \
      >> $OUT/ab.txt 2>&1
  echo "ab $L rc=$? t=$(( $(date +%s)-S ))"
done
grep -v Warning $OUT/ab.txt
timeout -s INT 150 python3 -m generator sweep --engine tma --reps 20 --layers qkv_gate --layers pooler --layers o \
    --layers unpooler --m 16 --m 32 --json $OUT/sweep_tma.json > $OUT/sweep_tma.txt 2>&1
echo "sweep rc=$? t=$(( $(date +%s)-S ))"; grep -v "^launch failed" $OUT/sweep_tma.txt | tail -9; cp tables/ttable.yaml $OUT/
python3 -m generator build > /dev/null 2>&1; echo "build rc=$? t=$(( $(date +%s)-S ))"; grep -m1 "inputs sha256" dist/submission.py
sha256sum dist/submission.py | cut -c1-16  # at most 8 files come back: the file is rebuilt here from ttable.yaml
timeout -s INT 130 python3 -m pytest -q tests/test_gpu.py > $OUT/gpu_tests.txt 2>&1
echo "gpu tests rc=$? t=$(( $(date +%s)-S ))"; tail -2 $OUT/gpu_tests.txt
timeout -s INT 110 python3 -m generator verify > $OUT/verify.txt 2>&1; echo "verify rc=$? t=$(( $(date +%s)-S ))"; tail -1 $OUT/verify.txt
timeout -s INT $(( 585 - ($(date +%s) - S) )) python3 -m generator bench --json $OUT/bench.json > $OUT/bench.txt 2>&1
echo "bench rc=$? t=$(( $(date +%s)-S ))"; grep -E "^(qkv_gate|o |pooler|unpooler|router) +(1|8|16|32) " $OUT/bench.txt; grep "launch floor\|geometric" $OUT/bench.txt
