# Prepared in session 8 (not yet run): the TMA GEMV's time taken apart (tprobe.py: no wgmma / no split-K tail /
# both), on main's dist/submission.py. ~4 min: four builds in parallel, then one timing process.
set -u
export PYTHONPATH=. PYTHONUNBUFFERED=1
S=$(date +%s)
for v in base nowg notail both; do timeout -s INT 300 python3 notes/session8/tprobe.py build $v > $OUT/build_$v.txt 2>&1 & done
wait; echo "builds t=$(( $(date +%s)-S ))"; tail -2 $OUT/build_*.txt
timeout -s INT 240 python3 notes/session8/tprobe.py time $OUT/tprobe.json base nowg notail both 2>&1 | tee $OUT/tprobe.txt
echo "time t=$(( $(date +%s)-S ))"
