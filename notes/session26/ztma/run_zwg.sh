# Session 26, call 7: the ztma probe's zwg kernel (decode into shared memory, wgmma) beside o's entries; nvcc only.
set -e
nvcc -O3 -std=c++17 -gencode=arch=compute_90a,code=sm_90a -Ikernels_src -o /tmp/ztma notes/session26/ztma/ztma.cu
timeout -s INT 100 /tmp/ztma zwg > $OUT/zwg.txt 2>&1 || echo "exit $?" >> $OUT/zwg.txt
cat $OUT/zwg.txt
