# Session 18, call 3 (branch xreg; carry [".whl", "wt_mcast"]): (1) the x-in-registers GEMV after its SASS fixes,
# `ab` against each shape's current route; (2) in wt_mcast (a worktree of branch x-multicast, the per-slot
# MEMBAR removed in 383dc91, never run since), a tma sweep of qkv_gate and pooler at m = 32: C = 4 (x multicast
# over CTA pairs) against C = 0-3 in one process.
set -u
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl
export PYTHONPATH=.:/tmp/site PYTHONUNBUFFERED=1
S=$(date +%s)
L="qkv_gate:32:tma:1,14,3 qkv_gate:32:tma:1,24,4 qkv_gate:32:tma:1,16,4 qkv_gate:32:tma:1,24,5
 qkv_gate:1:gemv:16,1,2,1,2,0 qkv_gate:1:tma:1,24,4 o:16:tma:1,8,0 o:16:tma:1,16,6
 pooler:32:tma:1,12,3 pooler:32:tma:1,24,5 unpooler:32:tma:1,12,0 unpooler:32:tma:1,24,6"
timeout -s INT 200 python3 -m generator ab --rounds 4 $L > $OUT/ab.txt 2>&1
echo "ab rc=$? t=$(( $(date +%s)-S ))"; grep -v Warning $OUT/ab.txt | tail -16
cd wt_mcast
timeout -s INT 200 python3 -m generator sweep --engine tma --reps 20 --layers qkv_gate --layers pooler --m 32 \
    --json $OUT/mcast_sweep.json > $OUT/mcast_sweep.txt 2>&1
echo "mcast sweep rc=$? t=$(( $(date +%s)-S ))"; grep -v "^launch failed" $OUT/mcast_sweep.txt | tail -4
python3 - <<'PY'
import json, os
for p in json.load(open(os.environ["OUT"] + "/mcast_sweep.json")):
    best = {}
    for cfg, us in p["timings"]:
        if cfg[2] not in best or us < best[cfg[2]][1]:
            best[cfg[2]] = (cfg, us)
    print(p["layer"], p["m"], "wrong", len(p["wrong"]), " ".join(f"C{c}:{best[c][0]}={best[c][1]:.2f}" for c in sorted(best)))
PY
