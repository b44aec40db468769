// The split-K tail probe (`python -m generator probe-tail`, docs/persistent-gemm.md "The split-K tail"): the
// reduction of persistent_gemm's stream-K tiles timed apart from the GEMM. A tile's `splits` CTAs each hold a
// synthetic fp32 partial in wgmma's accumulator layout (small integers: every sum is exact in bf16) and bring the
// tile to the output by one of five designs; the stamps (persistent_gemm.cuh's gemm_stamp) give each CTA's store,
// wait and reduction.
#define OKC_GEMM_STAMPS 1
#include "generated/constants.h"
#include "persistent_gemm.cuh"

namespace okc {

// The designs, in the order the probe's table lists them.
enum TailDesign : int {
    kTailStore = 0,         // the kernel's: partials by st.global, shares gathered back by bulk copies
    kTailBulkStore = 1,     // partials staged in shared memory and written by bulk copies; gathered back as above
    kTailReduceShares = 2,  // partials bulk-added into the tile's one fp32 sum in L2; each CTA then reads its share
    kTailReduceLast = 3,    // the same adds; the last CTA to add reads the whole tile
    kTailCluster = 4,       // the tile's CTAs are one cluster: each reads its share from every rank's shared memory
    kTailNone = 5,          // stamps only: the launch and the stamps' own cost
};

struct TailArgs {
    GemmArgs g;   // out, sums (the reduce designs), stamps, sem, M, N, K (8 k-blocks a CTA), ctas
    float* ws;    // the store designs: a partial slot per CTA and consumer warpgroup
    int splits;   // CTAs a tile: CTA c is participant c % splits of tile c / splits
};

// `bytes` contiguous bytes (a multiple of 16) of shared memory out to global memory by the bulk copy engine, in
// the issuing thread's bulk group (bulk_commit, bulk_wait).
__device__ __forceinline__ void bulk_store_1d(void* dst, const void* src, uint32_t bytes) {
    asm volatile("cp.async.bulk.global.shared::cta.bulk_group [%0], [%1], %2;" ::"l"(dst), "r"(smem_addr(src)),
                 "r"(bytes)
                 : "memory");
}

// Every thread of every CTA of the cluster: arrive (release) and wait (acquire).
__device__ __forceinline__ void cluster_sync() {
    asm volatile("barrier.cluster.arrive.release.aligned;\nbarrier.cluster.wait.acquire.aligned;" ::: "memory");
}

// Four floats at `local`'s offset in cluster rank `rank`'s shared memory (distributed shared memory).
__device__ __forceinline__ float4 ld_cluster_f4(const void* local, uint32_t rank) {
    uint32_t remote;
    asm volatile("mapa.shared::cluster.u32 %0, %1, %2;" : "=r"(remote) : "r"(smem_addr(local)), "r"(rank));
    float4 v;
    asm volatile("ld.shared::cluster.v4.f32 {%0, %1, %2, %3}, [%4];"
                 : "=f"(v.x), "=f"(v.y), "=f"(v.z), "=f"(v.w)
                 : "r"(remote)
                 : "memory");
    return v;
}

// Participant p's partial at (row, token): a small integer, so a tile's sum is exact in bf16.
__device__ __forceinline__ float tail_value(int row, int token, int p) {
    return (float)((row * 3 + token * 5 + p * 7) % 9 - 4);
}

template <class S>
__device__ __forceinline__ void tail_partial(float (&acc)[S::kBlocks][S::kAcc], int row0, int token0, int p, int t) {
#pragma unroll
    for (int b = 0; b < S::kBlocks; ++b)
#pragma unroll
        for (int e = 0; e < S::kAcc; ++e)
            acc[b][e] = tail_value(row0 + gemm_row(t, b, e), token0 + gemm_token(t, e), p);
}

// Designs kTailStore and kTailBulkStore: the partial into the CTA's workspace slot, thread-major, by st.global.cg
// from every thread (the kernel's stores before the bulk adds) or staged and bulk-copied; then one release.
template <class S, int G, bool BULK>
__device__ __forceinline__ void tail_store(float4* slot, int* arrivals, uint8_t* buffer,
                                           const float (&acc)[S::kBlocks][S::kAcc], int t) {
    if constexpr (BULK) {
        gemm_stage_partial<S>(buffer, acc, t);
        fence_async_shared();
        named_barrier_sync<kWarpgroupBarrier + G, 128>();
        if (t == 0) {
            for (int off = 0; off < S::kPartial * 16; off += kGemmTailCopy)
                bulk_store_1d(reinterpret_cast<uint8_t*>(slot) + off, buffer + off, kGemmTailCopy);
            bulk_commit();
            bulk_wait<0>();
            asm volatile("fence.proxy.async.global;" ::: "memory");
        }
    } else {
#pragma unroll
        for (int b = 0; b < S::kBlocks; ++b)
#pragma unroll
            for (int j = 0; j < S::kNB; ++j)
                __stcg(slot + (b * S::kNB + j) * 128 + t,
                       make_float4(acc[b][4 * j], acc[b][4 * j + 1], acc[b][4 * j + 2], acc[b][4 * j + 3]));
        asm volatile("fence.proxy.async.global;" ::: "memory");  // visible to the bulk copies that read it
        named_barrier_sync<kWarpgroupBarrier + G, 128>();
    }
    if (t == 0) asm volatile("red.release.gpu.global.add.s32 [%0], 1;" ::"l"(arrivals) : "memory");
}

// The store designs' gather, once all have arrived: this CTA's token blocks of every participant's partial come
// into the idle ring by bulk copies, as many participants a round as fit (one L2 round trip a round), are summed in
// participant order and written out. The last to leave resets the tile's counters.
template <class S, int G>
__device__ __forceinline__ void tail_gather(const TailArgs& a, const float4* parts, int* arrivals, int p,
                                            uint8_t* buffer, uint64_t* bar, int row0, int token0, uint8_t* staging,
                                            int t) {
    constexpr int kBuffer = S::kStages * S::kStage / kGemmConsumers;  // this warpgroup's half of the ring
    const int count = a.splits, block0 = S::kNB * p / count, blocks = S::kNB * (p + 1) / count - block0;
    if (t == 0) {
        while (load_acquire(arrivals) < count) __nanosleep(32);
        asm volatile("fence.proxy.async.global;" ::: "memory");  // the bulk copies read what was acquired
        gemm_stamp(a.g, G, kStampArrived);
    }
    named_barrier_sync<kWarpgroupBarrier + G, 128>();
    float sum[S::kBlocks][4 * S::kShareBlocks];
#pragma unroll
    for (int b = 0; b < S::kBlocks; ++b)
#pragma unroll
        for (int e = 0; e < 4 * S::kShareBlocks; ++e) sum[b][e] = 0.f;
    const int slice = blocks * 128 * 16;  // bytes of one participant's m64 block of the share
    const int batch = blocks ? max(1, kBuffer / (slice * S::kBlocks)) : count;
    uint32_t phase = 0;
    for (int c0 = 0; c0 < count && blocks; c0 += batch) {
        const int n = min(batch, count - c0);
        if (t == 0) {
            mbar_arrive_expect_tx(bar, n * S::kBlocks * slice);
            for (int c = c0; c < c0 + n; ++c)
                for (int b = 0; b < S::kBlocks; ++b)
                    bulk_load_1d(buffer + ((c - c0) * S::kBlocks + b) * slice,
                                 parts + (size_t)c * kGemmConsumers * S::kPartial + (b * S::kNB + block0) * 128, slice,
                                 bar);
        }
        mbar_wait(bar, phase);
        phase ^= 1;
        const float4* got = reinterpret_cast<const float4*>(buffer) + t;
        for (int c = 0; c < n; ++c)
#pragma unroll
            for (int b = 0; b < S::kBlocks; ++b)
#pragma unroll
                for (int j = 0; j < S::kShareBlocks; ++j)
                    if (j < blocks) {
                        const float4 v = got[((c * S::kBlocks + b) * blocks + j) * 128];
                        sum[b][4 * j] += v.x, sum[b][4 * j + 1] += v.y, sum[b][4 * j + 2] += v.z,
                            sum[b][4 * j + 3] += v.w;
                    }
        named_barrier_sync<kWarpgroupBarrier + G, 128>();  // the buffer is free for the next participants
    }
    gemm_write<S, G, S::kShareBlocks>(a.g, staging, row0, token0 + 8 * block0, sum, blocks, t);
    if (t == 0 && atomicAdd(arrivals + 1, 1) == count - 1) arrivals[0] = 0, arrivals[1] = 0;
}

// Design kTailCluster: each rank's partial stays in its shared memory; this CTA sums its token blocks over the ranks.
template <class S, int G>
__device__ __forceinline__ void tail_cluster(const TailArgs& a, uint8_t* buffer,
                                             const float (&acc)[S::kBlocks][S::kAcc], int row0, int token0,
                                             uint8_t* staging, int t) {
    gemm_stage_partial<S>(buffer, acc, t);
    if (t == 0) gemm_stamp(a.g, G, kStampUnits);
    cluster_sync();
    if (t == 0) gemm_stamp(a.g, G, kStampArrived);
    const float4* stage = reinterpret_cast<const float4*>(buffer) + t;
    const int p = (int)cluster_rank(), block0 = S::kNB * p / a.splits, blocks = S::kNB * (p + 1) / a.splits - block0;
    float sum[S::kBlocks][4 * S::kShareBlocks];
#pragma unroll
    for (int b = 0; b < S::kBlocks; ++b)
#pragma unroll
        for (int e = 0; e < 4 * S::kShareBlocks; ++e) sum[b][e] = 0.f;
    for (int r = 0; r < a.splits; ++r)
#pragma unroll
        for (int b = 0; b < S::kBlocks; ++b)
#pragma unroll
            for (int j = 0; j < S::kShareBlocks; ++j)
                if (j < blocks) {
                    const float4 v = ld_cluster_f4(stage + (b * S::kNB + block0 + j) * 128, r);
                    sum[b][4 * j] += v.x, sum[b][4 * j + 1] += v.y, sum[b][4 * j + 2] += v.z, sum[b][4 * j + 3] += v.w;
                }
    gemm_write<S, G, S::kShareBlocks>(a.g, staging, row0, token0 + 8 * block0, sum, blocks, t);
    cluster_sync();  // no rank leaves while another still reads its shared memory
}

// Design kTailReduceLast: the kernel's adds; the CTA whose add completes the tile reads all of it (zeroing it) and
// writes it out, the others leave.
template <class S, int G>
__device__ __forceinline__ void tail_reduce_last(const TailArgs& a, float4* sum, int* arrivals, uint8_t* buffer,
                                                 int* last, const float (&acc)[S::kBlocks][S::kAcc], int row0,
                                                 int token0, uint8_t* staging, int t) {
    const int before = gemm_add_partial<S, G>(sum, arrivals, buffer, acc, t);
    if (t == 0) *last = before == a.splits - 1, gemm_stamp(a.g, G, kStampUnits), gemm_stamp(a.g, G, kStampArrived);
    named_barrier_sync<kWarpgroupBarrier + G, 128>();
    if (!*last) return;
    const float4 zero = make_float4(0.f, 0.f, 0.f, 0.f);
    float part[S::kBlocks][S::kAcc];
#pragma unroll
    for (int b = 0; b < S::kBlocks; ++b)
#pragma unroll
        for (int j = 0; j < S::kNB; ++j) {
            float4* at = sum + (b * S::kNB + j) * 128 + t;
            const float4 v = __ldcg(at);
            __stcg(at, zero);
            part[b][4 * j] = v.x, part[b][4 * j + 1] = v.y, part[b][4 * j + 2] = v.z, part[b][4 * j + 3] = v.w;
        }
    gemm_write<S, G, S::kNB>(a.g, staging, row0, token0, part, S::kNB, t);
    if (t == 0) arrivals[0] = 0;
}

// One consumer warpgroup's tail in design D.
template <class S, int D, int G>
__device__ __forceinline__ void tail_consume(const TailArgs& a, uint8_t* slots, uint64_t* bar, int* last) {
    const int t = threadIdx.x % 128, cta = blockIdx.x, tile = cta / a.splits, p = cta % a.splits;
    const int row_tiles = a.g.N / S::kRows;
    const int row0 = (tile % row_tiles) * S::kRows + G * S::kRowsPerGroup, token0 = (tile / row_tiles) * S::kTokens;
    uint8_t* buffer = slots + G * (S::kStages * S::kStage / kGemmConsumers);  // this warpgroup's half of the ring
    uint8_t* staging = slots + S::kStages * S::kStage + G * S::kStageOut;
    int* arrivals = a.g.sem + (tile * kGemmConsumers + G) * 2;
    float4* sum = reinterpret_cast<float4*>(a.g.sums) + (size_t)(tile * kGemmConsumers + G) * S::kPartial;
    float4* parts = reinterpret_cast<float4*>(a.ws) + (size_t)(tile * a.splits * kGemmConsumers + G) * S::kPartial;
    float acc[S::kBlocks][S::kAcc];
    tail_partial<S>(acc, row0, token0, p, t);
    if (t == 0) gemm_stamp(a.g, G, kStampEntry);
    if constexpr (D == kTailStore || D == kTailBulkStore) {
        tail_store<S, G, D == kTailBulkStore>(parts + (size_t)p * kGemmConsumers * S::kPartial, arrivals, buffer, acc,
                                              t);
        if (t == 0) gemm_stamp(a.g, G, kStampUnits);
        tail_gather<S, G>(a, parts, arrivals, p, buffer, bar, row0, token0, staging, t);
    } else if constexpr (D == kTailReduceShares) {  // the kernel's tail
        gemm_add_partial<S, G>(sum, arrivals, buffer, acc, t);
        if (t == 0) gemm_stamp(a.g, G, kStampUnits);
        gemm_take_share<S, G>(a.g, sum, arrivals, p, a.splits, row0, token0, staging, t);
    } else if constexpr (D == kTailReduceLast) {
        tail_reduce_last<S, G>(a, sum, arrivals, buffer, last, acc, row0, token0, staging, t);
    } else if constexpr (D == kTailCluster) {
        tail_cluster<S, G>(a, buffer, acc, row0, token0, staging, t);
    } else if (t == 0) {
        gemm_stamp(a.g, G, kStampUnits), gemm_stamp(a.g, G, kStampArrived);
    }
    if (t == 0) gemm_stamp(a.g, G, kStampExit);
}

// persistent_gemm's block: warpgroup 0 (the producer there) idles but for the cluster's barriers.
template <class S, int D>
__global__ void __launch_bounds__(kGemmThreads, 1) splitk_tail_kernel(const TailArgs a) {
    extern __shared__ uint8_t smem_raw[];
    __shared__ __align__(8) uint64_t reduce_bar[kGemmConsumers];
    __shared__ int last[kGemmConsumers];
    uint8_t* slots = smem_raw + ((1024 - (smem_addr(smem_raw) & 1023)) & 1023);
    const int warpgroup = threadIdx.x / 128;
    if (threadIdx.x == 0) {
        mbar_init(&reduce_bar[0], 1), mbar_init(&reduce_bar[1], 1);
        fence_mbarrier_init();
    }
    __syncthreads();
    if (warpgroup == 0) {
        warpgroup_registers_dec<56>();
        if constexpr (D == kTailCluster) cluster_sync(), cluster_sync();
    } else {
        warpgroup_registers_inc<224>();
        if (warpgroup == 1)
            tail_consume<S, D, 0>(a, slots, &reduce_bar[0], &last[0]);
        else
            tail_consume<S, D, 1>(a, slots, &reduce_bar[1], &last[1]);
    }
}

// One launch of design D, or (clusters != nullptr) only how many of its clusters fit at once.
template <class S, int D>
const char* tail_launch(const TailArgs& a, cudaStream_t stream, int* clusters) {
    auto kernel = splitk_tail_kernel<S, D>;
    cudaError_t e = cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, S::kSmem);
    if (e == cudaSuccess && D == kTailCluster)
        e = cudaFuncSetAttribute(kernel, cudaFuncAttributeNonPortableClusterSizeAllowed, 1);
    cudaLaunchConfig_t config = {};
    config.gridDim = dim3(a.g.ctas), config.blockDim = dim3(kGemmThreads), config.dynamicSmemBytes = S::kSmem;
    config.stream = stream;
    cudaLaunchAttribute attr;
    if (D == kTailCluster) {
        attr.id = cudaLaunchAttributeClusterDimension;
        attr.val.clusterDim.x = a.splits, attr.val.clusterDim.y = 1, attr.val.clusterDim.z = 1;
    } else {
        attr.id = cudaLaunchAttributeCooperative, attr.val.cooperative = 1;  // the CTAs wait on each other
    }
    config.attrs = &attr, config.numAttrs = D == kTailNone ? 0 : 1;
    if (e == cudaSuccess && clusters != nullptr) {
        *clusters = 0;
        e = D == kTailCluster ? cudaOccupancyMaxActiveClusters(clusters, kernel, &config) : cudaSuccess;
    } else if (e == cudaSuccess) {
        e = cudaLaunchKernelEx(&config, kernel, a);
        if (e == cudaSuccess) e = cudaGetLastError();
    }
    return e == cudaSuccess ? "" : cudaGetErrorString(e);
}

template <class S>
const char* tail_design(int design, const TailArgs& a, cudaStream_t stream, int* clusters) {
    switch (design) {
        case kTailStore: return tail_launch<S, kTailStore>(a, stream, clusters);
        case kTailBulkStore: return tail_launch<S, kTailBulkStore>(a, stream, clusters);
        case kTailReduceShares: return tail_launch<S, kTailReduceShares>(a, stream, clusters);
        case kTailReduceLast: return tail_launch<S, kTailReduceLast>(a, stream, clusters);
        case kTailCluster: return tail_launch<S, kTailCluster>(a, stream, clusters);
        case kTailNone: return tail_launch<S, kTailNone>(a, stream, clusters);
    }
    return "design must be 0..5";
}

}  // namespace okc

// One launch of the probe on `stream` (clusters == 0), or the count of its clusters that fit at once written to
// *clusters; "" once done, else why not. The tile shapes are persistent_gemm's, each with its ring of the kernel's
// configs (so a CTA takes an SM as it does there).
const char* splitk_tail_launch(int design, int rows, int tokens, int m, int n, int splits, long long out,
                               long long ws, long long sums, long long stamps, long long sem, long long stream,
                               long long clusters) {
    const int tiles = n / rows * ((m + tokens - 1) / tokens);
    if (n % rows || splits < 2 || tiles * splits > 132 || (design == okc::kTailCluster && splits > 16))
        return "n must be a multiple of rows, 2 <= splits, tiles x splits <= 132, and clusters of at most 16";
    const okc::TailArgs a{{nullptr, nullptr, reinterpret_cast<void*>(out), reinterpret_cast<float*>(sums),
                           reinterpret_cast<long long*>(stamps), reinterpret_cast<int*>(sem), m, n,
                           splits * 8 * okc::kTmaTileK, tiles * splits},
                          reinterpret_cast<float*>(ws),
                          splits};
    auto st = reinterpret_cast<cudaStream_t>(stream);
    int* count = reinterpret_cast<int*>(clusters);
    using bf16 = __nv_bfloat16;
    if (rows == 128 && tokens == 64)
        return okc::tail_design<okc::GemmShape<128, 64, 8, false, bf16>>(design, a, st, count);
    if (rows == 128 && tokens == 128)
        return okc::tail_design<okc::GemmShape<128, 128, 5, false, bf16>>(design, a, st, count);
    if (rows == 128 && tokens == 256)
        return okc::tail_design<okc::GemmShape<128, 256, 4, false, bf16>>(design, a, st, count);
    if (rows == 256 && tokens == 128)
        return okc::tail_design<okc::GemmShape<256, 128, 4, false, bf16>>(design, a, st, count);
    return "rows x tokens must be 128 x 64, 128 x 128, 128 x 256 or 256 x 128";
}
