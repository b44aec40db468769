// Tensor-core GEMV for decode-sized batches (m <= 32): out[m, N] = x[m, K] . W[N, K]^T.
//
// Memory-bound: every weight byte must stream from HBM exactly once, at full bandwidth. So
//  * W is the mma's A operand (16 rows x 16 k), repacked once (kernels_src/packing.py) so that each lane's
//    share of a fragment is one 16-byte load and a warp reads 512 contiguous bytes per fragment;
//  * x is the B operand, tokens as columns, 8 tokens per column block (NB = 1, 2, 4 blocks for m <= 8, 16, 32);
//    the packing's k order makes a lane's x operand for a 32-wide K block one 16-byte load too;
//    tokens >= m are zeros in registers and never read;
//  * one CTA owns R 16-row blocks; its NW warps split the CTA's K range and reduce through shared memory.
//    Every warp applies each x fragment to all R row blocks, so x is read from L2 N/(16R) times, not N/16:
//    at m = 8..32 that re-read traffic rivals the weights themselves unless R > 1;
//  * optionally S CTAs split K, reduced one of two ways (C):
//    C = 0  semaphore: each writes its partial tile to a workspace, and the last to arrive (a counter per CTA
//           row group) sums them in a fixed order, writes the output and resets the counter to 0, so the next
//           launch or CUDA-graph replay needs no clearing kernel;
//    C = 1  cluster (Hopper): the S CTAs form one thread-block cluster and sum each other's tiles straight out
//           of distributed shared memory, each CTA a 1/S slice: no workspace, no atomics, no global round trip;
//  * dual mode (the fp32 router): hi and lo bf16 weights feed one fp32 accumulator, fp32 output.
#pragma once
#include "common.cuh"

#include <cooperative_groups.h>

namespace okc {

// Software-pipelining styles, the P of a CTABLE entry. A "trip" is U consecutive 32-wide K blocks per warp.
//   0  BATCH      issue the trip's loads (weights, x), then its mmas; warps hide each other's latency.
//   1  DOUBLE     two register sets: the next trip's loads are issued before this trip's mmas, so each
//                 warp keeps up to 2U blocks in flight.
//   2  BATCH_L2   as 0, with the L2::256B prefetch hint on weight loads.
//   3  DOUBLE_L2  as 1, with the hint.
__host__ __device__ constexpr bool pipe_double(int p) { return p == 1 || p == 3; }
__host__ __device__ constexpr bool pipe_l2_hint(int p) { return p >= 2; }

// Data registers one thread holds: weight fragments 8R (16R dual) per K block, times U, times 2 if double
// buffered; x fragments 4 NB per K block, which layout 0 holds for the whole trip like the weights, while
// layout 1 reads one K block's worth from shared memory just before its mmas; plus the 4 R NB accumulators.
// Budgets keep the kernel under 128 registers (512-thread CTAs) without spilling, as ptxas reports them: a
// single set may take 112 (U=2, NB=4, R=4 at 160 spilled); two live sets leave less room for addresses, so 100
// (U=2, NB=4 double-buffered at 112 spilled). kernels_src/dispatch.py (gemv_config_error) applies the same rule.
constexpr int kBatchDataRegs = 112;
constexpr int kDoubleDataRegs = 100;
__host__ __device__ constexpr int gemv_data_regs(int u, int nb, int r, int p, bool dual, int layout) {
    return (pipe_double(p) ? 2 : 1) * u * (8 * r * (dual ? 2 : 1) + (layout == 0 ? 4 * nb : 0)) +
           (layout == 0 ? 0 : 4 * nb) + 4 * r * nb;
}
__host__ __device__ constexpr bool gemv_fits(int u, int nb, int r, int p, bool dual, int layout) {
    return gemv_data_regs(u, nb, r, p, dual, layout) <= (pipe_double(p) ? kDoubleDataRegs : kBatchDataRegs);
}

struct GemvArgs {
    const Frag* x;   // [M, K] bf16, row-major, 16-byte aligned
    const Frag* w;   // packed weights (dual: the hi half)
    const Frag* w2;  // packed lo weights (dual only)
    void* out;       // [M, N]: bf16, or fp32 in dual mode
    float* ws;       // split-K partials: [N/(16R)][S][R*NB*128]
    int* sem;        // arrival counter per CTA row group; 0 between launches
    int M, N, K, S;
    int cluster;     // 1: the S split CTAs are one cluster and reduce through distributed shared memory
};

constexpr int kFragsPerBlock = 64;  // one 16-row x 32-k block: 2 steps x 32 lanes x 16 bytes

// One loop trip's weight fragments: row block r, K block u, mma steps y = 0, 1 (and the lo half when DUAL).
template <int U, int R, bool DUAL>
struct WeightTrip {
    Frag w[R][U][2];
    Frag w2[DUAL ? R : 1][DUAL ? U : 1][2];
};

template <int P>
__device__ __forceinline__ Frag ld_weights_pipe(const Frag* p, bool ok) {
    return ok ? (pipe_l2_hint(P) ? ld_weights_l2_256(p) : ld_weights(p)) : zero_frag();
}

// wp / w2p: this lane's fragment of K block 0 of the warp's first row block; row_frags: fragments per row block.
// K blocks at or past kb_end read as zeros (warp-uniform test), never out of bounds.
template <int U, int R, int P, bool DUAL>
__device__ __forceinline__ void load_weight_trip(WeightTrip<U, R, DUAL>& tr, const Frag* wp, const Frag* w2p,
                                                 size_t row_frags, int kb0, int kb_end) {
#pragma unroll
    for (int u = 0; u < U; ++u) {
        const int kb = kb0 + u;
        const bool ok = kb < kb_end;
#pragma unroll
        for (int r = 0; r < R; ++r)
#pragma unroll
            for (int y = 0; y < 2; ++y) {
                const size_t at = r * row_frags + (size_t)kb * kFragsPerBlock + y * 32;
                tr.w[r][u][y] = ld_weights_pipe<P>(wp + at, ok);
                if constexpr (DUAL) tr.w2[r][u][y] = ld_weights_pipe<P>(w2p + at, ok);
            }
    }
}

// acc[r][nb] += W(row block r, K block u) . x(column block nb, K block u)
template <int U, int NB, int R, bool DUAL>
__device__ __forceinline__ void mma_block(float (&acc)[R][NB][4], const WeightTrip<U, R, DUAL>& tr, int u,
                                          const Frag (&x)[NB]) {
#pragma unroll
    for (int r = 0; r < R; ++r)
#pragma unroll
        for (int y = 0; y < 2; ++y)
#pragma unroll
            for (int nb = 0; nb < NB; ++nb) {
                // step y consumes x elements 4y..4y+3 of the lane's 8 (see packing.py)
                const uint32_t b0 = x[nb].r[2 * y], b1 = x[nb].r[2 * y + 1];
                mma_bf16_m16n8k16(acc[r][nb], tr.w[r][u][y].r, b0, b1);
                if constexpr (DUAL) mma_bf16_m16n8k16(acc[r][nb], tr.w2[r][u][y].r, b0, b1);
            }
}

template <int R, int NB>
__device__ __forceinline__ void zero_acc(float (&acc)[R][NB][4]) {
#pragma unroll
    for (int r = 0; r < R; ++r)
#pragma unroll
        for (int nb = 0; nb < NB; ++nb)
#pragma unroll
            for (int j = 0; j < 4; ++j) acc[r][nb][j] = 0.f;
}

// A warp's accumulators into a tile in shared memory, element (r0 + r, nb, j) of each lane at
// idx = 32 * (4 ((r0 + r) NB + nb) + j) + lane: the mma C layout, bank-conflict free.
template <int R, int NB>
__device__ __forceinline__ void acc_to_tile(float* tile, const float (&acc)[R][NB][4], int r0, int lane) {
#pragma unroll
    for (int r = 0; r < R; ++r)
#pragma unroll
        for (int nb = 0; nb < NB; ++nb)
#pragma unroll
            for (int j = 0; j < 4; ++j) tile[(((r0 + r) * NB + nb) * 4 + j) * 32 + lane] = acc[r][nb][j];
}

// Element idx of a reduced tile (see acc_to_tile) -> out[token, row], for the CTA whose first row block is rb0.
template <int NB, typename OutT>
__device__ __forceinline__ void write_tile_element(const GemvArgs& a, int rb0, int idx, float v) {
    const int lane = idx & 31, c = idx >> 5;
    const int r = c / (NB * 4), nb = (c >> 2) % NB, j = c & 3;
    const int row = (rb0 + r) * 16 + (lane >> 2) + ((j & 2) ? 8 : 0);
    const int token = nb * 8 + (lane & 3) * 2 + (j & 1);
    if (token < a.M) store_out(static_cast<OutT*>(a.out) + (size_t)token * a.N + row, v);
}

// The CTA's partial tile, red[0, tile), is complete once every thread passes the first barrier here. Sum it with
// the other S - 1 split CTAs of this row group (always in split order: deterministic) and write the output.
template <int NB, typename OutT>
__device__ __forceinline__ void finish_tile(const GemvArgs& a, float* red, int tile, int rb0, int group, int split) {
    if (a.S == 1) {
        __syncthreads();
        for (int idx = threadIdx.x; idx < tile; idx += blockDim.x) write_tile_element<NB, OutT>(a, rb0, idx, red[idx]);
        return;
    }
    if (a.cluster) {
        cooperative_groups::cluster_group cluster = cooperative_groups::this_cluster();
        cluster.sync();  // every tile visible to the whole cluster (barrier.cluster has release/acquire semantics)
        const int rank = (int)cluster.block_rank();
        for (int idx = rank * blockDim.x + threadIdx.x; idx < tile; idx += a.S * blockDim.x) {
            float v = 0.f;
            for (int s = 0; s < a.S; ++s) v += cluster.map_shared_rank(red, s)[idx];
            write_tile_element<NB, OutT>(a, rb0, idx, v);
        }
        cluster.sync();  // no CTA may leave (and free its shared memory) while a peer still reads it
        return;
    }
    // Semaphore: publish this CTA's tile, then the last CTA of the row group to arrive reduces all S of them.
    __syncthreads();
    float* mine = a.ws + ((size_t)group * a.S + split) * tile;
    for (int idx = threadIdx.x; idx < tile; idx += blockDim.x) __stcg(mine + idx, red[idx]);
    __threadfence();  // make the tile visible device-wide before this CTA counts itself in
    __syncthreads();
    __shared__ int is_last;
    if (threadIdx.x == 0) is_last = atomicAdd(a.sem + group, 1) == a.S - 1;
    __syncthreads();
    if (!is_last) return;
    __threadfence();  // acquire: the other CTAs' tiles
    const float* tiles = a.ws + (size_t)group * a.S * tile;
    for (int idx = threadIdx.x; idx < tile; idx += blockDim.x) {
        float v = 0.f;
        for (int s = 0; s < a.S; ++s) v += __ldcg(tiles + (size_t)s * tile + idx);
        write_tile_element<NB, OutT>(a, rb0, idx, v);
    }
    if (threadIdx.x == 0) a.sem[group] = 0;  // every CTA has arrived: ready for the next launch
}

// ---------------------------------------------------------------------------------------------------------------
// Layout X = 0: the NW warps split the CTA's K range; each warp loads its own x fragments (L1/L2) and the warps'
// partial tiles are summed through shared memory. A CTA owns R row blocks.
template <int U, int NB, int R, int P, bool DUAL, typename OutT>
__global__ void __launch_bounds__(512, 1) gemv_kernel(const GemvArgs a) {
    extern __shared__ float red[];  // [NW][R * NB * 4][32]: each warp's accumulators, conflict-free by lane
    constexpr int kTile = R * NB * 4 * 32;
    const int nw = blockDim.x >> 5;
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    const int group = blockIdx.x, rb0 = group * R, split = blockIdx.y;
    const int kb_per_split = (a.K >> 5) / a.S;
    const int kb_begin = split * kb_per_split, kb_end = kb_begin + kb_per_split;

    // Lane (g, t) reads token g of each column block, x[token][32 kb + 8t .. +7]; absent tokens stay zero.
    const Frag* xp[NB];
    bool xvalid[NB];
#pragma unroll
    for (int nb = 0; nb < NB; ++nb) {
        const int token = nb * 8 + (lane >> 2);
        xvalid[nb] = token < a.M;
        xp[nb] = a.x + (size_t)(xvalid[nb] ? token : 0) * (a.K >> 3) + (lane & 3);
    }
    const size_t row_frags = (size_t)(a.K >> 5) * kFragsPerBlock;
    const size_t block0 = (size_t)rb0 * row_frags + lane;
    const Frag* wp = a.w + block0;
    const Frag* w2p = DUAL ? a.w2 + block0 : nullptr;

    auto load_x = [&](Frag (&x)[U][NB], int kb0) {
#pragma unroll
        for (int u = 0; u < U; ++u)
#pragma unroll
            for (int nb = 0; nb < NB; ++nb)
                x[u][nb] = (kb0 + u < kb_end && xvalid[nb]) ? ld_x(xp[nb] + (kb0 + u) * 4) : zero_frag();
    };
    float acc[R][NB][4];
    zero_acc(acc);

    // Each trip the CTA covers NW * U consecutive K blocks; warp w takes U consecutive ones of them.
    const int stride = nw * U;
    const int first = kb_begin + warp * U;
    if constexpr (!pipe_double(P)) {
        for (int kb = first; kb < kb_end; kb += stride) {
            WeightTrip<U, R, DUAL> tr;
            Frag x[U][NB];
            load_weight_trip<U, R, P, DUAL>(tr, wp, w2p, row_frags, kb, kb_end);
            load_x(x, kb);
#pragma unroll
            for (int u = 0; u < U; ++u) mma_block<U, NB, R, DUAL>(acc, tr, u, x[u]);
        }
    } else {
        WeightTrip<U, R, DUAL> t0, t1;
        Frag x0[U][NB], x1[U][NB];
        load_weight_trip<U, R, P, DUAL>(t0, wp, w2p, row_frags, first, kb_end);
        load_x(x0, first);
        for (int kb = first; kb < kb_end; kb += 2 * stride) {
            load_weight_trip<U, R, P, DUAL>(t1, wp, w2p, row_frags, kb + stride, kb_end);
            load_x(x1, kb + stride);
#pragma unroll
            for (int u = 0; u < U; ++u) mma_block<U, NB, R, DUAL>(acc, t0, u, x0[u]);
            load_weight_trip<U, R, P, DUAL>(t0, wp, w2p, row_frags, kb + 2 * stride, kb_end);
            load_x(x0, kb + 2 * stride);
#pragma unroll
            for (int u = 0; u < U; ++u) mma_block<U, NB, R, DUAL>(acc, t1, u, x1[u]);
        }
    }

    // Sum the warps' partial tiles through shared memory, into warp 0's slot: each idx is read and written by one
    // thread only, and finish_tile's barrier publishes the result.
    acc_to_tile(red + warp * kTile, acc, 0, lane);
    __syncthreads();
    for (int idx = threadIdx.x; idx < kTile; idx += blockDim.x) {
        float v = 0.f;
        for (int w = 0; w < nw; ++w) v += red[w * kTile + idx];
        red[idx] = v;
    }
    finish_tile<NB, OutT>(a, red, kTile, rb0, group, split);
}

// ---------------------------------------------------------------------------------------------------------------
// Layout X = 1: x staged once per CTA in shared memory; the NW warps split rows (warp w owns row blocks
// w R .. w R + R - 1, a CTA NW R of them) and all walk the CTA's whole K range in step. x is then read from L2
// once per NW R row blocks instead of once per R, which is what m = 16..32 needs, and x costs no registers
// between trips. No cross-warp reduction: each warp's accumulators are final for its rows (before split-K).
//
// The CTA's x slice, tokens 0 .. 8 NB - 1 by its K range, sits in fragment order, xs[(kb NB + nb) 32 + lane],
// so a warp's read of one fragment is 512 contiguous bytes (conflict free). It arrives by cp.async in kXPhases
// commit groups, one per quarter of the K range; the loop waits for a quarter only when it reaches it, so the
// first weight loads are in flight while x is still arriving.
constexpr int kXPhases = 4;

template <int NB>
__device__ __forceinline__ void stage_x(Frag* xs, const GemvArgs& a, int kb_begin, int nkb) {
    for (int q = 0; q < kXPhases; ++q) {
        const int c0 = (q * nkb / kXPhases) * 4, per_token = ((q + 1) * nkb / kXPhases) * 4 - c0;  // 16-byte chunks
        for (int i = threadIdx.x; i < NB * 8 * per_token; i += blockDim.x) {
            const int token = i / per_token, c = c0 + i % per_token;  // consecutive threads: consecutive 16 bytes
            Frag* dst = xs + ((c >> 2) * NB + (token >> 3)) * 32 + (token & 7) * 4 + (c & 3);
            if (token < a.M)
                cp_async_16(dst, a.x + (size_t)token * (a.K >> 3) + (size_t)kb_begin * 4 + c);
            else
                *dst = zero_frag();  // tokens >= m: zeros, published by the barrier of the first wait
        }
        cp_async_commit();
    }
}

template <int U, int NB, int R, int P, bool DUAL, typename OutT>
__global__ void __launch_bounds__(512, 1) gemv_xs_kernel(const GemvArgs a) {
    extern __shared__ Frag xs[];  // the x slice; afterwards reused for the CTA's output tile
    const int nw = blockDim.x >> 5;
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    const int group = blockIdx.x, rb0 = group * nw * R, split = blockIdx.y;
    const int nkb = (a.K >> 5) / a.S, kb_begin = split * nkb;
    stage_x<NB>(xs, a, kb_begin, nkb);

    const size_t row_frags = (size_t)(a.K >> 5) * kFragsPerBlock;
    const size_t block0 = (size_t)(rb0 + warp * R) * row_frags + (size_t)kb_begin * kFragsPerBlock + lane;
    const Frag* wp = a.w + block0;
    const Frag* w2p = DUAL ? a.w2 + block0 : nullptr;

    // x blocks [0, kb_hi) must be resident before they are read: wait for the quarters that cover them. The
    // trip sequence is the same for every warp, so the barrier is reached by all threads alike.
    int quarters = 0;
    auto wait_x = [&](int kb_hi) {
        kb_hi = min(kb_hi, nkb);
        if ((quarters * nkb) / kXPhases >= kb_hi) return;
        while ((quarters * nkb) / kXPhases < kb_hi) ++quarters;
        cp_async_wait_pending(kXPhases - quarters);
        __syncthreads();
    };
    float acc[R][NB][4];
    zero_acc(acc);
    auto mma_trip = [&](const WeightTrip<U, R, DUAL>& tr, int kb0) {
#pragma unroll
        for (int u = 0; u < U; ++u) {
            if (kb0 + u < nkb) {  // uniform
                Frag x[NB];
#pragma unroll
                for (int nb = 0; nb < NB; ++nb) x[nb] = xs[((kb0 + u) * NB + nb) * 32 + lane];
                mma_block<U, NB, R, DUAL>(acc, tr, u, x);
            }
        }
    };
    if constexpr (!pipe_double(P)) {
        for (int kb = 0; kb < nkb; kb += U) {
            WeightTrip<U, R, DUAL> tr;
            load_weight_trip<U, R, P, DUAL>(tr, wp, w2p, row_frags, kb, nkb);
            wait_x(kb + U);
            mma_trip(tr, kb);
        }
    } else {
        WeightTrip<U, R, DUAL> t0, t1;
        load_weight_trip<U, R, P, DUAL>(t0, wp, w2p, row_frags, 0, nkb);
        for (int kb = 0; kb < nkb; kb += 2 * U) {
            load_weight_trip<U, R, P, DUAL>(t1, wp, w2p, row_frags, kb + U, nkb);
            wait_x(kb + U);
            mma_trip(t0, kb);
            load_weight_trip<U, R, P, DUAL>(t0, wp, w2p, row_frags, kb + 2 * U, nkb);
            wait_x(kb + 2 * U);
            mma_trip(t1, kb + U);
        }
    }
    // The last trip waited for every quarter, so no cp.async is still writing. Once every warp is done reading
    // x, its space becomes the output tile.
    __syncthreads();
    float* red = reinterpret_cast<float*>(xs);
    acc_to_tile(red, acc, warp * R, lane);
    finish_tile<NB, OutT>(a, red, nw * R * NB * 4 * 32, rb0, group, split);
}

// Shared memory bytes each layout asks for (launch.cu and kernels_src/dispatch.py agree on these).
__host__ __device__ constexpr size_t gemv_smem_bytes(int layout, int nw, int nb, int r, int nkb) {
    return layout == 0 ? (size_t)nw * r * nb * 512 : (size_t)nb * 512 * (nkb > nw * r ? nkb : nw * r);
}

}  // namespace okc
