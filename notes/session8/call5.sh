# Session 8, call 5: the landed file (GPU-verified in call 4) benched twice more, in two processes, for the
# run-to-run spread of the shapes that sit at the bar's edge (qkv_gate m = 8, the router at m = 1, 8).
set -u
export PYTHONPATH=. PYTHONUNBUFFERED=1
S=$(date +%s)
for run in a b; do
  timeout -s INT 250 python3 -m generator bench --json $OUT/bench_$run.json > $OUT/bench_$run.txt 2>&1
  echo "bench $run rc=$? t=$(( $(date +%s)-S ))"; grep -v "^\s*$" $OUT/bench_$run.txt | head -34
done
