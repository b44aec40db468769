// Small device helpers shared by the kernels: 16-byte loads with explicit cache policy, the bf16 mma, and the
// skeleton the two mma.sync GEMVs (mma_gemv.cuh, compressed_gemv.cuh) share: x's operand pointers, the
// accumulators, and the end of a CTA (its warps' tiles summed, then S = 1, cluster or semaphore split-K).
#pragma once
#include <cuda_runtime.h>
#include <cuda_bf16.h>
#include <stdint.h>

#include "call.h"

namespace okc {

// kSmemOptInLimit, the dynamic shared memory a block may opt into (Hopper's 227 KB per block, less 1 KB kept for
// the kernels' static shared variables, which count against the same limit), and the semaphore array's layout
// (kTicketAt, kTicketGroups, kTicketSplits, kSemaphoreInts) come from engine.py, rendered ahead of this file
// (registry.py, cuda_prelude).

// One lane's 16 bytes: a whole mma A fragment (8 bf16), or 8 consecutive bf16 of x.
struct alignas(16) Frag {
    uint32_t r[4];
};

__device__ __forceinline__ Frag zero_frag() { return Frag{{0u, 0u, 0u, 0u}}; }

// Weights are read exactly once per call: keep them out of L1 (no_allocate) so x, which every CTA re-reads,
// stays there. `volatile` keeps the loads in the order the pipelining style wrote them.
__device__ __forceinline__ Frag ld_weights(const Frag* p) {
    Frag f;
    asm volatile("ld.global.nc.L1::no_allocate.v4.u32 {%0, %1, %2, %3}, [%4];"
                 : "=r"(f.r[0]), "=r"(f.r[1]), "=r"(f.r[2]), "=r"(f.r[3])
                 : "l"(p));
    return f;
}

// Same, and ask L2 to fetch the whole 256-byte sector group: the next lanes' and next trips' bytes arrive
// with fewer DRAM requests in flight.
__device__ __forceinline__ Frag ld_weights_l2_256(const Frag* p) {
    Frag f;
    asm volatile("ld.global.nc.L1::no_allocate.L2::256B.v4.u32 {%0, %1, %2, %3}, [%4];"
                 : "=r"(f.r[0]), "=r"(f.r[1]), "=r"(f.r[2]), "=r"(f.r[3])
                 : "l"(p));
    return f;
}

// x: small and re-read by every CTA, so the default read-only path (L1 + L2).
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

// mbarriers in shared memory: the TMA GEMV's ring and the cluster inbox below.
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

// Spin until the barrier's phase of this parity has completed (acquire: the bytes TMA wrote are visible).
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

// The same wait with cluster-scope acquire: what other CTAs of the cluster stored here with st.async is visible.
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

// Cluster split-K (reduce = cluster, and the TMA GEMV's cluster_gather / cluster_scatter), shared by the GEMVs:
// the S CTAs that split one output tile's K range are one thread-block cluster (launch_splits). A rank that owns
// part of the tile keeps an inbox in its shared memory, one slot per other rank and one mbarrier; the other ranks
// push their partials of that part into their slots with st.async (each 16-byte store counted on that barrier's byte
// count) and leave. The owner waits on the barrier once, adds the S partials in rank order (deterministic) and writes
// the output.
// After the slowest split that is one one-way SM-to-SM trip, where the semaphore path takes three L2 round trips
// (publish and fence, count, reload): that tail measured 1.7-1.9 us of the TMA GEMV's time (docs/tma-gemv.md).
// A gather gives rank 0 the whole tile; the TMA GEMV's scatter spreads it over all S ranks, because an SM takes in
// distributed shared memory at only ~25 GB/s.
__device__ __forceinline__ uint32_t cluster_rank() {
    uint32_t r;
    asm volatile("mov.u32 %0, %%cluster_ctarank;" : "=r"(r));
    return r;
}

// At kernel start, every thread of every CTA: each rank's thread 0 arms its inbox barrier for the `bytes` the
// other ranks will push to it (0: none) and publishes its initialisation to the cluster; everyone arrives on the
// cluster barrier. The matching inbox_ready() comes before the first push: by then the arrival is long done, so
// it costs no wait.
__device__ __forceinline__ void open_inbox(uint64_t* full, uint32_t bytes) {
    if (threadIdx.x == 0) {
        mbar_init(full, 1);
        mbar_arrive_expect_tx(full, bytes);  // the one arrival; the pushes complete the byte count
        asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
    }
    asm volatile("barrier.cluster.arrive.relaxed;" ::: "memory");
}

// Every thread, once, after open_inbox: every rank's barrier is armed (and no CTA leaves before all have started).
__device__ __forceinline__ void inbox_ready() { asm volatile("barrier.cluster.wait;" ::: "memory"); }

// Four floats into rank `to`'s inbox at `dst` (this CTA's address of the same shared-memory offset, 16-byte
// aligned), counted on rank `to`'s copy of `full`.
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

// Host side, shared by every GEMV launcher: launch `kernel` with `smem` bytes of dynamic shared memory (opting in
// past 48 KB) on a grid whose blockIdx.y is the K split, either plainly or (cluster) with each column of grid.y CTAs
// as one thread-block cluster, so that the splits can reduce through distributed shared memory. Returns nullptr, or
// the CUDA error's text.
template <typename... Params, typename... Args>
const char* launch_splits(void (*kernel)(Params...), dim3 grid, dim3 block, size_t smem, cudaStream_t stream,
                          bool cluster, Args... args) {
    if (smem > 48 * 1024) {  // past the default dynamic shared-memory limit: opt in (not a stream operation)
        const cudaError_t err = cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem);
        if (err != cudaSuccess) return cudaGetErrorString(err);
    }
    if (!cluster) {
        kernel<<<grid, block, smem, stream>>>(args...);
    } else {
        if (grid.y > 8) {  // 9..16-CTA clusters are beyond the portable 8: Hopper allows them on request
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
        cluster_dim.val.clusterDim.y = grid.y;  // the K splits of one row group
        cluster_dim.val.clusterDim.z = 1;
        config.attrs = &cluster_dim;
        config.numAttrs = 1;
        const cudaError_t err = cudaLaunchKernelEx(&config, kernel, args...);
        if (err != cudaSuccess) return cudaGetErrorString(err);
    }
    const cudaError_t err = cudaGetLastError();
    return err == cudaSuccess ? nullptr : cudaGetErrorString(err);
}

// Output-atomic split-K (mma_gemv reduce = atomic_out, fp32 outputs only): the S CTAs of a row group add their
// partial tiles straight into the output with red.global.add, so the end of a CTA is one fire-and-forget trip to
// L2 instead of the semaphore's three round trips, and no cluster has to fit (clusters of 8 do not all fit on the H200:
// docs/mma-gemv.md). The output must read zero before the first add lands, and the caller hands over a fresh
// torch.empty. So split 0 of each row group zeroes the group's part of the output at kernel start, before its
// last warp issues any load (a fence likely also waits for the warp's loads in flight: docs/mma-gemv.md),
// and raises the group's flag by S; the others check the flag, long since raised, before their adds. Which
// launch a flag value belongs to comes from a ticket:
//   ticket  32-bit, per row group and S: each CTA adds 1 at start and reads the old value only at its end, so
//           the round trip never stalls it. A launch adds exactly S, so ticket rounded down to a multiple of S
//           counts this S's earlier launches (mod 2^32; S is a power of two).
//   flag    32-bit, per row group and S: split 0 adds S once this launch's zeroes are visible device-wide. A
//           CTA of this launch waits for (its ticket rounded down to a multiple of S) + S.
// Both counters only grow, so a launch leaves them ready for the next one and a graph replay needs no clearing
// kernel; launches of another S use other counters. They live in the semaphore array past the semaphore
// reduction's counters.
// kTicketAt (the tickets' int offset in the semaphore array), kTicketGroups (row groups an output-atomic launch
// may have) and kTicketSplits (S = 2, 4, 8, 16, 32) are engine.py's, rendered ahead of this file.
constexpr int kFlagAt = kTicketAt + kTicketSplits * kTicketGroups;
static_assert(kFlagAt + kTicketSplits * kTicketGroups == kSemaphoreInts, "the flags end the semaphore array");

// The counters' slot for (group, S), S a power of two in 2..32.
__device__ __forceinline__ int ticket_slot(int group, int S) { return (__ffs(S) - 2) * kTicketGroups + group; }

// Thread 0 of every CTA, at kernel start; the result is read at the CTA's end (flag_wanted).
__device__ __forceinline__ uint32_t take_ticket(int* sem, int group, int S) {
    return atomicAdd(reinterpret_cast<unsigned int*>(sem + kTicketAt + ticket_slot(group, S)), 1u);
}

__device__ __forceinline__ uint32_t flag_wanted(uint32_t ticket, int S) {
    return (ticket & ~(uint32_t)(S - 1)) + (uint32_t)S;
}

// One warp of split 0, at kernel start: zero the row group's output [M tokens x `rows` from
// `row0`], make the zeroes visible device-wide, then raise the flag by S.
__device__ __forceinline__ void zero_and_raise(int* sem, int group, int S, float* out, int M, int N, int row0,
                                               int rows) {
    const int lane = threadIdx.x & 31, quads = rows / 4;
    for (int i = lane; i < M * quads; i += 32) {
        float4* p = reinterpret_cast<float4*>(out + (size_t)(i / quads) * N + row0) + i % quads;
        __stcg(p, make_float4(0.f, 0.f, 0.f, 0.f));
    }
    __syncwarp();  // orders the lanes' stores before lane 0's release, which covers them (cumulativity)
    if (lane == 0)
        asm volatile("red.release.gpu.global.add.u32 [%0], %1;" ::"l"(sem + kFlagAt + ticket_slot(group, S)), "r"(S)
                     : "memory");
}

// The flag, read without ordering: issued once per loop trip so that by the end a recent value is at hand.
__device__ __forceinline__ uint32_t peek_flag(const int* sem, int group, int S) {
    uint32_t v;
    asm volatile("ld.relaxed.gpu.global.u32 %0, [%1];" : "=r"(v) : "l"(sem + kFlagAt + ticket_slot(group, S)));
    return v;
}

// Thread 0, before the barrier that precedes the adds: wait until this launch's zeroes are visible (the last
// peek almost always already shows them), then an acquire fence; the CTA barrier passes it on.
__device__ __forceinline__ void await_zeroed(const int* sem, int group, int S, uint32_t seen, uint32_t want) {
    while (seen != want) seen = peek_flag(sem, group, S);
    asm volatile("fence.acq_rel.gpu;" ::: "memory");
}

// out[0..3] += v, one L2 atomic for four consecutive fp32 (sm_90: red.global.v4.f32). Like every f32 atomic add it
// flushes subnormal inputs and results to zero (PTX ISA): an atomic-reduced output below 2^-126 in magnitude reads 0.
__device__ __forceinline__ void red_add_v4(float* p, float v0, float v1, float v2, float v3) {
    asm volatile("red.global.add.v4.f32 [%0], {%1, %2, %3, %4};" ::"l"(p), "f"(v0), "f"(v1), "f"(v2), "f"(v3)
                 : "memory");
}

__device__ __forceinline__ void store_out(float* p, float v) { *p = v; }
__device__ __forceinline__ void store_out(__nv_bfloat16* p, float v) { *p = __float2bfloat16_rn(v); }

// x as the mma's B operand: lane (g, t) reads token g of each 8-token column block, x[token][32 kb + 8t .. +7]
// (the packing's k order makes that one 16-byte load per 32-wide K block); tokens >= M are never read.
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

// Element idx of a CTA's tile summed over its warps' partials (red: [NW][kTile], park_accumulators' layout; a
// warp's lanes read consecutive idx, conflict-free).
__device__ __forceinline__ float sum_over_warps(const float* red, int kTile, int idx) {
    const int nw = blockDim.x >> 5;
    float v = 0.f;
    for (int w = 0; w < nw; ++w) v += red[w * kTile + idx];
    return v;
}

// The end of a GEMV CTA, after park_accumulators and a barrier: sum the NW warps' tiles (kTile floats each) and
// write them out with write(idx, v), or, for S > 1 CTAs splitting K, reduce the S partial tiles one of two ways
// (C in the tables; a.cluster here):
//   cluster    the S CTAs form one thread-block cluster: ranks 1..S-1 push their tiles into rank 0's inbox
//              (S - 1 slots of kTile floats after `red`, armed by open_inbox at kernel start; their tiles are
//              small enough that one owner does not wait on the bytes), rank 0 sums:
//              no workspace, no atomics, no global round trip;
//   semaphore  each CTA writes its tile to the workspace a.ws, and the last to arrive at its row group's counter
//              a.sem[group] sums them, writes the output and resets the counter to 0, so the next launch or
//              CUDA-graph replay needs no clearing kernel.
// Both sum in a fixed order: deterministic. Args: MmaGemvArgs or CompressedGemvArgs (S, cluster, ws, sem).
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

    if (a.cluster) {  // rank r of the cluster is split r (the cluster spans grid.y)
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
        for (int idx = threadIdx.x; idx < kTile; idx += blockDim.x) {  // rank 0: its own tile while the rest land
            float v = sum_over_warps(red, kTile, idx);
            red[idx] = v;  // in place of warp 0's slice: each idx is read and written by this thread only
        }
        mbar_wait_cluster(inbox_full, 0);
        for (int idx = threadIdx.x; idx < kTile; idx += blockDim.x) {
            float v = red[idx];
            for (int s = 0; s < a.S - 1; ++s) v += inbox[(size_t)s * kTile + idx];  // rank order: deterministic
            write(idx, v);
        }
        return;
    }

    // Semaphore: publish this CTA's tile, then the last CTA of the row group reduces all S of them.
    float* mine = a.ws + ((size_t)group * a.S + split) * kTile;
    for (int idx = threadIdx.x; idx < kTile; idx += blockDim.x) {
        __stcg(mine + idx, sum_over_warps(red, kTile, idx));
    }
    __threadfence();  // make the tile visible device-wide before this CTA counts itself in
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
