# Session 16, call 2 (carry [".whl"]): the token groups (CTABLE's G). Sweep the plain GEMV at G = 2, 4 (plus each
# shape's current entry) where m has more than one column block; the GPU test of G; then build from the swept
# CTABLE, verify, bench.
set -u
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl
export PYTHONPATH=.:/tmp/site PYTHONUNBUFFERED=1
S=$(date +%s)
timeout -s INT 260 python3 -m generator sweep --reps 20 --groups 2 --groups 4 \
    --layers router --m 32 --m 16 --json $OUT/sweep_groups.json > $OUT/sweep_groups.txt 2>&1
echo "sweep rc=$? t=$(( $(date +%s)-S ))"; grep -v "^launch failed" $OUT/sweep_groups.txt | tail -6; cp tables/ctable.yaml $OUT/
python3 -m generator build > /dev/null 2>&1; echo "build rc=$? t=$(( $(date +%s)-S ))"; grep -m1 "inputs sha256" dist/submission.py
cp dist/submission.py $OUT/
timeout -s INT 100 python3 -m pytest -q -x tests/test_gpu.py -k "token_groups or tabulated_gemv" > $OUT/gpu_groups_test.txt 2>&1
echo "gpu groups test rc=$? t=$(( $(date +%s)-S ))"; tail -3 $OUT/gpu_groups_test.txt
timeout -s INT 100 python3 -m generator verify > $OUT/verify.txt 2>&1; echo "verify rc=$? t=$(( $(date +%s)-S ))"
tail -2 $OUT/verify.txt
timeout -s INT $(( 575 - ($(date +%s) - S) )) python3 -m generator bench --json $OUT/bench.json > $OUT/bench.txt 2>&1
echo "bench rc=$? t=$(( $(date +%s)-S ))"; grep -E "^(qkv_gate|o |pooler|unpooler|router) +(1|8|16|32) " $OUT/bench.txt; grep "launch floor\|geometric" $OUT/bench.txt
