# Session 28, call 12: when each slot of four CTAs is issued, lands and is done (zring.cu --trace).
cd notes/session28/zring
nvcc -O3 -std=c++17 -gencode=arch=compute_90a,code=sm_90a -o /tmp/zring zring.cu 2>/dev/null || exit 1
/tmp/zring --trace | tee $OUT/zring_trace.txt
