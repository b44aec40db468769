# Session 20, call 5 (main, dist sha256 1615aa441fefe97b): o (N = 8192, K = 1024) at m = 1, 8, 16 with half tiles
# in rings small enough for two CTAs per SM (8 slots at NB = 1: 80 KB), so that its 256 half-tile CTAs run in one
# wave, against the current entries. Each launch checked against float64 first.
set -u
export PYTHONPATH=. PYTHONUNBUFFERED=1
S=$(date +%s)
timeout -s INT 300 python3 -m generator ab --rounds 5 o:1:gemv:8,1,2,1,2,0 o:1:tma:1,8,3 o:1:tma:1,6,3 o:1:tma:1,4,3 \
  o:8:gemv:8,1,4,0,2,0 o:8:tma:1,8,3 o:8:tma:1,6,3 o:8:tma:1,4,3 \
  o:16:tma:1,8,0 o:16:tma:1,8,3 o:16:tma:1,6,3 o:16:tma:1,4,3 > $OUT/ab_o.txt 2>&1
echo "ab rc=$? t=$(( $(date +%s)-S ))"; grep -v Warning $OUT/ab_o.txt | tail -15
