# Session 30, call 6: the stop review's mend run on the H200: ab (now settling first) on o m = 16's entry against
# its cuBLAS fallback, 3 rounds.
export PYTHONPATH=. PYTHONUNBUFFERED=1
S=$(date +%s)
timeout -s INT 200 python3 -m generator ab --rounds 3 o:16:tma:1,8,0 o:16:cublas > $OUT/ab.txt 2>&1
echo "ab rc=$? t=$(( $(date +%s)-S ))"; tail -8 $OUT/ab.txt
