# (Copy of the script on branch router-probe; run it there.)
# For session 21's first call, on branch router-probe (no carry needed): where the router's extra ~1.8 us at
# m = 32 goes (session 20, call 6: in the loop, not the reduction). OKC_GEMV_PROBE (read at each launch, dual
# kernels only): x replaces x's loads by a constant fragment, w the weights' loads, n both; all give wrong results, so
# `ab --time-wrong` times them anyway (rows marked "(wrong)"; the real kernel, 0, must still match float64).
# ~300 s (the CUDA build has 334 kernels).
export PYTHONPATH=. PYTHONUNBUFFERED=1
S=$(date +%s)
timeout -s INT 420 python3 -m generator ab --rounds 5 --time-wrong --env OKC_GEMV_PROBE=0,x,w,n \
  router:32:gemv:16,4,1,1,1,1 router:32:gemv:16,8,2,2,1,0 router:32:gemv:8,8,2,0,1,1 \
  router:16:gemv:16,4,4,2,1,1 router:1:gemv:16,4,4,0,1,1 > $OUT/router_probe.txt 2>&1
echo "ab rc=$? t=$(( $(date +%s)-S ))"; grep -v Warning $OUT/router_probe.txt | tail -30
