# Session 20, call 4 (main after merging half-n64; the same dist as call 3, sha256 1615aa441fefe97b): a second bench
# of the landed file, then ab of entries the cheaper half tiles might now take (each against the current entry),
# and of qkv_gate / pooler m = 32 at 12 against 14 slots (call 3's ab ran out of time loading the extension).
set -u
export PYTHONPATH=. PYTHONUNBUFFERED=1
S=$(date +%s)
sha256sum dist/submission.py | cut -c1-16
timeout -s INT 200 python3 -m generator bench --json $OUT/bench.json > $OUT/bench.txt 2>&1
echo "bench rc=$? t=$(( $(date +%s)-S ))"; grep -E "^(qkv_gate|o |pooler|unpooler|router) +(1|8|16|32) " $OUT/bench.txt; grep "launch floor\|geometric" $OUT/bench.txt
timeout -s INT 200 python3 -m generator ab --rounds 5 qkv_gate:32:tma:1,14,3 qkv_gate:32:tma:1,12,3 \
  pooler:32:tma:1,12,3 pooler:32:tma:1,14,3 o:16:tma:1,8,0 o:16:tma:1,8,3 o:16:tma:1,16,3 \
  o:8:gemv:8,1,4,0,2,0 o:8:tma:1,16,3 qkv_gate:1:gemv:16,1,2,1,2,0 qkv_gate:1:tma:1,16,3 > $OUT/ab.txt 2>&1
echo "ab rc=$? t=$(( $(date +%s)-S ))"; grep -v Warning $OUT/ab.txt | tail -14
