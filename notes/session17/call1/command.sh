# Next session, first call (carry [".whl"]), on branch x-multicast: C = 4 (half tiles in clusters of two CTAs that
# multicast x to each other) against C = 0-3 in one tma sweep on the four plain layers, then the file built from
# it, every GPU test and bench. Merge only if the sweep reports 0 wrong and the GPU tests pass; keep C = 4 only if
# it wins a shape.
set -u
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl
export PYTHONPATH=.:/tmp/site PYTHONUNBUFFERED=1
S=$(date +%s)
timeout -s INT 200 python3 -m generator sweep --engine tma --reps 20 --layers qkv_gate --layers pooler --layers o \
    --layers unpooler --m 1 --m 8 --m 16 --m 32 --json $OUT/sweep_tma.json > $OUT/sweep_tma.txt 2>&1
echo "sweep rc=$? t=$(( $(date +%s)-S ))"; grep -v "^launch failed" $OUT/sweep_tma.txt | tail -17; cp tables/ttable.yaml $OUT/
python3 - <<'PY' > $OUT/sweep_c_best.txt 2>&1
import json, os
for p in json.load(open(os.environ["OUT"] + "/sweep_tma.json")):
    best = {}
    for cfg, us in p["timings"]:
        if cfg[2] not in best or us < best[cfg[2]][1]:
            best[cfg[2]] = (cfg, us)
    print(p["layer"], p["m"], "wrong", len(p["wrong"]), " ".join(f"C{c}:{best[c][0]}={best[c][1]:.2f}" for c in sorted(best)))
PY
cat $OUT/sweep_c_best.txt
python3 -m generator build > /dev/null 2>&1; echo "build rc=$? t=$(( $(date +%s)-S ))"; grep -m1 "inputs sha256" dist/submission.py
cp dist/submission.py $OUT/
timeout -s INT 150 python3 -m pytest -q tests/test_gpu.py > $OUT/gpu_tests.txt 2>&1
echo "gpu tests rc=$? t=$(( $(date +%s)-S ))"; tail -3 $OUT/gpu_tests.txt
timeout -s INT 110 python3 -m generator verify > $OUT/verify.txt 2>&1; echo "verify rc=$? t=$(( $(date +%s)-S ))"; tail -2 $OUT/verify.txt
timeout -s INT $(( 575 - ($(date +%s) - S) )) python3 -m generator bench --json $OUT/bench.json > $OUT/bench.txt 2>&1
echo "bench rc=$? t=$(( $(date +%s)-S ))"; grep -E "^(qkv_gate|o |pooler|unpooler|router) +(1|8|16|32) " $OUT/bench.txt; grep "launch floor\|geometric" $OUT/bench.txt
