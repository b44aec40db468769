# Session 26, call 1 (main as landed in session 25, no carry): the z sweep on o against the landed kernel (patch
# headers), never run on it; every config's time kept (--json) to see what R = 2 / 4 (x shared across row blocks)
# does at m = 16, where x's loads are the compressed GEMV's known cost.
export PYTHONPATH=. PYTHONUNBUFFERED=1
S=$(date +%s)
timeout -s INT 300 python3 -m generator sweep --engine z --layers o --m 8 --m 16 --best-by R --best-by NW \
  --json $OUT/sweep_z_o.json --write $OUT/ztable_o.yaml > $OUT/sweep_z_o.txt 2>&1
echo "sweep rc=$? t=$(( $(date +%s)-S ))"; tail -30 $OUT/sweep_z_o.txt
python3 - <<'PY'
import json, os
d = json.load(open(os.environ["OUT"] + "/sweep_z_o.json"))
print(type(d), (list(d)[:3] if isinstance(d, dict) else len(d)))
PY
