# Session 26, call 4 (main, no carry): the file to land (compress.py's patches_per_group added, default as
# shipped; CUDA_SRC identical to session 25's): verify (both distributions, every shape, graph replays) and bench
# against session 25's; then ncu on o's compressed GEMV at m = 8 and 16 beside o m = 16's TMA entry, to see where
# m = 16's extra ~0.4 us goes (the record for the next session).
export PYTHONPATH=. PYTHONUNBUFFERED=1
S=$(date +%s)
sha256sum dist/submission.py | cut -c1-16
timeout -s INT 250 python3 -m generator verify > $OUT/verify.txt 2>&1
echo "verify rc=$? t=$(( $(date +%s)-S ))"; tail -3 $OUT/verify.txt
timeout -s INT 250 python3 -m generator bench --json $OUT/bench.json --compare notes/bench.json > $OUT/bench.txt 2>&1
echo "bench rc=$? t=$(( $(date +%s)-S ))"; grep -E "^(qkv_gate|o |pooler|unpooler|router) +(1|8|16|32) " $OUT/bench.txt | tail -20; grep "launch floor\|geometric" $OUT/bench.txt
timeout -s INT 170 python3 -m generator profile --out $OUT/prof o:8:z:8,1,1,0,1,0 o:16:z:8,1,1,0,1,0 o:16:tma:1,8,0 \
  > $OUT/profile.txt 2>&1
echo "profile rc=$? t=$(( $(date +%s)-S ))"; head -3 $OUT/profile.txt
