# Session 21, call 8 (branch wgmma-regs): C = 5 with two accumulator sets (even, odd steps: wgmma chains of half the length); else as call 7:
# wgmma's 64), so S = 8 makes 8 clusters of 8, one per GPC, where 64-row tiles at S = 16 made 4 clusters of 16
# (4 GPCs idle). Against the entries, interleaved, each checked against float64 first.
export PYTHONPATH=. PYTHONUNBUFFERED=1
S=$(date +%s)
timeout -s INT 400 python3 -m generator ab --rounds 5 --time-wrong \
  router:32:gemv:16,4,1,1,1,1 router:32:tma:8,4,5 router:32:tma:8,2,5 router:32:tma:4,4,5 \
  router:16:gemv:16,4,4,2,1,1 router:16:tma:8,4,5 router:8:gemv:8,8,4,0,1,1 router:8:tma:8,4,5 \
  router:1:gemv:16,4,4,0,1,1 router:1:tma:8,4,5 o:8:gemv:8,1,4,0,2,0 o:8:tma:1,4,5 > $OUT/ab.txt 2>&1
echo "ab rc=$? t=$(( $(date +%s)-S ))"; grep -v Warning $OUT/ab.txt | tail -25
