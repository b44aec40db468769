# Session 11, call 1: bprobe.py (the TMA GEMV's fixed cost vs rate; bulk weight copies, L2 promotion, x share,
# reduction share; a small (S, STAGES, C) grid with and without bulk copies).
set -u
export PYTHONPATH=. PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem --format=csv,noheader
timeout -s INT 540 python3 notes/session11/bprobe.py time $OUT/call1_bprobe.json 2>&1 | tee $OUT/call1_bprobe.txt
