# Session 11, call 2: rprobe.py (bulk weight copies + a reduce-scatter cluster reduction for the TMA GEMV, against
# the shipped table's choice for 11 shapes, one process).
set -u
export PYTHONPATH=. PYTHONUNBUFFERED=1
timeout -s INT 560 python3 notes/session11/rprobe.py time $OUT/call2_rprobe.json 2>&1 | tee $OUT/call2_rprobe.txt
