# Session 27, call 6: is the TMA GEMV (1, 8, 0) faster than cuBLAS on o m = 32? (call 5's sweep: 9.71 against
# 9.89, 1.8 %; call 4's benches had cuBLAS at 10.08-10.14.) ab with the new cublas launch, 10 rounds, beside o
# m = 16 for reference; then verify of the file with TTABLE o 32: [1, 8, 0] (the candidate to land).
export PYTHONPATH=. PYTHONUNBUFFERED=1
S=$(date +%s)
sha256sum dist/submission.py | cut -c1-16
timeout -s INT 140 python3 -m generator ab --rounds 10 o:32:cublas o:32:tma:1,8,0 o:16:cublas o:16:tma:1,8,0 \
  > $OUT/ab_cublas.txt 2>&1
echo "ab rc=$? t=$(( $(date +%s)-S ))"; tail -7 $OUT/ab_cublas.txt
timeout -s INT 170 python3 -m generator verify > $OUT/verify.txt 2>&1
echo "verify rc=$? t=$(( $(date +%s)-S ))"; tail -3 $OUT/verify.txt
