# Session 29, call 2: bench the landing candidate (dist/submission.py, the early first round) and main's file
# (session 28's file, 7407da2f) alternately, twice each on one machine: the before / after of issue 4's bench.
# Session 28's file is main's dist/submission.py at a727570 (sha256 7407da2fd5adb6bc); it is not kept here (a copy of
# a generated file): recreate it before the call with
#   git show a727570:dist/submission.py > notes/session29/call2/main_submission.py
export PYTHONPATH=. PYTHONUNBUFFERED=1
S=$(date +%s)
MAIN=notes/session29/call2/main_submission.py
sha256sum dist/submission.py $MAIN | cut -c1-16
for r in 1 2; do
  timeout -s INT 140 python3 -m generator bench dist/submission.py --json $OUT/bench_land$r.json > $OUT/bench_land$r.txt 2>&1
  echo "land$r rc=$? t=$(( $(date +%s)-S ))"
  timeout -s INT 140 python3 -m generator bench $MAIN --json $OUT/bench_main$r.json > $OUT/bench_main$r.txt 2>&1
  echo "main$r rc=$? t=$(( $(date +%s)-S ))"
done
for f in land1 main1 land2 main2; do echo "== $f"; grep -E "^(o |qkv_gate) +(16|32) " $OUT/bench_$f.txt; grep "launch floor\|geometric" $OUT/bench_$f.txt; done
