# Session 13, call 4 (carry ["b_ztma"]; b_ztma = branch ztma): sprobe, leave-one-out / add-one-in timing of what
# caps a Z = 1 CTA's stream (~3 min: the edited extension compiles once, then 4 configs x 9 variants x 2 rounds).
set -u
cd b_ztma
export PYTHONPATH=. PYTHONUNBUFFERED=1
S=$(date +%s)
timeout -s INT 400 python3 notes/session13/sprobe.py time $OUT/sprobe.json > $OUT/sprobe.txt 2>&1
echo "sprobe rc=$? t=$(( $(date +%s)-S ))"; tail -6 $OUT/sprobe.txt
