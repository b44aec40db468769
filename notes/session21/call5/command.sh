# Session 21, call 5 (branch wgmma-regs): C = 5 with one wgmma fence + commit group per 16-wide step (ptxas waits per step
# for that step's registers, so the chain can run behind the loads) and predicated loads in one asm each.
export PYTHONPATH=. PYTHONUNBUFFERED=1
S=$(date +%s)
timeout -s INT 400 python3 -m generator ab --rounds 5 --time-wrong \
  router:32:gemv:16,4,1,1,1,1 router:32:tma:16,4,5 router:32:tma:16,2,5 \
  router:16:gemv:16,4,4,2,1,1 router:16:tma:16,4,5 router:1:gemv:16,4,4,0,1,1 router:1:tma:16,4,5 \
  o:8:gemv:8,1,4,0,2,0 o:8:tma:1,4,5 unpooler:8:gemv:16,1,8,0,1,0 unpooler:8:tma:8,2,5 > $OUT/ab.txt 2>&1
echo "ab rc=$? t=$(( $(date +%s)-S ))"; grep -v Warning $OUT/ab.txt | tail -25
