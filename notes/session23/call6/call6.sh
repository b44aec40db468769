# Session 23, call 6 (main, no carry): ncu on o m = 1: the compressed GEMV two ways (two trips of one group a warp,
# 4 CTAs a SM; one trip of four groups, one wave) beside the register GEMV's entry, for where the compressed
# GEMV's time goes on o (its 25 % fewer bytes gain nothing there: notes/README.md, session 23).
export PYTHONPATH=. PYTHONUNBUFFERED=1
S=$(date +%s)
timeout -s INT 230 python3 -m generator profile --out $OUT/prof o:1:z:8,1,1,0,1,0 o:1:z:4,1,4,0,1,0 o:1:gemv:8,1,2,1,2,0 > $OUT/profile.txt 2>&1
echo "profile rc=$? t=$(( $(date +%s)-S ))"; tail -30 $OUT/profile.txt; ls -la $OUT/prof
