# Session 30, call 4 (a fresh machine): three more benches of main's file (sha256 618a3f3a0f4e93b9, unchanged since session 29) with the
# bench's new floor: the median of samples before every shape after a 1 s settle (the after-prepare sample is in
# the JSON, floor_after_prepare_us, for the old method's ratios).
export PYTHONPATH=. PYTHONUNBUFFERED=1
S=$(date +%s)
sha256sum dist/submission.py | cut -c1-16
for i in 1 2 3; do
  timeout -s INT 200 python3 -m generator bench --json $OUT/bench$i.json > $OUT/bench$i.txt 2>&1
  echo "bench$i rc=$? t=$(( $(date +%s)-S ))"; head -1 $OUT/bench$i.txt
done
tail -34 $OUT/bench3.txt
