# Session 28, call 13 (branch early-issue): call 12's timeline had the first copy leave 0.27 us after a CTA's
# start, behind 16 barrier inits and the CTA barrier. OKC_TMA_EARLY = 1: the TMA GEMV's producer lane initialises
# the full barriers, issues the first round's copies, then initialises the empty barriers and joins the CTA
# barrier. ab --env (each launch checked against float64), 5 rounds.
export PYTHONPATH=. PYTHONUNBUFFERED=1
sha256sum dist/submission.py | cut -c1-16
timeout -s INT 150 python3 -m generator ab --rounds 5 --env OKC_TMA_EARLY=0,1 \
  o:16:tma:1,8,0 o:32:tma:1,8,0 qkv_gate:32:tma:1,14,3 pooler:16:tma:1,12,3 > $OUT/ab_early.txt 2>&1
echo "ab rc=$?"; tail -11 $OUT/ab_early.txt
