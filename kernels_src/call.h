// What a launch gets from Python (runtime.py, PlanContext.cuda_plan), in plain C++ so that binding.cpp needs neither
// CUDA nor torch headers: prepare() fills the plan's part, each call adds x, out, M and the stream. Each launcher
// (its .cuh) says which operand and scalar slot holds what.
#pragma once
#include "generated/constants.h"

namespace okc {

struct Call {
    const void* x;  // [M, K] bf16, row-major, 16-byte aligned            (per call)
    void* out;      // [M, N]: bf16, or fp32 for the router's dual mode   (per call)
    int M;          // tokens                                             (per call)
    void* stream;   // the caller's cudaStream_t (the capture stream inside torch.cuda.graph) (per call)
    int N, K;       // output width (the unpooler's slice at small m) and K
    const void* operand[kCallOperands];  // what prepare() built for the engine: packed weights, lo weights, ...
    long long scalar[kCallScalars];      // per-layer constants (the 12-bit format's table words ...)
    float* ws;                           // split-K workspace (engine.py: WORKSPACE_FLOATS)
    int* sem;                            // self-resetting counters (engine.py: SEMAPHORES), 0 between launches
};

}  // namespace okc

// Defined by the launch table after CUDA_SRC (the file's LAUNCH_TABLE): kernel number -> launcher instantiation.
const char* okc_launch(int kernel, const okc::Call& call);
