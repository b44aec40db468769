// Session 24: o's shipped GEMV kernels timed in the standalone probes' harness (notes/probekit.cuh: a CUDA graph,
// L2 read-flushed, events, median of 200), so that they compare with session 23's ostream streams (same harness,
// same machine, same call) without torch: o m = 8's entry streams 16.8 MB in one trip of 16 loads a thread in a
// 256 x 256 grid, the very shape of ostream's "16.8 MB 256 x 256, 16 loads, 1 trip, end" (8.5-8.7 us), yet the
// bench and ab time it at ~9.5. Built twice by gstream.sh: as shipped (ld.global.nc weight loads) and with the
// weight loads coherent (ld.global, as ostream's), the one difference between the two kernels' loads.
// gemv_parts: the m = 8 entry rebuilt from gemv.cuh's pieces with parts left out, to find what costs the ~0.5 us
// between the entry and ostream's stream of the same shape.
// After the runs, the kernels' common set-up (EntryFrame) and the round loop (probekit's run_rounds) were
// factored out: gemv_parts' SASS is unchanged by it (cuobjdump), gemv_trip's moved a little; the outputs beside
// this file are of the code before that (git log of this file).
// Builds against branch z-tail's kernels_src (the compressed GEMV's cases set its x tile); the session ran it
// there (gstream.sh, from the repository root of that branch).
// Values do not matter for timing (weights and x are a byte pattern; the compressed GEMV has no exceptions).
#include <cuda_runtime.h>
#include <cuda_bf16.h>

#include "../../probekit.cuh"
#include "gemv.cuh"
#include "zgemv.cuh"

using namespace okc;
using probekit::Timer;

// What gemv_parts and gemv_trip set up as gemv_kernel does (S = 1, no cluster): this thread's place, x's
// operand pointers, and its first weight fragment of the CTA's R row blocks.
template <int NB, int R>
struct EntryFrame {
    int nw, warp, lane, kb_end;
    size_t row_frags;
    const Frag* xp[NB];
    bool xvalid[NB];
    const Frag* wp;
    __device__ explicit EntryFrame(const GemvArgs& a)
        : nw(blockDim.x >> 5), warp(threadIdx.x >> 5), lane(threadIdx.x & 31), kb_end(a.K >> 5),
          row_frags((size_t)(a.K >> 5) * kFragsPerBlock) {
        x_operand<NB>(a.x, a.M, a.K, lane, xp, xvalid);
        wp = a.w + (size_t)blockIdx.x * R * row_frags + lane;
    }
};

// o m = 8's entry (P = 0, one trip) rebuilt from gemv.cuh's own pieces, with knobs to leave parts out (timing
// only; the outputs are wrong when a part is left out): MMA = 0 folds the weight words into the accumulators
// with adds instead of the mmas, XL = 0 issues no x loads (x reads as zeros), END picks the CTA's end:
//   0 none (a store that never happens), 1 the shipped one (park, barrier, every thread sums one element over
//   the warps and stores it: out[token, row], bf16), 2 the same but warp 0 alone sums and stores (8 elements a
//   lane), 3 every thread sums, no store (one that never happens), 4 every thread sums and stores to
//   out[CTA * 256 + thread] (contiguous, 512 B a CTA), 5 park and barrier, then each thread reads back its own
//   element only (no sum over the warps), 6 the barrier alone (no park), 7 the park alone (no barrier).
template <int U, int NB, int R, bool MMA, bool XL, int END>
__global__ void __launch_bounds__(512, 1) gemv_parts(const GemvArgs a) {
    extern __shared__ float red[];
    constexpr int kTile = R * NB * 4 * 32;
    const EntryFrame<NB, R> f(a);
    float acc[R][NB][4];
    zero_accumulators<R, NB>(acc);
    const int stride = f.nw * U;
    for (int kb = f.warp * U; kb < f.kb_end; kb += stride) {
        Trip<U, NB, R, false> tr;
        load_trip<U, NB, R, 0, false, true, XL>(tr, f.wp, nullptr, f.row_frags, f.xp, f.xvalid, kb, f.kb_end);
        if constexpr (!XL) {
#pragma unroll
            for (int u = 0; u < U; ++u)
#pragma unroll
                for (int nb = 0; nb < NB; ++nb) tr.x[u][nb] = zero_frag();
        }
        if constexpr (MMA) {
            mma_trip<U, NB, R, false>(acc, tr);
        } else {
#pragma unroll
            for (int u = 0; u < U; ++u)
#pragma unroll
                for (int r = 0; r < R; ++r)
#pragma unroll
                    for (int y = 0; y < 2; ++y)
#pragma unroll
                        for (int q = 0; q < 4; ++q)
                            acc[r][0][q] += __uint_as_float((tr.w[r][u][y].r[q] ^ tr.x[u][0].r[q]) & 0x3FFFFFFFu);
        }
    }
    if constexpr (END >= 5) {
        if constexpr (END != 6) park_accumulators<R, NB>(red, acc, f.warp, f.lane);
        if constexpr (END != 7) __syncthreads();
        float v = END == 6 ? acc[0][0][0] + acc[R - 1][0][3] : red[threadIdx.x];
        if (v == 1234.5f) static_cast<__nv_bfloat16*>(a.out)[threadIdx.x] = __float2bfloat16_rn(v);
    } else if constexpr (END != 0) {
        park_accumulators<R, NB>(red, acc, f.warp, f.lane);
        __syncthreads();
        if constexpr (END == 1) {
            for (int idx = threadIdx.x; idx < kTile; idx += blockDim.x)
                write_tile_element<NB, __nv_bfloat16>(a, blockIdx.x * R, idx, sum_over_warps(red, kTile, idx));
        } else if constexpr (END == 2) {
            if (f.warp == 0)
                for (int idx = f.lane; idx < kTile; idx += 32)
                    write_tile_element<NB, __nv_bfloat16>(a, blockIdx.x * R, idx, sum_over_warps(red, kTile, idx));
        } else {
            for (int idx = threadIdx.x; idx < kTile; idx += blockDim.x) {
                const float v = sum_over_warps(red, kTile, idx);
                if (END == 4 || v == 1234.5f)
                    static_cast<__nv_bfloat16*>(a.out)[blockIdx.x * kTile + idx] = __float2bfloat16_rn(v);
            }
        }
    } else {
        float v = 0.f;
#pragma unroll
        for (int r = 0; r < R; ++r)
#pragma unroll
            for (int q = 0; q < 4; ++q) v += acc[r][0][q];
        if (v == 1234.5f) static_cast<__nv_bfloat16*>(a.out)[threadIdx.x] = __float2bfloat16_rn(v);
    }
}

// Two candidate changes to the entry's trip, timed beside it: XFIRST issues the trip's x loads before its
// weight loads (x: every CTA reads the same 16 KB at the start); SPLIT accumulates odd K blocks into a second
// accumulator set, summed before the park, so the mma chains are U instead of 2U long.
template <int U, int NB, int R, bool XFIRST, bool SPLIT>
__global__ void __launch_bounds__(512, 1) gemv_trip(const GemvArgs a) {
    extern __shared__ float red[];
    constexpr int kTile = R * NB * 4 * 32;
    const EntryFrame<NB, R> f(a);
    float acc[R][NB][4], acc2[R][NB][4];
    zero_accumulators<R, NB>(acc);
    zero_accumulators<R, NB>(acc2);
    const int stride = f.nw * U;
    for (int kb = f.warp * U; kb < f.kb_end; kb += stride) {
        Trip<U, NB, R, false> tr;
        if constexpr (XFIRST) {
            load_trip<U, NB, R, 0, false, false, true>(tr, f.wp, nullptr, f.row_frags, f.xp, f.xvalid, kb, f.kb_end);
            load_trip<U, NB, R, 0, false, true, false>(tr, f.wp, nullptr, f.row_frags, f.xp, f.xvalid, kb, f.kb_end);
        } else {
            load_trip<U, NB, R, 0, false>(tr, f.wp, nullptr, f.row_frags, f.xp, f.xvalid, kb, f.kb_end);
        }
#pragma unroll
        for (int u = 0; u < U; ++u)
#pragma unroll
            for (int r = 0; r < R; ++r)
#pragma unroll
                for (int y = 0; y < 2; ++y)
#pragma unroll
                    for (int nb = 0; nb < NB; ++nb)
                        mma_bf16_m16n8k16(SPLIT && (u & 1) ? acc2[r][nb] : acc[r][nb], tr.w[r][u][y].r,
                                          tr.x[u][nb].r[2 * y], tr.x[u][nb].r[2 * y + 1]);
    }
    if constexpr (SPLIT) {
#pragma unroll
        for (int r = 0; r < R; ++r)
#pragma unroll
            for (int nb = 0; nb < NB; ++nb)
#pragma unroll
                for (int q = 0; q < 4; ++q) acc[r][nb][q] += acc2[r][nb][q];
    }
    park_accumulators<R, NB>(red, acc, f.warp, f.lane);
    __syncthreads();
    for (int idx = threadIdx.x; idx < kTile; idx += blockDim.x)
        write_tile_element<NB, __nv_bfloat16>(a, blockIdx.x * R, idx, sum_over_warps(red, kTile, idx));
}

int main() {
    Timer tm;
    const int N = 8192, K = 1024;
    const size_t o_bytes = (size_t)N * K * 2;
    Frag *w, *x;
    CK(cudaMalloc(&w, o_bytes));
    CK(cudaMemset(w, 0x11, o_bytes));
    CK(cudaMalloc(&x, 32 * K * 2));
    CK(cudaMemset(x, 0x22, 32 * K * 2));
    __nv_bfloat16* out;
    CK(cudaMalloc(&out, (size_t)32 * N * 2));
    int2* exceptions;  // capr = 1, all padding; row starts all 0: no exceptions
    int* row_starts;
    CK(cudaMalloc(&exceptions, N / 16 * 8));
    CK(cudaMemset(exceptions, 0, N / 16 * 8));
    CK(cudaMalloc(&row_starts, N / 16 * 17 * 4));
    CK(cudaMemset(row_starts, 0, N / 16 * 17 * 4));

    const double bw = tm.read_bandwidth();
    printf("read bandwidth %.3f TB/s (flush kernel, 1 GiB)\n", bw);

    auto gemv = [&](int m) { return GemvArgs{x, w, nullptr, out, nullptr, nullptr, m, N, K, 1, 0}; };
    auto zgemv = [&](int m) {
        ZGemvArgs a{};
        a.x = x, a.w = w, a.exceptions = exceptions, a.row_starts = row_starts, a.out = out;
        a.table = make_uint4(0x3c3b3a39u, 0x403f3e3du, 0xbcbbbab9u, 0xc0bfbebdu);
        a.M = m, a.N = N, a.K = K, a.S = 1, a.capr = 1, a.cluster = 0;
        a.xtile = 1;
        return a;
    };
    const size_t zsmem = zgemv_smem_bytes(8, 1, 1, 1, zgemv_xtile_bytes(1, K), 0);
    // A case: `kernel` on a grid of N / rows_per_cta CTAs of 256 threads, from args(m).
    auto launch = [&](const char* name, size_t bytes, auto kernel, int rows_per_cta, size_t smem, auto args, int m) {
        return probekit::Case{name, bytes, [=](cudaStream_t s) { kernel<<<N / rows_per_cta, 256, smem, s>>>(args(m)); }};
    };
    const size_t g1 = gemv_smem_bytes(8, 2, 1, 0), g2 = gemv_smem_bytes(8, 2, 2, 0);
    std::vector<probekit::Case> cases = {
        launch("gemv <4,1,2,0> 256 x 256 m=8 (o m=8 entry)", o_bytes, gemv_kernel<4, 1, 2, 0, false, false, __nv_bfloat16>, 32, g1, gemv, 8),
        launch("gemv <4,1,2,0> 256 x 256 m=1", o_bytes, gemv_kernel<4, 1, 2, 0, false, false, __nv_bfloat16>, 32, g1, gemv, 1),
        launch("gemv <2,1,2,1> 256 x 256 m=1 (o m=1 entry)", o_bytes, gemv_kernel<2, 1, 2, 1, false, false, __nv_bfloat16>, 32, g1, gemv, 1),
        launch("gemv <4,2,2,0> 256 x 256 m=16", o_bytes, gemv_kernel<4, 2, 2, 0, false, false, __nv_bfloat16>, 32, g2, gemv, 16),
        launch("parts: all (= the entry), m=8", o_bytes, gemv_parts<4, 1, 2, true, true, 1>, 32, g1, gemv, 8),
        launch("parts: no mma (adds), m=8", o_bytes, gemv_parts<4, 1, 2, false, true, 1>, 32, g1, gemv, 8),
        launch("parts: no x loads, m=8", o_bytes, gemv_parts<4, 1, 2, true, false, 1>, 32, g1, gemv, 8),
        launch("parts: no end, m=8", o_bytes, gemv_parts<4, 1, 2, true, true, 0>, 32, g1, gemv, 8),
        launch("parts: no mma, no x, m=8", o_bytes, gemv_parts<4, 1, 2, false, false, 1>, 32, g1, gemv, 8),
        launch("parts: loads only, m=8", o_bytes, gemv_parts<4, 1, 2, false, false, 0>, 32, g1, gemv, 8),
        launch("parts: end by warp 0 alone, m=8", o_bytes, gemv_parts<4, 1, 2, true, true, 2>, 32, g1, gemv, 8),
        launch("parts: end without stores, m=8", o_bytes, gemv_parts<4, 1, 2, true, true, 3>, 32, g1, gemv, 8),
        launch("parts: end, contiguous stores, m=8", o_bytes, gemv_parts<4, 1, 2, true, true, 4>, 32, g1, gemv, 8),
        launch("parts: park, barrier, own element, m=8", o_bytes, gemv_parts<4, 1, 2, true, true, 5>, 32, g1, gemv, 8),
        launch("parts: barrier alone, m=8", o_bytes, gemv_parts<4, 1, 2, true, true, 6>, 32, g1, gemv, 8),
        launch("parts: park alone, m=8", o_bytes, gemv_parts<4, 1, 2, true, true, 7>, 32, g1, gemv, 8),
        launch("trip: as shipped, m=8", o_bytes, gemv_trip<4, 1, 2, false, false>, 32, g1, gemv, 8),
        launch("trip: as shipped, m=16", o_bytes, gemv_trip<4, 2, 2, false, false>, 32, g2, gemv, 16),
        launch("trip: x first, m=8", o_bytes, gemv_trip<4, 1, 2, true, false>, 32, g1, gemv, 8),
        launch("trip: x first, m=16", o_bytes, gemv_trip<4, 2, 2, true, false>, 32, g2, gemv, 16),
        launch("trip: split chains, m=8", o_bytes, gemv_trip<4, 1, 2, false, true>, 32, g1, gemv, 8),
        launch("trip: split chains, m=16", o_bytes, gemv_trip<4, 2, 2, false, true>, 32, g2, gemv, 16),
        launch("trip: x first, split chains, m=8", o_bytes, gemv_trip<4, 1, 2, true, true>, 32, g1, gemv, 8),
        launch("trip: x first, split chains, m=16", o_bytes, gemv_trip<4, 2, 2, true, true>, 32, g2, gemv, 16),
        launch("zgemv <1,1,1,0> 512 x 256 m=1 (12.6 MB)", o_bytes / 4 * 3, zgemv_kernel<1, 1, 1, 0>, 16, zsmem, zgemv, 1),
        launch("zgemv <1,1,1,0> 512 x 256 m=8 (12.6 MB)", o_bytes / 4 * 3, zgemv_kernel<1, 1, 1, 0>, 16, zsmem, zgemv, 8),
    };
    probekit::run_rounds(tm, cases, bw);
    return 0;
}
