# Session 7, call 1: re-verify main's dist (it differs from session 6's GPU-checked file in _engine's single
# route), then the plain GEMV's time breakdown at m = 8..32 (xprobe.py: x traffic removed / mma removed).
set -u
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl
export PYTHONPATH=.:/tmp/site PYTHONUNBUFFERED=1
S=$(date +%s)
for v in base xl1 nomma both; do timeout -s INT 400 python3 notes/session7/xprobe.py build $v > $OUT/build_$v.txt 2>&1 & done
timeout -s INT 300 python3 -m pytest -q tests/test_gpu.py > $OUT/gpu_tests.txt 2>&1; echo "gpu tests rc=$? t=$(( $(date +%s)-S ))"; tail -3 $OUT/gpu_tests.txt
timeout -s INT 150 python3 -m generator verify > $OUT/verify.txt 2>&1; echo "verify rc=$? t=$(( $(date +%s)-S ))"; tail -2 $OUT/verify.txt
wait; echo "builds done t=$(( $(date +%s)-S ))"; tail -n 3 $OUT/build_*.txt
timeout -s INT 200 python3 -m generator bench --json $OUT/bench.json \
    --compare notes/session6/final_bench.json > $OUT/bench.txt 2>&1; echo "bench rc=$? t=$(( $(date +%s)-S ))"
grep -v "^\s*$" $OUT/bench.txt | head -60
timeout -s INT $(( 570 - ($(date +%s) - S) )) python3 notes/session7/xprobe.py time $OUT/xprobe.json base xl1 nomma both \
    > $OUT/xprobe.txt 2>&1; echo "xprobe rc=$? t=$(( $(date +%s)-S ))"; cat $OUT/xprobe.txt
