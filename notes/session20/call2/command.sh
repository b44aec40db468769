# Session 20, call 2, on branch half-n64 (no carry needed): half tiles with one wgmma of N = 16 NB per k step over
# both x boxes (OKC_HALF_N64=1) against main's two N = 8 NB wgmmas (0), which read the weights' A tile from shared
# memory twice per k step. `generator ab --env` checks every (launch, value) against float64 first. Then the TMA
# GPU test under the merged form. unpooler:32:tma:1,12,0 (64-row tiles) is a control the switch does not touch.
export PYTHONPATH=. PYTHONUNBUFFERED=1
S=$(date +%s)
timeout -s INT 330 python3 -m generator ab --rounds 5 --env OKC_HALF_N64=0,1 \
  qkv_gate:32:tma:1,14,3 qkv_gate:32:tma:1,12,3 qkv_gate:16:tma:1,16,3 qkv_gate:8:tma:1,16,3 qkv_gate:1:tma:1,16,3 \
  pooler:32:tma:1,12,3 pooler:32:tma:1,14,3 pooler:16:tma:1,12,3 pooler:8:tma:1,16,3 pooler:1:tma:1,16,3 \
  unpooler:32:tma:1,12,3 unpooler:16:tma:1,12,3 unpooler:8:tma:1,16,3 o:16:tma:1,8,3 unpooler:32:tma:1,12,0 \
  > $OUT/n64.txt 2>&1
echo "ab rc=$? t=$(( $(date +%s)-S ))"; grep -v Warning $OUT/n64.txt | tail -40
OKC_HALF_N64=1 timeout -s INT 200 python3 -m pytest -q -x tests/test_gpu.py -k tma > $OUT/gpu_tests_n64.txt 2>&1
echo "gpu tests (n64) rc=$? t=$(( $(date +%s)-S ))"; tail -3 $OUT/gpu_tests_n64.txt
