# Session 17, call 3 (main, carry [".whl"]): re-sweep the router's m = 32 CTABLE entry (call 2 timed
# (16, 4, 2, 0, 1, 1) at 9.60 us against the entry's 9.98), build, verify, bench; then ncu on qkv_gate's half
# tiles at m = 32 (12 stages) against m = 16 (16 and 12 stages).
set -u
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl
export PYTHONPATH=.:/tmp/site PYTHONUNBUFFERED=1
S=$(date +%s)
timeout -s INT 150 python3 -m generator sweep --engine gemv --reps 30 --layers router --m 32 \
    --json $OUT/sweep_router32.json > $OUT/sweep_router32.txt 2>&1
echo "sweep rc=$? t=$(( $(date +%s)-S ))"; grep -v "^launch failed" $OUT/sweep_router32.txt | tail -4; cp tables/ctable.yaml $OUT/
python3 -m generator build > /dev/null 2>&1; echo "build rc=$? t=$(( $(date +%s)-S ))"; grep -m1 "inputs sha256" dist/submission.py
cp dist/submission.py $OUT/
timeout -s INT 110 python3 -m generator verify > $OUT/verify.txt 2>&1; echo "verify rc=$? t=$(( $(date +%s)-S ))"; tail -1 $OUT/verify.txt
timeout -s INT 110 python3 -m generator bench --json $OUT/bench.json > $OUT/bench.txt 2>&1
echo "bench rc=$? t=$(( $(date +%s)-S ))"; grep -E "^(qkv_gate|o |pooler|unpooler|router) +(1|8|16|32) " $OUT/bench.txt; grep "launch floor\|geometric" $OUT/bench.txt
timeout -s INT $(( 560 - ($(date +%s) - S) )) python3 -m generator profile --out $OUT/profile \
    qkv_gate:32:tma:1,12,3 qkv_gate:16:tma:1,16,3 qkv_gate:16:tma:1,12,3 > $OUT/profile.txt 2>&1
echo "profile rc=$? t=$(( $(date +%s)-S ))"; head -40 $OUT/profile.txt
rm -f $OUT/profile/profile.ncu-rep
cd $OUT && tar czf call3.tgz --exclude call3.tgz . && find . -type f ! -name call3.tgz -delete && find . -mindepth 1 -type d -empty -delete
