# Session 27, call 5 (main, dist sha 55dfaef0ca4b5beb): re-sweep the TMA GEMV on o at m = 16 and 32 (TTABLE's o
# entries date from before the half-tile and reduction changes of sessions 18-20), then ab the three fastest of
# each against o m = 16's entry (1, 8, 0), 8 rounds.
export PYTHONPATH=. PYTHONUNBUFFERED=1
S=$(date +%s)
timeout -s INT 220 python3 -m generator sweep --engine tma --layers o --m 16 --m 32 \
  --json $OUT/sweep_tma_o.json --write $OUT/ttable_o.yaml > $OUT/sweep_tma_o.txt 2>&1
echo "sweep rc=$? t=$(( $(date +%s)-S ))"; tail -6 $OUT/sweep_tma_o.txt
python3 - > $OUT/ab_args.txt <<'PY'
import json, os
points = json.load(open(os.environ["OUT"] + "/sweep_tma_o.json"))
args = []
for p in points:
    args += [f"{p['layer']}:{p['m']}:tma:" + ",".join(map(str, cfg)) for cfg, _ in p["timings"][:3]]
print(" ".join(a for a in args if a != "o:16:tma:1,8,0"))
PY
echo "ab args: $(cat $OUT/ab_args.txt)"
timeout -s INT 200 python3 -m generator ab --rounds 8 o:16:tma:1,8,0 $(cat $OUT/ab_args.txt) > $OUT/ab.txt 2>&1
echo "ab rc=$? t=$(( $(date +%s)-S ))"; tail -12 $OUT/ab.txt
