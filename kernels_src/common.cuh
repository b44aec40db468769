// Helpers every kernel shares: cached loads, the bf16 mma, mbarriers, the cluster push, the launch, and the end of
// a CTA of the two mma.sync GEMVs (their warps' tiles summed, then S = 1, cluster or semaphore split-K). Design and
// figures: docs/mma-gemv.md.
#pragma once
#include <cuda_runtime.h>
#include <cuda_bf16.h>
#include <stdint.h>

#include "call.h"
#include "generated/constants.h"

#if defined(__clang__) && !defined(__NVCC__)
// clang's CUDA headers give __stcg (store, L2 only) for bf16 alone; nvcc's give the float ones the split-K partials
// use. For clang-based tools (clangd, README "Editing kernels"): nvcc never reads these.
__device__ inline void __stcg(float* p, float v) { asm("st.global.cg.f32 [%0], %1;" ::"l"(p), "f"(v) : "memory"); }
__device__ inline void __stcg(float4* p, float4 v) {
    asm("st.global.cg.v4.f32 [%0], {%1, %2, %3, %4};" ::"l"(p), "f"(v.x), "f"(v.y), "f"(v.z), "f"(v.w) : "memory");
}
#endif

namespace okc {

// kSmemOptInLimit and the semaphore array's layout (kTicketAt, kTicketGroups, kTicketSplits, kSemaphoreInts) come
// from engine.py, in the prelude.

// One lane's 16 bytes: a whole mma A fragment (8 bf16), or 8 consecutive bf16 of x.
struct alignas(16) Frag {
    uint32_t r[4];
};

__device__ __forceinline__ Frag zero_frag() { return Frag{{0u, 0u, 0u, 0u}}; }

// Weights are read once: not into L1, which x keeps; `volatile` keeps the loads in the order a style writes them.
__device__ __forceinline__ Frag ld_weights(const Frag* p) {
    Frag f;
    asm volatile("ld.global.nc.L1::no_allocate.v4.u32 {%0, %1, %2, %3}, [%4];"
                 : "=r"(f.r[0]), "=r"(f.r[1]), "=r"(f.r[2]), "=r"(f.r[3])
                 : "l"(p));
    return f;
}

// The same, and L2 fetches the whole 256-byte sector group.
__device__ __forceinline__ Frag ld_weights_l2_256(const Frag* p) {
    Frag f;
    asm volatile("ld.global.nc.L1::no_allocate.L2::256B.v4.u32 {%0, %1, %2, %3}, [%4];"
                 : "=r"(f.r[0]), "=r"(f.r[1]), "=r"(f.r[2]), "=r"(f.r[3])
                 : "l"(p));
    return f;
}

// x: re-read by every CTA, so through L1.
__device__ __forceinline__ Frag ld_x(const Frag* p) {
    uint4 v = __ldg(reinterpret_cast<const uint4*>(p));
    return Frag{{v.x, v.y, v.z, v.w}};
}

// D = A(16x16 bf16, row) * B(16x8 bf16, col) + D, fp32 accumulate. a: 4 regs, b0/b1: 2 regs, d: 4 floats.
__device__ __forceinline__ void mma_bf16_m16n8k16(float (&d)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
    asm("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 "
        "{%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

// mbarriers in shared memory: the rings (ring.cuh) and the cluster inbox below.
__device__ __forceinline__ uint32_t smem_addr(const void* p) {
    return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}

__device__ __forceinline__ void mbar_init(uint64_t* bar, uint32_t count) {
    asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" ::"r"(smem_addr(bar)), "r"(count) : "memory");
}

__device__ __forceinline__ void mbar_arrive(uint64_t* bar) {
    asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];" ::"r"(smem_addr(bar)) : "memory");
}

__device__ __forceinline__ void mbar_arrive_expect_tx(uint64_t* bar, uint32_t bytes) {
    asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(smem_addr(bar)), "r"(bytes) : "memory");
}

// Spin until the barrier's phase of this parity has completed (acquire).
__device__ __forceinline__ void mbar_wait(uint64_t* bar, uint32_t parity) {
    asm volatile(
        "{\n"
        ".reg .pred done;\n"
        "MBAR_WAIT_%=:\n"
        "mbarrier.try_wait.parity.shared::cta.b64 done, [%0], %1;\n"
        "@!done bra MBAR_WAIT_%=;\n"
        "}\n" ::"r"(smem_addr(bar)),
        "r"(parity)
        : "memory");
}

// The same with cluster-scope acquire: the cluster's st.async stores here are visible.
__device__ __forceinline__ void mbar_wait_cluster(uint64_t* bar, uint32_t parity) {
    asm volatile(
        "{\n"
        ".reg .pred done;\n"
        "MBAR_WAIT_CLUSTER_%=:\n"
        "mbarrier.try_wait.parity.acquire.cluster.shared::cta.b64 done, [%0], %1;\n"
        "@!done bra MBAR_WAIT_CLUSTER_%=;\n"
        "}\n" ::"r"(smem_addr(bar)),
        "r"(parity)
        : "memory");
}

// Cluster split-K: the S CTAs of a tile are one cluster; the ranks that own part of it keep an inbox (a slot per
// other rank, one mbarrier), the others push into it with st.async and leave: one SM-to-SM trip where the
// semaphore takes three L2 round trips (1.7-1.9 us of the TMA GEMV's tail).
__device__ __forceinline__ uint32_t cluster_rank() {
    uint32_t r;
    asm volatile("mov.u32 %0, %%cluster_ctarank;" : "=r"(r));
    return r;
}

// At kernel start, every thread: thread 0 arms this rank's inbox for `bytes`; all arrive on the cluster barrier,
// whose wait (inbox_ready, before the first push) is long done by then.
__device__ __forceinline__ void open_inbox(uint64_t* full, uint32_t bytes) {
    if (threadIdx.x == 0) {
        mbar_init(full, 1);
        mbar_arrive_expect_tx(full, bytes);  // the one arrival; the pushes complete the byte count
        asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
    }
    asm volatile("barrier.cluster.arrive.relaxed;" ::: "memory");
}

// Every thread, once after open_inbox: every rank's inbox is armed.
__device__ __forceinline__ void inbox_ready() { asm volatile("barrier.cluster.wait;" ::: "memory"); }

// Four floats into rank `to`'s copy of `dst`, counted on its copy of `full`.
__device__ __forceinline__ void push_to_rank(int to, float* dst, uint64_t* full, float v0, float v1, float v2,
                                             float v3) {
    uint32_t remote_dst, remote_bar;
    asm volatile("mapa.shared::cluster.u32 %0, %1, %2;" : "=r"(remote_dst) : "r"(smem_addr(dst)), "r"(to));
    asm volatile("mapa.shared::cluster.u32 %0, %1, %2;" : "=r"(remote_bar) : "r"(smem_addr(full)), "r"(to));
    asm volatile(
        "st.async.shared::cluster.mbarrier::complete_tx::bytes.v4.b32 [%0], {%1, %2, %3, %4}, [%5];" ::"r"(remote_dst),
        "r"(__float_as_uint(v0)), "r"(__float_as_uint(v1)), "r"(__float_as_uint(v2)), "r"(__float_as_uint(v3)),
        "r"(remote_bar)
        : "memory");
}

// Host side: `kernel` with `smem` bytes of dynamic shared memory, grid.y the K split, a column of it one cluster if
// asked; nullptr, or the CUDA error's text.
template <typename... Params, typename... Args>
const char* launch_splits(void (*kernel)(Params...), dim3 grid, dim3 block, size_t smem, cudaStream_t stream,
                          bool cluster, Args... args) {
    if (smem > 48 * 1024) {  // past the default limit: opt in
        const cudaError_t err = cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem);
        if (err != cudaSuccess) return cudaGetErrorString(err);
    }
    if (!cluster) {
        kernel<<<grid, block, smem, stream>>>(args...);
    } else {
        if (grid.y > 8) {  // past the portable 8, on request
            const cudaError_t err = cudaFuncSetAttribute(kernel, cudaFuncAttributeNonPortableClusterSizeAllowed, 1);
            if (err != cudaSuccess) return cudaGetErrorString(err);
        }
        cudaLaunchConfig_t config = {};
        config.gridDim = grid;
        config.blockDim = block;
        config.dynamicSmemBytes = smem;
        config.stream = stream;
        cudaLaunchAttribute cluster_dim;
        cluster_dim.id = cudaLaunchAttributeClusterDimension;
        cluster_dim.val.clusterDim.x = 1;
        cluster_dim.val.clusterDim.y = grid.y;
        cluster_dim.val.clusterDim.z = 1;
        config.attrs = &cluster_dim;
        config.numAttrs = 1;
        const cudaError_t err = cudaLaunchKernelEx(&config, kernel, args...);
        if (err != cudaSuccess) return cudaGetErrorString(err);
    }
    const cudaError_t err = cudaGetLastError();
    return err == cudaSuccess ? nullptr : cudaGetErrorString(err);
}

// Output-atomic split-K (mma_gemv, reduce = atomic_out, fp32 out): split 0 zeroes the row group's output and
// raises its flag by S; every CTA adds its tile with red.add once the flag reaches the value its ticket names.
// Tickets and flags only grow, so no launch clears them (docs/mma-gemv.md).
constexpr int kFlagAt = kTicketAt + kTicketSplits * kTicketGroups;
static_assert(kFlagAt + kTicketSplits * kTicketGroups == kSemaphoreInts, "the flags end the semaphore array");

// The counters' slot for (group, S), S a power of two in 2..32.
__device__ __forceinline__ int ticket_slot(int group, int S) { return (__ffs(S) - 2) * kTicketGroups + group; }

// Thread 0 of every CTA, at kernel start; read at its end (flag_wanted).
__device__ __forceinline__ uint32_t take_ticket(int* sem, int group, int S) {
    return atomicAdd(reinterpret_cast<unsigned int*>(sem + kTicketAt + ticket_slot(group, S)), 1u);
}

__device__ __forceinline__ uint32_t flag_wanted(uint32_t ticket, int S) {
    return (ticket & ~(uint32_t)(S - 1)) + (uint32_t)S;
}

// One warp of split 0, at kernel start: zero the row group's output, then raise its flag by S.
__device__ __forceinline__ void zero_and_raise(int* sem, int group, int S, float* out, int M, int N, int row0,
                                               int rows) {
    const int lane = threadIdx.x & 31, quads = rows / 4;
    for (int i = lane; i < M * quads; i += 32) {
        float4* p = reinterpret_cast<float4*>(out + (size_t)(i / quads) * N + row0) + i % quads;
        __stcg(p, make_float4(0.f, 0.f, 0.f, 0.f));
    }
    __syncwarp();  // the lanes' stores before lane 0's release, which covers them
    if (lane == 0)
        asm volatile("red.release.gpu.global.add.u32 [%0], %1;" ::"l"(sem + kFlagAt + ticket_slot(group, S)), "r"(S)
                     : "memory");
}

// The flag, unordered: peeked once a loop trip, so that the wait after the loop rarely waits.
__device__ __forceinline__ uint32_t peek_flag(const int* sem, int group, int S) {
    uint32_t v;
    asm volatile("ld.relaxed.gpu.global.u32 %0, [%1];" : "=r"(v) : "l"(sem + kFlagAt + ticket_slot(group, S)));
    return v;
}

// Thread 0, before the CTA barrier ahead of the adds: this launch's zeroes are visible.
__device__ __forceinline__ void await_zeroed(const int* sem, int group, int S, uint32_t seen, uint32_t want) {
    while (seen != want) seen = peek_flag(sem, group, S);
    asm volatile("fence.acq_rel.gpu;" ::: "memory");
}

// out[0..3] += v, one L2 atomic; like every f32 atomic add it flushes results under 2^-126 to 0.
__device__ __forceinline__ void red_add_v4(float* p, float v0, float v1, float v2, float v3) {
    asm volatile("red.global.add.v4.f32 [%0], {%1, %2, %3, %4};" ::"l"(p), "f"(v0), "f"(v1), "f"(v2), "f"(v3)
                 : "memory");
}

__device__ __forceinline__ void store_out(float* p, float v) { *p = v; }
__device__ __forceinline__ void store_out(__nv_bfloat16* p, float v) { *p = __float2bfloat16_rn(v); }

// x as the mma's B operand: lane (g, t) reads token g of each 8-token block, one 16-byte load a 32-wide K block.
template <int NB>
__device__ __forceinline__ void x_operand(const Frag* x, int M, int K, int lane, const Frag* (&xp)[NB],
                                          bool (&xvalid)[NB]) {
#pragma unroll
    for (int nb = 0; nb < NB; ++nb) {
        const int token = nb * 8 + (lane >> 2);
        xvalid[nb] = token < M;
        xp[nb] = x + (size_t)(xvalid[nb] ? token : 0) * (K >> 3) + (lane & 3);
    }
}

template <int RowBlocks, int NB>
__device__ __forceinline__ void zero_accumulators(float (&acc)[RowBlocks][NB][4]) {
#pragma unroll
    for (int r = 0; r < RowBlocks; ++r)
#pragma unroll
        for (int nb = 0; nb < NB; ++nb)
#pragma unroll
            for (int j = 0; j < 4; ++j) acc[r][nb][j] = 0.f;
}

// red: [NW][R * NB * 4][32], each warp's accumulators in the mma C layout, conflict-free by lane.
template <int RowBlocks, int NB>
__device__ __forceinline__ void park_accumulators(float* red, const float (&acc)[RowBlocks][NB][4], int warp,
                                                  int lane) {
#pragma unroll
    for (int r = 0; r < RowBlocks; ++r)
#pragma unroll
        for (int nb = 0; nb < NB; ++nb)
#pragma unroll
            for (int j = 0; j < 4; ++j)
                red[(warp * RowBlocks * NB * 4 + (r * NB + nb) * 4 + j) * 32 + lane] = acc[r][nb][j];
}

// Element idx of a CTA's tile summed over its warps (red: [NW][kTile], conflict-free by lane).
__device__ __forceinline__ float sum_over_warps(const float* red, int kTile, int idx) {
    const int nw = blockDim.x >> 5;
    float v = 0.f;
    for (int w = 0; w < nw; ++w) v += red[w * kTile + idx];
    return v;
}

// The end of a GEMV CTA, after park_accumulators and a barrier: the warps' tiles summed and written (write(idx, v)),
// or for S > 1 reduced by cluster push into rank 0 or by semaphore, both in a fixed order. Args: S, cluster, ws, sem.
template <typename Args, typename WriteElement>
__device__ __forceinline__ void finish_tile(const Args& a, float* red, float* inbox, uint64_t* inbox_full, int kTile,
                                            int group, int split, WriteElement write) {
    const int nw = blockDim.x >> 5;
    if (a.S == 1) {
        for (int idx = threadIdx.x; idx < kTile; idx += blockDim.x) {
            float v = sum_over_warps(red, kTile, idx);
            write(idx, v);
        }
        return;
    }

    if (a.cluster) {  // rank r is split r
        inbox_ready();
        const int rank = (int)cluster_rank();
        if (rank != 0) {
            float* slot = inbox + (size_t)(rank - 1) * kTile;
            for (int i = threadIdx.x * 4; i < kTile; i += blockDim.x * 4) {
                float v[4] = {0.f, 0.f, 0.f, 0.f};
                for (int w = 0; w < nw; ++w)
#pragma unroll
                    for (int j = 0; j < 4; ++j) v[j] += red[w * kTile + i + j];
                push_to_rank(0, slot + i, inbox_full, v[0], v[1], v[2], v[3]);
            }
            return;
        }
        for (int idx = threadIdx.x; idx < kTile; idx += blockDim.x) {  // rank 0's own while the rest land
            float v = sum_over_warps(red, kTile, idx);
            red[idx] = v;  // in place of warp 0's: each idx is this thread's alone
        }
        mbar_wait_cluster(inbox_full, 0);
        for (int idx = threadIdx.x; idx < kTile; idx += blockDim.x) {
            float v = red[idx];
            for (int s = 0; s < a.S - 1; ++s) v += inbox[(size_t)s * kTile + idx];  // rank order: deterministic
            write(idx, v);
        }
        return;
    }

    // Semaphore: publish this CTA's tile; the last CTA of the row group sums all S.
    float* mine = a.ws + ((size_t)group * a.S + split) * kTile;
    for (int idx = threadIdx.x; idx < kTile; idx += blockDim.x) {
        __stcg(mine + idx, sum_over_warps(red, kTile, idx));
    }
    __threadfence();  // visible device-wide before this CTA counts itself in
    __syncthreads();
    __shared__ int is_last;
    if (threadIdx.x == 0) is_last = atomicAdd(a.sem + group, 1) == a.S - 1;
    __syncthreads();
    if (!is_last) return;
    __threadfence();  // acquire: the other CTAs' tiles
    const float* tiles = a.ws + (size_t)group * a.S * kTile;
    for (int idx = threadIdx.x; idx < kTile; idx += blockDim.x) {
        float v = 0.f;
        for (int s = 0; s < a.S; ++s) v += __ldcg(tiles + (size_t)s * kTile + idx);  // fixed order: deterministic
        write(idx, v);
    }
    if (threadIdx.x == 0) a.sem[group] = 0;  // every CTA has arrived: ready for the next launch
}

}  // namespace okc
