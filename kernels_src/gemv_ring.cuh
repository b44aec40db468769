// The same GEMV (gemv.cuh) with the weights streamed through a shared-memory ring by the bulk-copy engine
// (layout X = 1 of a CTABLE entry).
//
// Why: in gemv.cuh every weight byte in flight sits in a register, so the bytes one SM can have outstanding are
// capped by the register file, and at m = 16..32 the x fragments and accumulators crowd the weights out. HBM
// only reaches full bandwidth with several MB in flight across the chip. Here one producer warp keeps STAGES
// chunks of the CTA's weights in flight with cp.async.bulk (no registers, one instruction per row block per
// chunk), so what is outstanding is bounded by shared memory (up to 227 KB per SM) instead.
//
//  * CTA = NW consumer warps + 1 producer warp. A chunk ("stage") is NW * U consecutive 32-wide K blocks of
//    each of the CTA's R row blocks (hi and lo for the dual router): R (2R) contiguous runs of NW * U KB in the
//    packed order, one bulk copy each, completion counted on the stage's `full` mbarrier (expect_tx).
//  * Consumer warp w takes K blocks w U .. w U + U - 1 of every stage: it reads its weight fragments with
//    ld.shared (512 contiguous bytes per warp instruction: conflict free), its x fragments from L1/L2 one stage
//    ahead (registers), runs the mmas, and releases the slot on the stage's `empty` mbarrier (NW arrivals).
//  * The producer waits for `empty` before refilling a slot. Phases alternate per lap of the ring: stage i uses
//    slot i % STAGES with parity (i / STAGES) & 1.
//  * After the last stage the warps' partial tiles are summed through shared memory (the ring's space) and the
//    S split CTAs are reduced as in gemv.cuh (cluster or semaphore).
#pragma once
#include "gemv.cuh"

namespace okc {

constexpr int kRingMaxStages = 5;

// Registers: x for two stages (4 NB per K block, U blocks), one stage's weight fragments while they are used
// (8 R per K block, 16 R dual), the accumulators. Same 112 budget as gemv.cuh's single set.
__host__ __device__ constexpr int ring_data_regs(int u, int nb, int r, bool dual) {
    return 2 * u * 4 * nb + u * 8 * r * (dual ? 2 : 1) + 4 * r * nb;
}
__host__ __device__ constexpr bool ring_fits(int u, int nb, int r, bool dual) {
    return ring_data_regs(u, nb, r, dual) <= kBatchDataRegs;
}
// Shared memory: the ring (stages x R row blocks (x2 dual) x NW U K blocks of 1 KB), which the end reuses for
// the NW partial tiles (NW R NB 512 bytes) when that is larger. kernels_src/dispatch.py mirrors this.
__host__ __device__ constexpr size_t ring_smem_bytes(int stages, int nw, int u, int nb, int r, bool dual) {
    const size_t ring = (size_t)stages * r * (dual ? 2 : 1) * nw * u * 1024;
    const size_t tiles = (size_t)nw * r * nb * 512;
    return ring > tiles ? ring : tiles;
}

// The CTA's partial tile is in red[0, tile) once every thread passes the first barrier here. Sum it with the other
// S - 1 split CTAs of its row group (in split order: deterministic) and write the output.
template <int NB, typename OutT>
__device__ __forceinline__ void finish_split_tile(const GemvArgs& a, float* red, int tile, int rb0, int group,
                                                  int split) {
    if (a.S == 1) {
        __syncthreads();
        for (int idx = threadIdx.x; idx < tile; idx += blockDim.x) write_tile_element<NB, OutT>(a, rb0, idx, red[idx]);
        return;
    }
    if (a.cluster) {
        cooperative_groups::cluster_group cluster = cooperative_groups::this_cluster();
        cluster.sync();  // every tile visible to the whole cluster (barrier.cluster: release/acquire)
        const int rank = (int)cluster.block_rank();
        for (int idx = rank * blockDim.x + threadIdx.x; idx < tile; idx += a.S * blockDim.x) {
            float v = 0.f;
            for (int s = 0; s < a.S; ++s) v += cluster.map_shared_rank(red, s)[idx];
            write_tile_element<NB, OutT>(a, rb0, idx, v);
        }
        cluster.sync();  // no CTA may leave (and free its shared memory) while a peer still reads it
        return;
    }
    __syncthreads();
    float* mine = a.ws + ((size_t)group * a.S + split) * tile;
    for (int idx = threadIdx.x; idx < tile; idx += blockDim.x) __stcg(mine + idx, red[idx]);
    __threadfence();  // the tile is visible device-wide before this CTA counts itself in
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

template <int U, int NB, int R, bool DUAL, typename OutT>
__global__ void __launch_bounds__(512, 1) gemv_ring_kernel(const GemvArgs a, int stages) {
    extern __shared__ __align__(128) Frag ring[];  // [stages][R (x2 dual)][NW U K blocks][64 fragments]
    __shared__ uint64_t full[kRingMaxStages], empty[kRingMaxStages];
    constexpr int kTile = R * NB * 4 * 32;
    constexpr int kRuns = R * (DUAL ? 2 : 1);  // contiguous runs per stage: the hi (and lo) rows of each block
    const int nw = (blockDim.x >> 5) - 1;      // consumer warps; warp nw is the producer
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    const int group = blockIdx.x, rb0 = group * R, split = blockIdx.y;
    const int stage_kb = nw * U;
    const int kb_per_split = (a.K >> 5) / a.S;
    const int kb_begin = split * kb_per_split;
    const int n_stages = kb_per_split / stage_kb;  // dispatch guarantees it divides
    const int slot_frags = kRuns * stage_kb * kFragsPerBlock;
    const size_t row_frags = (size_t)(a.K >> 5) * kFragsPerBlock;

    if (threadIdx.x == 0) {
        for (int s = 0; s < stages; ++s) {
            mbar_init(&full[s], 1);
            mbar_init(&empty[s], nw);
        }
        mbar_fence_init();
    }
    __syncthreads();

    float acc[R][NB][4];
#pragma unroll
    for (int r = 0; r < R; ++r)
#pragma unroll
        for (int nb = 0; nb < NB; ++nb)
#pragma unroll
            for (int j = 0; j < 4; ++j) acc[r][nb][j] = 0.f;

    if (warp == nw) {
        // Producer: one lane issues every copy; the others go straight to the epilogue's barriers.
        if (lane == 0) {
            const uint64_t policy = l2_evict_first_policy();
            const unsigned run_bytes = stage_kb * kFragsPerBlock * sizeof(Frag);
            for (int i = 0; i < n_stages; ++i) {
                const int s = i % stages;
                if (i >= stages) mbar_wait(&empty[s], ((i / stages) - 1) & 1);  // its consumers are done
                mbar_arrive_expect_tx(&full[s], run_bytes * kRuns);
                const size_t k_off = (size_t)(kb_begin + i * stage_kb) * kFragsPerBlock;
#pragma unroll
                for (int r = 0; r < R; ++r) {
                    Frag* dst = ring + (size_t)s * slot_frags + (size_t)r * stage_kb * kFragsPerBlock;
                    bulk_copy_g2s(dst, a.w + (rb0 + r) * row_frags + k_off, run_bytes, &full[s], policy);
                    if constexpr (DUAL)
                        bulk_copy_g2s(dst + (size_t)R * stage_kb * kFragsPerBlock, a.w2 + (rb0 + r) * row_frags + k_off,
                                      run_bytes, &full[s], policy);
                }
            }
        }
    } else {
        // Consumer: lane (g, t) reads token g of each column block, x[token][32 kb + 8t .. +7]; absent tokens
        // stay zero.
        const Frag* xp[NB];
        bool xvalid[NB];
#pragma unroll
        for (int nb = 0; nb < NB; ++nb) {
            const int token = nb * 8 + (lane >> 2);
            xvalid[nb] = token < a.M;
            xp[nb] = a.x + (size_t)(xvalid[nb] ? token : 0) * (a.K >> 3) + (lane & 3);
        }
        auto load_x = [&](Frag (&x)[U][NB], int i) {
            const int kb0 = kb_begin + i * stage_kb + warp * U;
#pragma unroll
            for (int u = 0; u < U; ++u)
#pragma unroll
                for (int nb = 0; nb < NB; ++nb)
                    x[u][nb] = (i < n_stages && xvalid[nb]) ? ld_x(xp[nb] + (kb0 + u) * 4) : zero_frag();
        };
        auto consume = [&](const Frag (&x)[U][NB], int i) {
            const int s = i % stages;
            mbar_wait(&full[s], (i / stages) & 1);
            const Frag* slot = ring + (size_t)s * slot_frags + (size_t)warp * U * kFragsPerBlock + lane;
#pragma unroll
            for (int u = 0; u < U; ++u)
#pragma unroll
                for (int r = 0; r < R; ++r)
#pragma unroll
                    for (int y = 0; y < 2; ++y) {
                        const size_t at = ((size_t)r * stage_kb + u) * kFragsPerBlock + y * 32;
                        const Frag w = slot[at];
                        const Frag w2 = DUAL ? slot[at + (size_t)R * stage_kb * kFragsPerBlock] : w;
#pragma unroll
                        for (int nb = 0; nb < NB; ++nb) {
                            // step y consumes x elements 4y..4y+3 of the lane's 8 (see packing.py)
                            const uint32_t b0 = x[u][nb].r[2 * y], b1 = x[u][nb].r[2 * y + 1];
                            mma_bf16_m16n8k16(acc[r][nb], w.r, b0, b1);
                            if constexpr (DUAL) mma_bf16_m16n8k16(acc[r][nb], w2.r, b0, b1);
                        }
                    }
            __syncwarp();
            if (lane == 0) mbar_arrive(&empty[s]);  // this warp is done with the slot
        };
        // x is fetched one stage ahead, so its L2 latency overlaps the wait for the weights.
        Frag x0[U][NB], x1[U][NB];
        load_x(x0, 0);
        for (int i = 0; i < n_stages; i += 2) {
            load_x(x1, i + 1);
            consume(x0, i);
            if (i + 1 >= n_stages) break;
            load_x(x0, i + 2);
            consume(x1, i + 1);
        }
    }

    // Every stage was waited for, so no copy is still landing: the ring's space takes the warps' partial tiles.
    __syncthreads();
    float* red = reinterpret_cast<float*>(ring);
    if (warp < nw)
#pragma unroll
        for (int r = 0; r < R; ++r)
#pragma unroll
            for (int nb = 0; nb < NB; ++nb)
#pragma unroll
                for (int j = 0; j < 4; ++j) red[warp * kTile + ((r * NB + nb) * 4 + j) * 32 + lane] = acc[r][nb][j];
    __syncthreads();
    for (int idx = threadIdx.x; idx < kTile; idx += blockDim.x) {  // sum into warp 0's slot, one thread per idx
        float v = 0.f;
        for (int w = 0; w < nw; ++w) v += red[w * kTile + idx];
        red[idx] = v;
    }
    finish_split_tile<NB, OutT>(a, red, kTile, rb0, group, split);
}

}  // namespace okc
