# Session 12, call 3 (carry [".whl"]), on main's file (inputs sha256:17e04ce348ade2aa, the dist session 11 left):
# what session 11 could not run, its GPU tests (C = 2 included) and two benches at the bar's edge.
set -u
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl
export PYTHONPATH=.:/tmp/site PYTHONUNBUFFERED=1
S=$(date +%s)
grep -m1 "inputs sha256" dist/submission.py
timeout -s INT 230 python3 -m pytest -q tests/test_gpu.py > $OUT/gpu_tests.txt 2>&1
echo "gpu tests rc=$? t=$(( $(date +%s)-S ))"; tail -3 $OUT/gpu_tests.txt
for r in a b; do
  timeout -s INT 150 python3 -m generator bench --json $OUT/bench_$r.json > $OUT/bench_$r.txt 2>&1
  echo "bench $r rc=$? t=$(( $(date +%s)-S ))"
done
tail -40 $OUT/bench_a.txt
