# Session 29, call 1 (branch early-issue-land, main merged in). Session 28's call 13 saw the TMA GEMV's early first
# round take 1.4-2.0 % off o m = 16 / 32. 1) ab --env OKC_TMA_EARLY=0,1 on every TMA table entry with the probe
# build (early_probe_submission.py: branch early-issue's file, the switch read at each launch), 6 rounds, every
# launch checked against float64. 2) verify and the GPU tests on the landing candidate (dist/submission.py: the
# unconditional version).
# The probe file is branch early-issue's dist/submission.py (commit 82d2cfa, sha256 5beccc90eb1d68fc); it is not kept
# here (a copy of a generated file): recreate it before the call with
#   git show 82d2cfa:dist/submission.py > notes/session29/call1/early_probe_submission.py
export PYTHONPATH=. PYTHONUNBUFFERED=1
S=$(date +%s)
sha256sum dist/submission.py notes/session29/call1/early_probe_submission.py | cut -c1-16
timeout -s INT 200 python3 -m generator ab --file notes/session29/call1/early_probe_submission.py --rounds 6 \
  --env OKC_TMA_EARLY=0,1 o:16:tma:1,8,0 o:32:tma:1,8,0 qkv_gate:8:tma:1,16,3 qkv_gate:16:tma:1,16,3 \
  qkv_gate:32:tma:1,14,3 pooler:16:tma:1,12,3 pooler:32:tma:1,12,3 unpooler:16:tma:1,12,0 unpooler:32:tma:1,12,0 \
  > $OUT/ab_early.txt 2>&1
echo "ab rc=$? t=$(( $(date +%s)-S ))"; tail -22 $OUT/ab_early.txt
timeout -s INT 200 python3 -m generator verify dist/submission.py > $OUT/verify.txt 2>&1
echo "verify rc=$? t=$(( $(date +%s)-S ))"; tail -4 $OUT/verify.txt
timeout -s INT 150 python3 -m pytest -q tests/test_gpu.py > $OUT/test_gpu.txt 2>&1
echo "pytest rc=$? t=$(( $(date +%s)-S ))"; tail -4 $OUT/test_gpu.txt
