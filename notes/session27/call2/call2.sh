# Session 27, call 2: the walk, its overflow staged in shared memory (call 1: looked up in global memory after every block, 10.9 us on o m = 16), (zgemv P = 2..4) on o. First its GPU tests (planted overflow on o, every walk
# config; the compressed GEMV on every layer), then `sweep --engine z --styles 2 3 4` on o (walk configs against
# each shape's current entry), then ab of the best walk per m against the incumbents, 8 rounds.
export PYTHONPATH=. PYTHONUNBUFFERED=1
S=$(date +%s)
sha256sum dist/submission.py | cut -c1-16
timeout -s INT 200 python3 -m pytest -x -q tests/test_gpu.py -k "planted_overflow" > $OUT/gputest_planted.txt 2>&1
echo "planted rc=$? t=$(( $(date +%s)-S ))"; tail -3 $OUT/gputest_planted.txt
timeout -s INT 200 python3 -m generator sweep --engine z --layers o --styles 2 --styles 3 --styles 4 \
  --json $OUT/sweep_walk_o.json --write $OUT/ztable_walk_o.yaml > $OUT/sweep_walk_o.txt 2>&1
echo "sweep rc=$? t=$(( $(date +%s)-S ))"; tail -25 $OUT/sweep_walk_o.txt
python3 - > $OUT/ab_args.txt <<'PY'
import json, os
points = json.load(open(os.environ["OUT"] + "/sweep_walk_o.json"))
args = []
for p in points:  # the two fastest walk configs of each shape
    walks = [cfg for cfg, _ in p["timings"] if cfg[3] >= 2][:2]
    args += [f"{p['layer']}:{p['m']}:z:" + ",".join(map(str, cfg)) for cfg in walks]
print(" ".join(args))
PY
echo "ab args: $(cat $OUT/ab_args.txt)"
timeout -s INT 240 python3 -m generator ab --rounds 8 $(cat $OUT/ab_args.txt) \
  o:1:z:8,1,1,0,1,0 o:8:z:8,1,1,0,1,0 o:16:tma:1,8,0 o:16:z:8,1,1,0,1,0 > $OUT/ab.txt 2>&1
echo "ab rc=$? t=$(( $(date +%s)-S ))"; cat $OUT/ab.txt | tail -30
