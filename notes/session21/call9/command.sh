# Session 21, call 9 (branch wgmma-regs; the last ~5 min of device time): ncu on C = 5 (stacked router tiles,
# S = 8) against the register GEMV's entry at m = 1, same run: where C = 5's extra ~0.9 us goes.
set -u
export PYTHONPATH=. PYTHONUNBUFFERED=1
S=$(date +%s)
timeout -s INT 190 python3 -m generator profile --out $OUT/profile \
    router:1:tma:8,4,5 router:1:gemv:16,4,4,0,1,1 > $OUT/profile.txt 2>&1
echo "profile rc=$? t=$(( $(date +%s)-S ))"; head -30 $OUT/profile.txt
rm -f $OUT/profile/profile.ncu-rep $OUT/profile/source.csv; ls -la $OUT/profile
