# Session 29, call 4 (main, the early first round landed). The unpooler slice (m <= 8, 8.4 MB) read 1.175-1.224 x
# floor in call 2 against its 1.20 bar; its compressed-GEMV entry was last swept in session 6 (z 8.32 vs 7.55 us),
# before the compressed GEMV's later work (o m = 1 / 8 moved to it in session 25). 1) sweep --engine z on the
# unpooler slice (written to $OUT, not to tables/). 2) ab: the sweep's three fastest z configs per m against the
# gemv entry, 6 rounds.
export PYTHONPATH=. PYTHONUNBUFFERED=1
S=$(date +%s)
sha256sum dist/submission.py | cut -c1-16
timeout -s INT 260 python3 -m generator sweep --engine z --layers unpooler --m 1 --m 8 \
  --json $OUT/zsweep_unpooler.json --write $OUT/ztable.yaml > $OUT/zsweep_unpooler.txt 2>&1
echo "sweep rc=$? t=$(( $(date +%s)-S ))"; tail -8 $OUT/zsweep_unpooler.txt
LAUNCHES=$(python3 - <<'PY'
import json, os
points = json.load(open(os.environ["OUT"] + "/zsweep_unpooler.json"))
out = []
for p in points:
    out.append(f"unpooler:{p['m']}:gemv:16,1,8,0,1,0")
    out += [f"unpooler:{p['m']}:z:" + ",".join(map(str, cfg)) for cfg, _ in p["timings"][:3]]  # fastest first
print(" ".join(out))
PY
)
echo "$LAUNCHES"
timeout -s INT 200 python3 -m generator ab --rounds 6 $LAUNCHES > $OUT/ab_unpooler.txt 2>&1
echo "ab rc=$? t=$(( $(date +%s)-S ))"; tail -10 $OUT/ab_unpooler.txt
