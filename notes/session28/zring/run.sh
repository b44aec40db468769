# Session 28, calls 5-8 and 11: the zring probe (standalone nvcc), three rounds.
cd notes/session28/zring
nvcc -O3 -std=c++17 -gencode=arch=compute_90a,code=sm_90a -o /tmp/zring zring.cu && /tmp/zring | tee $OUT/zring_call11.txt
