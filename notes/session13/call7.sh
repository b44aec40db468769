# Session 13, call 7 (carry ["b_ztma"]; b_ztma = branch ztma with stmatrix stores): zlean, the leaner Z = 1
# consumer checked against float64 and timed beside Z = 0 (~3 min; the session's last device time).
set -u
cd b_ztma
export PYTHONPATH=. PYTHONUNBUFFERED=1
S=$(date +%s)
timeout -s INT 280 python3 notes/session13/zlean.py time $OUT/zlean.json > $OUT/zlean.txt 2>&1
echo "zlean rc=$? t=$(( $(date +%s)-S ))"; tail -18 $OUT/zlean.txt
