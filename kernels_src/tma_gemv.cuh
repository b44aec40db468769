// Bulk-copy + wgmma GEMV for decode batches (m <= 32): out[m, N] = x[m, K] . W[N, K]^T, Hopper only.
//
// Why a second GEMV: the register-fed mma.sync kernel (gemv.cuh) streams near the HBM floor for m <= 8, but at
// m = 16..32 each warp also re-reads 1-2x its weight bytes of x from L2 and waits on every load's scoreboard
// (ncu, qkv_gate m = 32: 53 % of DRAM bandwidth, half of the cycles between issues stalled on L1TEX), while
// cuBLAS's own TMA + wgmma kernel streams the same weights at 63 %. This kernel does what that one does, minus
// its separate split-K reduction launch. Measured (notes/session3): its time hardly moves with m, but its base
// is higher (each CTA pays a fill latency and, for S > 1, a reduction round trip that only a few CTAs per SM
// overlap). Since its consumer loop was cut to ~48 instructions per slot (notes/session15-16; the half tiles'
// to ~32 in session 20) the half tiles (C = 3 below) lead on qkv_gate m = 8..32 and pooler m = 16, 32; TTABLE
// routes each shape where it wins.
//  * one CTA = one 64-row weight tile x a contiguous range of 64-wide K tiles (S CTAs split K unevenly,
//    any S up to K/64), one producer warp and one consumer warpgroup;
//  * the producer's lane 0 streams each K tile of W (64 x 64 bf16 = 8 KB; hi and lo for the router) and of x
//    (NB*8 tokens x 64) into a STAGES-deep shared-memory ring with the bulk copy engine (TMA). W's tiles are
//    packed contiguously and pre-swizzled once in prepare() (packing.pack_tma_bulk), so each is one plain 8 KB
//    bulk copy from a pointer: no tensor map to fetch before the first byte moves (notes/session11: 0.6-0.75 us
//    faster than tensor-map copies of the same tiles). x comes through a tensor map in the same 128-byte
//    swizzle; its rows m..NB*8-1 are out of bounds, which TMA fills with zeros: no masking of x;
//  * the consumer warpgroup issues four wgmma.m64nNk16 per K tile (N = 8 NB tokens), weights as A, x as B,
//    both straight from shared memory, keeping one K tile's wgmmas in flight while it waits for the next;
//  * full / empty mbarriers per stage: TMA completes `full` by its byte count; each consumer warp arrives
//    on `empty` once its wgmmas that read the stage have retired;
//  * S > 1, reduced one of three ways (C; 0 and 1 as in gemv.cuh):
//    C = 0  every CTA writes its fp32 partial tile to a workspace and the last to arrive at the tile's counter
//           sums the S partials in split order (deterministic), writes the output and resets the counter to 0,
//           so the next launch or graph replay needs no clearing kernel;
//    C = 1  gathered: the S CTAs of a tile form one thread-block cluster; ranks 1..S-1 push their partials
//           from registers into rank 0's inbox after the ring (st.async, counted on one mbarrier) and leave;
//           rank 0 adds them to its own in rank order and writes the output (common.cuh, open_inbox): no
//           workspace, no fence, no counter;
//    C = 2  scattered: the same cluster, but rank r owns consumer threads [128 r / S, 128 (r + 1) / S) of the
//           tile; every other rank pushes those threads' accumulators into rank r's inbox and leaves, and rank
//           r adds the S partials of its threads in rank order and writes them. An SM takes in distributed
//           shared memory at only ~25 GB/s, so the gather costs in proportion to the bytes rank 0 receives
//           ((S - 1) x 2 KB x NB: ~1 us at qkv_gate m = 32, 5.8 us for the router at S = 16); the scatter
//           spreads them over S SMs but keeps every rank alive to the end. The sweep picks per shape
//           (notes/session11: C = 2 won at NB = 4, C = 1 at NB <= 2 on qkv_gate).
//  * C = 3, half tiles (HALF): no split at all. A CTA owns 32 weight rows and the whole K, so qkv_gate runs 72
//    CTAs instead of 36 x S, and no reduction waits at the end. notes/session14 (launchprobe) timed the frame
//    without the math: a cluster barrier or DSMEM push after the ring costs 0.5-0.8 us, and 72 CTAs streaming
//    whole rows with x's boxes beside them beat 36 x 3 with the push by ~1.1 us on qkv_gate's 37.7 MB. wgmma's
//    M is 64, so each 8 KB slot stacks the 32 rows' K [k0, k0 + 64) on top of their K [k0 + 64, k0 + 128)
//    (packing.pack_tma_half_tiles) and meets two x boxes (landed together by one copy of a 3-D tensor map,
//    tma_load_3d). The boxes lie one after the other, 8 NB token rows of 128 bytes each, so together they are one
//    K-major B of 16 NB rows: one wgmma of N = 16 NB per k step takes both, reading the weights once. Of its D,
//    rows 0-31 x box 1's columns and rows 32-63 x box 2's are the useful quarters; the other two are discarded
//    (the tensor cores have time to spare). Warps 2-3 hand theirs to warps 0-1 through the idle ring at the end.
//    (Until session 20 each box had its own N = 8 NB wgmma, which read the 8 KB weight tile from shared memory
//    twice: 40 KB of shared-memory traffic per slot at m = 32 instead of 32, near the SM's 128 bytes a clock at
//    qkv_gate's ~147 ns a slot. One wgmma was 0.7-2.4 % faster on every half-tile shape, qkv_gate m = 32 1.9 %.)
#pragma once
#include "common.cuh"

#include <cuda.h>

namespace okc {

constexpr int kTmaTileRows = 64;                          // weight rows per CTA: the wgmma M
constexpr int kTmaTileK = 64;                             // K per ring slot: 64 bf16 = one 128-byte swizzle row
constexpr int kTmaHalfRows = 32;                          // C = 3: weight rows per CTA (and 128 of K per slot)
constexpr int kTmaWBytes = kTmaTileRows * kTmaTileK * 2;  // 8 KB of weights per slot (per matrix)
constexpr int kTmaConsumers = 128;                        // one warpgroup: warps 0..3
constexpr int kTmaThreads = kTmaConsumers + 32;           // + the producer warp

// The ring depths (STAGES) compiled in. Each is a kernel per NB, dual and half tiles, so the list stays short.
// This is the one list: tma_launch.cu dispatches on it, checks against it and names it in its refusal, and a
// test keeps kernels_src/dispatch.py's TMA_STAGES equal to it.
template <int... Depths>
struct RingDepths {
    static constexpr int values[sizeof...(Depths)] = {Depths...};
    static constexpr bool contains(int stages) { return ((stages == Depths) || ...); }
};
using TmaRingDepths = RingDepths<2, 4, 6, 8, 12, 14, 16>;

__host__ __device__ constexpr int tma_x_bytes(int nb) { return nb * 8 * kTmaTileK * 2; }
// A slot: the weight block(s), then x's box (two boxes for half tiles); every part a multiple of 1 KB:
// swizzle-aligned.
__host__ __device__ constexpr int tma_stage_bytes(int nb, bool dual, bool half = false) {
    return kTmaWBytes * (dual ? 2 : 1) + tma_x_bytes(nb) * (half ? 2 : 1);
}
// +1 KB: the dynamic shared memory base is only 16-byte aligned; the 128-byte swizzle needs 1024.
__host__ __device__ constexpr int tma_smem_bytes(int nb, int stages, bool dual, bool half = false) {
    return stages * tma_stage_bytes(nb, dual, half) + 1024;
}
__host__ __device__ constexpr bool tma_fits(int nb, int stages, bool dual, bool half = false) {
    return tma_smem_bytes(nb, stages, dual, half) <= (int)kSmemOptInLimit;
}
// C = 2: rank r of the cluster owns consumer threads [tma_owned_from(r, S), tma_owned_from(r + 1, S)), and
// tma_owner(t, S) is the rank that owns thread t (the largest r with tma_owned_from(r, S) <= t).
__host__ __device__ constexpr int tma_owned_from(int rank, int s) { return rank * kTmaConsumers / s; }
__host__ __device__ constexpr int tma_owner(int t, int s) { return ((t + 1) * s - 1) / kTmaConsumers; }
// The cluster inbox follows the ring: S - 1 slots (one per other rank, in rank order) of 4 NB floats for each
// thread the rank owns: all 128 (C = 1, rank 0), or at most ceil(128 / S) (C = 2). None for C = 0.
__host__ __device__ constexpr int tma_inbox_bytes(int nb, int s, int c) {
    return c == 0 ? 0 : (s - 1) * (c == 1 ? kTmaConsumers : (kTmaConsumers + s - 1) / s) * 4 * nb * 4;
}

struct TmaGemvArgs {
    const uint8_t* w;   // packing.pack_tma_bulk tiles: [N/64][K/64] blocks of 8 KB, each pre-swizzled (half tiles:
                        // pack_tma_half_bulk's [N/32][K/128])
    const uint8_t* w2;  // the router's lo half (dual), else w again
    void* out;  // [M, N]: bf16, or fp32 in dual mode
    float* ws;  // split-K partials: [N/64][S][64 * 8 NB]
    int* sem;   // arrival counter per 64-row tile; 0 between launches
    int M, N, K, S;
    int cluster;  // C: 1 / 2, the S split CTAs of a tile are one cluster and reduce gathered / scattered; 0
                  // otherwise (half tiles, C = 3, run as HALF with cluster 0)
};

// One box of a 2-D tensor map (c0: the inner coordinate, K; c1: rows) into shared memory, counted on `bar`.
__device__ __forceinline__ void tma_load_2d(void* dst, const CUtensorMap* map, int c0, int c1, uint64_t* bar) {
    asm volatile(
        "cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3}], [%4];" ::"r"(
            smem_addr(dst)),
        "l"(reinterpret_cast<uint64_t>(map)), "r"(c0), "r"(c1), "r"(smem_addr(bar))
        : "memory");
}

// One box of a 3-D tensor map (c0 innermost) into shared memory, counted on `bar`. Half tiles read x as
// [K/64][M][64]: a box of two 64-wide K chunks lands as x's two 2-D boxes back to back, in one copy.
__device__ __forceinline__ void tma_load_3d(void* dst, const CUtensorMap* map, int c0, int c1, int c2,
                                            uint64_t* bar) {
    asm volatile(
        "cp.async.bulk.tensor.3d.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3, %4}], "
        "[%5];" ::"r"(smem_addr(dst)),
        "l"(reinterpret_cast<uint64_t>(map)), "r"(c0), "r"(c1), "r"(c2), "r"(smem_addr(bar))
        : "memory");
}

// `bytes` contiguous bytes (a multiple of 16) into shared memory by the bulk copy engine, counted on `bar`: no
// tensor map, no swizzling on the way (the source is already laid out as shared memory should hold it).
__device__ __forceinline__ void bulk_load_1d(void* dst, const void* src, uint32_t bytes, uint64_t* bar) {
    asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];" ::"r"(
                     smem_addr(dst)),
                 "l"(src), "r"(bytes), "r"(smem_addr(bar))
                 : "memory");
}

// wgmma shared-memory descriptor of a K-major operand in the 128-byte swizzle: rows 128 bytes apart, groups
// of 8 rows 1024 bytes apart (SBO); the leading offset is unused in this mode (1 by convention).
__device__ __forceinline__ uint64_t sw128_desc(uint32_t addr) {
    return (uint64_t)((addr & 0x3FFFF) >> 4) | ((uint64_t)1 << 16) | ((uint64_t)(1024 >> 4) << 32) |
           ((uint64_t)1 << 62);
}

// The descriptor of the operand `units` x 16 bytes further on: the address field is the low 14 bits and never
// carries (shared memory addresses are < 2^18), so only the low word changes.
__device__ __forceinline__ uint64_t desc_plus(uint64_t desc, uint32_t units) {
    uint64_t out;
    asm("{\n.reg .b32 lo, hi;\nmov.b64 {lo, hi}, %1;\nadd.u32 lo, lo, %2;\nmov.b64 %0, {lo, hi};\n}"
        : "=l"(out)
        : "l"(desc), "r"(units));
    return out;
}

__device__ __forceinline__ void wgmma_fence() { asm volatile("wgmma.fence.sync.aligned;" ::: "memory"); }
__device__ __forceinline__ void wgmma_commit() { asm volatile("wgmma.commit_group.sync.aligned;" ::: "memory"); }
template <int N>
__device__ __forceinline__ void wgmma_wait() {
    asm volatile("wgmma.wait_group.sync.aligned %0;" ::"n"(N) : "memory");
}

// Keep the compiler from moving accumulator reads or writes across the asynchronous wgmma boundaries.
template <int R>
__device__ __forceinline__ void fence_regs(float (&d)[R]) {
#pragma unroll
    for (int i = 0; i < R; ++i) asm volatile("" : "+f"(d[i])::"memory");
}

// D[64 x 8NB] += A[64 x 16] . B[16 x 8NB], bf16 in, fp32 accumulate, both operands from shared memory.
// NB = 8 (N = 64) serves half tiles at NB = 4: both x boxes in one wgmma.
template <int NB>
__device__ __forceinline__ void wgmma_bf16(float (&d)[4 * NB], uint64_t a, uint64_t b);

template <>
__device__ __forceinline__ void wgmma_bf16<1>(float (&d)[4], uint64_t a, uint64_t b) {
    asm volatile(
        "{\n.reg .pred p;\nsetp.ne.b32 p, 1, 0;\n"
        "wgmma.mma_async.sync.aligned.m64n8k16.f32.bf16.bf16 {%0, %1, %2, %3}, %4, %5, p, 1, 1, 0, 0;\n}\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "l"(a), "l"(b));
}

template <>
__device__ __forceinline__ void wgmma_bf16<2>(float (&d)[8], uint64_t a, uint64_t b) {
    asm volatile(
        "{\n.reg .pred p;\nsetp.ne.b32 p, 1, 0;\n"
        "wgmma.mma_async.sync.aligned.m64n16k16.f32.bf16.bf16 {%0, %1, %2, %3, %4, %5, %6, %7}, %8, %9, p, 1, 1, "
        "0, 0;\n}\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7])
        : "l"(a), "l"(b));
}

template <>
__device__ __forceinline__ void wgmma_bf16<4>(float (&d)[16], uint64_t a, uint64_t b) {
    asm volatile(
        "{\n.reg .pred p;\nsetp.ne.b32 p, 1, 0;\n"
        "wgmma.mma_async.sync.aligned.m64n32k16.f32.bf16.bf16 {%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, "
        "%12, %13, %14, %15}, %16, %17, p, 1, 1, 0, 0;\n}\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]),
          "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15])
        : "l"(a), "l"(b));
}

template <>
__device__ __forceinline__ void wgmma_bf16<8>(float (&d)[32], uint64_t a, uint64_t b) {
    asm volatile(
        "{\n.reg .pred p;\nsetp.ne.b32 p, 1, 0;\n"
        "wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16 {%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, "
        "%12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31}, %32, "
        "%33, p, 1, 1, 0, 0;\n}\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]),
          "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]),
          "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]),
          "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31])
        : "l"(a), "l"(b));
}

// bar.sync on a named barrier for the consumer warpgroup only (the producer warp may have left already).
__device__ __forceinline__ void consumers_sync() {
    asm volatile("bar.sync 1, %0;" ::"n"(kTmaConsumers) : "memory");
}

// Accumulator element e of consumer thread t (the wgmma D layout: warp w owns rows 16w..16w+15, like mma.sync's
// C per 8-token block) -> out[token, row0 + row] for tokens < M.
template <typename OutT>
__device__ __forceinline__ void tma_write(const TmaGemvArgs& a, int row0, int t, int e, float v) {
    const int warp = t >> 5, lane = t & 31;
    const int row = row0 + warp * 16 + (lane >> 2) + ((e & 2) ? 8 : 0);
    const int token = (e >> 2) * 8 + (lane & 3) * 2 + (e & 1);
    if (token < a.M) store_out(static_cast<OutT*>(a.out) + (size_t)token * a.N + row, v);
}

template <int NB, int STAGES, bool DUAL, bool HALF, typename OutT>
__global__ void __launch_bounds__(kTmaThreads, 1)
    tma_gemv_kernel(const __grid_constant__ CUtensorMap x_map, const TmaGemvArgs a) {
    static_assert(!(HALF && DUAL), "half tiles are for plain bf16 weights");
    constexpr int kAcc = 4 * NB;                             // fp32 accumulators per consumer thread (per set)
    constexpr int kStage = tma_stage_bytes(NB, DUAL, HALF);  // bytes TMA lands in one ring slot
    constexpr int kXOffset = kTmaWBytes * (DUAL ? 2 : 1);    // x's box follows the weight box(es)
    constexpr int kSlotK = kTmaTileK * (HALF ? 2 : 1);       // K one slot covers
    // wgmma groups (one per slot) the consumer keeps in flight before it hands a slot back. Half tiles feed 72
    // CTAs on qkv_gate, each at 3x the bytes per second of the 64-row tiles' 108, with twice the MMA work
    // per slot (N = 16 NB), so they keep 3 (the 64-row tiles 1). Measured (notes/session14, calls 10 and 11,
    // best C = 3 config, us): qkv_gate m = 1 16.91 -> 19.14, m = 32 20.53 -> 20.10; pooler m = 16 21.39 -> 21.18
    // (at 12 stages).
    // Mixed; that was before the consumer loop was cut (sessions 15-16), when its instruction count, not wgmma
    // latency, capped the half tiles; session 19 found 1, 2 and 3 within 1 % of each other. The producer runs
    // STAGES - kInFlight slots ahead, so kInFlight < STAGES.
    constexpr int kInFlight = HALF ? (STAGES > 3 ? 3 : STAGES - 1) : 1;
    extern __shared__ uint8_t smem_raw[];
    __shared__ __align__(8) uint64_t full[STAGES], empty[STAGES];
    __shared__ int is_last;
    __shared__ __align__(8) uint64_t inbox_full;
    uint8_t* ring = smem_raw + ((1024 - (smem_addr(smem_raw) & 1023)) & 1023);
    float* inbox = reinterpret_cast<float*>(ring + STAGES * kStage);  // C = 1, 2: [S - 1][threads owned][kAcc]

    const int tile = blockIdx.x, split = blockIdx.y;
    const int k_tiles = a.K / kSlotK;  // slots a tile's K takes (its 8 KB blocks in the packed operand)
    const int kt0 = (int)((long long)split * k_tiles / a.S);  // uneven splits differ by at most one K tile
    const int n_k = (int)((long long)(split + 1) * k_tiles / a.S) - kt0;
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;

    // Slot i's copies into ring slot s (the producer's lane only).
    auto issue = [&](int i, int s) {
        uint8_t* slot = ring + s * kStage;
        const int k0 = (kt0 + i) * kSlotK;
        mbar_arrive_expect_tx(&full[s], kStage);  // out-of-bounds x rows count too (as zeros)
        const size_t block = (size_t)(tile * k_tiles + kt0 + i) * kTmaWBytes;  // packed: one 8 KB block
        bulk_load_1d(slot, a.w + block, kTmaWBytes, &full[s]);
        if constexpr (DUAL) bulk_load_1d(slot + kTmaWBytes, a.w2 + block, kTmaWBytes, &full[s]);
        if constexpr (HALF)  // both 64-wide K chunks of the slot in one copy (see tma_load_3d)
            tma_load_3d(slot + kXOffset, &x_map, 0, 0, k0 / kTmaTileK, &full[s]);
        else
            tma_load_2d(slot + kXOffset, &x_map, k0, 0, &full[s]);
    };
    // The producer's lane fetches x's tensor map, initialises the full barriers and sends the first round's copies
    // before the CTA barrier, then initialises the empty barriers, which no one touches before that barrier. Until
    // session 28 every barrier was initialised first and the copies left after the CTA barrier: the first copy
    // left ~0.27 us after the CTA started (notes/session28, call 12's timeline), and issuing early took 1.4-2.0 %
    // off o m = 16 / 32 (call 13).
    if (threadIdx.x == kTmaConsumers) {
        asm volatile("prefetch.tensormap [%0];" ::"l"(reinterpret_cast<uint64_t>(&x_map)) : "memory");
        for (int s = 0; s < STAGES; ++s) mbar_init(&full[s], 1);  // the producer's arrive.expect_tx + TMA's bytes
        asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");  // visible to the async proxy
        for (int s = 0; s < STAGES && s < n_k; ++s) issue(s, s);
        for (int s = 0; s < STAGES; ++s) mbar_init(&empty[s], 4);  // one arrival per consumer warp
        asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
    }
    if (a.cluster) {  // this rank's inbox: S - 1 partials of the threads it owns
        const int rank = (int)cluster_rank();
        const int owned = a.cluster == 2 ? tma_owned_from(rank + 1, a.S) - tma_owned_from(rank, a.S)
                                         : (rank == 0 ? kTmaConsumers : 0);
        open_inbox(&inbox_full, (uint32_t)((a.S - 1) * owned * kAcc * sizeof(float)));
    }
    __syncthreads();

    // Half tiles: acc[0, kAcc) meets x's first box, acc[kAcc, 2 kAcc) its second (one wgmma's D of N = 16 NB).
    float acc[(HALF ? 2 : 1) * kAcc];
#pragma unroll
    for (int e = 0; e < (HALF ? 2 : 1) * kAcc; ++e) acc[e] = 0.f;
    if (warp == kTmaConsumers / 32) {  // producer warp: one lane issues every copy
        if (lane == 0) {
            // A round of the ring at a time, its slots unrolled, as the consumers walk it.
            // From the second round on: the first left before the CTA barrier. (A round less, rather than a test
            // per slot, which cost the half tiles 1.5 us in session 19 and again in session 28's call 13.)
            for (int round = 1; round * STAGES < n_k; ++round) {
#pragma unroll
                for (int s = 0; s < STAGES; ++s) {
                    const int i = round * STAGES + s;
                    if (i >= n_k) break;
                    mbar_wait(&empty[s], (round - 1) & 1);  // the slot's previous use has retired
                    issue(i, s);
                }
            }
        }
        __syncwarp();
        if (a.cluster) inbox_ready();  // arrived in open_inbox; waits once, like every thread of the cluster
        return;
    } else {
        // Slot 0's descriptors, computed once: slot s, k step kk is desc_plus'd (s kStage + kk 32) / 16. (Plain
        // 64-bit adds here made ptxas serialise the wgmmas of the plain kernels, C7514.)
        const uint64_t w_desc0 = sw128_desc(smem_addr(ring));
        const uint64_t x_desc0 = sw128_desc(smem_addr(ring) + kXOffset);
        // The ring is walked a round at a time, its STAGES slots unrolled, so every slot's descriptors are slot 0's
        // plus compile-time offsets.
        uint32_t phase = 0;
        for (int round = 0; round * STAGES < n_k; ++round, phase ^= 1) {
#pragma unroll
            for (int s = 0; s < STAGES; ++s) {
                const int i = round * STAGES + s;
                if (i >= n_k) break;
                mbar_wait(&full[s], phase);
                fence_regs(acc);
                wgmma_fence();
#pragma unroll
                for (int kk = 0; kk < kTmaTileK / 16; ++kk) {  // 16 k = 32 bytes along the swizzled 128-byte row
                    const uint32_t at = (s * kStage + kk * 32) / 16;
                    const uint64_t b = desc_plus(x_desc0, at);
                    if constexpr (HALF) {  // both x boxes at once: B's rows are box 1's 8 NB tokens, then box 2's
                        wgmma_bf16<2 * NB>(acc, desc_plus(w_desc0, at), b);
                    } else {
                        wgmma_bf16<NB>(acc, desc_plus(w_desc0, at), b);
                        if constexpr (DUAL) wgmma_bf16<NB>(acc, desc_plus(w_desc0, at + kTmaWBytes / 16), b);
                    }
                }
                wgmma_commit();
                fence_regs(acc);
                wgmma_wait<kInFlight>();  // slot i - kInFlight's wgmmas have retired: hand it back to the producer
                fence_regs(acc);
                if (i >= kInFlight && lane == 0) mbar_arrive(&empty[(s + STAGES - kInFlight) % STAGES]);
            }
        }
        wgmma_wait<0>();
        fence_regs(acc);
    }

    const int t = threadIdx.x;
    if constexpr (HALF) {  // row r of the 32: box 1's set of warp r / 16 + box 2's set of warp 2 + r / 16
        // The ring is idle: every copy has landed (each slot was waited on) and every wgmma has retired.
        float* fold = reinterpret_cast<float*>(ring);
        if (warp >= 2) {
#pragma unroll
            for (int e = 0; e < kAcc; ++e) fold[e * 64 + (t - 64)] = acc[kAcc + e];
        }
        consumers_sync();
        if (warp < 2) {
#pragma unroll
            for (int e = 0; e < kAcc; ++e) tma_write<OutT>(a, tile * kTmaHalfRows, t, e, acc[e] + fold[e * 64 + t]);
        }
        return;
    }
    constexpr int kTile = kAcc * kTmaConsumers;  // floats in one partial tile, thread-major
    if (a.cluster) {  // thread t's accumulators meet on the rank that owns t: rank 0 (C = 1) or tma_owner (C = 2)
        inbox_ready();
        const int rank = (int)cluster_rank();  // split `rank`: the cluster spans grid.y
        const bool scattered = a.cluster == 2;
        const int owner = scattered ? tma_owner(t, a.S) : 0;
        const int from = scattered ? tma_owned_from(owner, a.S) : 0;
        const int owned = scattered ? tma_owned_from(owner + 1, a.S) - from : kTmaConsumers;
        if (owner != rank) {  // into the owner's slot for this rank (its slots skip itself)
            const int slot = rank < owner ? rank : rank - 1;
            float* dst = inbox + ((size_t)slot * owned + (t - from)) * kAcc;  // thread-major: 16-byte pushes
#pragma unroll
            for (int e = 0; e < kAcc; e += 4)
                push_to_rank(owner, dst + e, &inbox_full, acc[e], acc[e + 1], acc[e + 2], acc[e + 3]);
            return;
        }
        mbar_wait_cluster(&inbox_full, 0);
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
        for (int e = 0; e < kAcc; ++e) tma_write<OutT>(a, tile * kTmaTileRows, t, e, sum[e]);
        return;
    }
    if (a.S == 1) {
#pragma unroll
        for (int e = 0; e < kAcc; ++e) tma_write<OutT>(a, tile * kTmaTileRows, t, e, acc[e]);
        return;
    }

    // Split-K: publish this CTA's partial (thread-major, so stores and the reduction's loads coalesce), then the
    // last CTA of the tile sums all S of them.
    float* mine = a.ws + ((size_t)tile * a.S + split) * kTile;
#pragma unroll
    for (int e = 0; e < kAcc; ++e) __stcg(mine + e * kTmaConsumers + t, acc[e]);
    __threadfence();  // the partial is visible device-wide before this CTA counts itself in
    consumers_sync();
    if (t == 0) is_last = atomicAdd(a.sem + tile, 1) == a.S - 1;
    consumers_sync();
    if (!is_last) return;
    __threadfence();  // acquire: the other CTAs' partials
    const float* parts = a.ws + (size_t)tile * a.S * kTile + t;
    float sum[kAcc];
#pragma unroll
    for (int e = 0; e < kAcc; ++e) sum[e] = 0.f;
    // Partials in split order (deterministic), a chunk of them loaded before any is added: one L2 round trip per
    // chunk instead of one per partial, which at S = 8 would be most of this CTA's tail.
    constexpr int kChunk = 64 / kAcc;
    int s = 0;
    for (; s + kChunk <= a.S; s += kChunk) {
        float v[kChunk][kAcc];
#pragma unroll
        for (int c = 0; c < kChunk; ++c)
#pragma unroll
            for (int e = 0; e < kAcc; ++e) v[c][e] = __ldcg(parts + (size_t)(s + c) * kTile + e * kTmaConsumers);
#pragma unroll
        for (int c = 0; c < kChunk; ++c)
#pragma unroll
            for (int e = 0; e < kAcc; ++e) sum[e] += v[c][e];
    }
    for (; s < a.S; ++s)
#pragma unroll
        for (int e = 0; e < kAcc; ++e) sum[e] += __ldcg(parts + (size_t)s * kTile + e * kTmaConsumers);
#pragma unroll
    for (int e = 0; e < kAcc; ++e) tma_write<OutT>(a, tile * kTmaTileRows, t, e, sum[e]);
    if (t == 0) a.sem[tile] = 0;  // every CTA has arrived: ready for the next launch
}

}  // namespace okc
