// Prepared in session 23 for the next session (not yet run on a GPU): what sets o's ~6.9 us of kernel time?
//
// Call 6 (ncu, o m = 1): the compressed GEMV (12.6 MB) and the register GEMV (16.8 MB) take the same ~6.9 us, at
// 39-51 % of DRAM bandwidth, though a plain streaming read scales with its bytes at this size. This standalone
// program (no torch: nvcc alone, seconds to build) times, the judge's way (notes/probekit.cuh: a CUDA graph, L2
// read-flushed before each replay, events around it, median of 200), register-loaded streams of o's bytes in the
// register GEMVs' shapes, so that the next design starts from what the shape itself costs:
//   one wave, every load of a thread issued before any is used (one round trip), in the grids o's entries use
//   (256 CTAs of 256 threads, 2 a SM; 512 of 256, 4 a SM), over 16.8 MB (bf16) and 12.6 MB (12-bit);
//   the same with the loads in two dependent halves (two round trips, as the compressed GEMV's P = 0 makes them);
//   each with no end and with the GEMVs' end (every warp parks 4 floats a lane in shared memory, one barrier, the
//   warps' sum, one bf16 store per thread of the first warp), and the empty frame of each grid;
//   a grid-stride streaming read (the facts' kind) over the same bytes for reference.
// Timing only: nothing here is checked, and nothing of it ships.
//
// build and run:  nvcc -O3 -std=c++17 -gencode=arch=compute_90a,code=sm_90a -Xptxas -v -o /tmp/os \
//                      notes/session23/next/ostream.cu && /tmp/os > $OUT/ostream.txt
#include <cuda_runtime.h>
#include <cuda_bf16.h>

#include "../../probekit.cuh"
#include "../../../kernels_src/common.cuh"

using namespace okc;
using probekit::Timer;

// The empty frame of a grid: every thread starts and leaves.
__global__ void empty_frame(float* sink) {
    if (threadIdx.x == 1234567) *sink = 1.f;
}

// A 16-byte load like the GEMVs' ld_weights (L1 no-allocate) but coherent (no .nc): ptxas moves a read-only .nc
// load across a barrier, a coherent one it does not.
__device__ __forceinline__ Frag ld_stream(const Frag* p) {
    Frag f;
    asm volatile("ld.global.L1::no_allocate.v4.u32 {%0, %1, %2, %3}, [%4];"
                 : "=r"(f.r[0]), "=r"(f.r[1]), "=r"(f.r[2]), "=r"(f.r[3])
                 : "l"(p)
                 : "memory");
    return f;
}

// One CTA reads a contiguous chunk of `L` 512-byte warp rows per warp: warp w's load j covers bytes
// [((cta * warps + w) * L + j) * 512, + 512), lane l its 16 bytes at l * 16 (the GEMVs' per-lane 16-byte loads).
// HALVES = 2: the second half of the loads is issued only after the first half has been used (two round trips).
// END = 1: the GEMVs' end (park, barrier, sum over warps, bf16 stores); END = 0: a store that never happens.
template <int L, int HALVES, int END>
__global__ void __launch_bounds__(256, 1) stream_regs(const Frag* w, __nv_bfloat16* out, float* sink) {
    extern __shared__ float parked[];  // [warps][4][32]
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, warps = blockDim.x >> 5;
    const Frag* p = w + ((size_t)blockIdx.x * warps + warp) * L * 32 + lane;
    float acc[4] = {0.f, 0.f, 0.f, 0.f};
#pragma unroll
    for (int h = 0; h < HALVES; ++h) {
        Frag f[L / HALVES];
#pragma unroll
        for (int j = 0; j < L / HALVES; ++j) f[j] = ld_stream(p + (size_t)(h * (L / HALVES) + j) * 32);
        // Every load of the half is issued before any of its data is used: ptxas moves no coherent load below a
        // barrier (without it, ptxas interleaved the sums with the loads, 5 of 16 in flight; an empty volatile
        // asm does not stop it, since ptxas never sees one). Every warp reaches it right after its loads.
        __syncthreads();
#pragma unroll
        for (int j = 0; j < L / HALVES; ++j)
#pragma unroll
            for (int r = 0; r < 4; ++r) acc[r] += __uint_as_float(f[j].r[r] & 0x3FFFFFFFu);  // finite, >= 0
        // The next half's addresses depend on this half's data (never by value: acc >= 0), so the compiler cannot
        // issue its loads before this half has arrived.
        p += acc[0] == -1.f ? 32 : 0;
    }
    if constexpr (END == 1) {
#pragma unroll
        for (int r = 0; r < 4; ++r) parked[(warp * 4 + r) * 32 + lane] = acc[r];
        __syncthreads();
        if (warp == 0) {
            float v = 0.f;
            for (int w2 = 0; w2 < warps; ++w2) v += parked[(w2 * 4 + (lane & 3)) * 32 + lane];
            out[(size_t)blockIdx.x * 32 + lane] = __float2bfloat16_rn(v);
        }
    } else {
        if (acc[0] + acc[1] + acc[2] + acc[3] == 1234.5f) *sink = acc[0];
    }
}

// The facts' kind of streaming read: a grid-stride loop of 16-byte loads.
__global__ void stream_strided(const float4* p, size_t n, float* sink) {
    float s = 0.f;
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
        float4 v = __ldg(p + i);
        s += v.x + v.y + v.z + v.w;
    }
    if (s == 1234.5f) *sink = s;
}

int main() {
    Timer tm;
    const size_t o_bytes = (size_t)8192 * 1024 * 2;  // 16.8 MB: o in bf16; 3/4 of it is o in 12 bits
    Frag* w;
    CK(cudaMalloc(&w, o_bytes));
    CK(cudaMemset(w, 1, o_bytes));
    __nv_bfloat16* out;
    CK(cudaMalloc(&out, 1 << 20));

    const double bw = tm.read_bandwidth();
    printf("read bandwidth %.3f TB/s (flush kernel, 1 GiB)\n", bw);

    // (name, bytes, launcher): every register stream is one wave (2 or 4 CTAs of 256 threads a SM fit).
    const int smem = 8 * 4 * 32 * 4;
    std::vector<probekit::Case> cases = {
        {"empty 256 x 256", 0, [&](cudaStream_t s) { empty_frame<<<256, 256, 0, s>>>(tm.sink); }},
        {"empty 512 x 256", 0, [&](cudaStream_t s) { empty_frame<<<512, 256, 0, s>>>(tm.sink); }},
        {"16.8 MB 256 x 256, 16 loads, 1 trip, no end", o_bytes,
         [&](cudaStream_t s) { stream_regs<16, 1, 0><<<256, 256, smem, s>>>(w, out, tm.sink); }},
        {"16.8 MB 256 x 256, 16 loads, 1 trip, end", o_bytes,
         [&](cudaStream_t s) { stream_regs<16, 1, 1><<<256, 256, smem, s>>>(w, out, tm.sink); }},
        {"16.8 MB 256 x 256, 16 loads, 2 trips, end", o_bytes,
         [&](cudaStream_t s) { stream_regs<16, 2, 1><<<256, 256, smem, s>>>(w, out, tm.sink); }},
        {"12.6 MB 256 x 256, 12 loads, 1 trip, no end", o_bytes / 4 * 3,
         [&](cudaStream_t s) { stream_regs<12, 1, 0><<<256, 256, smem, s>>>(w, out, tm.sink); }},
        {"12.6 MB 256 x 256, 12 loads, 1 trip, end", o_bytes / 4 * 3,
         [&](cudaStream_t s) { stream_regs<12, 1, 1><<<256, 256, smem, s>>>(w, out, tm.sink); }},
        {"12.6 MB 256 x 256, 12 loads, 2 trips, end", o_bytes / 4 * 3,
         [&](cudaStream_t s) { stream_regs<12, 2, 1><<<256, 256, smem, s>>>(w, out, tm.sink); }},
        {"16.8 MB 512 x 256, 8 loads, 1 trip, end", o_bytes,
         [&](cudaStream_t s) { stream_regs<8, 1, 1><<<512, 256, smem, s>>>(w, out, tm.sink); }},
        {"12.6 MB 512 x 256, 6 loads, 1 trip, end", o_bytes / 4 * 3,
         [&](cudaStream_t s) { stream_regs<6, 1, 1><<<512, 256, smem, s>>>(w, out, tm.sink); }},
        {"12.6 MB 512 x 256, 6 loads, 2 trips, end", o_bytes / 4 * 3,
         [&](cudaStream_t s) { stream_regs<6, 2, 1><<<512, 256, smem, s>>>(w, out, tm.sink); }},
        {"16.8 MB grid-stride 1056 x 512", o_bytes,
         [&](cudaStream_t s) {
             stream_strided<<<132 * 8, 512, 0, s>>>(reinterpret_cast<const float4*>(w), o_bytes / 16, tm.sink);
         }},
        {"12.6 MB grid-stride 1056 x 512", o_bytes / 4 * 3,
         [&](cudaStream_t s) {
             stream_strided<<<132 * 8, 512, 0, s>>>(reinterpret_cast<const float4*>(w), o_bytes / 4 * 3 / 16,
                                                     tm.sink);
         }},
    };
    probekit::run_rounds(tm, cases, bw);
    return 0;
}
