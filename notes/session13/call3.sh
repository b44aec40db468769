# Session 13, call 3 (carry [".whl", "b_ztma"]; b_ztma = branch ztma, two consumer warpgroups): ncu on the TMA
# GEMV at Z = 0 and Z = 1, same configs (qkv_gate m = 1, S = 1 and 3), full set with source-level stall sampling.
set -u
cd b_ztma
export PYTHONPATH=. PYTHONUNBUFFERED=1
S=$(date +%s)
PLAN="qkv_gate:1:1,8,0,0 qkv_gate:1:1,8,0,1 qkv_gate:1:3,8,1,0 qkv_gate:1:3,8,1,1"
timeout -s INT 200 python3 ../notes/session13/ncu_tma.py $PLAN > $OUT/warm.txt 2>&1; echo "warm rc=$? t=$(( $(date +%s)-S ))"; tail -2 $OUT/warm.txt
timeout -s INT 250 ncu --clock-control none --profile-from-start off --target-processes application-only --set full \
    --import-source no -f -o $OUT/tma python3 ../notes/session13/ncu_tma.py $PLAN > $OUT/ncu_run.txt 2>&1
echo "ncu rc=$? t=$(( $(date +%s)-S ))"; tail -3 $OUT/ncu_run.txt
ncu -i $OUT/tma.ncu-rep --page details > $OUT/details.txt 2>&1
ncu -i $OUT/tma.ncu-rep --page source --csv --print-source sass > $OUT/source.csv 2>&1
echo "export t=$(( $(date +%s)-S ))"; ls -la $OUT
grep -E "tma_gemv_kernel|Duration|DRAM Throughput|Warp Cycles Per Issued|No Eligible|Stall" $OUT/details.txt | head -60
