# Session 29, call 5 (main). The unpooler slice's plain-GEMV entry (16, 1, 8, 0, 1, 0) dates from session 8's sweep;
# the kernel has changed since. 1) sweep (gemv) on the unpooler slice, m = 1 then m = 8, written to $OUT only.
# 2) ab: each m's three fastest against the entry, 6 rounds.
export PYTHONPATH=. PYTHONUNBUFFERED=1
S=$(date +%s)
sha256sum dist/submission.py | cut -c1-16
for m in 1 8; do
  timeout -s INT 150 python3 -m generator sweep --layers unpooler --m $m \
    --json $OUT/sweep_unpooler_m$m.json --write $OUT/ctable_m$m.yaml > $OUT/sweep_unpooler_m$m.txt 2>&1
  echo "sweep m=$m rc=$? t=$(( $(date +%s)-S ))"; tail -3 $OUT/sweep_unpooler_m$m.txt
done
LAUNCHES=$(python3 - <<'PY'
import json, os
out = []
for m in (1, 8):
    path = f"{os.environ['OUT']}/sweep_unpooler_m{m}.json"
    if not os.path.exists(path):
        continue
    (point,) = json.load(open(path))
    out.append(f"unpooler:{m}:gemv:16,1,8,0,1,0")
    out += [f"unpooler:{m}:gemv:" + ",".join(map(str, cfg)) for cfg, _ in point["timings"][:4] if cfg != [16, 1, 8, 0, 1, 0]][:3]
print(" ".join(out))
PY
)
echo "$LAUNCHES"
[ -n "$LAUNCHES" ] && timeout -s INT 100 python3 -m generator ab --rounds 6 $LAUNCHES > $OUT/ab_unpooler.txt 2>&1
echo "ab rc=$? t=$(( $(date +%s)-S ))"; tail -10 $OUT/ab_unpooler.txt
