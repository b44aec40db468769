// Persistent warp-specialized GEMM (engine persistent_gemm): out[M, N] = x[M, K] . W[N, K]^T, weights as wgmma's A
// (`rows` a tile, packed 8 KB tiles by bulk copy), x as its B (`tokens` a tile, by TMA). A CTA per SM walks its
// share of the (tile, k-block) space: whole tiles first, then an equal split of a remaining tile (split-K). Two
// producer lanes feed the ring, two consumer warpgroups multiply, and write a whole tile through shared memory or
// store their partial; a split tile's CTAs then each sum a share of its partials and write it out.
// Docs: docs/persistent-gemm.md.
#pragma once
#include "ring.cuh"
#include "tma_gemv.cuh"  // bf16_rows_map
#include "generated/constants.h"

namespace okc {

constexpr int kGemmConsumers = 2;  // consumer warpgroups; the producer is warpgroup 0
constexpr int kGemmThreads = 128 * (1 + kGemmConsumers);

struct GemmArgs {
    const uint8_t* w;   // packing.pack_tma_bulk tiles: [N/64][K/64] pre-swizzled 8 KB blocks
    const uint8_t* w2;  // the router's lo tiles (dual), else w
    void* out;          // [M, N] of the layer's output type
    float* ws;          // the split tiles' partials: [CTA][warpgroup][S::kPartial float4] fp32
    long long* stamps;  // probe-gemm's phase stamps (OKC_GEMM_STAMPS) past the partials, else unused
    int* sem;           // arrivals and departures per split tile and warpgroup; 0 between launches
    int M, N, K, ctas;
};

// Phase stamps for `probe-gemm --phases` (which defines OKC_GEMM_STAMPS; the shipped build compiles them out): the
// global timer (ns) of consumer warpgroup G at each phase, 8 a warpgroup, in the workspace. generator/probes/gemm.py
// reads them.
#ifndef OKC_GEMM_STAMPS
#define OKC_GEMM_STAMPS 0
#endif
// The producer lanes' pause after their first slot, in SM clocks (probe-gemm --define sets it; 0: none), so that
// every CTA's first slot is asked for ahead of the rest of the rings.
#ifndef OKC_GEMM_FIRST_GAP
#define OKC_GEMM_FIRST_GAP 0
#endif
enum GemmPhase { kStampEntry, kStampFirstSlot, kStampMainloops, kStampUnits, kStampArrived, kStampExit };
__device__ __forceinline__ void gemm_stamp(const GemmArgs& a, int g, int phase) {
    if constexpr (OKC_GEMM_STAMPS) {
        long long now;
        asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(now));
        a.stamps[(blockIdx.x * kGemmConsumers + g) * 8 + phase] = now;
    }
}

template <int Rows, int Tokens, int Stages, bool Dual, typename Out>
struct GemmShape {
    static constexpr int kRows = Rows, kTokens = Tokens, kStages = Stages;
    static constexpr bool kDual = Dual;
    using OutT = Out;
    static constexpr int kRowsPerGroup = Rows / kGemmConsumers;  // a consumer warpgroup's rows: 64 or 128
    static constexpr int kBlocks = kRowsPerGroup / 64;           // its m64 wgmmas per k16 step
    static constexpr int kNB = Tokens / 8;                       // 8-token blocks: wgmma N = Tokens
    static constexpr int kAcc = 4 * kNB;                         // fp32 accumulators a thread per m64 block
    static constexpr int kWBytes = Rows / kTmaTileRows * kTmaWBytes;
    static constexpr int kXOffset = kWBytes * (Dual ? 2 : 1);
    static constexpr int kXBytes = Tokens * kTmaTileK * 2;
    static constexpr int kStage = kXOffset + kXBytes;
    static constexpr int kOutBytes = sizeof(Out);
    static constexpr int kChunk = kGemmStagedBytes / (kRowsPerGroup * kOutBytes);  // tokens staged at a time
    static constexpr int kStagePitch = kRowsPerGroup + 16 / kOutBytes;  // a staged token row (+16 bytes: banks)
    static constexpr int kStageOut = kChunk * kStagePitch * kOutBytes;  // a warpgroup's staging bytes
    static constexpr int kPartial = kBlocks * kNB * 128;                // float4s of a warpgroup's partial tile
    static constexpr int kShareBlocks = kNB / 2;  // token blocks of a split tile's share at most (>= 2 CTAs)
    static constexpr int kGatherBytes = Stages * kStage / kGemmConsumers;  // a warpgroup's half of the idle ring
    static constexpr int kSmem = Stages * kStage + kGemmConsumers * kStageOut + 1024;  // +1 KB: swizzle alignment
    static_assert(kBlocks * kAcc <= kGemmMaxAccumulators, "a consumer thread's accumulators fit its registers");
    static_assert(kSmem <= (int)kSmemOptInLimit, "the ring and the staging fit shared memory");
    static_assert(2 * kBlocks * kShareBlocks * 128 * 16 <= kGatherBytes, "the own share and one other's fit");
};

// A CTA's work, unit by unit: k-blocks [k_begin, k_end) of one tile. CTA c takes whole tiles c, c + ctas, ... for
// as many full waves as there are, then its even share of the remaining tiles' k-blocks, cut at tile edges (the
// rule makes the CTAs a multiple of those tiles: each is split over its own equal group of CTAs, one unit each).
struct GemmUnit {
    int tile, k_begin, k_end;
};

struct GemmSchedule {
    int k_blocks, ctas, cta, whole_waves, whole_tiles, next_wave;
    long long rest, at, end;  // the k-blocks past the whole tiles; this CTA's range of them

    __device__ __forceinline__ GemmSchedule(int tiles, int k_blocks_, int ctas_, int cta_)
        : k_blocks(k_blocks_), ctas(ctas_), cta(cta_), whole_waves(tiles / ctas_), next_wave(0) {
        whole_tiles = whole_waves * ctas;
        rest = (long long)(tiles - whole_tiles) * k_blocks;
        at = begin_of(cta), end = begin_of(cta + 1);
    }
    // Where CTA c's range begins, and which CTA's range holds k-block p (each holds >= 1: the rule).
    __device__ __forceinline__ long long begin_of(int c) const { return rest * c / ctas; }
    __device__ __forceinline__ int owner(long long p) const { return (int)(((p + 1) * ctas + rest - 1) / rest) - 1; }
    __device__ __forceinline__ bool next(GemmUnit& u) {
        if (next_wave < whole_waves) {
            u = GemmUnit{cta + ctas * next_wave++, 0, k_blocks};
            return true;
        }
        if (at >= end) return false;
        const int in_tile = (int)(at % k_blocks);
        const int len = (int)min((long long)(k_blocks - in_tile), end - at);
        u = GemmUnit{whole_tiles + (int)(at / k_blocks), in_tile, in_tile + len};
        at += len;
        return true;
    }
};

// Phase 1, two producer lanes in two warps (one issuer took in ~60 GB/s a SM, docs/persistent-gemm.md): lane 0 of
// warp 0 announces each slot's bytes and copies its weight tiles, lane 0 of warp 1 copies its x box (the
// barrier's pending arrival keeps the slot from completing before the announcement, whichever lands first).
template <class S, bool WEIGHTS>
__device__ __forceinline__ void gemm_produce(RingBarriers<S::kStages>& ring, uint8_t* slots, const CUtensorMap* x_map,
                                             const GemmArgs& a, int row_tiles) {
    const int k_blocks = a.K / kTmaTileK;
    // x is read by every row tile (kept); W once where one token tile covers M (let go), else by each token tile
    const uint64_t policy = !WEIGHTS ? l2_evict_last() : a.M <= S::kTokens ? l2_evict_first() : l2_evict_normal();
    GemmSchedule schedule(row_tiles * ((a.M + S::kTokens - 1) / S::kTokens), k_blocks, a.ctas, blockIdx.x);
    RingCursor<S::kStages> cursor;
    GemmUnit u;
    while (schedule.next(u)) {
        const int row64 = (u.tile % row_tiles) * S::kRows / 64, token0 = (u.tile / row_tiles) * S::kTokens;
        for (int kb = u.k_begin; kb < u.k_end; ++kb, cursor.advance()) {
            uint8_t* slot = slots + cursor.slot * S::kStage;
            if constexpr (WEIGHTS) {
                uint64_t* full = ring.acquire(cursor.slot, cursor.phase, S::kStage);  // x rows past M land as zeros
#pragma unroll
                for (int r = 0; r < S::kRows / 64; ++r) {
                    const size_t tile = ((size_t)(row64 + r) * k_blocks + kb) * kTmaWBytes;
                    bulk_load_1d_hint(slot + r * kTmaWBytes, a.w + tile, kTmaWBytes, full, policy);
                    if constexpr (S::kDual)
                        bulk_load_1d_hint(slot + S::kWBytes + r * kTmaWBytes, a.w2 + tile, kTmaWBytes, full, policy);
                }
            } else {
                ring.wait_free(cursor.slot, cursor.phase);
                tma_load_2d_hint(slot + S::kXOffset, x_map, kb * kTmaTileK, token0, &ring.full[cursor.slot], policy);
            }
            if (OKC_GEMM_FIRST_GAP && kb == u.k_begin && cursor.slot == 0 && cursor.phase == 0)
                for (const long long t0 = clock64(); clock64() - t0 < OKC_GEMM_FIRST_GAP;) {
                }
        }
    }
}

// Phase 2 (a consumer warpgroup): one unit's k-blocks into acc, one slot's wgmmas in flight while the next lands.
template <class S, int G>
__device__ __forceinline__ void gemm_mainloop(RingBarriers<S::kStages>& ring, RingCursor<S::kStages>& cursor,
                                              uint8_t* slots, const GemmUnit& u, float (&acc)[S::kBlocks][S::kAcc],
                                              int lane) {
#pragma unroll
    for (int b = 0; b < S::kBlocks; ++b)
#pragma unroll
        for (int e = 0; e < S::kAcc; ++e) acc[b][e] = 0.f;
    const uint64_t w_desc0 = sw128_desc(smem_addr(slots) + G * S::kRowsPerGroup * 128);
    const uint64_t x_desc0 = sw128_desc(smem_addr(slots) + S::kXOffset);
    int held = -1;  // the slot whose wgmmas are in flight
    for (int kb = u.k_begin; kb < u.k_end; ++kb, cursor.advance()) {
        ring.wait_full(cursor.slot, cursor.phase);
        const uint32_t slot = cursor.slot * (S::kStage / 16);
#pragma unroll
        for (int b = 0; b < S::kBlocks; ++b) fence_regs(acc[b]);
        wgmma_fence();
#pragma unroll
        for (int kk = 0; kk < kTmaTileK / 16; ++kk) {  // 16 k = 32 bytes along the swizzled row
            const uint64_t x = desc_plus(x_desc0, slot + kk * 2);
#pragma unroll
            for (int b = 0; b < S::kBlocks; ++b) {
                const uint32_t w = slot + b * kTmaWBytes / 16 + kk * 2;
                wgmma_bf16<S::kNB>(acc[b], desc_plus(w_desc0, w), x);
                if constexpr (S::kDual) wgmma_bf16<S::kNB>(acc[b], desc_plus(w_desc0, w + S::kWBytes / 16), x);
            }
        }
        wgmma_commit();
        wgmma_wait<1>();
        if (held >= 0 && lane == 0) ring.release(held);
        held = cursor.slot;
    }
    wgmma_wait<0>();
#pragma unroll
    for (int b = 0; b < S::kBlocks; ++b) fence_regs(acc[b]);
    if (held >= 0 && lane == 0) ring.release(held);
}

// Accumulator e of m64 block b of consumer thread t (0..127) in the wgmma D layout: its row of the warpgroup's
// rows and its token among the 8-token blocks the accumulators cover.
__device__ __forceinline__ int gemm_row(int t, int b, int e) {
    return b * 64 + (t >> 5) * 16 + ((t & 31) >> 2) + ((e & 2) ? 8 : 0);
}
__device__ __forceinline__ int gemm_token(int t, int e) { return (e >> 2) * 8 + (t & 3) * 2 + (e & 1); }

// Phase 3a: the warpgroup's rows x the first `blocks` 8-token blocks of v (tokens token0 ..), S::kChunk tokens at a
// time through its staging buffer, out in whole 16-byte pieces of token rows.
template <class S, int G, int NB>
__device__ __forceinline__ void gemm_write(const GemmArgs& a, uint8_t* staging, int row0, int token0,
                                           const float (&v)[S::kBlocks][4 * NB], int blocks, int t) {
    using OutT = typename S::OutT;
    constexpr int kPieces = S::kRowsPerGroup * S::kOutBytes / 16;  // 16-byte pieces a staged token row
    constexpr int kChunks = (8 * NB + S::kChunk - 1) / S::kChunk;
    OutT* stage = reinterpret_cast<OutT*>(staging);
    OutT* out = static_cast<OutT*>(a.out);
    const int tokens = min(8 * blocks, a.M - token0);
#pragma unroll
    for (int chunk = 0; chunk < kChunks; ++chunk) {
        if (chunk * S::kChunk >= tokens) break;  // uniform: every thread skips the chunk's barriers
#pragma unroll
        for (int b = 0; b < S::kBlocks; ++b)
#pragma unroll
            for (int i = 0; i < S::kChunk / 2 && chunk * S::kChunk / 2 + i < 4 * NB; ++i) {
                const int e = chunk * S::kChunk / 2 + i;  // a chunk's accumulators: S::kChunk / 8 blocks of 4
                store_out(stage + (gemm_token(t, e) - chunk * S::kChunk) * S::kStagePitch + gemm_row(t, b, e), v[b][e]);
            }
        named_barrier_sync<kWarpgroupBarrier + G, 128>();
        for (int c = t; c < S::kChunk * kPieces; c += 128) {
            const int token = chunk * S::kChunk + c / kPieces, piece = c % kPieces * 16 / S::kOutBytes;
            if (token < tokens)
                *reinterpret_cast<uint4*>(out + (size_t)(token0 + token) * a.N + row0 + piece) =
                    *reinterpret_cast<const uint4*>(stage + (c / kPieces) * S::kStagePitch + piece);
        }
        named_barrier_sync<kWarpgroupBarrier + G, 128>();  // the staging is free again
    }
}

// A split tile's share of participant `share` of `count`: its 8-token blocks [first, first + blocks).
struct GemmShare {
    int first, blocks;
    template <int NB>
    __device__ __forceinline__ static GemmShare of(int share, int count) {
        const int first = NB * share / count;
        return GemmShare{first, NB * (share + 1) / count - first};
    }
    __device__ __forceinline__ bool holds(int block) const { return block >= first && block < first + blocks; }
};

// Phase 3b, a split tile's unit (a CTA's last: the rule splits the tiles past the full waves over equal groups of
// CTAs): its partial into the CTA's workspace slot, thread-major so a warp stores 512 contiguous bytes, but for the
// blocks of its own share, which never leave the SM (1/S of the store and of the gather); then counted in. (Bulk
// adds into one fp32 sum a tile took 1.4-4.3 us longer: docs/persistent-gemm.md, The split-K tail.)
template <class S, int G>
__device__ __forceinline__ void gemm_store_partial(float4* slot, int* arrivals, const float (&acc)[S::kBlocks][S::kAcc],
                                                   GemmShare own, int t) {
#pragma unroll
    for (int b = 0; b < S::kBlocks; ++b)
#pragma unroll
        for (int j = 0; j < S::kNB; ++j)
            if (!own.holds(j))
                __stcg(slot + (b * S::kNB + j) * 128 + t,
                       make_float4(acc[b][4 * j], acc[b][4 * j + 1], acc[b][4 * j + 2], acc[b][4 * j + 3]));
    asm volatile("fence.proxy.async.global;" ::: "memory");  // visible to the bulk copies that will read it
    named_barrier_sync<kWarpgroupBarrier + G, 128>();
    // One release by thread 0 covers the warpgroup's stores, ordered before it by the barrier: a __threadfence in
    // every thread (MEMBAR.SC.GPU) made the store phase 2.31 us at qkv_gate m = 128, this 1.94
    if (t == 0) asm volatile("red.release.gpu.global.add.s32 [%0], 1;" ::"l"(arrivals) : "memory");
}

// The own share, kept: thread-major at the head of this warpgroup's half of the ring, once both consumer warpgroups
// are done with it. Each thread reads back only what it wrote, so no barrier stands between.
template <class S>
__device__ __forceinline__ void gemm_keep_share(float4* kept, const float (&acc)[S::kBlocks][S::kAcc], GemmShare own,
                                                int t) {
#pragma unroll
    for (int b = 0; b < S::kBlocks; ++b)
#pragma unroll
        for (int j = 0; j < S::kNB; ++j)
            if (own.holds(j))
                kept[(b * own.blocks + j - own.first) * 128 + t] =
                    make_float4(acc[b][4 * j], acc[b][4 * j + 1], acc[b][4 * j + 2], acc[b][4 * j + 3]);
}

__device__ __forceinline__ int load_acquire(const int* p) {
    int v;
    asm volatile("ld.acquire.gpu.global.s32 %0, [%1];" : "=r"(v) : "l"(p) : "memory");
    return v;
}

// Phase 4, once the tile's `count` CTAs have all stored theirs: the own share (kept at the buffer's head) plus the
// same token blocks of every other participant's partial, which come into the rest of this warpgroup's half of the
// idle ring by bulk copies, as many participants a round as fit (one L2 round trip each; loads one by one took
// o m = 128 from 13 to 26 us), summed own first, then in participant order (deterministic), and written out. The
// last to leave resets the tile's counters.
template <class S, int G>
__device__ __forceinline__ void gemm_gather_share(const GemmArgs& a, const float4* parts, int* arrivals, int share,
                                                  int count, uint8_t* buffer, uint64_t* bar, int row0, int token0,
                                                  uint8_t* staging, int t) {
    const GemmShare own = GemmShare::of<S::kNB>(share, count);
    const int slice = own.blocks * 128 * 16;  // bytes of one participant's m64 block of the share
    const int batch = own.blocks ? max(1, (S::kGatherBytes - slice * S::kBlocks) / (slice * S::kBlocks)) : count;
    if (t == 0) {
        while (load_acquire(arrivals) < count) __nanosleep(32);
        asm volatile("fence.proxy.async.global;" ::: "memory");  // the bulk copies read what was acquired
        if (OKC_GEMM_STAMPS) gemm_stamp(a, G, kStampArrived);
    }
    named_barrier_sync<kWarpgroupBarrier + G, 128>();
    float sum[S::kBlocks][4 * S::kShareBlocks];
    const float4* kept = reinterpret_cast<const float4*>(buffer) + t;
#pragma unroll
    for (int b = 0; b < S::kBlocks; ++b)
#pragma unroll
        for (int j = 0; j < S::kShareBlocks; ++j) {
            const float4 v = j < own.blocks ? kept[(b * own.blocks + j) * 128] : make_float4(0.f, 0.f, 0.f, 0.f);
            sum[b][4 * j] = v.x, sum[b][4 * j + 1] = v.y, sum[b][4 * j + 2] = v.z, sum[b][4 * j + 3] = v.w;
        }
    uint8_t* others = buffer + slice * S::kBlocks;
    uint32_t phase = 0;
    for (int c0 = 0; c0 < count - 1 && own.blocks; c0 += batch) {  // c: the others, participant `share` skipped
        const int n = min(batch, count - 1 - c0);
        if (t == 0) {
            mbar_arrive_expect_tx(bar, n * S::kBlocks * slice);
            for (int c = c0; c < c0 + n; ++c)
                for (int b = 0; b < S::kBlocks; ++b)
                    bulk_load_1d(others + ((c - c0) * S::kBlocks + b) * slice,
                                 parts + (size_t)(c + (c >= share)) * kGemmConsumers * S::kPartial +
                                     (b * S::kNB + own.first) * 128,
                                 slice, bar);
        }
        mbar_wait(bar, phase);
        phase ^= 1;
        const float4* got = reinterpret_cast<const float4*>(others) + t;
        for (int c = 0; c < n; ++c)
#pragma unroll
            for (int b = 0; b < S::kBlocks; ++b)
#pragma unroll
                for (int j = 0; j < S::kShareBlocks; ++j)
                    if (j < own.blocks) {
                        const float4 v = got[((c * S::kBlocks + b) * own.blocks + j) * 128];
                        sum[b][4 * j] += v.x, sum[b][4 * j + 1] += v.y, sum[b][4 * j + 2] += v.z,
                            sum[b][4 * j + 3] += v.w;
                    }
        named_barrier_sync<kWarpgroupBarrier + G, 128>();  // the buffer is free for the next participants
    }
    gemm_write<S, G, S::kShareBlocks>(a, staging, row0, token0 + 8 * own.first, sum, own.blocks, t);
    if (t == 0 && atomicAdd(arrivals + 1, 1) == count - 1) arrivals[0] = 0, arrivals[1] = 0;
}

// A split tile's unit, for consumer warpgroup G: its CTAs owner(first k-block) .. owner(last), one unit each, and
// where their partials (the first participant's slot; the others' follow a CTA apart) and the tile's counters lie.
template <class S, int G>
struct GemmSplit {
    int share, count, row0, token0;
    float4* parts;
    int* arrivals;
    __device__ __forceinline__ GemmSplit(const GemmArgs& a, const GemmSchedule& schedule, const GemmUnit& u,
                                         int row_tiles) {
        const int tile = u.tile - schedule.whole_tiles;
        const long long k0 = (long long)tile * schedule.k_blocks;
        const int first = schedule.owner(k0);
        share = schedule.cta - first, count = schedule.owner(k0 + schedule.k_blocks - 1) - first + 1;
        row0 = (u.tile % row_tiles) * S::kRows + G * S::kRowsPerGroup, token0 = (u.tile / row_tiles) * S::kTokens;
        parts = reinterpret_cast<float4*>(a.ws) + (size_t)(first * kGemmConsumers + G) * S::kPartial;
        arrivals = a.sem + (tile * kGemmConsumers + G) * 2;
    }
};

// A consumer warpgroup's whole run: each unit's mainloop, then its write (a whole tile) or, for a split tile (the
// CTA's last unit), its partial's store; then, the ring idle, its share of the split tile (after the loop: the
// accumulators are dead by then, and 128 of them a thread leave no room for both).
template <class S, int G>
__device__ __forceinline__ void gemm_consume(RingBarriers<S::kStages>& ring, uint8_t* slots, uint8_t* staging,
                                             uint64_t* gather_bar, const GemmArgs& a, int row_tiles) {
    const int t = threadIdx.x % 128, lane = threadIdx.x % 32;
    const int k_blocks = a.K / kTmaTileK;
    GemmSchedule schedule(row_tiles * ((a.M + S::kTokens - 1) / S::kTokens), k_blocks, a.ctas, blockIdx.x);
    RingCursor<S::kStages> cursor;
    float acc[S::kBlocks][S::kAcc];
    const bool stamp = OKC_GEMM_STAMPS && t == 0;
    if (stamp) gemm_stamp(a, G, kStampEntry), ring.wait_full(0, 0), gemm_stamp(a, G, kStampFirstSlot);
    GemmUnit u, split_unit{-1, 0, 0};
    while (schedule.next(u)) {
        gemm_mainloop<S, G>(ring, cursor, slots, u, acc, lane);
        if (stamp) gemm_stamp(a, G, kStampMainloops);  // the last stamp stands: the last unit's
        if (u.k_begin > 0 || u.k_end < k_blocks) {
            const GemmSplit<S, G> split(a, schedule, u, row_tiles);
            split_unit = u;
            const GemmShare own = GemmShare::of<S::kNB>(split.share, split.count);
            gemm_store_partial<S, G>(split.parts + (size_t)split.share * kGemmConsumers * S::kPartial, split.arrivals,
                                     acc, own, t);
            named_barrier_sync<kConsumersBarrier, 128 * kGemmConsumers>();  // both warpgroups are done with the ring
            gemm_keep_share<S>(reinterpret_cast<float4*>(slots + G * S::kGatherBytes), acc, own, t);
        } else {
            gemm_write<S, G, S::kNB>(a, staging, (u.tile % row_tiles) * S::kRows + G * S::kRowsPerGroup,
                                     (u.tile / row_tiles) * S::kTokens, acc, S::kNB, t);
        }
    }
    if (stamp) gemm_stamp(a, G, kStampUnits);
    if (split_unit.tile >= 0) {
        const GemmSplit<S, G> s(a, schedule, split_unit, row_tiles);
        gemm_gather_share<S, G>(a, s.parts, s.arrivals, s.share, s.count, slots + G * S::kGatherBytes, gather_bar,
                                s.row0, s.token0, staging, t);
    } else if (stamp) {
        gemm_stamp(a, G, kStampArrived);
    }
    if (stamp) gemm_stamp(a, G, kStampExit);
}

template <class S>
__global__ void __launch_bounds__(kGemmThreads, 1)
    persistent_gemm_kernel(const __grid_constant__ CUtensorMap x_map, const GemmArgs a) {
    extern __shared__ uint8_t smem_raw[];
    __shared__ RingBarriers<S::kStages> ring;
    __shared__ __align__(8) uint64_t gather_bar[kGemmConsumers];
    uint8_t* slots = smem_raw + ((1024 - (smem_addr(smem_raw) & 1023)) & 1023);
    uint8_t* staging = slots + S::kStages * S::kStage;
    const int row_tiles = a.N / S::kRows, warpgroup = threadIdx.x / 128;
    if (threadIdx.x == 0) {
        prefetch_tensor_map(&x_map);
        mbar_init(&gather_bar[0], 1), mbar_init(&gather_bar[1], 1);
        ring.init(4 * kGemmConsumers);  // one arrival per consumer warp
    }
    __syncthreads();
    if (warpgroup == 0) {
        warpgroup_registers_dec<56>();
        if (threadIdx.x == 0) gemm_produce<S, true>(ring, slots, &x_map, a, row_tiles);
        if (threadIdx.x == 32) gemm_produce<S, false>(ring, slots, &x_map, a, row_tiles);
    } else {
        warpgroup_registers_inc<224>();
        if (warpgroup == 1)
            gemm_consume<S, 0>(ring, slots, staging, &gather_bar[0], a, row_tiles);
        else
            gemm_consume<S, 1>(ring, slots, staging + S::kStageOut, &gather_bar[1], a, row_tiles);
    }
}

// ---- Host launcher (launch_table.py's cases). call.operand[0] = the packed weight tiles, [1] = the router's lo
// tiles (dual) or the tiles again; call.scalar[0] = the workspace's floats (the partials, then probe-gemm's stamps).
// ctas: the persistent grid, cooperative when a split tile's CTAs wait on each other.
template <typename L>
const char* launch_persistent_gemm(const Call& c) {
    using S = GemmShape<L::rows, L::tokens, L::stages, L::dual, typename L::out>;
    constexpr int ctas = L::ctas;
    static_assert(S::kSmem <= L::smem_bytes, "the ring and the staging fit the shared memory the engine's rule gives");
    if (c.M < 1 || c.N % L::rows || c.K % kTmaTileK || ctas < 1) return "persistent_gemm: N or K does not fit the tile";
    const int tiles = c.N / L::rows * ((c.M + L::tokens - 1) / L::tokens);
    const int split_tiles = tiles % ctas;  // tiles past the full waves, each over ctas / split_tiles CTAs
    if (split_tiles &&
        (ctas % split_tiles || c.K / kTmaTileK < ctas / split_tiles ||
         (long long)ctas * L::rows * L::tokens > c.scalar[0] || split_tiles * kGemmConsumers * 2 > kTicketAt))
        return "persistent_gemm: the split tiles need equal groups of CTAs, a k-block each, and fit the workspace";
    CUtensorMap x_map;
    const char* err = bf16_rows_map(&x_map, c.x, c.M, c.K, L::tokens, 1);
    if (err != nullptr) return err;
    const GemmArgs a{static_cast<const uint8_t*>(c.operand[0]),
                     static_cast<const uint8_t*>(c.operand[1]),
                     c.out,
                     c.ws,
                     reinterpret_cast<long long*>(c.ws + (size_t)ctas * L::rows * L::tokens),
                     c.sem,
                     c.M,
                     c.N,
                     c.K,
                     ctas};
    auto kernel = persistent_gemm_kernel<S>;
    cudaError_t e = cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, L::smem_bytes);
    cudaLaunchConfig_t config = {};
    config.gridDim = dim3(ctas), config.blockDim = dim3(kGemmThreads), config.dynamicSmemBytes = L::smem_bytes;
    config.stream = static_cast<cudaStream_t>(c.stream);
    cudaLaunchAttribute cooperative;
    cooperative.id = cudaLaunchAttributeCooperative, cooperative.val.cooperative = 1;
    config.attrs = &cooperative, config.numAttrs = split_tiles ? 1 : 0;
    if (e == cudaSuccess) e = cudaLaunchKernelEx(&config, kernel, x_map, a);
    if (e == cudaSuccess) e = cudaGetLastError();
    return e == cudaSuccess ? nullptr : cudaGetErrorString(e);
}

}  // namespace okc
