# Session 23, call 5 (branch x-probe, timing only, no carry): where o m = 8 loses its 0.26 us to m = 1 on the same
# kernel (call 3's ab: 9.60 against 9.34; NB = 1 both, so the same instructions, and only x's loads and the
# output's rows differ). OKC_X_PROBE=1 points every lane's x loads at token 0's row: the same load instructions,
# one line each instead of eight. If m = 8 drops to m = 1's time, x's line traffic is the cost.
export PYTHONPATH=. PYTHONUNBUFFERED=1
S=$(date +%s)
timeout -s INT 300 python3 -m generator ab --rounds 6 --time-wrong --env OKC_X_PROBE=0,1 \
  o:1:gemv:8,1,2,1,2,0 o:8:gemv:8,1,2,1,2,0 o:8:gemv:8,1,4,0,2,0 o:16:gemv:8,1,2,1,2,0 \
  qkv_gate:8:gemv:16,1,2,1,2,0 unpooler:8:gemv:16,1,8,0,1,0 > $OUT/ab_xprobe.txt 2>&1
echo "ab rc=$? t=$(( $(date +%s)-S ))"; tail -16 $OUT/ab_xprobe.txt
