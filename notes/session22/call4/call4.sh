# Session 22, call 4 (branch red-split, no carry): C = 2 with the warps' partials summed conflict-free before the
# quads' adds, and one fence (the release) where the zeroing had two. 1. tests/test_gpu.py -k atomic.
# 2. ab: each router entry against C = 2 configs, one process.
export PYTHONPATH=. PYTHONUNBUFFERED=1
S=$(date +%s)
timeout -s INT 240 python3 -m pytest -q -x tests/test_gpu.py -k atomic > $OUT/gpu_atomic.txt 2>&1
echo "test rc=$? t=$(( $(date +%s)-S ))"; tail -3 $OUT/gpu_atomic.txt
timeout -s INT 300 python3 -m generator ab --rounds 5 \
  router:32:gemv:16,4,1,1,1,1 router:32:gemv:16,4,1,1,1,2 router:32:gemv:8,16,1,1,1,2 router:32:gemv:4,32,2,0,1,2 \
  router:32:gemv:8,16,2,0,1,2 router:32:gemv:8,16,2,2,1,2 router:32:gemv:4,32,1,1,1,2 router:32:gemv:8,32,1,0,1,2 \
  router:32:gemv:4,16,2,0,1,2 router:32:gemv:16,8,1,4,1,2 router:32:gemv:8,16,1,4,1,2 router:32:gemv:8,16,1,0,1,2 \
  router:32:gemv:4,32,1,4,1,2 \
  router:16:gemv:16,4,4,2,1,1 router:16:gemv:8,16,2,2,1,2 router:16:gemv:8,16,2,0,1,2 router:16:gemv:4,32,2,0,1,2 \
  router:8:gemv:8,8,4,0,1,1 router:8:gemv:4,16,4,0,1,2 router:8:gemv:8,16,2,0,1,2 router:8:gemv:4,32,2,0,1,2 \
  router:1:gemv:16,4,4,0,1,1 router:1:gemv:4,16,4,0,1,2 router:1:gemv:8,16,2,0,1,2 router:1:gemv:4,32,2,0,1,2 \
  > $OUT/ab.txt 2>&1
echo "ab rc=$? t=$(( $(date +%s)-S ))"; grep -v Warning $OUT/ab.txt | tail -27
