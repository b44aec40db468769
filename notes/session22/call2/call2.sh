# Session 22, call 2 (branch red-split, no carry): C = 2, the router's atomic split-K, checked and timed again: split 0 zeroes (no ticket wait), per-S 32-bit tickets read at the end.
# 1. tests/test_gpu.py -k atomic: float64 check of C = 2 on poisoned outputs, every loop style, S changing launch
#    to launch on one semaphore array, and graph replays (~100 s with the CUDA build).
# 2. ab: each router entry against C = 2 configs in the same process (~60 s).
export PYTHONPATH=. PYTHONUNBUFFERED=1
S=$(date +%s)
timeout -s INT 240 python3 -m pytest -q -x tests/test_gpu.py -k atomic > $OUT/gpu_atomic.txt 2>&1
echo "test rc=$? t=$(( $(date +%s)-S ))"; tail -5 $OUT/gpu_atomic.txt
timeout -s INT 300 python3 -m generator ab --rounds 5 \
  router:32:gemv:16,4,1,1,1,1 router:32:gemv:16,4,1,1,1,2 router:32:gemv:16,8,1,1,1,2 router:32:gemv:16,8,2,2,1,2 \
  router:32:gemv:16,8,2,0,1,2 router:32:gemv:16,8,1,4,1,2 router:32:gemv:8,16,2,0,1,2 router:32:gemv:16,16,1,1,1,2 \
  router:32:gemv:16,8,1,0,2,2 router:32:gemv:8,8,2,0,1,2 \
  router:16:gemv:16,4,4,2,1,1 router:16:gemv:16,4,4,2,1,2 router:16:gemv:16,8,2,2,1,2 router:16:gemv:8,8,4,0,1,2 \
  router:16:gemv:16,8,1,1,1,2 \
  router:8:gemv:8,8,4,0,1,1 router:8:gemv:8,8,4,0,1,2 router:8:gemv:16,8,4,0,1,2 router:8:gemv:16,8,2,0,1,2 \
  router:1:gemv:16,4,4,0,1,1 router:1:gemv:16,4,4,0,1,2 router:1:gemv:16,8,4,0,1,2 router:1:gemv:8,8,4,0,1,2 \
  router:1:gemv:16,8,2,0,1,2 > $OUT/ab.txt 2>&1
echo "ab rc=$? t=$(( $(date +%s)-S ))"; grep -v Warning $OUT/ab.txt | tail -40
