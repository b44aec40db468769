# Session 10, call 4 (no wheels needed): nprobe.py (the reduction's cost, and the acq_rel arrival for C = 0, in
# one process), then two benches of dist/ (verified in call 2) for the spread at the bar's edge.
set -u
export PYTHONPATH=. PYTHONUNBUFFERED=1
S=$(date +%s)
timeout -s INT 260 python3 notes/session10/nprobe.py time $OUT/nprobe.json 2>&1 | tee $OUT/nprobe.txt
echo "nprobe t=$(( $(date +%s)-S ))"
for run in a b; do
  timeout -s INT $(( 585 - ($(date +%s) - S) )) python3 -m generator bench --json $OUT/bench_$run.json \
      --compare notes/session10/call1_bench.json > $OUT/bench_$run.txt 2>&1; echo "bench $run rc=$? t=$(( $(date +%s)-S ))"
  grep -v "^\s*$" $OUT/bench_$run.txt | sed -n '/old us/,$p' | grep -E "^(qkv_gate|o |pooler|unpooler|router|geomean)" | awk '$2<=32 || /geomean/'
done
