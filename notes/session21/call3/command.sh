# Session 21, call 3 (branch wgmma-regs): ncu on C = 5 (register-fed wgmma) kernels, which call 2 timed 0.6-2.5 us
# slower than the entries: router m = 1 and 32 (S = 16, clusters of 16) and o m = 8 (S = 1, no cluster).
# Compare with session 20 call 6 (router m = 1 / 32 gemv entries, o m = 8 gemv entry).
set -u
export PYTHONPATH=. PYTHONUNBUFFERED=1
S=$(date +%s)
timeout -s INT 300 python3 -m generator profile --out $OUT/profile \
    router:1:tma:16,4,5 router:32:tma:16,4,5 o:8:tma:1,4,5 > $OUT/profile.txt 2>&1
echo "profile rc=$? t=$(( $(date +%s)-S ))"; head -40 $OUT/profile.txt
rm -f $OUT/profile/profile.ncu-rep; ls -la $OUT/profile
