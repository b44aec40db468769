# Session 25, call 6 (main, no carry): call 5's file with one header load a trip (not one a group) in the
# compressed GEMV: verify (both distributions, every shape, graph replays; heavy o weights take the overflow
# pass) and bench against session 24's. Landed only if verify passes; kept only if it beats call 5's bench.
export PYTHONPATH=. PYTHONUNBUFFERED=1
S=$(date +%s)
sha256sum dist/submission.py | cut -c1-16
timeout -s INT 250 python3 -m generator verify > $OUT/verify.txt 2>&1
echo "verify rc=$? t=$(( $(date +%s)-S ))"; tail -3 $OUT/verify.txt
timeout -s INT 250 python3 -m generator bench --json $OUT/bench.json --compare notes/bench.json > $OUT/bench.txt 2>&1
echo "bench rc=$? t=$(( $(date +%s)-S ))"; grep -E "^(qkv_gate|o |pooler|unpooler|router) +(1|8|16|32) " $OUT/bench.txt | tail -20; grep "launch floor\|geometric" $OUT/bench.txt
