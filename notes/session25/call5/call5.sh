# Session 25, call 5 (main, no carry): the file with o m = 1..8 on the compressed GEMV (patches in the groups'
# headers) and unpooler m = 16 back on the TMA GEMV: verify (both distributions, every shape, graph replays; heavy
# o weights take the overflow pass), bench against session 24's, then ab of z configs for unpooler m = 16 and o
# m = 16 for the next session's table.
export PYTHONPATH=. PYTHONUNBUFFERED=1
S=$(date +%s)
sha256sum dist/submission.py | cut -c1-16
timeout -s INT 250 python3 -m generator verify > $OUT/verify.txt 2>&1
echo "verify rc=$? t=$(( $(date +%s)-S ))"; tail -3 $OUT/verify.txt
timeout -s INT 250 python3 -m generator bench --json $OUT/bench.json --compare notes/bench.json > $OUT/bench.txt 2>&1
echo "bench rc=$? t=$(( $(date +%s)-S ))"; grep -E "^(qkv_gate|o |pooler|unpooler|router) +(1|8|16|32) " $OUT/bench.txt | tail -20; grep "launch floor\|geometric" $OUT/bench.txt
timeout -s INT 80 python3 -m generator ab --rounds 4 unpooler:16:tma:1,12,0 unpooler:16:z:8,1,2,0,2,0 \
  unpooler:16:z:8,1,1,0,2,0 unpooler:16:z:8,1,2,0,1,0 o:16:tma:1,8,0 o:16:z:8,1,1,0,1,0 o:16:z:4,1,2,0,1,0 \
  > $OUT/ab_m16.txt 2>&1
echo "ab rc=$? t=$(( $(date +%s)-S ))"; tail -10 $OUT/ab_m16.txt
