# Session 20, call 6 (main, the landed file; no carry): ncu on the router's register GEMV at m = 32 (its entry)
# against m = 1 (its entry), and o m = 8 (its entry): where the router's extra 1.8 us at m = 32 goes. The router
# at m = 32 has never been profiled; the budget left (~350 s) allows one short call.
set -u
export PYTHONPATH=. PYTHONUNBUFFERED=1
S=$(date +%s)
timeout -s INT 250 python3 -m generator profile --out $OUT/profile \
    router:32:gemv:16,4,1,1,1,1 router:1:gemv:16,4,4,0,1,1 o:8:gemv:8,1,4,0,2,0 > $OUT/profile.txt 2>&1
echo "profile rc=$? t=$(( $(date +%s)-S ))"; head -30 $OUT/profile.txt
rm -f $OUT/profile/profile.ncu-rep; ls -la $OUT/profile
