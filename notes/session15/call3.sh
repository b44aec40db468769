# Session 15, call 3 (carry [".whl"]): ncu on qkv_gate m = 16: half tiles C = 3 (1, 16, 3), C = 4 (1, 6, 4) beside
# the 64-row tiles (3, 8, 1): where the half-tile kernels, 4-6 us slower than the probe's 72-CTA stream, stall.
set -u
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl
export PYTHONPATH=.:/tmp/site PYTHONUNBUFFERED=1
S=$(date +%s)
timeout -s INT 450 python3 -m generator profile --out $OUT/profile \
    qkv_gate:16:tma:1,16,3 qkv_gate:16:tma:1,6,4 qkv_gate:16:tma:3,8,1 > $OUT/profile.txt 2>&1
echo "profile rc=$? t=$(( $(date +%s)-S ))"; head -60 $OUT/profile.txt
rm -f $OUT/profile/profile.ncu-rep
