# Prepared in session 7 for the next device call, on branch flat-split (or main + `git apply
# notes/session7/flat_split_vs_main.patch` + `python -m generator build`): is qkv_gate's m = 8..32 gap the SM fill?
# (notes/README.md, session 7: pooler's 256 row blocks run m = 16 at 1.02 x floor, qkv_gate's 144 at 1.18 x; with
# whole row groups per CTA qkv_gate keeps 60 of 132 SMs idle at R = 2.) The flat split's GPU test passed on the
# H200 in call 4 (call4_flat_test.txt); its speed is unmeasured.
#  1. the flat split's GPU test again (cheap once compiled; it is the poisoned check the sweep lacks);
#  2. sweep --splits 2: every flat config against each shape's current entry (kept unless beaten by 2 %),
#     then bench of the file built with that table; a second call: all GPU tests and verify on that file.
set -u
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl
export PYTHONPATH=.:/tmp/site PYTHONUNBUFFERED=1
S=$(date +%s)
timeout -s INT 200 python3 -m pytest -q tests/test_gpu.py -k flat > $OUT/flat_test.txt 2>&1; echo "flat test rc=$? t=$(( $(date +%s)-S ))"; tail -5 $OUT/flat_test.txt
timeout -s INT 250 python3 -m generator sweep --splits 2 --reps 20 --layers qkv_gate --layers pooler --layers router \
    --layers o --json $OUT/sweep_flat.json > $OUT/sweep_flat.txt 2>&1; echo "sweep rc=$? t=$(( $(date +%s)-S ))"
grep -v "^\s*$" $OUT/sweep_flat.txt | tail -18; cp tables/ctable.yaml $OUT/ctable.yaml
python3 -m generator build > /dev/null 2>&1; echo "build rc=$? t=$(( $(date +%s)-S ))"
timeout -s INT $(( 590 - ($(date +%s) - S) )) python3 -m generator bench --json $OUT/bench.json \
    --compare notes/session7/call1_bench.json > $OUT/bench.txt 2>&1; echo "bench rc=$? t=$(( $(date +%s)-S ))"
grep -v "^\s*$" $OUT/bench.txt | head -40
# then (a second call): pytest tests/test_gpu.py, generator verify, on the file with the adopted table.
