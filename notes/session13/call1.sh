# Session 13, call 1 (carry [".whl", "b_ztma", "b_gscat"]: branches ztma and gemv-scatter exported by git archive).
#  1. zprobe on ztma: leave-one-out timing of the Z = 1 consumer's per-tile steps (notes/session12/zprobe.py there).
#  2. gemv-scatter: the router swept at m = 16, 32 with the register GEMV's scattered reduction (C = 2) available.
set -u
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl
S=$(date +%s)
(cd b_ztma && PYTHONPATH=. PYTHONUNBUFFERED=1 timeout -s INT 300 python3 notes/session12/zprobe.py time $OUT/zprobe.json > $OUT/zprobe.txt 2>&1)
echo "zprobe rc=$? t=$(( $(date +%s)-S ))"; tail -9 $OUT/zprobe.txt
(cd b_gscat && PYTHONPATH=.:/tmp/site PYTHONUNBUFFERED=1 timeout -s INT $(( 560 - ($(date +%s) - S) )) python3 -m generator sweep --reps 20 \
    --layers router --m 16 --m 32 --json $OUT/sweep_router.json > $OUT/sweep_router.txt 2>&1)
echo "sweep rc=$? t=$(( $(date +%s)-S ))"; tail -4 $OUT/sweep_router.txt
