# Session 19, call 6 (branch inflight): wgmma groups the half tiles' consumer keeps in flight (OKC_TMA_INFLIGHT:
# 0 = main's 3, then 1, 2), per shape, each launch checked against float64 first.
export PYTHONPATH=. PYTHONUNBUFFERED=1
S=$(date +%s)
timeout -s INT 280 python3 notes/session19/envprobe.py $OUT/inflight.txt OKC_TMA_INFLIGHT 0,1,2,0 \
  qkv_gate:32:tma:1,14,3 qkv_gate:16:tma:1,16,3 qkv_gate:8:tma:1,16,3 qkv_gate:1:tma:1,16,3 \
  pooler:32:tma:1,12,3 pooler:16:tma:1,12,3 2>&1 | grep -v Warning | tail -40
echo "probe rc=${PIPESTATUS[0]} t=$(( $(date +%s)-S ))"
