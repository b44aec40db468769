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
    kTailStore = 0,         // the kernel's: partials less the own share by st.global, gathered back by bulk copies
    kTailBulkStore = 1,     // partials staged in shared memory and written by bulk copies; gathered back as above
    kTailReduceShares = 2,  // partials bulk-added into the tile's one fp32 sum in L2; each CTA then reads its share
    kTailReduceLast = 3,    // the same adds; the last CTA to add reads the whole tile
    kTailCluster = 4,       // the tile's CTAs are one cluster: each reads its share from every rank's shared memory
    kTailNone = 5,          // stamps only: the launch and the stamps' own cost
};

struct TailArgs {
    GemmArgs g;   // out, ws (the store designs' partials), stamps, sem, M, N, K (8 k-blocks a CTA), ctas
    float* sums;  // the reduce designs: each tile's fp32 sum per consumer warpgroup, zero between launches
    int splits;   // CTAs a tile: CTA c is participant c % splits of tile c / splits
};

constexpr int kTailCopy = 8192;  // bytes a bulk copy of a partial: four to sixteen in flight

// `bytes` contiguous bytes (a multiple of 16) of shared memory out to global memory by the bulk copy engine, in
// the issuing thread's bulk group (bulk_commit, bulk_wait).
__device__ __forceinline__ void bulk_store_1d(void* dst, const void* src, uint32_t bytes) {
    asm volatile("cp.async.bulk.global.shared::cta.bulk_group [%0], [%1], %2;" ::"l"(dst), "r"(smem_addr(src)),
                 "r"(bytes)
                 : "memory");
}

// The same bytes, as floats, added into global memory (the adds are done in L2, atomically per element).
__device__ __forceinline__ void bulk_reduce_add_f32(float* dst, const void* src, uint32_t bytes) {
    asm volatile("cp.reduce.async.bulk.global.shared::cta.bulk_group.add.f32 [%0], [%1], %2;" ::"l"(dst),
                 "r"(smem_addr(src)), "r"(bytes)
                 : "memory");
}

__device__ __forceinline__ void bulk_commit() { asm volatile("cp.async.bulk.commit_group;" ::: "memory"); }

// Until all but N of the thread's committed bulk groups are complete: their global writes done.
template <int N>
__device__ __forceinline__ void bulk_wait() {
    asm volatile("cp.async.bulk.wait_group %0;" ::"n"(N) : "memory");
}

// This thread's shared-memory writes made visible to the async proxy (a bulk copy that reads them next).
__device__ __forceinline__ void fence_async_shared() { asm volatile("fence.proxy.async.shared::cta;" ::: "memory"); }

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

// A warpgroup's partial into shared memory, thread-major: float4 j of m64 block b of thread t at (b * kNB + j) * 128
// + t, so a warp's 512 bytes lie together and one bulk copy takes the whole.
template <class S>
__device__ __forceinline__ void tail_stage(uint8_t* buffer, const float (&acc)[S::kBlocks][S::kAcc], int t) {
    float4* stage = reinterpret_cast<float4*>(buffer) + t;
#pragma unroll
    for (int b = 0; b < S::kBlocks; ++b)
#pragma unroll
        for (int j = 0; j < S::kNB; ++j)
            stage[(b * S::kNB + j) * 128] =
                make_float4(acc[b][4 * j], acc[b][4 * j + 1], acc[b][4 * j + 2], acc[b][4 * j + 3]);
}

// Designs kTailReduceShares and kTailReduceLast: the partial, staged in this warpgroup's half of the idle ring, is
// added into the tile's fp32 sum in L2 by bulk reduce copies, all in flight at once; then counted in. Thread 0 gets
// the arrivals before its own.
template <class S, int G>
__device__ __forceinline__ int tail_add_partial(float4* sum, int* arrivals, uint8_t* buffer,
                                                const float (&acc)[S::kBlocks][S::kAcc], int t) {
    tail_stage<S>(buffer, acc, t);
    fence_async_shared();
    named_barrier_sync<kWarpgroupBarrier + G, 128>();
    int before = 0;
    if (t == 0) {
        for (int off = 0; off < S::kPartial * 16; off += kTailCopy)
            bulk_reduce_add_f32(reinterpret_cast<float*>(sum) + off / 4, buffer + off, kTailCopy);
        bulk_commit();
        bulk_wait<0>();
        asm volatile("fence.proxy.async.global;" ::: "memory");  // the adds, then the release that counts them
        asm volatile("atom.acq_rel.gpu.global.add.s32 %0, [%1], 1;" : "=r"(before) : "l"(arrivals) : "memory");
    }
    return before;
}

// Design kTailBulkStore: the kernel's store, staged and written by bulk copies instead of every thread's stores.
template <class S, int G>
__device__ __forceinline__ void tail_bulk_store(float4* slot, int* arrivals, uint8_t* buffer,
                                                const float (&acc)[S::kBlocks][S::kAcc], int t) {
    tail_stage<S>(buffer, acc, t);
    fence_async_shared();
    named_barrier_sync<kWarpgroupBarrier + G, 128>();
    if (t == 0) {
        for (int off = 0; off < S::kPartial * 16; off += kTailCopy)
            bulk_store_1d(reinterpret_cast<uint8_t*>(slot) + off, buffer + off, kTailCopy);
        bulk_commit();
        bulk_wait<0>();
        asm volatile("fence.proxy.async.global;" ::: "memory");
        asm volatile("red.release.gpu.global.add.s32 [%0], 1;" ::"l"(arrivals) : "memory");
    }
}

// Design kTailReduceShares, once the tile's `count` CTAs have all added theirs: participant `share`'s token blocks of
// the sum: read, zeroed for the next launch, written out. The last to leave resets the tile's counters.
template <class S, int G>
__device__ __forceinline__ void tail_take_share(const GemmArgs& a, float4* sum, int* arrivals, int share, int count,
                                                int row0, int token0, uint8_t* staging, int t) {
    if (t == 0) {
        while (load_acquire(arrivals) < count) __nanosleep(32);
        if (OKC_GEMM_STAMPS) gemm_stamp(a, G, kStampArrived);
    }
    named_barrier_sync<kWarpgroupBarrier + G, 128>();
    const int block0 = S::kNB * share / count, blocks = S::kNB * (share + 1) / count - block0;
    const float4 zero = make_float4(0.f, 0.f, 0.f, 0.f);
    float part[S::kBlocks][4 * S::kShareBlocks];
#pragma unroll
    for (int b = 0; b < S::kBlocks; ++b)
#pragma unroll
        for (int j = 0; j < S::kShareBlocks; ++j)
            if (j < blocks) {
                float4* at = sum + (b * S::kNB + block0 + j) * 128 + t;
                const float4 v = __ldcg(at);
                __stcg(at, zero);
                part[b][4 * j] = v.x, part[b][4 * j + 1] = v.y, part[b][4 * j + 2] = v.z, part[b][4 * j + 3] = v.w;
            }
    gemm_write<S, G, S::kShareBlocks>(a, staging, row0, token0 + 8 * block0, part, blocks, t);
    if (t == 0 && atomicAdd(arrivals + 1, 1) == count - 1) arrivals[0] = 0, arrivals[1] = 0;
}

// Design kTailCluster: each rank's partial stays in its shared memory; this CTA sums its token blocks over the ranks.
template <class S, int G>
__device__ __forceinline__ void tail_cluster(const TailArgs& a, uint8_t* buffer,
                                             const float (&acc)[S::kBlocks][S::kAcc], int row0, int token0,
                                             uint8_t* staging, int t) {
    tail_stage<S>(buffer, acc, t);
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
    const int before = tail_add_partial<S, G>(sum, arrivals, buffer, acc, t);
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
    float4* sum = reinterpret_cast<float4*>(a.sums) + (size_t)(tile * kGemmConsumers + G) * S::kPartial;
    float4* parts = reinterpret_cast<float4*>(a.g.ws) + (size_t)(tile * a.splits * kGemmConsumers + G) * S::kPartial;
    float4* mine = parts + (size_t)p * kGemmConsumers * S::kPartial;
    float acc[S::kBlocks][S::kAcc];
    tail_partial<S>(acc, row0, token0, p, t);
    if (t == 0) gemm_stamp(a.g, G, kStampEntry);
    if constexpr (D == kTailStore || D == kTailBulkStore) {        // the kernel's gather after either store
        const GemmShare own = GemmShare::of<S::kNB>(p, a.splits);  // kept out of the store and the gather
        if constexpr (D == kTailStore)
            gemm_store_partial<S, G>(mine, arrivals, acc, own, t);
        else
            tail_bulk_store<S, G>(mine, arrivals, buffer, acc, t);
        named_barrier_sync<kConsumersBarrier, 128 * kGemmConsumers>();
        gemm_keep_share<S>(reinterpret_cast<float4*>(buffer), acc, own, t);
        if (t == 0) gemm_stamp(a.g, G, kStampUnits);
        gemm_gather_share<S, G>(a.g, parts, arrivals, p, a.splits, buffer, bar, row0, token0, staging, t);
    } else if constexpr (D == kTailReduceShares) {
        tail_add_partial<S, G>(sum, arrivals, buffer, acc, t);
        if (t == 0) gemm_stamp(a.g, G, kStampUnits);
        tail_take_share<S, G>(a.g, sum, arrivals, p, a.splits, row0, token0, staging, t);
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
const char* splitk_tail_launch(int design, int rows, int tokens, int m, int n, int splits, long long out, long long ws,
                               long long sums, long long stamps, long long sem, long long stream, long long clusters) {
    const int tiles = n / rows * ((m + tokens - 1) / tokens);
    if (n % rows || splits < 2 || tiles * splits > 132 || (design == okc::kTailCluster && splits > 16))
        return "n must be a multiple of rows, 2 <= splits, tiles x splits <= 132, and clusters of at most 16";
    const okc::TailArgs a{{nullptr, nullptr, reinterpret_cast<void*>(out), reinterpret_cast<float*>(ws),
                           reinterpret_cast<long long*>(stamps), reinterpret_cast<int*>(sem), m, n,
                           splits * 8 * okc::kTmaTileK, tiles * splits},
                          reinterpret_cast<float*>(sums),
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
