# Prepared in session 13 for the next session's first device call (main, carry [".whl"] not needed; ~6 min):
#  1. `generator profile` on the H200 for the first time: the bf16 TMA GEMV against the register GEMV at
#     qkv_gate m = 16 and 32 (the shapes still over the bar);
#  2. fprobe: the TMA GEMV's fixed cost taken apart (empty ring, no reduction, copies before the CTA barrier, no x).
set -u
export PYTHONPATH=. PYTHONUNBUFFERED=1
S=$(date +%s)
timeout -s INT 280 python3 -m generator profile --out $OUT/profile qkv_gate:16:tma:3,8,1 qkv_gate:16:gemv:16,1,2,4,2,0 \
    qkv_gate:32:tma:3,8,2 qkv_gate:32:gemv:4,4,1,1,1,1 > $OUT/profile.txt 2>&1
echo "profile rc=$? t=$(( $(date +%s)-S ))"; head -4 $OUT/profile.txt; rm -f $OUT/profile/source.csv  # sass.txt keeps it
timeout -s INT 280 python3 notes/session13/fprobe.py time $OUT/fprobe.json > $OUT/fprobe.txt 2>&1
echo "fprobe rc=$? t=$(( $(date +%s)-S ))"; tail -7 $OUT/fprobe.txt
