# Session 26, call 2 (branch z-xs): the compressed GEMV's P = 2 (x staged in shared memory once a CTA, R row
# blocks a CTA with NW warps each). 1) its GPU test (both distributions, every plain layer, P = 2 configs added);
# 2) the z sweep of P = 2 alone (--styles 2) on o, pooler and unpooler at m = 1, 8, 16 against the current
# entries; 3) ab of the candidates against the entries.
export PYTHONPATH=. PYTHONUNBUFFERED=1
S=$(date +%s)
timeout -s INT 260 python3 -m pytest -q -x tests/test_gpu.py -k "compressed" > $OUT/test_gpu_z.txt 2>&1
echo "test rc=$? t=$(( $(date +%s)-S ))"; tail -3 $OUT/test_gpu_z.txt
timeout -s INT 200 python3 -m generator sweep --engine z --styles 2 --layers o --m 1 --m 8 --m 16 \
  --json $OUT/sweep_xs_o.json --write $OUT/ztable_xs_o.yaml > $OUT/sweep_xs_o.txt 2>&1
echo "sweep o rc=$? t=$(( $(date +%s)-S ))"; tail -4 $OUT/sweep_xs_o.txt
python3 - <<'PY'
import json, os
for p in json.load(open(os.environ["OUT"] + "/sweep_xs_o.json")):
    items = sorted(p["timings"].items(), key=lambda kv: kv[1])[:8]
    print(p["layer"], p["m"], " ".join(f"{k}:{v:.2f}" for k, v in items))
PY
timeout -s INT 150 python3 -m generator ab --rounds 6 \
  o:8:z:8,1,1,0,1,0 o:8:z:8,1,1,2,4,0 o:8:z:8,1,1,2,2,0 o:16:z:8,1,1,0,1,0 o:16:z:8,1,1,2,4,0 o:16:z:8,1,1,2,2,0 \
  o:16:z:4,1,1,2,4,0 o:16:tma:1,8,0 > $OUT/ab_xs.txt 2>&1
echo "ab rc=$? t=$(( $(date +%s)-S ))"; tail -12 $OUT/ab_xs.txt
