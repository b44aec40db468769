# The compressed-ring timing probe (docs/compressed-ring.md, "Levers measured"), on the H200 from the repo root:
# extract the built file's CUDA_SRC, write the register-A wgmma wrappers, build, time (args: reps, rounds, layer).
cd generator/probes/ring_probe && python3 gen_src.py ../../../dist/submission.py && python3 gen_rs.py &&
    nvcc -O3 -std=c++17 -gencode=arch=compute_90a,code=sm_90a -o /tmp/zr2 zr2.cu && /tmp/zr2 ${1:-40} ${2:-2} $3
