# Session 30, call 2: launch-floor drift within a run (floor_drift.py), 30 rounds.
export PYTHONPATH=. PYTHONUNBUFFERED=1
S=$(date +%s)
nvidia-smi --query-gpu=name,clocks.max.sm,clocks.max.mem,power.limit --format=csv
timeout -s INT 300 python3 notes/session30/call2/floor_drift.py 30 > $OUT/floor_drift.txt 2>&1
echo "probe rc=$? t=$(( $(date +%s)-S ))"; cat $OUT/floor_drift.txt | tail -40
