# For session 21's first call, on branch router-probe (no carry needed): where the router's extra ~1.8 us at
# m = 32 goes (session 20, call 6: in the loop, not the reduction). OKC_GEMV_PROBE (read at each launch, dual
# kernels only): x replaces x's loads by a constant fragment, w the weights' loads, n both; all give wrong results, so
# `ab --time-wrong` times them anyway (rows marked "(wrong)"; the real kernel, 0, must still match float64).
# ~300 s for the ab (the CUDA build has 334 kernels), ~110 s for the bench.
export PYTHONPATH=. PYTHONUNBUFFERED=1
S=$(date +%s)
timeout -s INT 420 python3 -m generator ab --rounds 5 --time-wrong --env OKC_GEMV_PROBE=0,x,w,n \
  router:32:gemv:16,4,1,1,1,1 router:32:gemv:16,8,2,2,1,0 router:32:gemv:8,8,2,0,1,1 \
  router:16:gemv:16,4,4,2,1,1 router:1:gemv:16,4,4,0,1,1 > $OUT/router_probe.txt 2>&1
echo "ab rc=$? t=$(( $(date +%s)-S ))"; grep -v Warning $OUT/router_probe.txt | tail -30
# Then a bench of this build: with OKC_GEMV_PROBE unset its kernels are main's (all 226 of main's kernels have
# byte-identical SASS here; checked in session 20), and graph replays run no host code, so this is main's bench on
# another H200: is o m = 8 / 16 at 1.14-1.15 x floor (session 20) or 1.08-1.09 (session 19) the machine?
timeout -s INT 170 python3 -m generator bench --json $OUT/bench.json > $OUT/bench.txt 2>&1
echo "bench rc=$? t=$(( $(date +%s)-S ))"; grep -E "^(qkv_gate|o |pooler|unpooler|router) +(1|8|16|32) " $OUT/bench.txt; grep "launch floor\|geometric" $OUT/bench.txt
