# Session 23, call 3 (main, no carry): o m = 8 / 16 and qkv_gate m = 32 sit at 1.10 x floor. ab (one process,
# interleaved rounds) of each entry against its neighbours: o m = 8 on m = 1's double-buffered config (the same
# kernel: NB = 1 for both), the compressed GEMV, o m = 16 on the register GEMV and other TMA rings; then a bench
# of main's file on this machine (call 1 benched the same kernels but for the sum-over-warps helper).
export PYTHONPATH=. PYTHONUNBUFFERED=1
S=$(date +%s)
sha256sum dist/submission.py | cut -c1-16
timeout -s INT 250 python3 -m generator ab --rounds 8 \
  o:1:gemv:8,1,2,1,2,0 o:1:z:8,1,1,0,1,0 \
  o:8:gemv:8,1,4,0,2,0 o:8:gemv:8,1,2,1,2,0 o:8:z:8,1,1,0,1,0 o:8:tma:1,8,0 \
  o:16:tma:1,8,0 o:16:gemv:8,1,2,1,2,0 o:16:gemv:8,1,4,0,2,0 o:16:tma:1,8,3 o:16:tma:1,12,0 o:16:tma:1,6,0 \
  qkv_gate:32:tma:1,14,3 qkv_gate:32:tma:1,12,3 qkv_gate:32:tma:3,8,2 > $OUT/ab.txt 2>&1
echo "ab rc=$? t=$(( $(date +%s)-S ))"; tail -22 $OUT/ab.txt
timeout -s INT 200 python3 -m generator bench --json $OUT/bench.json --compare notes/session23/call1/bench.json > $OUT/bench.txt 2>&1
echo "bench rc=$? t=$(( $(date +%s)-S ))"; grep -E "^(qkv_gate|o |pooler|unpooler|router) +(1|8|16|32) " $OUT/bench.txt | tail -20; grep "launch floor\|geometric" $OUT/bench.txt
