# Session 19, call 4 (branch rolled): the TMA GEMV's ring walked by a rolled loop (OKC_TMA_ROLLED=1: a third to
# half the code) against the unrolled one main runs (0), per shape, then the TMA GPU test on both forms.
export PYTHONPATH=. PYTHONUNBUFFERED=1
S=$(date +%s)
timeout -s INT 300 python3 notes/session19/envprobe.py $OUT/rolled.txt OKC_TMA_ROLLED 0,1,0 \
  qkv_gate:32:tma:1,14,3 qkv_gate:32:tma:1,12,3 qkv_gate:16:tma:1,16,3 qkv_gate:8:tma:1,16,3 qkv_gate:1:tma:1,16,3 \
  pooler:32:tma:1,12,3 pooler:16:tma:1,12,3 pooler:1:tma:1,16,3 unpooler:32:tma:1,12,0 unpooler:16:tma:1,12,0 \
  o:16:tma:1,8,0 o:8:tma:1,16,0 router:32:tma:16,4,1 router:32:tma:16,4,2 unpooler:8:tma:1,16,3 \
  2>&1 | grep -v Warning | tail -60
echo "probe rc=${PIPESTATUS[0]} t=$(( $(date +%s)-S ))"
OKC_TMA_ROLLED=1 timeout -s INT 200 python3 -m pytest -q -x tests/test_gpu.py -k tma > $OUT/gpu_tests_rolled.txt 2>&1
echo "gpu tests (rolled) rc=$? t=$(( $(date +%s)-S ))"; tail -3 $OUT/gpu_tests_rolled.txt
