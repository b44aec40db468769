# Session 28, call 3: (a) branch zpf, the compressed GEMV prefetching its next trip's weights into L1 or L2 at
# the start of each trip (OKC_Z_PF = 1 / 2; 0 = as main), each launch checked against float64 and timed with ab
# --env; (b) a bench of main's file (copied beside this script), which has o m = 32 on the TMA GEMV since session
# 27 and was never benched. (The copy, main_submission.py, was `git show main:dist/submission.py` at sha256
# 7407da2fd5adb6bc, made before the call and not kept: it is dist/submission.py on main.)
export PYTHONPATH=. PYTHONUNBUFFERED=1
S=$(date +%s)
sha256sum dist/submission.py notes/session28/call3/main_submission.py | cut -c1-16
timeout -s INT 250 python3 -m generator ab --rounds 6 --env OKC_Z_PF=0,1,2 \
  o:1:z:8,1,1,0,1,0 o:8:z:8,1,1,0,1,0 o:16:z:8,1,1,0,1,0 pooler:1:z:8,1,4,0,1,0 o:16:tma:1,8,0 \
  > $OUT/ab_zpf.txt 2>&1
echo "ab rc=$? t=$(( $(date +%s)-S ))"; tail -18 $OUT/ab_zpf.txt
timeout -s INT 250 python3 -m generator bench notes/session28/call3/main_submission.py --json $OUT/bench.json \
  --compare notes/bench.json > $OUT/bench.txt 2>&1
echo "bench rc=$? t=$(( $(date +%s)-S ))"
grep -E "^(qkv_gate|o |pooler|unpooler|router) +(1|8|16|32) " $OUT/bench.txt | tail -20; grep "launch floor\|geometric" $OUT/bench.txt
