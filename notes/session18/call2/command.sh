# Session 18, call 2 (carry [".whl"]): the first GPU run of the x-in-registers TMA GEMV (C = 4, 5, 6;
# kernels_src/tma_xreg.cuh). One `ab` of it against each shape's current route (checked against float64 in
# poisoned memory before timing), then the TMA GPU test (every C on every layer, both distributions).
set -u
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl
export PYTHONPATH=.:/tmp/site PYTHONUNBUFFERED=1
S=$(date +%s)
L="qkv_gate:32:tma:1,14,3 qkv_gate:32:tma:1,24,4 qkv_gate:32:tma:1,16,4 qkv_gate:32:tma:1,12,4 qkv_gate:32:tma:1,24,5
 qkv_gate:16:tma:1,16,3 qkv_gate:16:tma:1,24,4 qkv_gate:8:tma:1,16,3 qkv_gate:8:tma:1,24,4
 qkv_gate:1:gemv:16,1,2,1,2,0 qkv_gate:1:tma:1,24,4
 o:16:tma:1,8,0 o:16:tma:1,24,6 o:16:tma:1,16,6 o:16:tma:1,16,5 o:8:gemv:8,1,4,0,2,0 o:8:tma:1,24,6 o:32:tma:1,24,6
 pooler:32:tma:1,12,3 pooler:32:tma:1,24,5 pooler:32:tma:1,16,5 pooler:32:tma:1,24,6
 pooler:16:tma:1,12,3 pooler:16:tma:1,24,5 pooler:8:z:8,1,4,0,1,0 pooler:8:tma:1,24,5
 unpooler:32:tma:1,12,0 unpooler:32:tma:1,24,6 unpooler:32:tma:1,24,5 unpooler:16:z:8,1,2,0,2,0 unpooler:16:tma:1,24,6
 unpooler:8:gemv:16,1,8,0,1,0 unpooler:8:tma:1,24,5"
timeout -s INT 280 python3 -m generator ab --rounds 6 $L > $OUT/ab.txt 2>&1
echo "ab rc=$? t=$(( $(date +%s)-S ))"; grep -v Warning $OUT/ab.txt | tail -40
timeout -s INT $(( 560 - ($(date +%s) - S) )) python3 -m pytest -q -x tests/test_gpu.py -k tma > $OUT/gpu_tests.txt 2>&1
echo "gpu tests rc=$? t=$(( $(date +%s)-S ))"; tail -30 $OUT/gpu_tests.txt
