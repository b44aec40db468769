set -u
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl
export PYTHONPATH=.:/tmp/site PYTHONUNBUFFERED=1
S=$(date +%s)
timeout -s INT 200 python3 -m pytest -x -q tests/test_gpu.py -k compressed > $OUT/ztest.txt 2>&1; rc=$?
echo "ztest rc=$rc t=$(( $(date +%s)-S ))"; tail -15 $OUT/ztest.txt | cut -c1-300
if [ $rc -ne 0 ]; then timeout -s INT 120 python3 notes/session5/zdiag.py dist/submission.py; exit 0; fi
timeout -s INT 200 python3 probe/zexc.py dist/submission.py $OUT/zexc.json > $OUT/zexc.txt 2>&1; echo "zexc rc=$? t=$(( $(date +%s)-S ))"; cat $OUT/zexc.txt
timeout -s INT $(( 570 - ($(date +%s) - S) )) python3 -m generator sweep --engine z --layers qkv_gate --layers o --layers pooler --layers unpooler \
    --json $OUT/sweep_z.json > $OUT/sweep_z.txt 2>&1; echo "sweep rc=$? t=$(( $(date +%s)-S ))"; tail -18 $OUT/sweep_z.txt
cp tables/ztable.yaml $OUT/ztable.yaml
