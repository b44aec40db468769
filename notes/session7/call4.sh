# Session 7, call 4 (the last ~4 device minutes), branch flat-split: is the flat split correct on the H200, and
# does it move qkv_gate m = 8..32? The GPU test of the flat split, then sweep --splits 2 on qkv_gate only.
set -u
export PYTHONPATH=. PYTHONUNBUFFERED=1
S=$(date +%s)
timeout -s INT 125 python3 -m pytest -q -x tests/test_gpu.py -k flat > $OUT/flat_test.txt 2>&1; echo "flat test rc=$? t=$(( $(date +%s)-S ))"; tail -4 $OUT/flat_test.txt | cut -c1-400
timeout -s INT $(( 205 - ($(date +%s) - S) )) python3 -m generator sweep --splits 2 --reps 20 --layers qkv_gate --m 8 --m 16 --m 32 \
    --json $OUT/sweep_flat.json --write $OUT/ctable.yaml > $OUT/sweep_flat.txt 2>&1; echo "sweep rc=$? t=$(( $(date +%s)-S ))"
grep -v "^\s*$" $OUT/sweep_flat.txt | tail -8
