# Session 26, call 6: the ztma probe (notes/session26/ztma/ztma.cu) on main's kernels_src; nvcc only.
set -e
nvcc -O3 -std=c++17 -gencode=arch=compute_90a,code=sm_90a -Ikernels_src -o /tmp/ztma notes/session26/ztma/ztma.cu
timeout -s INT 150 /tmp/ztma > $OUT/ztma.txt 2>&1 || echo "exit $?" >> $OUT/ztma.txt
cat $OUT/ztma.txt
