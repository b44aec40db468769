# Session 27, call 4 (main, dist sha 55dfaef0ca4b5beb: session 26's file, unchanged): two more benches of the
# landed file back to back, for the bar question on o m = 16 / qkv_gate m = 32 (session 26: c4 1.087, c5 1.111).
export PYTHONPATH=. PYTHONUNBUFFERED=1
S=$(date +%s)
sha256sum dist/submission.py | cut -c1-16
for i in 1 2; do
  timeout -s INT 250 python3 -m generator bench --json $OUT/bench$i.json --compare notes/bench.json > $OUT/bench$i.txt 2>&1
  echo "bench$i rc=$? t=$(( $(date +%s)-S ))"
  grep -E "^(qkv_gate|o |pooler|unpooler|router) +(1|8|16|32) " $OUT/bench$i.txt | tail -20; grep "launch floor\|geometric" $OUT/bench$i.txt
done
