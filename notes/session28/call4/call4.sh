# Session 28, call 4: where the x-resident TMA GEMV (C = 4, branch xres) loses its 0.6-1.1 us (call 1), timing
# only: OKC_XRES_PROBE = 1 skips the wait for x (copies still issued), 2 skips x's copies too (the wgmmas read
# whatever shared memory holds: the TMA GEMV with no x at all). Wrong outputs are timed (--time-wrong). Then a
# second bench of main's file (call 3's copy) for the spread of o m = 16 / 32's ratios between runs.
export PYTHONPATH=. PYTHONUNBUFFERED=1
S=$(date +%s)
sha256sum dist/submission.py notes/session28/call3/main_submission.py | cut -c1-16
timeout -s INT 200 python3 -m generator ab --rounds 6 --time-wrong --env OKC_XRES_PROBE=0,1,2 \
  o:16:tma:1,8,4 o:32:tma:1,8,4 o:16:tma:1,8,0 o:32:tma:1,8,0 > $OUT/ab_probe.txt 2>&1
echo "ab rc=$? t=$(( $(date +%s)-S ))"; tail -14 $OUT/ab_probe.txt
timeout -s INT 250 python3 -m generator bench notes/session28/call3/main_submission.py --json $OUT/bench2.json \
  --compare notes/session28/call3/bench.json > $OUT/bench2.txt 2>&1
echo "bench rc=$? t=$(( $(date +%s)-S ))"
grep -E "^(qkv_gate|o |pooler|unpooler|router) +(1|8|16|32) " $OUT/bench2.txt | tail -20; grep "launch floor\|geometric" $OUT/bench2.txt
