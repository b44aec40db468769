set -u
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl
export PYTHONPATH=.:/tmp/site PYTHONUNBUFFERED=1
S=$(date +%s)
timeout 150 python3 -X faulthandler probe/throw_probe.py dist/submission.py > $OUT/throw.txt 2>&1; echo "throw rc=$? t=$(( $(date +%s)-S ))"; tail -30 $OUT/throw.txt
timeout 90 python3 -m generator sweep --engine tma --layers router --m 32 --json $OUT/sweep_router32.json > $OUT/sweep_router32.txt 2>&1; echo "sweep rc=$? t=$(( $(date +%s)-S ))"; tail -3 $OUT/sweep_router32.txt
cp tables/ttable.yaml $OUT/ttable.yaml
timeout 60 python3 -m generator build > $OUT/build.txt 2>&1; echo "build rc=$?"; cp dist/submission.py $OUT/
timeout 100 python3 -m generator verify > $OUT/verify.txt 2>&1; echo "verify rc=$? t=$(( $(date +%s)-S ))"; tail -2 $OUT/verify.txt
timeout 120 python3 -m pytest -q tests/test_gpu.py > $OUT/test_gpu.txt 2>&1; echo "gpu tests rc=$? t=$(( $(date +%s)-S ))"; tail -2 $OUT/test_gpu.txt
timeout 130 python3 -m generator bench --json $OUT/bench.json --compare notes/session3/bench.json > $OUT/bench.txt 2>&1; echo "bench rc=$? t=$(( $(date +%s)-S ))"
grep -v "^\s*$" $OUT/bench.txt | head -36
if which gdb > /dev/null 2>&1; then timeout 60 gdb -batch -ex run -ex bt --args python3 probe/throw_probe.py dist/submission.py > $OUT/gdb.txt 2>&1; echo "gdb rc=$?"; grep -E "^#|SIG" $OUT/gdb.txt | head -30; else echo "no gdb"; fi
