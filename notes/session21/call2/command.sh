# Session 21, call 2 (branch wgmma-regs): the register-fed wgmma GEMV (TMA engine C = 5: weights from HBM into
# registers as wgmma's A, x by TMA into shared memory) against the table's entries, interleaved, each checked
# against float64 first (a wrong one is timed and marked, not dropped).
export PYTHONPATH=. PYTHONUNBUFFERED=1
S=$(date +%s)
timeout -s INT 540 python3 -m generator ab --rounds 5 --time-wrong \
  router:32:gemv:16,4,1,1,1,1 router:32:tma:16,4,5 router:32:tma:16,2,5 router:32:tma:8,4,5 router:32:tma:16,1,5 \
  router:16:gemv:16,4,4,2,1,1 router:16:tma:16,4,5 router:1:gemv:16,4,4,0,1,1 router:1:tma:16,4,5 \
  o:8:gemv:8,1,4,0,2,0 o:8:tma:1,4,5 o:8:tma:1,2,5 o:16:tma:1,8,0 o:16:tma:1,4,5 \
  unpooler:8:gemv:16,1,8,0,1,0 unpooler:8:tma:8,2,5 unpooler:8:tma:4,4,5 \
  qkv_gate:32:tma:1,14,3 qkv_gate:32:tma:3,4,5 > $OUT/ab.txt 2>&1
echo "ab rc=$? t=$(( $(date +%s)-S ))"; grep -v Warning $OUT/ab.txt | tail -45
