set -u
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl
export PYTHONPATH=.:/tmp/site PYTHONUNBUFFERED=1
S=$(date +%s)
left() { echo $(( 590 - ($(date +%s) - S) )); }
timeout 260 python3 probe/wide_probe.py dist/submission.py $OUT/wide_probe.json > $OUT/wide_probe.txt 2>&1; rc=$?
echo "wide rc=$rc t=$(( $(date +%s)-S ))"; tail -12 $OUT/wide_probe.txt | cut -c1-330
cp tables/ctable.yaml $OUT/ctable.yaml
timeout 60 python3 -m generator build > /dev/null 2>&1; echo "build rc=$?"; cp dist/submission.py $OUT/
timeout 150 python3 -X faulthandler probe/segv_probe.py dist/submission.py > /tmp/segv.txt 2>&1; echo "segv rc=$? t=$(( $(date +%s)-S ))"; cut -c1-200 /tmp/segv.txt
timeout 100 python3 -m generator verify > /tmp/verify.txt 2>&1; echo "verify rc=$? t=$(( $(date +%s)-S ))"; grep -i "fail\|wrong" /tmp/verify.txt | head -5; tail -2 /tmp/verify.txt
timeout 110 python3 -m pytest -q tests/test_gpu.py > /tmp/test_gpu.txt 2>&1; echo "gpu tests rc=$? t=$(( $(date +%s)-S ))"; tail -4 /tmp/test_gpu.txt | cut -c1-400
timeout $(( $(left) )) python3 -m generator bench --json $OUT/bench.json --compare notes/session5/bench.json > $OUT/bench.txt 2>&1; echo "bench rc=$? t=$(( $(date +%s)-S ))"
grep -v "^\s*$" $OUT/bench.txt | head -48
