# Session 13, call 5 (carry ["b_ztma"]; b_ztma = branch ztma): cprobe, the Z = 1 consumer's per-tile steps left
# out one at a time with the exception warp off the ring (~2 min).
set -u
cd b_ztma
export PYTHONPATH=. PYTHONUNBUFFERED=1
S=$(date +%s)
timeout -s INT 400 python3 notes/session13/cprobe.py time $OUT/cprobe.json > $OUT/cprobe.txt 2>&1
echo "cprobe rc=$? t=$(( $(date +%s)-S ))"; tail -6 $OUT/cprobe.txt
