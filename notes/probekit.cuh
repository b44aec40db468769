// What the standalone nvcc probes in notes/sessionN/ share (no torch: nvcc alone, seconds to build): an error check,
// the judge's cold timing (a CUDA graph of the enqueued work, L2 read-flushed by a plain read of 1 GiB before each
// replay, events around the replay, the median), the launch floor's tiny kernel and the flush's read bandwidth.
// Used by notes/session14/launchprobe.cu, notes/session23/next/ostream.cu and notes/session24/gstream/gstream.cu.
// Timing only: nothing here ships.
#pragma once
#include <cuda_runtime.h>
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <vector>

#define CK(x)                                                                                 \
    do {                                                                                      \
        cudaError_t e_ = (x);                                                                 \
        if (e_ != cudaSuccess) {                                                              \
            fprintf(stderr, "%s:%d %s: %s\n", __FILE__, __LINE__, #x, cudaGetErrorString(e_)); \
            exit(1);                                                                          \
        }                                                                                     \
    } while (0)

namespace probekit {

// The flush: read 1 GiB with plain loads and never write it (a write-flush bills dirty write-backs to the timed
// kernel; __ldcs, evict-first, left the timed buffer in L2: session 14, call 2).
__global__ void flush_read(const float4* p, size_t n, float* sink) {
    float s = 0.f;
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
        float4 v = p[i];
        s += v.x + v.y + v.z + v.w;
    }
    if (s == 1234.5f) *sink = s;  // never true: keeps the loads
}

// The launch floor: one thread, one add.
__global__ void tiny(float* p) { p[0] += 1.f; }

struct Timer {
    cudaStream_t stream;
    float4* flush_buf;
    size_t flush_n = (size_t)1 << 26;  // 1 GiB of float4
    float* sink;

    Timer() {
        CK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
        CK(cudaMalloc(&flush_buf, flush_n * 16));
        CK(cudaMemset(flush_buf, 0, flush_n * 16));
        CK(cudaMalloc(&sink, 64));
    }

    // Dynamic shared memory each flush CTA asks for (0: none, as the judge's torch sum nearly does); a probe of the
    // L1 / shared split a flush leaves behind sets it (session 28, carveout.cu), with the attribute opted in.
    int flush_smem_bytes = 0;

    void flush(cudaStream_t s) { flush_read<<<132 * 8, 512, flush_smem_bytes, s>>>(flush_buf, flush_n, sink); }

    // The flush kernel's own read bandwidth, TB/s: the floor's denominator.
    double read_bandwidth() {
        cudaEvent_t a, b;
        CK(cudaEventCreate(&a));
        CK(cudaEventCreate(&b));
        for (int i = 0; i < 3; ++i) flush(stream);
        CK(cudaEventRecord(a, stream));
        for (int i = 0; i < 10; ++i) flush(stream);
        CK(cudaEventRecord(b, stream));
        CK(cudaStreamSynchronize(stream));
        float ms;
        CK(cudaEventElapsedTime(&ms, a, b));
        cudaEventDestroy(a), cudaEventDestroy(b);
        return flush_n * 16.0 * 10 / (ms * 1e-3) / 1e12;
    }

    // Median cold time, us, of the work `enqueue` puts on a stream, replayed as one CUDA graph.
    float time_cold(const std::function<void(cudaStream_t)>& enqueue, int reps = 200) {
        enqueue(stream);  // eager warm-up (and errors)
        CK(cudaStreamSynchronize(stream));
        CK(cudaGetLastError());
        cudaGraph_t graph;
        cudaGraphExec_t exec;
        CK(cudaStreamBeginCapture(stream, cudaStreamCaptureModeGlobal));
        enqueue(stream);
        CK(cudaStreamEndCapture(stream, &graph));
        CK(cudaGraphInstantiate(&exec, graph, 0));
        std::vector<cudaEvent_t> st(reps), en(reps);
        for (int i = 0; i < reps; ++i) {
            CK(cudaEventCreate(&st[i]));
            CK(cudaEventCreate(&en[i]));
        }
        for (int i = 0; i < reps; ++i) {
            flush(stream);
            CK(cudaEventRecord(st[i], stream));
            CK(cudaGraphLaunch(exec, stream));
            CK(cudaEventRecord(en[i], stream));
        }
        CK(cudaStreamSynchronize(stream));
        CK(cudaGetLastError());
        std::vector<float> us(reps);
        for (int i = 0; i < reps; ++i) {
            float ms;
            CK(cudaEventElapsedTime(&ms, st[i], en[i]));
            us[i] = ms * 1000.f;
            cudaEventDestroy(st[i]), cudaEventDestroy(en[i]);
        }
        cudaGraphExecDestroy(exec), cudaGraphDestroy(graph);
        std::nth_element(us.begin(), us.begin() + reps / 2, us.end());
        return us[reps / 2];
    }
};

// One timed case of a probe: its name, the bytes it must read (its floor), and what it enqueues.
struct Case {
    const char* name;
    size_t bytes;
    std::function<void(cudaStream_t)> run;
};

// `rounds` rounds of: the launch floor (the tiny kernel), then every case's cold time and its ratio to the floor
// (launch floor + bytes / the flush's read bandwidth `bw_tbs`), one line each.
inline void run_rounds(Timer& tm, const std::vector<Case>& cases, double bw_tbs, int rounds = 2) {
    float* tiny_buf;
    CK(cudaMalloc(&tiny_buf, 64));
    for (int round = 0; round < rounds; ++round) {
        printf("--- round %d\n", round);
        const float launch_floor = tm.time_cold([&](cudaStream_t s) { tiny<<<1, 1, 0, s>>>(tiny_buf); });
        printf("%-50s %8s %8s %8s\n", "case", "us", "floor", "x floor");
        printf("%-50s %8.2f\n", "launch floor: tiny<<<1, 1>>>", launch_floor);
        for (const Case& c : cases) {
            const float us = tm.time_cold(c.run);
            const double floor = launch_floor + c.bytes / (bw_tbs * 1e12) * 1e6;
            printf("%-50s %8.2f %8.2f %8.3f\n", c.name, us, floor, us / floor);
        }
    }
    CK(cudaFree(tiny_buf));
}

}  // namespace probekit
