# Session 25 call 2: the compressed GEMV with an exception warp (kernels_src/zgemv.cuh at this commit) in the zflow
# probe, built twice: as shipped (launch bound 288 x 1) and asking ptxas for 4 resident CTAs a SM; nvcc only.
set -e
F="-O3 -std=c++17 -gencode=arch=compute_90a,code=sm_90a"
nvcc $F -Ikernels_src -o /tmp/zflow notes/session25/zflow/zflow.cu &
nvcc $F -DOKC_ZGEMV_MIN_BLOCKS=4 -Ikernels_src -o /tmp/zflow4 notes/session25/zflow/zflow.cu &
wait
{ echo "=== min blocks 1"; timeout -s INT 120 /tmp/zflow; echo "=== min blocks 4"; timeout -s INT 120 /tmp/zflow4; } > $OUT/zew.txt 2>&1 || echo "exit $?" >> $OUT/zew.txt
cat $OUT/zew.txt
