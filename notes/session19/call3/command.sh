# (Record of what ran. notes/session19/l2probe.py, which it runs, stays on branch l2-ahead: envprobe.py is its general form.)
# Session 19, call 2 (branch l2-ahead): L2 prefetch distance of the TMA GEMV's producer warp, against d = 0, per
# shape (notes/session19/l2probe.py). The gemv rows run the current routes (their d does nothing: a noise gauge).
export PYTHONPATH=. PYTHONUNBUFFERED=1
timeout -s INT 500 python3 notes/session19/l2probe.py $OUT/l2.txt \
  qkv_gate:32:tma:1,14,3 qkv_gate:16:tma:1,16,3 qkv_gate:1:tma:1,16,3 pooler:32:tma:1,12,3 pooler:16:tma:1,12,3 \
  unpooler:32:tma:1,12,0 o:16:tma:1,8,0 router:32:tma:16,4,1 router:32:tma:16,4,2 router:32:gemv:16,4,1,1,1,1 \
  qkv_gate:1:gemv:16,1,2,1,2,0 2>&1 | grep -v Warning | tail -80
echo "rc=${PIPESTATUS[0]}"
