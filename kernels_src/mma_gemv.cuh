// The mma.sync GEMV (engine mma_gemv, m <= 32): out[m, N] = x[m, K] . W[N, K]^T, every weight byte streamed once.
// W is mma's A operand, packed so that a lane's share of a fragment is one 16-byte load; x is B, 8 tokens a column
// block. A CTA owns RowBlocks 16-row blocks (each x fragment serves them all), its warps split its K range and
// reduce through shared memory; splits > 1 CTAs meet by semaphore, cluster push or, for the router's fp32 output,
// atomic adds (common.cuh). Dual: the router's hi and lo bf16 weights into one fp32 accumulator. Design and
// figures: docs/mma-gemv.md.
#pragma once
#include "common.cuh"
#include "generated/constants.h"

namespace okc {

// The pipelining styles (MmaPipeline; docs/mma-gemv.md): a trip is Unroll 32-wide K blocks a warp. double: the next
// trip's loads before this trip's mmas; double_w: its weights before them and its x after; *_l2: the L2::256B hint.
__host__ __device__ constexpr bool pipe_double(MmaPipeline p) {
    return p == MmaPipeline::kDouble || p == MmaPipeline::kDoubleL2;
}
__host__ __device__ constexpr bool pipe_double_w(MmaPipeline p) {
    return p == MmaPipeline::kDoubleW || p == MmaPipeline::kDoubleWL2;
}
__host__ __device__ constexpr bool pipe_l2_hint(MmaPipeline p) {
    return p == MmaPipeline::kBatchL2 || p == MmaPipeline::kDoubleL2 || p == MmaPipeline::kDoubleWL2;
}

struct MmaGemvArgs {
    const Frag* x;   // [M, K] bf16, row-major, 16-byte aligned
    const Frag* w;   // packed weights (dual: the hi half)
    const Frag* w2;  // packed lo weights (dual only)
    void* out;       // [M, N]: bf16, or fp32 in dual mode
    float* ws;       // split-K partials: [N/(16R)][S][R*NB*128]
    int* sem;        // arrival counter per CTA row group; 0 between launches
    int M, N, K, S;
    int cluster;  // 1: the S split CTAs are one cluster (atomic_out is the kernel's AtomicOut)
};

constexpr int kFragsPerBlock = 64;  // one 16-row x 32-k block: 2 steps x 32 lanes x 16 bytes

template <int Unroll, int NB, int RowBlocks, bool Dual>
struct Trip {
    Frag w[RowBlocks][Unroll][2];                         // row block r, K block u, steps y = 0, 1
    Frag w2[Dual ? RowBlocks : 1][Dual ? Unroll : 1][2];  // lo weights (Dual)
    Frag x[Unroll][NB];                                   // shared by all row blocks
};

template <MmaPipeline Pipeline>
__device__ __forceinline__ Frag ld_weights_pipe(const Frag* p, bool ok) {
    return ok ? (pipe_l2_hint(Pipeline) ? ld_weights_l2_256(p) : ld_weights(p)) : zero_frag();
}

// wp / w2p: this lane's first fragment of the CTA's first row block. WEIGHTS / X: which of the trip's loads.
template <int Unroll, int NB, int RowBlocks, MmaPipeline Pipeline, bool Dual, bool WEIGHTS = true, bool X = true>
__device__ __forceinline__ void load_trip(Trip<Unroll, NB, RowBlocks, Dual>& tr, const Frag* wp, const Frag* w2p,
                                          size_t row_frags, const Frag* const (&xp)[NB], const bool (&xvalid)[NB],
                                          int kb0, int kb_end) {
#pragma unroll
    for (int u = 0; u < Unroll; ++u) {
        const int kb = kb0 + u;
        const bool ok = kb < kb_end;  // warp-uniform
        if constexpr (WEIGHTS) {
#pragma unroll
            for (int r = 0; r < RowBlocks; ++r)
#pragma unroll
                for (int y = 0; y < 2; ++y) {
                    const size_t at = r * row_frags + kb * kFragsPerBlock + y * 32;
                    tr.w[r][u][y] = ld_weights_pipe<Pipeline>(wp + at, ok);
                    if constexpr (Dual) tr.w2[r][u][y] = ld_weights_pipe<Pipeline>(w2p + at, ok);
                }
        }
        if constexpr (X) {
#pragma unroll
            for (int nb = 0; nb < NB; ++nb) tr.x[u][nb] = (ok && xvalid[nb]) ? ld_x(xp[nb] + kb * 4) : zero_frag();
        }
    }
}

template <int Unroll, int NB, int RowBlocks, bool Dual>
__device__ __forceinline__ void mma_trip(float (&acc)[RowBlocks][NB][4], const Trip<Unroll, NB, RowBlocks, Dual>& tr) {
#pragma unroll
    for (int u = 0; u < Unroll; ++u)
#pragma unroll
        for (int r = 0; r < RowBlocks; ++r)
#pragma unroll
            for (int y = 0; y < 2; ++y)
#pragma unroll
                for (int nb = 0; nb < NB; ++nb) {
                    // step y consumes x elements 4y..4y+3 of the lane's 8 (see packing.py)
                    const uint32_t b0 = tr.x[u][nb].r[2 * y], b1 = tr.x[u][nb].r[2 * y + 1];
                    mma_bf16_m16n8k16(acc[r][nb], tr.w[r][u][y].r, b0, b1);
                    if constexpr (Dual) mma_bf16_m16n8k16(acc[r][nb], tr.w2[r][u][y].r, b0, b1);
                }
}

// Element idx of a reduced tile (idx = 32 * (4 (NB r + nb) + j) + lane, the mma C layout) -> out[token, row].
template <int NB, typename Out>
__device__ __forceinline__ void write_tile_element(const MmaGemvArgs& a, int rb0, int idx, float v) {
    const int lane = idx & 31, c = idx >> 5;
    const int r = c / (NB * 4), nb = (c >> 2) % NB, j = c & 3;
    const int row = (rb0 + r) * 16 + (lane >> 2) + ((j & 2) ? 8 : 0);
    const int token = nb * 8 + (lane & 3) * 2 + (j & 1);
    if (token < a.M) store_out(static_cast<Out*>(a.out) + (size_t)token * a.N + row, v);
}

// reduce = atomic_out: the warps summed conflict-free in place of warp 0's slice (into quads directly: 4x the
// wavefronts), then one red.add a quad of four rows of one token.
template <int RowBlocks, int NB>
__device__ __forceinline__ void add_tile(const MmaGemvArgs& a, float* red, int rb0) {
    constexpr int kTile = RowBlocks * NB * 4 * 32, kQuads = kTile / 4;
    for (int idx = threadIdx.x; idx < kTile; idx += blockDim.x)
        red[idx] = sum_over_warps(red, kTile, idx);  // each idx is read and written by this thread only
    __syncthreads();
    for (int i = threadIdx.x; i < kQuads; i += blockDim.x) {
        const int q = i & 3, t = (i >> 2) & 7, nb = (i >> 5) % NB, r = i / (32 * NB);
        const int token = nb * 8 + t;
        if (token >= a.M) continue;
        float v[4];
#pragma unroll
        for (int e = 0; e < 4; ++e) {
            const int lr = 4 * q + e;
            v[e] = red[((r * NB + nb) * 4 + 2 * (lr >> 3) + (t & 1)) * 32 + 4 * (lr & 7) + (t >> 1)];
        }
        float* dst = static_cast<float*>(a.out) + (size_t)token * a.N + (rb0 + r) * 16 + 4 * q;
        red_add_v4(dst, v[0], v[1], v[2], v[3]);
    }
}

// The end of a CTA: the warps' tiles reduced in shared memory, then across the splits (atomic_out: once the flag
// says split 0's zeroes are visible).
template <int NB, int RowBlocks, bool AtomicOut, typename Out>
__device__ __forceinline__ void finish_gemv(const MmaGemvArgs& a, float* red, const float (&acc)[RowBlocks][NB][4],
                                            uint64_t* inbox_full, int warp, int lane, uint32_t ticket, uint32_t seen) {
    constexpr int kTile = RowBlocks * NB * 4 * 32;
    const int group = blockIdx.x, rb0 = group * RowBlocks, split = blockIdx.y;
    park_accumulators<RowBlocks, NB>(red, acc, warp, lane);
    if constexpr (AtomicOut) {
        if (threadIdx.x == 0) await_zeroed(a.sem, group, a.S, seen, flag_wanted(ticket, a.S));
        __syncthreads();
        add_tile<RowBlocks, NB>(a, red, rb0);
    } else {
        __syncthreads();
        finish_tile(a, red, red + (blockDim.x >> 5) * kTile, inbox_full, kTile, group, split,
                    [&](int idx, float v) { write_tile_element<NB, Out>(a, rb0, idx, v); });
    }
}

// The K loop of each style: acc += every trip of this warp's K blocks from `first`, `stride` apart; peek() once a
// trip (atomic_out's look at its flag).
template <int Unroll, int NB, int RowBlocks, MmaPipeline Pipeline, bool Dual, typename Peek>
__device__ __forceinline__ void k_loop_double(float (&acc)[RowBlocks][NB][4], const Frag* wp, const Frag* w2p,
                                              size_t row_frags, const Frag* const (&xp)[NB], const bool (&xvalid)[NB],
                                              int first, int stride, int kb_end, const Peek& peek) {
    Trip<Unroll, NB, RowBlocks, Dual> t0, t1;
    load_trip<Unroll, NB, RowBlocks, Pipeline, Dual>(t0, wp, w2p, row_frags, xp, xvalid, first, kb_end);
    for (int kb = first; kb < kb_end; kb += 2 * stride) {
        peek();
        load_trip<Unroll, NB, RowBlocks, Pipeline, Dual>(t1, wp, w2p, row_frags, xp, xvalid, kb + stride, kb_end);
        mma_trip<Unroll, NB, RowBlocks, Dual>(acc, t0);
        load_trip<Unroll, NB, RowBlocks, Pipeline, Dual>(t0, wp, w2p, row_frags, xp, xvalid, kb + 2 * stride, kb_end);
        mma_trip<Unroll, NB, RowBlocks, Dual>(acc, t1);
    }
}

// t0.x and t1.x are never live at once, so ptxas gives them one set of registers.
template <int Unroll, int NB, int RowBlocks, MmaPipeline Pipeline, bool Dual, typename Peek>
__device__ __forceinline__ void k_loop_double_w(float (&acc)[RowBlocks][NB][4], const Frag* wp, const Frag* w2p,
                                                size_t row_frags, const Frag* const (&xp)[NB], const bool (&xvalid)[NB],
                                                int first, int stride, int kb_end, const Peek& peek) {
    Trip<Unroll, NB, RowBlocks, Dual> t0, t1;
    load_trip<Unroll, NB, RowBlocks, Pipeline, Dual>(t0, wp, w2p, row_frags, xp, xvalid, first, kb_end);
    for (int kb = first; kb < kb_end; kb += 2 * stride) {
        peek();
        load_trip<Unroll, NB, RowBlocks, Pipeline, Dual, true, false>(t1, wp, w2p, row_frags, xp, xvalid, kb + stride,
                                                                      kb_end);
        mma_trip<Unroll, NB, RowBlocks, Dual>(acc, t0);
        load_trip<Unroll, NB, RowBlocks, Pipeline, Dual, false, true>(t1, wp, w2p, row_frags, xp, xvalid, kb + stride,
                                                                      kb_end);
        load_trip<Unroll, NB, RowBlocks, Pipeline, Dual, true, false>(t0, wp, w2p, row_frags, xp, xvalid,
                                                                      kb + 2 * stride, kb_end);
        mma_trip<Unroll, NB, RowBlocks, Dual>(acc, t1);
        load_trip<Unroll, NB, RowBlocks, Pipeline, Dual, false, true>(t0, wp, w2p, row_frags, xp, xvalid,
                                                                      kb + 2 * stride, kb_end);
    }
}

template <int Unroll, int NB, int RowBlocks, MmaPipeline Pipeline, bool Dual, typename Peek>
__device__ __forceinline__ void k_loop_batch(float (&acc)[RowBlocks][NB][4], const Frag* wp, const Frag* w2p,
                                             size_t row_frags, const Frag* const (&xp)[NB], const bool (&xvalid)[NB],
                                             int first, int stride, int kb_end, const Peek& peek) {
    for (int kb = first; kb < kb_end; kb += stride) {
        Trip<Unroll, NB, RowBlocks, Dual> tr;
        load_trip<Unroll, NB, RowBlocks, Pipeline, Dual>(tr, wp, w2p, row_frags, xp, xvalid, kb, kb_end);
        peek();
        mma_trip<Unroll, NB, RowBlocks, Dual>(acc, tr);
    }
}

// AtomicOut: its own instantiation, so that the other kernels carry none of its registers.
template <int Unroll, int NB, int RowBlocks, MmaPipeline Pipeline, bool Dual, bool AtomicOut, typename Out>
__global__ void __launch_bounds__(512, 1) mma_gemv_kernel(const MmaGemvArgs a) {
    static_assert(!AtomicOut || Dual, "the atomic reduction adds into an fp32 output: dual mode only");
    extern __shared__ float red[];  // [NW][kTile] warps' tiles, then a cluster's inbox [S - 1][kTile]
    __shared__ __align__(8) uint64_t inbox_full;
    constexpr int kTile = RowBlocks * NB * 4 * 32;
    const int nw = blockDim.x >> 5;
    if (a.cluster) open_inbox(&inbox_full, cluster_rank() == 0 ? (uint32_t)((a.S - 1) * kTile * sizeof(float)) : 0u);
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    const int group = blockIdx.x, rb0 = group * RowBlocks, split = blockIdx.y;
    const int kb_per_split = (a.K >> 5) / a.S;
    const int kb_begin = split * kb_per_split, kb_end = kb_begin + kb_per_split;

    const Frag* xp[NB];
    bool xvalid[NB];
    x_operand<NB>(a.x, a.M, a.K, lane, xp, xvalid);
    const size_t row_frags = (size_t)(a.K >> 5) * kFragsPerBlock;
    const size_t block0 = (size_t)rb0 * row_frags + lane;
    const Frag* wp = a.w + block0;
    const Frag* w2p = Dual ? a.w2 + block0 : nullptr;

    float acc[RowBlocks][NB][4];
    zero_accumulators<RowBlocks, NB>(acc);

    // atomic_out: split 0's last warp zeroes before any load of its own (after them: ~0.5 us), thread 0 takes a
    // ticket now and peeks at the flag once a trip.
    uint32_t ticket = 0, seen = 0;
    if constexpr (AtomicOut) {
        if (threadIdx.x == 0) ticket = take_ticket(a.sem, group, a.S);
        if (split == 0 && warp == nw - 1)
            zero_and_raise(a.sem, group, a.S, static_cast<float*>(a.out), a.M, a.N, rb0 * 16, RowBlocks * 16);
    }
    auto peek = [&]() {
        if (AtomicOut && threadIdx.x == 0) seen = peek_flag(a.sem, group, a.S);
    };

    // A trip covers NW * Unroll consecutive K blocks, Unroll a warp.

    const int stride = nw * Unroll;
    const int first = kb_begin + warp * Unroll;
    if constexpr (pipe_double(Pipeline))
        k_loop_double<Unroll, NB, RowBlocks, Pipeline, Dual>(acc, wp, w2p, row_frags, xp, xvalid, first, stride, kb_end,
                                                             peek);
    else if constexpr (pipe_double_w(Pipeline))
        k_loop_double_w<Unroll, NB, RowBlocks, Pipeline, Dual>(acc, wp, w2p, row_frags, xp, xvalid, first, stride,
                                                               kb_end, peek);
    else
        k_loop_batch<Unroll, NB, RowBlocks, Pipeline, Dual>(acc, wp, w2p, row_frags, xp, xvalid, first, stride, kb_end,
                                                            peek);

    finish_gemv<NB, RowBlocks, AtomicOut, Out>(a, red, acc, &inbox_full, warp, lane, ticket, seen);
}

// Whether case L's layout fits the shared memory its engine's rule gives it: the warps' partial tiles, then for a
// cluster rank 0's inbox of S - 1 more (finish_tile).
template <typename L>
constexpr bool mma_gemv_layout_fits() {
    const int tiles = L::warps + (L::reduce == Reduce::kCluster ? L::splits - 1 : 0);
    return tiles * L::row_blocks * L::NB * 4 * 32 * (int)sizeof(float) <= L::smem_bytes &&
           L::smem_bytes <= (int)kSmemOptInLimit;
}

// Launch-table case L (generator/launch_table.py: the engine's variant(), by name). call.operand[0] = packed weights
// (dual: hi), [1] = packed lo weights (dual) or the weights again.
template <typename L>
const char* launch_mma_gemv(const Call& c) {
    constexpr bool cluster = L::reduce == Reduce::kCluster;
    static_assert(mma_gemv_layout_fits<L>(), "the warps' tiles and the cluster inbox fit the engine's shared memory");
    if (c.M < 1 || c.M > 8 * L::NB) return "mma_gemv: M does not fit this kernel's column blocks";
    const MmaGemvArgs a{static_cast<const Frag*>(c.x),
                        static_cast<const Frag*>(c.operand[0]),
                        static_cast<const Frag*>(c.operand[1]),
                        c.out,
                        c.ws,
                        c.sem,
                        c.M,
                        c.N,
                        c.K,
                        L::splits,
                        cluster};
    auto kernel =
        mma_gemv_kernel<L::unroll, L::NB, L::row_blocks, L::pipeline, L::dual, L::atomic_out, typename L::out>;
    return launch_splits(kernel, dim3(c.N / (16 * L::row_blocks), L::splits), dim3(L::warps * 32),
                         (size_t)L::smem_bytes, static_cast<cudaStream_t>(c.stream), cluster, a);
}

}  // namespace okc
