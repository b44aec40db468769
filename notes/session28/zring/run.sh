# Session 28, calls 5-8 and 11: the zring probe (standalone nvcc), three rounds of call N's cases
# (`bash run.sh N`, N = 5, 6, 7, 8 or 11; 11 by default). Calls 10 and 12: ncu.sh and trace.sh.
CALL=${1:-11}
cd notes/session28/zring
nvcc -O3 -std=c++17 -gencode=arch=compute_90a,code=sm_90a -o /tmp/zring zring.cu && /tmp/zring --call$CALL | tee $OUT/zring_call$CALL.txt
