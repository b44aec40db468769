# Session 24, call 3 (main, no carry): this session's record of the file on main (its kernels are session 23's,
# verified there): verify (both distributions, every shape, graph replays) and bench, against session 23's bench.
export PYTHONPATH=. PYTHONUNBUFFERED=1
S=$(date +%s)
sha256sum dist/submission.py | cut -c1-16
timeout -s INT 250 python3 -m generator verify > $OUT/verify.txt 2>&1
echo "verify rc=$? t=$(( $(date +%s)-S ))"; tail -3 $OUT/verify.txt
timeout -s INT 250 python3 -m generator bench --json $OUT/bench.json --compare notes/bench.json > $OUT/bench.txt 2>&1
echo "bench rc=$? t=$(( $(date +%s)-S ))"; grep -E "^(qkv_gate|o |pooler|unpooler|router) +(1|8|16|32) " $OUT/bench.txt | tail -20; grep "launch floor\|geometric" $OUT/bench.txt
