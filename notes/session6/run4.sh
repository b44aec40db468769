# Session 6 call 4 (branch zstage): the chunked, parallel exception gather: GPU test, exception cost (zexc),
# sweep --engine z, then the built file's verify and bench against the final call of main.
set -u
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl
export PYTHONPATH=.:/tmp/site PYTHONUNBUFFERED=1
S=$(date +%s)
timeout -s INT 200 python3 -m pytest -x -q tests/test_gpu.py -k compressed > $OUT/ztest.txt 2>&1; rc=$?
echo "ztest rc=$rc t=$(( $(date +%s)-S ))"; tail -5 $OUT/ztest.txt | cut -c1-400
if [ $rc -ne 0 ]; then exit 0; fi
timeout -s INT 120 python3 notes/session6/zexc.py dist/submission.py $OUT/zexc.json > $OUT/zexc.txt 2>&1; echo "zexc rc=$? t=$(( $(date +%s)-S ))"; cat $OUT/zexc.txt
timeout -s INT 150 python3 -m generator sweep --engine z --layers qkv_gate --layers o --layers pooler --layers unpooler \
    --json $OUT/sweep_z.json > $OUT/sweep_z.txt 2>&1; echo "sweep rc=$? t=$(( $(date +%s)-S ))"; tail -17 $OUT/sweep_z.txt
cp tables/ztable.yaml $OUT/ztable.yaml
timeout -s INT 60 python3 -m generator build > /dev/null 2>&1; echo "build rc=$?"; cp dist/submission.py $OUT/
timeout -s INT 120 python3 -m generator verify > $OUT/verify.txt 2>&1; echo "verify rc=$? t=$(( $(date +%s)-S ))"; tail -2 $OUT/verify.txt
timeout -s INT $(( 585 - ($(date +%s) - S) )) python3 -m generator bench --json $OUT/bench.json \
    --compare notes/session6/final_bench.json > $OUT/bench.txt 2>&1; echo "bench rc=$? t=$(( $(date +%s)-S ))"
grep -v "^\s*$" $OUT/bench.txt | tail -34
