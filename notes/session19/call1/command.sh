# On branch xreg (carry [".whl"]): version 3 of the x-as-A TMA GEMV (x staged by cp.async; A by ldmatrix, C = 4-6,
# or from shared memory, C = 7-9) against
# each shape's current route in one process (each launch checked in float64 first), then the TMA GPU test.
set -u
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl
export PYTHONPATH=.:/tmp/site PYTHONUNBUFFERED=1
S=$(date +%s)
L="qkv_gate:32:tma:1,14,3 qkv_gate:32:tma:1,20,4 qkv_gate:32:tma:1,16,4 qkv_gate:32:tma:1,20,5 qkv_gate:32:tma:1,16,5
 qkv_gate:32:tma:1,16,7 qkv_gate:32:tma:1,16,8 qkv_gate:16:tma:1,16,7 qkv_gate:1:tma:1,16,7
 o:16:tma:1,16,9 o:8:tma:1,16,9 pooler:32:tma:1,16,8 pooler:32:tma:1,16,9 unpooler:32:tma:1,16,9
 qkv_gate:16:tma:1,16,3 qkv_gate:16:tma:1,20,4 qkv_gate:1:gemv:16,1,2,1,2,0 qkv_gate:1:tma:1,20,4
 o:16:tma:1,8,0 o:16:tma:1,16,6 o:16:tma:1,16,5 o:8:gemv:8,1,4,0,2,0 o:8:tma:1,16,6
 pooler:32:tma:1,12,3 pooler:32:tma:1,20,5 pooler:32:tma:1,20,6 pooler:16:tma:1,12,3 pooler:16:tma:1,20,5
 unpooler:32:tma:1,12,0 unpooler:32:tma:1,20,6 unpooler:32:tma:1,20,5"
timeout -s INT 250 python3 -m generator ab --rounds 4 $L > $OUT/ab.txt 2>&1
echo "ab rc=$? t=$(( $(date +%s)-S ))"; grep -v Warning $OUT/ab.txt | tail -30
timeout -s INT $(( 560 - ($(date +%s) - S) )) python3 -m pytest -q -x tests/test_gpu.py -k tma > $OUT/gpu_tests.txt 2>&1
echo "gpu tests rc=$? t=$(( $(date +%s)-S ))"; tail -30 $OUT/gpu_tests.txt
