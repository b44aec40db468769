# Session 15, call 5 (carry [".whl"]): ncu on qkv_gate m = 16, half tiles C = 3 (1, 16, 3) and C = 4 (1, 12, 4)
# beside the 64-row tiles (3, 8, 1), after the per-slot instruction cut of call 4: what the consumers still spend.
set -u
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl
export PYTHONPATH=.:/tmp/site PYTHONUNBUFFERED=1
S=$(date +%s)
timeout -s INT 200 python3 -m generator profile --out $OUT/profile \
    qkv_gate:16:tma:1,16,3 qkv_gate:16:tma:1,12,4 qkv_gate:16:tma:3,8,1 > $OUT/profile.txt 2>&1
echo "profile rc=$? t=$(( $(date +%s)-S ))"; head -60 $OUT/profile.txt
rm -f $OUT/profile/profile.ncu-rep
