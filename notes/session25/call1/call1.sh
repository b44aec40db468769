# Session 25 call 1: the zflow probe (notes/session25/zflow/zflow.cu) on main's kernels_src; nvcc only, ~1 min.
set -e
F="-O3 -std=c++17 -gencode=arch=compute_90a,code=sm_90a"
nvcc $F -Ikernels_src -o /tmp/zflow notes/session25/zflow/zflow.cu
timeout -s INT 200 /tmp/zflow > $OUT/zflow.txt 2>&1 || echo "exit $?" >> $OUT/zflow.txt
cat $OUT/zflow.txt
