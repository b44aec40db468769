// The mma.sync tensor-core GEMV (engine mma_gemv, kernels_src/mma_gemv.py) for decode-sized batches (m <= 32):
// out[m, N] = x[m, K] . W[N, K]^T. Design and measurements: docs/mma-gemv.md.
//
// Memory-bound: every weight byte must stream from HBM exactly once, at full bandwidth. So
//  * W is the mma's A operand (16 rows x 16 k), repacked once (kernels_src/packing.py) so that each lane's
//    share of a fragment is one 16-byte load and a warp reads 512 contiguous bytes per fragment;
//  * x is the B operand, tokens as columns, 8 tokens per column block (NB = 1, 2, 4 blocks for m <= 8, 16, 32);
//    the packing's k order makes a lane's x operand for a 32-wide K block one 16-byte load too;
//    tokens >= m are zeros in registers and never read;
//  * one CTA owns R (row_blocks) 16-row blocks; its warps split the CTA's K range and reduce through shared
//    memory. Every warp applies each x fragment to all R row blocks, so x is read from L2 N/(16R) times, not
//    N/16: at m = 8..32 that re-read traffic rivals the weights themselves unless R > 1;
//  * optionally S (splits) CTAs split K, reduced one of three ways (reduce):
//    semaphore  each writes its partial tile to a workspace, and the last to arrive (a counter per CTA row
//               group) sums them in a fixed order, writes the output and resets the counter to 0, so the next
//               launch or CUDA-graph replay needs no clearing kernel;
//    cluster    (Hopper) the S CTAs form one thread-block cluster; ranks 1..S-1 push their tiles into rank 0's
//               shared-memory inbox (st.async, one mbarrier counting the bytes) and leave, rank 0 sums and
//               writes: no workspace, no atomics, no global round trip (common.cuh, open_inbox / finish_tile);
//    atomic_out (fp32 output, i.e. dual mode only) every CTA adds its tile into the output with red.global.add;
//               split 0 zeroed that part of the output at kernel start (common.cuh, take_ticket,
//               zero_and_raise). S up to 32, no cluster to fit; the order of the adds varies from run to run.
//  * dual mode (the fp32 router): hi and lo bf16 weights feed one fp32 accumulator, fp32 output.
#pragma once
#include "common.cuh"

namespace okc {

// Software-pipelining styles (P: the table's pipeline, MmaPipeline, generated from mma_gemv.py's MMA_PIPELINE).
// A "trip" is U (unroll) consecutive 32-wide K blocks per warp.
//   batch        issue the trip's loads (weights, x), then its mmas; warps hide each other's latency.
//   double       two register sets: the next trip's loads are issued before this trip's mmas, so each
//                 warp keeps up to 2U blocks in flight.
//   batch_l2     as batch, with the L2::256B prefetch hint on weight loads.
//   double_l2    as double, with the hint.
//   double_w     two weight sets but one x set: the next trip's weights (HBM, long latency) are issued before
//                 this trip's mmas, its x (an L2 hit, short) only after them. Fewer registers and, measured,
//                 faster at equal U (the figures: docs/mma-gemv.md); a likely reason, not measured: the weight
//                 requests no longer queue behind x's.
//   double_w_l2  as double_w, with the hint.
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
    int cluster;  // 1: the S split CTAs are one cluster and reduce through distributed shared memory
};  // the atomic reduction is not a field: it is the kernel's ATOMIC template argument

constexpr int kFragsPerBlock = 64;  // one 16-row x 32-k block: 2 steps x 32 lanes x 16 bytes

template <int Unroll, int NB, int RowBlocks, bool Dual>
struct Trip {
    Frag w[RowBlocks][Unroll][2];                         // row block r, K block u, steps y = 0, 1
    Frag w2[Dual ? RowBlocks : 1][Dual ? Unroll : 1][2];  // lo weights (unused unless DUAL)
    Frag x[Unroll][NB];                                   // shared by all R row blocks
};

template <MmaPipeline Pipeline>
__device__ __forceinline__ Frag ld_weights_pipe(const Frag* p, bool ok) {
    return ok ? (pipe_l2_hint(Pipeline) ? ld_weights_l2_256(p) : ld_weights(p)) : zero_frag();
}

// wp / w2p: this lane's first fragment of the CTA's first row block; row_frags: fragments per row block.
// WEIGHTS / X: which of the trip's loads to issue (DOUBLE_W issues them at different points of the loop).
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

// reduce = atomic_out: add the CTA's tile (its NW warps' partials) into the fp32 output. First each thread sums
// its elements over the warps, conflict-free as finish_tile does, in place of warp 0's slice; then each quad of
// four rows of one token is one red.add. (Summing the warps straight into quads read shared memory 4-way conflicted,
// 4x the wavefronts.) Quad i is token 8 nb + t, rows 16 r + 4 q .. + 3 (local rows lr = 4 q + e); in the mma C layout
// row lr, token t sit at lane 4 (lr & 7) + t / 2, register j = 2 (lr >> 3) + (t & 1).
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

// The end of a gemv CTA: the warps' partial tiles reduced through shared memory, then across the S split CTAs
// (the output-atomic reduction once split 0's zeroes are visible: the flag the ticket waits for).
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

// The K loop in each software-pipelining style (MmaPipeline): acc += every trip of this warp's K blocks, from
// `first` to kb_end, `stride` apart a trip (wp, w2p, row_frags, xp, xvalid as load_trip takes them). peek() runs
// once a trip: the output-atomic reduction's look at its flag, nothing otherwise.
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

// t0.x and t1.x are never live at once (each is loaded after the other's mmas), so ptxas gives them the same
// registers: two weight sets, one x set.
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

// ATOMIC: reduce = atomic_out (a separate instantiation, so that the other kernels carry none of its registers).
// Phases: the output-atomic reduction's start, the K loop of the pipelining style, then the warps' partial tiles
// reduced through shared memory and across the S split CTAs.
template <int Unroll, int NB, int RowBlocks, MmaPipeline Pipeline, bool Dual, bool AtomicOut, typename Out>
__global__ void __launch_bounds__(512, 1) mma_gemv_kernel(const MmaGemvArgs a) {
    static_assert(!AtomicOut || Dual, "the atomic reduction adds into an fp32 output: dual mode only");
    extern __shared__ float red[];  // [NW][R * NB * 4][32]: each warp's accumulators, conflict-free by lane;
                                    // then, for a cluster, rank 0's inbox: [S - 1][R * NB * 4 * 32] (common.cuh)
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

    // Atomic reduction: thread 0 takes a ticket now and reads it at the end. The last warp of split 0 zeroes the output
    // before any load of its own, so that its fence waits on the zeroes' stores alone. (Zeroing after the first
    // loads left the atomic reduction ~0.5 us behind the cluster one in the same config, likely the fence
    // waiting on those loads and costing the double-buffered styles a trip's overlap; after the first trip's
    // mmas it delayed the flag to the end of one-trip configs.)
    // Thread 0 looks at the zeroed flag once per loop trip, never waiting on it there, so that the check after
    // the loop costs no round trip of its own (common.cuh).
    uint32_t ticket = 0, seen = 0;
    if constexpr (AtomicOut) {
        if (threadIdx.x == 0) ticket = take_ticket(a.sem, group, a.S);
        if (split == 0 && warp == nw - 1)
            zero_and_raise(a.sem, group, a.S, static_cast<float*>(a.out), a.M, a.N, rb0 * 16, RowBlocks * 16);
    }
    auto peek = [&]() {
        if (AtomicOut && threadIdx.x == 0) seen = peek_flag(a.sem, group, a.S);
    };

    // Each trip the CTA covers NW * U consecutive K blocks; warp w takes U consecutive ones of them.
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

// ---- Host launcher of a launch-table case L (kernels_src/runtime.py, launch_table: mma_gemv.py's variant(), by
// name). call.operand[0] = packed weights (dual: hi), [1] = packed lo weights (dual) or the weights again.
// Whether case L's layout fits the shared memory its engine's rule gives it: the warps' partial tiles, then for a
// cluster rank 0's inbox of S - 1 more (finish_tile).
template <typename L>
constexpr bool mma_gemv_layout_fits() {
    const int tiles = L::warps + (L::reduce == Reduce::kCluster ? L::splits - 1 : 0);
    return tiles * L::row_blocks * L::NB * 4 * 32 * (int)sizeof(float) <= L::smem_bytes &&
           L::smem_bytes <= (int)kSmemOptInLimit;
}

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
