# Session 23, call 1 (branch sum-over-warps rebased on main, no carry): verify and bench the branch's file (one
# sum_over_warps helper; SASS order at the tile's end differs from main's), then the compressed GEMV swept on o
# (m = 1, 8, 16): o sits at 1.09-1.10 x floor on bf16 bytes, the best streaming read's own ratio for 16.8 MB.
export PYTHONPATH=. PYTHONUNBUFFERED=1
S=$(date +%s)
sha256sum dist/submission.py | cut -c1-16
timeout -s INT 200 python3 -m generator verify > $OUT/verify.txt 2>&1
echo "verify rc=$? t=$(( $(date +%s)-S ))"; tail -3 $OUT/verify.txt
timeout -s INT 170 python3 -m generator bench --json $OUT/bench.json --compare notes/bench.json > $OUT/bench.txt 2>&1
echo "bench rc=$? t=$(( $(date +%s)-S ))"; grep -E "^(qkv_gate|o |pooler|unpooler|router) +(1|8|16|32) " $OUT/bench.txt; grep "launch floor\|geometric" $OUT/bench.txt
timeout -s INT $(( 575 - ($(date +%s)-S) )) python3 -m generator sweep --engine z --layers o --m 1 --m 8 --m 16 --json $OUT/zsweep_o.json --write $OUT/ztable_o.yaml > $OUT/zsweep_o.txt 2>&1
echo "zsweep rc=$? t=$(( $(date +%s)-S ))"; tail -25 $OUT/zsweep_o.txt
