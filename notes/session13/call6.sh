# Session 13, call 6 (carry ["b_ztma"]; b_ztma = branch ztma): eprobe, each weight slot released right after
# the consumers' loads of it (timing only), with and without the exception warp on the ring (~2 min).
set -u
cd b_ztma
export PYTHONPATH=. PYTHONUNBUFFERED=1
S=$(date +%s)
timeout -s INT 400 python3 notes/session13/eprobe.py time $OUT/eprobe.json > $OUT/eprobe.txt 2>&1
echo "eprobe rc=$? t=$(( $(date +%s)-S ))"; tail -6 $OUT/eprobe.txt
