# Session 28, call 2: the carveout probe (standalone nvcc) and what torch's sum launches.
cd notes/session28/carveout
nvcc -O3 -std=c++17 -gencode=arch=compute_90a,code=sm_90a -o /tmp/carveout carveout.cu && /tmp/carveout | tee $OUT/carveout.txt
python3 flush_kernel.py 2>&1 | tail -6 | tee $OUT/flush_kernel.txt
