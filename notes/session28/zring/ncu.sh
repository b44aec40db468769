# Session 28, call 10: ncu on zring's parts at m = 16 beside the TMA and compressed GEMVs' entries (the probe's
# --ncu mode: each m = 16 case once, after a warm-up and a flush).
cd notes/session28/zring
nvcc -O3 -std=c++17 -gencode=arch=compute_90a,code=sm_90a -o /tmp/zring zring.cu 2>/dev/null || exit 1
ncu --clock-control none --profile-from-start off --set full -f -o $OUT/zring /tmp/zring --ncu > $OUT/ncu_log.txt 2>&1
echo "ncu rc=$?"; tail -8 $OUT/ncu_log.txt
ncu -i $OUT/zring.ncu-rep --page details > $OUT/details.txt 2>&1
grep -E "^  [a-z_:<>(), 0-9A-Za-z]+\(|Duration|DRAM Throughput|Issue Slots Busy|Executed Ipc Active|Registers Per|Achieved Occupancy|Warp Cycles Per Issued" $OUT/details.txt | head -80
