# Next session, on branch zgemv (git checkout zgemv), one device call (carry .whl): the compressed GEMV's
# correctness on every plain layer, its sweep into tables/ztable.yaml, then the built file's verify and bench.
# timeout -s INT: Python unwinds and releases torch's JIT build lock (a SIGTERM'd load leaves it: notes/README.md).
set -u
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl
export PYTHONPATH=.:/tmp/site PYTHONUNBUFFERED=1
S=$(date +%s)
timeout -s INT 240 python3 -m pytest -x -q tests/test_gpu.py -k compressed > $OUT/ztest.txt 2>&1; rc=$?
echo "ztest rc=$rc t=$(( $(date +%s)-S ))"; tail -15 $OUT/ztest.txt | cut -c1-300
if [ $rc -ne 0 ]; then timeout -s INT 120 python3 notes/session5/zdiag.py dist/submission.py; exit 0; fi
timeout -s INT 220 python3 -m generator sweep --engine z --layers qkv_gate --layers o --layers pooler --layers unpooler \
    --json $OUT/sweep_z.json > $OUT/sweep_z.txt 2>&1; echo "sweep rc=$? t=$(( $(date +%s)-S ))"; tail -20 $OUT/sweep_z.txt
cp tables/ztable.yaml $OUT/ztable.yaml
timeout -s INT 60 python3 -m generator build > /dev/null 2>&1; echo "build rc=$?"; cp dist/submission.py $OUT/
timeout -s INT 100 python3 -m generator verify > /tmp/verify.txt 2>&1; echo "verify rc=$? t=$(( $(date +%s)-S ))"; tail -2 /tmp/verify.txt
timeout -s INT $(( 590 - ($(date +%s) - S) )) python3 -m generator bench --json $OUT/bench.json \
    --compare notes/session5/bench.json > $OUT/bench.txt 2>&1; echo "bench rc=$? t=$(( $(date +%s)-S ))"
grep -v "^\s*$" $OUT/bench.txt | head -48
