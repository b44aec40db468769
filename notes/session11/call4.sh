# Session 11, call 4: aprobe.py (the TMA GEMV's cluster push as plain remote stores + one arrival per thread or
# per warp, against the shipped st.async push and no reduction, one process).
set -u
export PYTHONPATH=. PYTHONUNBUFFERED=1
timeout -s INT 400 python3 notes/session11/aprobe.py time $OUT/call4_aprobe.json 2>&1 | tee $OUT/call4_aprobe.txt
