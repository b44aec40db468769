# For session 26 (prepared in session 25, not run): what the patch headers cost pooler m = 1 / 8 (19.06 / 19.58 us
# in session 25's call 6 against 18.05 / 18.78 in session 24). Times the same launches from two submission files
# in one call: session 24's (commit 0d5e958, exceptions in a pass after the loop) and main's, each ab'd against the
# register GEMV as a common yardstick. Run from the repository root; ~4 min of device time.
set -e
export PYTHONPATH=. PYTHONUNBUFFERED=1
git show 0d5e958:dist/submission.py > /tmp/submission_s24.py
L="pooler:1:z:8,1,4,0,1,0 pooler:8:z:8,1,4,0,1,0 pooler:1:gemv:8,1,4,1,1,0 o:8:z:8,1,1,0,1,0 o:8:gemv:8,1,4,0,2,0"
timeout -s INT 250 python3 -m generator ab --rounds 6 --file /tmp/submission_s24.py $L > $OUT/ab_s24.txt 2>&1 || true
timeout -s INT 250 python3 -m generator ab --rounds 6 $L > $OUT/ab_main.txt 2>&1 || true
tail -8 $OUT/ab_s24.txt $OUT/ab_main.txt
