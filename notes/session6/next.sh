# Prepared in session 6 for the next device call (carry .whl not needed): why the compressed GEMV falls short of
# its floor on qkv_gate and o while it beats it on pooler, and why code after its loop slowed the loop (call 4).
#  1. SASS of every zgemv_kernel, shipped vs call 4's sources (cuobjdump is on the H200 only);
#  2. ncu on z vs the plain GEMV at equal shapes: DRAM throughput, issue activity, stall reasons, waves.
set -u
export PYTHONPATH=. PYTHONUNBUFFERED=1
S=$(date +%s)
timeout -s INT 240 python3 notes/session6/sass.py $OUT/sass > $OUT/sass.txt 2>&1; echo "sass rc=$? t=$(( $(date +%s)-S ))"
cut -c1-220 $OUT/sass.txt | head -50
timeout -s INT 300 ncu --clock-control none --profile-from-start off --cache-control all \
  --section SpeedOfLight --section MemoryWorkloadAnalysis --section WarpStateStats --section Occupancy \
  --section LaunchStats --section SchedulerStats --section ComputeWorkloadAnalysis \
  python3 notes/session6/ncu_z.py dist/submission.py \
  qkv_gate:1:16,1,2,1,2,0 qkv_gate:1:z:4,4,2,0,1,1 qkv_gate:1:z:16,1,2,0,2,0 \
  pooler:1:8,1,4,1,1,0 pooler:1:z:8,1,4,0,1,0 o:1:8,1,2,1,2,0 o:1:z:8,1,1,0,1,0 \
  qkv_gate:16:16,1,1,1,2,0 qkv_gate:16:z:16,1,1,0,2,0 \
  > $OUT/ncu.txt 2>&1; echo "ncu rc=$? t=$(( $(date +%s)-S ))"
grep -E "PROBE|Duration|DRAM Throughput|Issue Slots Busy|Achieved Occupancy|Registers Per|Waves Per SM|No Eligible" $OUT/ncu.txt | head -120
