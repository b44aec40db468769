// The bulk-copy + wgmma kernel of engines tma_gemv (m <= 32, one consumer warpgroup) and tma_gemm (m <= 256, 1-4
// warpgroups): out[m, N] = x[m, K] . W[N, K]^T on Hopper. A CTA streams its 64-row weight tile(s) (pre-swizzled
// 8 KB blocks, plain bulk copies) and x's boxes (tensor map, rows past m zero-filled) through a shared-memory ring
// (ring.cuh) that its warpgroups read with wgmma; splits > 1 meet by semaphore, cluster (gather or scatter) or L2
// atomics; half tiles take 32 rows and the whole K. Phases: TmaStream::start, produce / consume, then finish_half
// or finish_full. Design and figures: docs/tma-gemv.md, docs/tma-gemm.md.
#pragma once
#include "ring.cuh"
#include "generated/constants.h"

#include <cudaTypedefs.h>

namespace okc {

// kTmaTileRows, kTmaTileK, kTmaConsumers, kTmaProducer (tma_gemv.py), the Reduce codes (engine.py): the prelude.
constexpr int kTmaHalfRows = 32;                          // half tiles: weight rows per CTA (and 128 of K per slot)
constexpr int kTmaWBytes = kTmaTileRows * kTmaTileK * 2;  // 8 KB of weights per slot (per matrix)
// The consumer warpgroups, then the producer warp.
__host__ __device__ constexpr int tma_threads(int wg) { return kTmaConsumers * wg + kTmaProducer; }

__host__ __device__ constexpr int tma_x_bytes(int nb) { return nb * 8 * kTmaTileK * 2; }
// cluster_scatter: rank r owns consumer threads [tma_owned_from(r, S), tma_owned_from(r + 1, S)); tma_owner(t, S)
// is the rank that owns thread t.
__host__ __device__ constexpr int tma_owned_from(int rank, int s) { return rank * kTmaConsumers / s; }
__host__ __device__ constexpr int tma_owner(int t, int s) { return ((t + 1) * s - 1) / kTmaConsumers; }

struct TmaArgs {
    const uint8_t* w;   // packing.pack_tma_bulk's [N/64][K/64] 8 KB blocks (half tiles: pack_tma_half_bulk's)
    const uint8_t* w2;  // the router's lo half (dual), else w again
    void* out;          // [M, N]: bf16, or fp32 in dual mode
    float* ws;          // split-K partials: [N/64][S][64 * 8 NB]
    float* acc;         // reduce = atomic: a zeroed fp32 accumulator, [N/64][64 * 8 NB]; left zeroed
    int* sem;           // arrival counter per 64-row tile; 0 between launches
    int M, N, K, S;
    Reduce reduce;  // S > 1: how the splits meet
};

// Consumer warpgroup g's own named barrier, by a switch: immediate ids (ring.cuh, NamedBarrier).
__device__ __forceinline__ void consumers_sync(int g = 0) {
    switch (g) {
        case 0: named_barrier_sync<kWarpgroupBarrier, kTmaConsumers>(); break;
        case 1: named_barrier_sync<kWarpgroupBarrier + 1, kTmaConsumers>(); break;
        case 2: named_barrier_sync<kWarpgroupBarrier + 2, kTmaConsumers>(); break;
        default: named_barrier_sync<kWarpgroupBarrier + 3, kTmaConsumers>(); break;
    }
}

// Accumulator element e of consumer thread t (wgmma's D layout): its row of the tile plus row0, and its token.
__device__ __forceinline__ void tma_element(int t, int e, int row0, int& row, int& token) {
    const int warp = t >> 5, lane = t & 31;
    row = row0 + warp * 16 + (lane >> 2) + ((e & 2) ? 8 : 0);
    token = (e >> 2) * 8 + (lane & 3) * 2 + (e & 1);
}

// Element e of thread t -> out[token, row0 + row] of an [M, N] output, for tokens < M.
template <typename Out>
__device__ __forceinline__ void store_element(Out* out, int M, int N, int row0, int t, int e, float v) {
    int row, token;
    tma_element(t, e, row0, row, token);
    if (token < M) store_out(out + (size_t)token * N + row, v);
}
template <typename Out>
__device__ __forceinline__ void tma_write(const TmaArgs& a, int row0, int t, int e, float v) {
    store_element(static_cast<Out*>(a.out), a.M, a.N, row0, t, e, v);
}

// epilogue = staged: the tile token-major through the idle ring, out in whole 128-byte token rows (tma_write's
// 2-byte stores took a CTA 3.6 us at m = 128: docs/tma-gemm.md).
constexpr int kStagedPitch = kTmaTileRows + 8;  // bf16 a staged token row: 144 bytes, 16-byte aligned, banks spread
template <int NB>
__device__ __forceinline__ void write_staged(const TmaArgs& a, uint8_t* ring, const float (&acc)[4 * NB], int row0,
                                             int t) {
    __nv_bfloat16* tile = reinterpret_cast<__nv_bfloat16*>(ring);  // [8 NB tokens][kStagedPitch]
#pragma unroll
    for (int e = 0; e < 4 * NB; ++e) {
        int row, token;
        tma_element(t, e, 0, row, token);
        tile[token * kStagedPitch + row] = __float2bfloat16_rn(acc[e]);
    }
    consumers_sync();
    __nv_bfloat16* out = static_cast<__nv_bfloat16*>(a.out);
    for (int c = t; c < 8 * NB * 8; c += kTmaConsumers) {  // 8 pieces of 16 bytes a token row of 64
        const int token = c >> 3, part = c & 7;
        if (token < a.M)
            *reinterpret_cast<uint4*>(out + (size_t)token * a.N + row0 + part * 8) =
                *reinterpret_cast<const uint4*>(tile + token * kStagedPitch + part * 8);
    }
}

// One CTA's stream through the ring: its slots, and the K tiles it streams. Warpgroup g reads weight block g of a
// slot (the 64-row tile Warpgroups x tile + g) and the slot's x.
template <int NB, int Stages, bool Dual, bool Half, int Warpgroups = 1>
struct TmaStream {
    static_assert(Warpgroups == 1 || !Half, "half tiles run one warpgroup");
    static_assert(NB <= 4 || NB == 8 || NB == 16 || NB == 32, "wgmma's N = 8 NB: 8 .. 32, 64, 128 or 256");
    static constexpr int kAcc = 4 * NB;                        // fp32 accumulators per consumer thread (per set)
    static constexpr int kWSet = kTmaWBytes * (Dual ? 2 : 1);  // one warpgroup's weight bytes in a slot
    static constexpr int kXOffset = kWSet * Warpgroups;        // x's box (two for half tiles) after the weights
    static constexpr int kStage = kXOffset + tma_x_bytes(NB) * (Half ? 2 : 1);  // bytes TMA lands in a slot
    static constexpr int kSlotK = kTmaTileK * (Half ? 2 : 1);                   // K one slot covers
    // wgmma groups left open before a slot goes back: half tiles carry twice the MMAs a slot (1-3 within 1 %).
    static constexpr int kInFlight = Half ? (Stages > 3 ? 3 : Stages - 1) : 1;

    uint8_t* slots;
    RingBarriers<Stages>& bars;
    const CUtensorMap* x_map;
    const TmaArgs& a;
    int tile, kt0, n_k;

    // Slot i's copies into ring slot s, counted on `full`; x rows past M count too (as zeros).
    __device__ __forceinline__ void issue(int i, int s, uint64_t* full) const {
        uint8_t* slot = slots + s * kStage;
        const int k_tiles = a.K / kSlotK;
        const int k0 = (kt0 + i) * kSlotK;
#pragma unroll
        for (int g = 0; g < Warpgroups; ++g) {  // packed: one 8 KB block per 64-row tile and K tile
            const size_t block = (size_t)((tile * Warpgroups + g) * k_tiles + kt0 + i) * kTmaWBytes;
            bulk_load_1d(slot + g * kWSet, a.w + block, kTmaWBytes, full);
            if constexpr (Dual) bulk_load_1d(slot + g * kWSet + kTmaWBytes, a.w2 + block, kTmaWBytes, full);
        }
        if constexpr (Half)  // both 64-wide K chunks of the slot in one copy (see tma_load_3d)
            tma_load_3d(slot + kXOffset, x_map, 0, 0, k0 / kTmaTileK, full);
        else
            tma_load_2d(slot + kXOffset, x_map, k0, 0, full);
    }

    // The producer's lane, before the CTA barrier: the first round leaves before it (1.4-2.0 % off o m = 16 / 32).
    __device__ __forceinline__ void start() const {
        prefetch_tensor_map(x_map);
        bars.init_full();
        for (int s = 0; s < Stages && s < n_k; ++s) issue(s, s, bars.arm(s, kStage));
        bars.init_empty(4 * Warpgroups);  // one arrival per consumer warp
    }

    // The producer's lane: the other rounds, slots unrolled (a test per slot cost the half tiles 1.5 us).
    __device__ __forceinline__ void produce() const {
        for (int round = 1; round * Stages < n_k; ++round) {
#pragma unroll
            for (int s = 0; s < Stages; ++s) {
                const int i = round * Stages + s;
                if (i >= n_k) break;
                issue(i, s, bars.acquire(s, round & 1, kStage));
            }
        }
    }

    // Warpgroup Warpgroup's wgmmas into acc, a round at a time, slots unrolled: every descriptor is slot 0's plus a
    // constant (~32 instructions a slot, from ~106); a template warpgroup keeps them uniform (a run-time one: 604
    // against 447 a round). Half tiles: acc[kAcc, 2 kAcc) meets x's second box.
    template <int Warpgroup = 0>
    __device__ __forceinline__ void consume(float (&acc)[(Half ? 2 : 1) * kAcc], int lane) const {
        const uint64_t w_desc0 = sw128_desc(smem_addr(slots) + Warpgroup * kWSet);
        const uint64_t x_desc0 = sw128_desc(smem_addr(slots) + kXOffset);
        uint32_t phase = 0;
        for (int round = 0; round * Stages < n_k; ++round, phase ^= 1) {
#pragma unroll
            for (int s = 0; s < Stages; ++s) {
                const int i = round * Stages + s;
                if (i >= n_k) break;
                bars.wait_full(s, phase);
                fence_regs(acc);
                wgmma_fence();
#pragma unroll
                for (int kk = 0; kk < kTmaTileK / 16; ++kk) {  // 16 k: 32 bytes of the 128-byte swizzled row
                    const uint32_t at = (s * kStage + kk * 32) / 16;
                    const uint64_t b = desc_plus(x_desc0, at);
                    if constexpr (Half) {  // both boxes as one B (0.7-2.4 % faster than a wgmma each)
                        wgmma_bf16<2 * NB>(acc, desc_plus(w_desc0, at), b);
                    } else {
                        wgmma_bf16<NB>(acc, desc_plus(w_desc0, at), b);
                        if constexpr (Dual) wgmma_bf16<NB>(acc, desc_plus(w_desc0, at + kTmaWBytes / 16), b);
                    }
                }
                wgmma_commit();
                fence_regs(acc);
                wgmma_wait<kInFlight>();  // slot i - kInFlight is read: back to the producer
                fence_regs(acc);
                if (i >= kInFlight && lane == 0) bars.release((s + Stages - kInFlight) % Stages);
            }
        }
        wgmma_wait<0>();
        fence_regs(acc);
    }
};

// consume<g> for a run-time g, uniform across each warp.
template <int Warpgroup, int Warpgroups, typename Stream, typename Acc>
__device__ __forceinline__ void consume_as(const Stream& stream, Acc& acc, int lane, int g) {
    if constexpr (Warpgroup + 1 >= Warpgroups) {
        stream.template consume<Warpgroup>(acc, lane);
    } else if (g == Warpgroup) {
        stream.template consume<Warpgroup>(acc, lane);
    } else {
        consume_as<Warpgroup + 1, Warpgroups>(stream, acc, lane, g);
    }
}

// Half tiles: row r of the 32 is box 1's result of warp r / 16 plus box 2's of warp 2 + r / 16; warps 2-3 hand
// theirs over through the idle ring.
template <int kAcc, typename Out>
__device__ __forceinline__ void finish_half(const TmaArgs& a, uint8_t* ring, const float (&acc)[2 * kAcc], int tile,
                                            int t, int warp) {
    float* fold = reinterpret_cast<float*>(ring);
    if (warp >= 2) {
#pragma unroll
        for (int e = 0; e < kAcc; ++e) fold[e * 64 + (t - 64)] = acc[kAcc + e];
    }
    consumers_sync();
    if (warp < 2) {
#pragma unroll
        for (int e = 0; e < kAcc; ++e) tma_write<Out>(a, tile * kTmaHalfRows, t, e, acc[e] + fold[e * 64 + t]);
    }
}

// A cluster split: thread t's accumulators meet on rank 0 (gather) or tma_owner(t) (scatter); the others push.
template <int kAcc, typename Out>
__device__ __forceinline__ void finish_cluster(const TmaArgs& a, float* inbox, uint64_t* inbox_full,
                                               const float (&acc)[kAcc], int tile, int t) {
    inbox_ready();
    const int rank = (int)cluster_rank();  // split `rank`: the cluster spans grid.y
    const bool scattered = a.reduce == Reduce::kClusterScatter;
    const int owner = scattered ? tma_owner(t, a.S) : 0;
    const int from = scattered ? tma_owned_from(owner, a.S) : 0;
    const int owned = scattered ? tma_owned_from(owner + 1, a.S) - from : kTmaConsumers;
    if (owner != rank) {  // the owner's inbox slots skip the owner
        const int slot = rank < owner ? rank : rank - 1;
        float* dst = inbox + ((size_t)slot * owned + (t - from)) * kAcc;  // thread-major: 16-byte pushes
#pragma unroll
        for (int e = 0; e < kAcc; e += 4)
            push_to_rank(owner, dst + e, inbox_full, acc[e], acc[e + 1], acc[e + 2], acc[e + 3]);
        return;
    }
    mbar_wait_cluster(inbox_full, 0);
    float sum[kAcc];
#pragma unroll
    for (int e = 0; e < kAcc; ++e) sum[e] = 0.f;
    for (int r = 0; r < a.S; ++r) {  // rank order: deterministic
        if (r == rank) {
#pragma unroll
            for (int e = 0; e < kAcc; ++e) sum[e] += acc[e];
            continue;
        }
        const int slot = r < rank ? r : r - 1;
        const float4* part = reinterpret_cast<const float4*>(inbox + ((size_t)slot * owned + (t - from)) * kAcc);
#pragma unroll
        for (int e = 0; e < kAcc; e += 4) {
            const float4 v = part[e / 4];
            sum[e] += v.x, sum[e + 1] += v.y, sum[e + 2] += v.z, sum[e + 3] += v.w;
        }
    }
#pragma unroll
    for (int e = 0; e < kAcc; ++e) tma_write<Out>(a, tile * kTmaTileRows, t, e, sum[e]);
}

// After a split's partial is published: true in the CTA that arrives last, once it has acquired the others'.
__device__ __forceinline__ bool arrived_last(const TmaArgs& a, int* is_last, int tile, int t, int g) {
    __threadfence();  // the partial is visible device-wide before this CTA counts itself in
    consumers_sync(g);
    if (t == 0) *is_last = atomicAdd(a.sem + tile, 1) == a.S - 1;
    consumers_sync(g);
    if (!*is_last) return false;
    __threadfence();  // acquire: the other CTAs' partials
    return true;
}

// The semaphore split: every CTA stores its partial; the last sums all S in split order and resets the counter.
template <int kAcc, typename Out>
__device__ __forceinline__ void finish_semaphore(const TmaArgs& a, const float (&acc)[kAcc], int* is_last, int tile,
                                                 int split, int t, int g = 0) {
    constexpr int kTile = kAcc * kTmaConsumers;  // floats in one partial tile, thread-major
    float* mine = a.ws + ((size_t)tile * a.S + split) * kTile;
#pragma unroll
    for (int e = 0; e < kAcc; ++e) __stcg(mine + e * kTmaConsumers + t, acc[e]);
    if (!arrived_last(a, is_last, tile, t, g)) return;
    const float* parts = a.ws + (size_t)tile * a.S * kTile + t;
    // A chunk of partials loaded before any is added (one L2 round trip each), kE accumulators at a time: 96 registers.
    constexpr int kE = kAcc > 32 ? 32 : kAcc;
    constexpr int kChunk = 64 / kE;
#pragma unroll
    for (int e0 = 0; e0 < kAcc; e0 += kE) {
        float sum[kE];
#pragma unroll
        for (int e = 0; e < kE; ++e) sum[e] = 0.f;
        int s = 0;
        for (; s + kChunk <= a.S; s += kChunk) {
            float v[kChunk][kE];
#pragma unroll
            for (int c = 0; c < kChunk; ++c)
#pragma unroll
                for (int e = 0; e < kE; ++e)
                    v[c][e] = __ldcg(parts + (size_t)(s + c) * kTile + (e0 + e) * kTmaConsumers);
#pragma unroll
            for (int c = 0; c < kChunk; ++c)
#pragma unroll
                for (int e = 0; e < kE; ++e) sum[e] += v[c][e];
        }
        for (; s < a.S; ++s)
#pragma unroll
            for (int e = 0; e < kE; ++e) sum[e] += __ldcg(parts + (size_t)s * kTile + (e0 + e) * kTmaConsumers);
#pragma unroll
        for (int e = 0; e < kE; ++e) tma_write<Out>(a, tile * kTmaTileRows, t, e0 + e, sum[e]);
    }
    if (t == 0) a.sem[tile] = 0;  // every CTA has arrived: ready for the next launch
}

// The atomic split: every CTA adds its partial into the zeroed accumulator (red.add.v4: f32 atomics flush outputs
// under 2^-126 to 0); the last writes the sum, zeroes it and resets the counter. Blocks past M stay zero.
template <int kAcc, typename Out>
__device__ __forceinline__ void finish_atomic(const TmaArgs& a, const float (&acc)[kAcc], int* is_last, int tile, int t,
                                              int g) {
    float4* mine = reinterpret_cast<float4*>(a.acc) + (size_t)tile * (kAcc / 4) * kTmaConsumers + t;
#pragma unroll
    for (int q = 0; q < kAcc / 4; ++q)
        if (8 * q < a.M)
            red_add_v4(reinterpret_cast<float*>(mine + q * kTmaConsumers), acc[4 * q], acc[4 * q + 1], acc[4 * q + 2],
                       acc[4 * q + 3]);
    if (!arrived_last(a, is_last, tile, t, g)) return;
    constexpr int kQ = kAcc / 4 > 8 ? 8 : kAcc / 4;  // float4s loaded before any is written: 32 registers
#pragma unroll
    for (int q0 = 0; q0 < kAcc / 4; q0 += kQ) {
        if (8 * q0 >= a.M) break;
        float4 v[kQ];
#pragma unroll
        for (int q = 0; q < kQ; ++q) v[q] = __ldcg(mine + (q0 + q) * kTmaConsumers);
#pragma unroll
        for (int q = 0; q < kQ; ++q) {
            __stcg(mine + (q0 + q) * kTmaConsumers, make_float4(0.f, 0.f, 0.f, 0.f));
            const int e = 4 * (q0 + q);
            tma_write<Out>(a, tile * kTmaTileRows, t, e, v[q].x);
            tma_write<Out>(a, tile * kTmaTileRows, t, e + 1, v[q].y);
            tma_write<Out>(a, tile * kTmaTileRows, t, e + 2, v[q].z);
            tma_write<Out>(a, tile * kTmaTileRows, t, e + 3, v[q].w);
        }
    }
    if (t == 0) a.sem[tile] = 0;  // every CTA has arrived: ready for the next launch
}

// A full tile's end (warpgroup g's 64-row tile tile64): the plain write, or the split's reduction.
template <int NB, int Warpgroups, typename Out, bool Staged, int kAcc>
__device__ __forceinline__ void finish_full(const TmaArgs& a, uint8_t* slots, float* inbox, uint64_t* inbox_full,
                                            int* is_last, const float (&acc)[kAcc], int tile, int tile64, int split,
                                            int t, int g, bool cluster) {
    if (a.S == 1) {
        if constexpr (Staged) {
            write_staged<NB>(a, slots, acc, tile64 * kTmaTileRows, t);
        } else {
#pragma unroll
            for (int e = 0; e < kAcc; ++e) tma_write<Out>(a, tile64 * kTmaTileRows, t, e, acc[e]);
        }
    } else if (a.reduce == Reduce::kAtomic) {
        finish_atomic<kAcc, Out>(a, acc, &is_last[g], tile64, t, g);
    } else if (cluster) {
        if constexpr (Warpgroups == 1 && NB <= 4)
            finish_cluster<kAcc, Out>(a, inbox, inbox_full, acc, tile, t);
        else
            __trap();  // the launcher asserts the clusters are the GEMV's
    } else {
        finish_semaphore<kAcc, Out>(a, acc, &is_last[g], tile64, split, t, g);
    }
}

// At kernel start, a cluster split: this rank's inbox, for S - 1 partials of the threads it owns.
template <int kAcc>
__device__ __forceinline__ void open_tma_inbox(const TmaArgs& a, uint64_t* inbox_full) {
    const int rank = (int)cluster_rank();
    const int owned = a.reduce == Reduce::kClusterScatter ? tma_owned_from(rank + 1, a.S) - tma_owned_from(rank, a.S)
                                                          : (rank == 0 ? kTmaConsumers : 0);
    open_inbox(inbox_full, (uint32_t)((a.S - 1) * owned * kAcc * sizeof(float)));
}

template <int NB, int Stages, bool Dual, bool Half, int Warpgroups, typename Out, bool Staged>
__global__ void __launch_bounds__(tma_threads(Warpgroups), 1)
    tma_kernel(const __grid_constant__ CUtensorMap x_map, const TmaArgs a) {
    static_assert(!(Half && Dual), "half tiles are for plain bf16 weights");
    static_assert(!Staged || (Warpgroups == 1 && !Dual && !Half && NB >= 8),
                  "the staged write: the GEMM's, one warpgroup, bf16");
    using Stream = TmaStream<NB, Stages, Dual, Half, Warpgroups>;
    static_assert(!Staged || 8 * NB * kStagedPitch * 2 <= Stages * Stream::kStage, "the staged tile fits the ring");
    constexpr int kAcc = Stream::kAcc;
    extern __shared__ uint8_t smem_raw[];
    __shared__ RingBarriers<Stages> bars;
    __shared__ int is_last[Warpgroups];
    __shared__ __align__(8) uint64_t inbox_full;
    uint8_t* slots = smem_raw + ((1024 - (smem_addr(smem_raw) & 1023)) & 1023);
    float* inbox = reinterpret_cast<float*>(slots + Stages * Stream::kStage);  // clusters: [S - 1][owned][kAcc]

    const int tile = blockIdx.x, split = blockIdx.y;
    const int k_tiles = a.K / Stream::kSlotK;                 // slots of a tile's whole K
    const int kt0 = (int)((long long)split * k_tiles / a.S);  // uneven splits differ by at most one K tile
    const int n_k = (int)((long long)(split + 1) * k_tiles / a.S) - kt0;
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    const Stream stream{slots, bars, &x_map, a, tile, kt0, n_k};

    const bool cluster = a.S > 1 && (a.reduce == Reduce::kClusterGather || a.reduce == Reduce::kClusterScatter);

    if (threadIdx.x == kTmaConsumers * Warpgroups) stream.start();
    if (cluster) open_tma_inbox<kAcc>(a, &inbox_full);
    __syncthreads();

    float acc[(Half ? 2 : 1) * kAcc];
#pragma unroll
    for (int e = 0; e < (Half ? 2 : 1) * kAcc; ++e) acc[e] = 0.f;
    if (warp == Warpgroups * kTmaConsumers / 32) {  // the producer warp: one lane issues every copy
        if (lane == 0) stream.produce();
        __syncwarp();
        if (cluster) inbox_ready();  // every thread of a cluster waits once
        return;
    }
    const int g = warp / 4;  // this thread's warpgroup
    consume_as<0, Warpgroups>(stream, acc, lane, g);

    const int t = threadIdx.x % kTmaConsumers, tile64 = tile * Warpgroups + g;
    if constexpr (Half)
        finish_half<kAcc, Out>(a, slots, acc, tile, t, warp);
    else
        finish_full<NB, Warpgroups, Out, Staged>(a, slots, inbox, &inbox_full, is_last, acc, tile, tile64, split, t, g,
                                                 cluster);
}

// ---- Host side: x's tensor map, then the launcher.

// cuTensorMapEncodeTiled is a driver-API function: fetched through the runtime, so nothing links libcuda.
inline PFN_cuTensorMapEncodeTiled_v12000 tensor_map_encoder(const char** error) {
    static PFN_cuTensorMapEncodeTiled_v12000 encode = nullptr;
    if (encode == nullptr) {
        void* fn = nullptr;
        cudaDriverEntryPointQueryResult found;
        const cudaError_t err =
            cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &fn, 12000, cudaEnableDefault, &found);
        if (err != cudaSuccess || found != cudaDriverEntryPointSuccess || fn == nullptr) {
            *error = "cuTensorMapEncodeTiled is not available from the driver";
            return nullptr;
        }
        encode = reinterpret_cast<PFN_cuTensorMapEncodeTiled_v12000>(fn);
    }
    return encode;
}

// A [rows, K] bf16 matrix in boxes of box_rows x 64, 128-byte swizzled, rows past the end zero; k_chunks = 2 (half
// tiles): 3-D, [K/64][rows][64], so a slot's two boxes land in one copy.
inline const char* bf16_rows_map(CUtensorMap* map, const void* base, int rows, int K, int box_rows, int k_chunks) {
    const char* error = nullptr;
    auto encode = tensor_map_encoder(&error);
    if (encode == nullptr) return error;
    const cuuint64_t dims[3] = {(cuuint64_t)kTmaTileK, (cuuint64_t)rows, (cuuint64_t)(K / kTmaTileK)};
    const cuuint64_t strides[2] = {(cuuint64_t)K * 2, (cuuint64_t)kTmaTileK * 2};  // bytes between rows, chunks
    const cuuint32_t box[3] = {(cuuint32_t)kTmaTileK, (cuuint32_t)box_rows, (cuuint32_t)k_chunks};
    const cuuint32_t steps[3] = {1, 1, 1};
    // 2-D: [rows, K] itself, boxes of box_rows x 64.
    const cuuint64_t dims2[2] = {(cuuint64_t)K, (cuuint64_t)rows};
    const cuuint32_t box2[2] = {(cuuint32_t)kTmaTileK, (cuuint32_t)box_rows};
    const bool flat = k_chunks == 1;
    const CUresult r =
        encode(map, CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, flat ? 2 : 3, const_cast<void*>(base), flat ? dims2 : dims,
               strides, flat ? box2 : box, steps, CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B,
               CU_TENSOR_MAP_L2_PROMOTION_L2_256B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
    return r == CUDA_SUCCESS ? nullptr : "cuTensorMapEncodeTiled rejected the tensor";
}

template <typename L>
constexpr bool tma_cluster() {
    return L::splits > 1 && (L::reduce == Reduce::kClusterGather || L::reduce == Reduce::kClusterScatter);
}

// Whether case L's layout fits the shared memory its engine's rule gives it: the ring (+1 KB to align it), then
// for a cluster split the inbox, S - 1 partials of the most consumer threads a rank owns.
template <typename L>
constexpr bool tma_layout_fits() {
    int owned = tma_cluster<L>() && L::reduce == Reduce::kClusterGather ? kTmaConsumers : 0;  // threads a rank owns
    for (int rank = 0; tma_cluster<L>() && L::reduce == Reduce::kClusterScatter && rank < L::splits; ++rank) {
        const int share = tma_owned_from(rank + 1, L::splits) - tma_owned_from(rank, L::splits);
        owned = share > owned ? share : owned;
    }
    const int ring = L::stages * TmaStream<L::NB, L::stages, L::dual, L::half, L::warpgroups>::kStage + 1024;
    return ring + (L::splits - 1) * owned * 4 * L::NB * 4 <= L::smem_bytes && L::smem_bytes <= (int)kSmemOptInLimit;
}

// Launch-table case L (generator/launch_table.py: the engine's variant(), by name). call.operand[0] = the packed tiles
// (dual: hi), [1] = the lo tiles (dual) or the tiles again, [2] = the zeroed accumulator (atomic).
template <typename L>
const char* launch_tma(const Call& c) {
    constexpr bool cluster = tma_cluster<L>();
    static_assert(tma_layout_fits<L>(), "the ring and the cluster inbox fit the engine's shared memory");
    static_assert(!cluster || (L::warpgroups == 1 && L::NB <= 4), "the cluster reductions are the GEMV's");
    static_assert(!L::staged || L::splits == 1, "the staged write is the plain one's (splits = 1)");
    if (c.M < 1 || c.M > 8 * L::NB) return "tma_gemv: M does not fit this kernel's column blocks";
    if (L::reduce == Reduce::kAtomic && c.operand[2] == nullptr) return "tma_gemv: reduce=atomic needs its accumulator";
    if (c.N % (kTmaTileRows * L::warpgroups)) return "tma_gemv: N is not a multiple of the CTA's rows";
    CUtensorMap x_map;
    const char* err = bf16_rows_map(&x_map, c.x, c.M, c.K, L::NB * 8, L::half ? 2 : 1);
    if (err != nullptr) return err;
    const TmaArgs a{static_cast<const uint8_t*>(c.operand[0]),
                    static_cast<const uint8_t*>(c.operand[1]),
                    c.out,
                    c.ws,
                    static_cast<float*>(const_cast<void*>(c.operand[2])),
                    c.sem,
                    c.M,
                    c.N,
                    c.K,
                    L::splits,
                    L::reduce};
    auto kernel = tma_kernel<L::NB, L::stages, L::dual, L::half, L::warpgroups, typename L::out, L::staged>;
    return launch_splits(kernel, dim3(c.N / (L::half ? kTmaHalfRows : kTmaTileRows * L::warpgroups), L::splits),
                         dim3(tma_threads(L::warpgroups)), (size_t)L::smem_bytes, static_cast<cudaStream_t>(c.stream),
                         cluster, x_map, a);
}

}  // namespace okc
