// Session 14 probe: what does the bf16 TMA GEMV's fixed ~1.7 us over the launch floor consist of?
//
// fprobe (call 1) showed the qkv_gate TMA GEMV's stream at the read bandwidth and everything else fixed: the empty
// ring (no copies, the reduction of zeros) costs 6.24 us against a 4.58 us launch floor. This standalone program
// (no torch: nvcc alone, seconds to build) times, the judge's way (notes/probekit.cuh since session 23: CUDA graph,
// L2 read-flushed before each replay, events around the replay, median), kernels that add the TMA GEMV's features one at a time:
//   shells:  the same grid (36 x 3 CTAs of 160 threads) empty; + 91 KB dynamic shared memory; + a cluster of 3;
//            + the ring's barriers; + the cluster barrier; + the DSMEM push of a partial tile; + the output write;
//   streams: the ring alone (bulk copies of 8 KB tiles into STAGES slots, consumers only wait and release), over
//            the same 37.7 MB, on 108 CTAs (36 x 3, clustered or not) and on 132, 264, 396 CTAs.
// Timing only: nothing here is checked, and nothing of it ships.
//
// build and run:  nvcc -O3 -std=c++17 -gencode=arch=compute_90a,code=sm_90a -o /tmp/lp notes/session14/launchprobe.cu
//                 /tmp/lp > out.txt
#include <cuda_runtime.h>
#include <cstdio>
#include <cstdlib>
#include <vector>
#include <algorithm>
#include <functional>
#include <string>

#include "../probekit.cuh"
#include "../../kernels_src/common.cuh"

using namespace okc;
using probekit::Timer;

enum ShellFlags { INIT = 1, CBAR = 2, PUSH = 4, WRITE = 8, WRITE_VEC = 16, PUSH_BULK = 32, PULL = 64, ENDBAR = 128, ROT_X = 256, XREG16 = 512, XREG32 = 1024 };

// The tail of a split CTA: push its partial (8 floats per consumer thread) to rank 0 (st.async per thread, or one
// bulk copy of the tile staged in this CTA's shared memory), rank 0 sums and writes 64 rows x 16 tokens of bf16.
__device__ void tail(int flags, float (&acc)[8], float* inbox, float* stage, uint64_t* inbox_full, __nv_bfloat16* out,
                     int S) {
    constexpr int kAcc = 8;
    const int t = threadIdx.x;
    const int rank = (flags & CBAR) ? (int)cluster_rank() : (int)blockIdx.y;
    if (flags & CBAR) {
        inbox_ready();
        if ((flags & (PUSH | PUSH_BULK)) && rank != 0) {
            float* dst = inbox + ((size_t)(rank - 1) * 128 + t) * kAcc;
            if (flags & PUSH) {
                for (int e = 0; e < kAcc; e += 4)
                    push_to_rank(0, dst + e, inbox_full, acc[e], acc[e + 1], acc[e + 2], acc[e + 3]);
                return;
            }
            for (int e = 0; e < kAcc; e += 4)
                *reinterpret_cast<float4*>(stage + t * kAcc + e) = make_float4(acc[e], acc[e + 1], acc[e + 2], acc[e + 3]);
            asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
            asm volatile("bar.sync 1, 128;" ::: "memory");
            if (t == 0) {
                uint32_t rdst, rbar;
                asm volatile("mapa.shared::cluster.u32 %0, %1, %2;" : "=r"(rdst) : "r"(smem_addr(inbox + (size_t)(rank - 1) * 128 * kAcc)), "r"(0));
                asm volatile("mapa.shared::cluster.u32 %0, %1, %2;" : "=r"(rbar) : "r"(smem_addr(inbox_full)), "r"(0));
                asm volatile("cp.async.bulk.shared::cluster.shared::cta.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];"
                             :: "r"(rdst), "r"(smem_addr(stage)), "r"(128 * kAcc * 4), "r"(rbar) : "memory");
                asm volatile("cp.async.bulk.commit_group;" ::: "memory");
                asm volatile("cp.async.bulk.wait_group.read 0;" ::: "memory");
            }
            return;
        }
        if (flags & ENDBAR) {  // only the cluster barrier every rank waits on at the end: no data
            asm volatile("barrier.cluster.arrive.release;\nbarrier.cluster.wait.acquire;" ::: "memory");
            if (rank != 0) return;
        }
        if (flags & PULL) {  // every rank parks its partial at home; rank 0 reads the others' remotely
            for (int e = 0; e < kAcc; e += 4)
                *reinterpret_cast<float4*>(stage + t * kAcc + e) = make_float4(acc[e], acc[e + 1], acc[e + 2], acc[e + 3]);
            asm volatile("barrier.cluster.arrive.release;\nbarrier.cluster.wait.acquire;" ::: "memory");
            if (rank != 0) {  // stay until rank 0 has read this CTA's shared memory
                asm volatile("barrier.cluster.arrive.relaxed;\nbarrier.cluster.wait;" ::: "memory");
                return;
            }
            float4 v[8][kAcc / 4];
            for (int r = 1; r < S && r < 8; ++r)
                for (int e = 0; e < kAcc; e += 4) {
                    uint32_t ra;
                    asm volatile("mapa.shared::cluster.u32 %0, %1, %2;" : "=r"(ra) : "r"(smem_addr(stage + t * kAcc + e)), "r"(r));
                    asm volatile("ld.shared::cluster.v4.f32 {%0, %1, %2, %3}, [%4];"
                                 : "=f"(v[r][e / 4].x), "=f"(v[r][e / 4].y), "=f"(v[r][e / 4].z), "=f"(v[r][e / 4].w) : "r"(ra) : "memory");
                }
            for (int r = 1; r < S && r < 8; ++r)
                for (int e = 0; e < kAcc; e += 4)
                    acc[e] += v[r][e / 4].x, acc[e + 1] += v[r][e / 4].y, acc[e + 2] += v[r][e / 4].z, acc[e + 3] += v[r][e / 4].w;
            asm volatile("barrier.cluster.arrive.relaxed;" ::: "memory");
        }
        if (flags & (PUSH | PUSH_BULK)) {
            mbar_wait_cluster(inbox_full, 0);
            for (int r = 1; r < S; ++r)
                for (int e = 0; e < kAcc; ++e) acc[e] += inbox[((size_t)(r - 1) * 128 + t) * kAcc + e];
        }
    }
    if ((flags & WRITE) && rank == 0)
        for (int e = 0; e < kAcc; ++e)
            out[(size_t)(e & 1 ? 8 : 0) * 2304 + blockIdx.x * 64 + t / 2 + e] = __float2bfloat16(acc[e]);
    if ((flags & WRITE_VEC) && rank == 0) {  // 16 bytes per thread: 8 rows of one token
        uint4 v;
        v.x = __float_as_uint(acc[0] + acc[1]), v.y = __float_as_uint(acc[2] + acc[3]);
        v.z = __float_as_uint(acc[4] + acc[5]), v.w = __float_as_uint(acc[6] + acc[7]);
        *reinterpret_cast<uint4*>(out + (size_t)(t >> 3) * 2304 + blockIdx.x * 64 + (t & 7) * 8) = v;
    }
}


// The TMA GEMV's frame without its ring: barriers, the cluster inbox, the push of NB = 2's partial tile
// (8 floats per consumer thread) to rank 0, rank 0's wait and its bf16 output write.
__global__ void __launch_bounds__(160, 1) shell(int flags, __nv_bfloat16* out) {
    __shared__ __align__(8) uint64_t full[8], empty[8];
    __shared__ __align__(8) uint64_t inbox_full;
    extern __shared__ uint8_t smem_raw[];
    float* inbox = reinterpret_cast<float*>(smem_raw);
    constexpr int kAcc = 8;
    const int S = gridDim.y;
    if ((flags & INIT) && threadIdx.x == 128) {
        for (int s = 0; s < 8; ++s) mbar_init(&full[s], 1), mbar_init(&empty[s], 4);
        asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
    }
    const int rank = (flags & CBAR) ? (int)cluster_rank() : 0;
    if (flags & CBAR) open_inbox(&inbox_full, (flags & (PUSH | PUSH_BULK)) && rank == 0 ? (S - 1) * 128 * kAcc * 4 : 0);
    __syncthreads();
    if (threadIdx.x >= 128) {
        if (flags & CBAR) inbox_ready();
        return;
    }
    float acc[kAcc];
    for (int e = 0; e < kAcc; ++e) acc[e] = (float)(threadIdx.x + e);
    tail(flags, acc, inbox, inbox + (S - 1) * 128 * kAcc, &inbox_full, out, S);
}

// The ring alone: the CTAs of column x (grid.y of them, the "splits") stream tiles [x T / gx, (x + 1) T / gx) of
// the T tiles through STAGES slots; split 0 takes `lead` tiles more than an even share. Then tail(flags).
template <int STAGES>
__global__ void __launch_bounds__(160, 1)
    stream_ring(const uint8_t* w, int tiles, int tile_bytes, int lead, int flags, __nv_bfloat16* out, float* sink,
                const uint8_t* x, int x_bytes) {
    __shared__ __align__(8) uint64_t full[STAGES], empty[STAGES];
    __shared__ __align__(8) uint64_t inbox_full;
    extern __shared__ uint8_t smem_raw[];
    uint8_t* ring = smem_raw + ((1024 - (smem_addr(smem_raw) & 1023)) & 1023);
    const int slot_bytes = tile_bytes + x_bytes;  // the weights, then (if any) x's boxes: a small L2-hot buffer
    float* inbox = reinterpret_cast<float*>(ring + STAGES * slot_bytes);
    const int S = gridDim.y, b = blockIdx.y * gridDim.x + blockIdx.x;
    const int base = (int)((long long)blockIdx.x * tiles / gridDim.x);  // this column's tiles
    const int per = (int)((long long)(blockIdx.x + 1) * tiles / gridDim.x) - base;
    const int rest = per - lead;
    const int t0 = base + (blockIdx.y == 0 ? 0 : lead + (int)((long long)blockIdx.y * rest / S));
    const int n = (blockIdx.y == 0 ? lead : 0) + (int)((long long)(blockIdx.y + 1) * rest / S) -
                  (int)((long long)blockIdx.y * rest / S);
    if (threadIdx.x == 128) {
        for (int s = 0; s < STAGES; ++s) mbar_init(&full[s], 1), mbar_init(&empty[s], 4);
        asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
    }
    const int rank = (flags & CBAR) ? (int)cluster_rank() : 0;
    if (flags & CBAR) open_inbox(&inbox_full, rank == 0 ? (S - 1) * 128 * 8 * 4 : 0);
    __syncthreads();
    if (threadIdx.x >= 128) {
        if (threadIdx.x == 128)
            for (int i = 0; i < n; ++i) {
                const int s = i % STAGES;
                if (i >= STAGES) mbar_wait(&empty[s], ((i / STAGES) - 1) & 1);
                mbar_arrive_expect_tx(&full[s], slot_bytes);
                asm volatile(
                    "cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];" ::"r"(
                        smem_addr(ring + s * slot_bytes)),
                    "l"(w + (size_t)(t0 + i) * tile_bytes), "r"(tile_bytes), "r"(smem_addr(&full[s]))
                    : "memory");
                if (x_bytes)
                    asm volatile(
                        "cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];" ::"r"(
                            smem_addr(ring + s * slot_bytes + tile_bytes)),
                        "l"(x + (size_t)(((flags & ROT_X ? b * 37 : t0 - base) + i) * x_bytes) % (512 * 1024)), "r"(x_bytes), "r"(smem_addr(&full[s]))
                        : "memory");
            }
        __syncwarp();
        if (flags & CBAR) inbox_ready();
        return;
    }
    float v = 0.f;
    // XREG: x as a register operand (wgmma's A), loaded by the consumer warps that hold real tokens (warp 0 for
    // m <= 16, warps 0-1 for m <= 32) from global memory, one slot ahead: per 16-wide k step four 32-bit words,
    // tokens g and g + 8 at k = 2t and 2t + 8 (the m16n8k16 A layout). The slot spans kx = 128 of K.
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    const bool xreg = (flags & (XREG16 | XREG32)) && warp < ((flags & XREG32) ? 2 : 1);
    const uint32_t* xw = reinterpret_cast<const uint32_t*>(x) + (size_t)(16 * warp + (lane >> 2)) * 4096 + (lane & 3);
    uint32_t xa[32], xb[32];
    auto load_x = [&](uint32_t (&r)[32], int i) {
        const uint32_t* p = xw + (size_t)i * 64;  // 128 bf16 = 64 words of K per slot
#pragma unroll
        for (int st = 0; st < 8; ++st) {
            r[4 * st + 0] = __ldg(p + 8 * st);
            r[4 * st + 1] = __ldg(p + 8 * st + 8 * 4096);
            r[4 * st + 2] = __ldg(p + 8 * st + 4);
            r[4 * st + 3] = __ldg(p + 8 * st + 8 * 4096 + 4);
        }
    };
    if (xreg && n > 0) load_x(xa, 0);
    // two slots per trip, so the double buffer's roles are fixed at compile time (no local memory)
    auto step = [&](int i, uint32_t (&cur)[32], uint32_t (&nxt)[32]) {
        const int s = i % STAGES;
        if (xreg) {
            if (i + 1 < n) load_x(nxt, i + 1);
#pragma unroll
            for (int j = 0; j < 32; ++j) v += __uint_as_float(cur[j]);
        }
        mbar_wait(&full[s], (i / STAGES) & 1);
        v += reinterpret_cast<const float*>(ring + s * slot_bytes)[threadIdx.x];
        __syncwarp();
        if ((threadIdx.x & 31) == 0) mbar_arrive(&empty[s]);
    };
    for (int i = 0; i < n; i += 2) {
        step(i, xa, xb);
        if (i + 1 < n) step(i + 1, xb, xa);
    }
    if (v == 1234.5f) *sink = v;
    float acc[8];
    for (int e = 0; e < 8; ++e) acc[e] = v + e;
    tail(flags, acc, inbox, inbox + (S - 1) * 128 * 8, &inbox_full, out, S);
}


template <typename K, typename... Args>
void launch(K kernel, dim3 grid, int smem, int cluster_y, cudaStream_t stream, Args... args) {
    if (smem > 48 * 1024) CK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
    cudaLaunchConfig_t c = {};
    c.gridDim = grid, c.blockDim = dim3(160), c.dynamicSmemBytes = smem, c.stream = stream;
    cudaLaunchAttribute a;
    a.id = cudaLaunchAttributeClusterDimension;
    a.val.clusterDim.x = 1, a.val.clusterDim.y = cluster_y, a.val.clusterDim.z = 1;
    c.attrs = &a, c.numAttrs = cluster_y > 1 ? 1 : 0;
    CK(cudaLaunchKernelEx(&c, kernel, args...));
}

int main() {
    Timer tm;
    float* tiny_buf;
    CK(cudaMalloc(&tiny_buf, 64));
    __nv_bfloat16* out;
    CK(cudaMalloc(&out, 32 * 2304 * 2));
    const size_t big = (size_t)8192 * 8192 * 2;  // 134 MB: every stream below reads a prefix
    uint8_t* w;
    CK(cudaMalloc(&w, big));
    CK(cudaMemset(w, 1, big));
    uint8_t* xbuf;
    CK(cudaMalloc(&xbuf, 512 * 1024));
    CK(cudaMemset(xbuf, 1, 512 * 1024));
    const double bw = tm.read_bandwidth();  // the flush kernel's own, for the floor
    printf("read bandwidth %.3f TB/s (flush kernel, 1 GiB)\n", bw);
    for (int round = 0; round < 2; ++round) {
        printf("--- round %d\n", round);
        const float launch_floor = tm.time_cold([&](cudaStream_t s) { probekit::tiny<<<1, 1, 0, s>>>(tiny_buf); });
        printf("%-52s %8.2f\n", "launch floor: tiny<<<1,1>>>", launch_floor);
        struct ShellCase {
            const char* name;
            int smem, cluster, flags;
        };
        const ShellCase shells[] = {
            {"shell 36x3 empty", 0, 1, 0},
            {"shell + 91 KB smem", 93184, 1, 0},
            {"shell + 91 KB + cluster 3", 93184, 3, 0},
            {"shell + 91 KB + cluster + barrier init", 93184, 3, INIT},
            {"shell + 91 KB + cluster + init + cluster barrier", 93184, 3, INIT | CBAR},
            {"shell + ... + push to rank 0", 93184, 3, INIT | CBAR | PUSH},
            {"shell + ... + push + write", 93184, 3, INIT | CBAR | PUSH | WRITE},
            {"shell cluster 3, 0 smem, init+cbar+push+write", 16384, 3, INIT | CBAR | PUSH | WRITE},
            {"shell no cluster, 91 KB, init + write", 93184, 1, INIT | WRITE},
            {"shell + 200 KB smem", 204800, 1, 0},
            {"shell + ... + bulk push + write", 93184, 3, INIT | CBAR | PUSH_BULK | WRITE},
            {"shell + ... + push + 16-byte writes", 93184, 3, INIT | CBAR | PUSH | WRITE_VEC},
            {"shell no cluster, 91 KB, init + 16-byte writes", 93184, 1, INIT | WRITE_VEC},
            {"shell + ... + end barrier + write", 93184, 3, INIT | CBAR | ENDBAR | WRITE},
            {"shell + ... + pull + write", 93184, 3, INIT | CBAR | PULL | WRITE},
        };
        for (const auto& c : shells)
            printf("%-52s %8.2f\n", c.name, tm.time_cold([&](cudaStream_t s) {
                       launch(shell, dim3(36, 3), c.smem, c.cluster, s, c.flags, out);
                   }));
        struct StreamCase {
            const char* name;
            int gx, gy, cluster, tile, x_bytes, stages, lead, flags;
            size_t bytes;
        };
        const size_t qkv = (size_t)2304 * 8192 * 2, pool = (size_t)4096 * 8192 * 2, slice = (size_t)1024 * 4096 * 2;
        const int full_tail = INIT | CBAR | PUSH | WRITE;
        const StreamCase streams[] = {
            {"qkv 36x3 cl3, (8+2 KB) x 8: m=16 today, + tail", 36, 3, 3, 8192, 2048, 8, 0, full_tail, qkv},
            {"qkv 36x3 cl3, (8+4 KB) x 8: m=32 today, + tail", 36, 3, 3, 8192, 4096, 8, 0, full_tail, qkv},
            {"qkv 72x1, 8 KB x 16, + write (no x)", 72, 1, 1, 8192, 0, 16, 0, WRITE, qkv},
            {"qkv 72x1, (8+2 KB) x 16, + write", 72, 1, 1, 8192, 2048, 16, 0, WRITE, qkv},
            {"qkv 72x1, (8+4 KB) x 16, + write", 72, 1, 1, 8192, 4096, 16, 0, WRITE, qkv},
            {"qkv 72x1, (8+2 KB) x 20, + write", 72, 1, 1, 8192, 2048, 20, 0, WRITE, qkv},
            {"qkv 72x1, (8+4 KB) x 8, + write", 72, 1, 1, 8192, 4096, 8, 0, WRITE, qkv},
            {"qkv 72x1, (16+4 KB) x 10, + write", 72, 1, 1, 16384, 4096, 10, 0, WRITE, qkv},
            {"qkv 72x1, (16+8 KB) x 9, + write", 72, 1, 1, 16384, 8192, 9, 0, WRITE, qkv},
            {"qkv 72x1, (4+2 KB) x 20, + write", 72, 1, 1, 4096, 2048, 20, 0, WRITE, qkv},
            {"qkv 144x1, (4+2 KB) x 16, + write", 144, 1, 1, 4096, 2048, 16, 0, WRITE, qkv},
            {"qkv 72x1, (8+2 KB) x 16, + write, x rotated", 72, 1, 1, 8192, 2048, 16, 0, WRITE | ROT_X, qkv},
        };
        for (const auto& c : streams) {
            const int smem = (c.tile + c.x_bytes) * c.stages + 1024 + (c.flags & CBAR ? 3 * 128 * 8 * 4 * (c.gy > 3 ? c.gy : 3) : 0);
            const int T = (int)(c.bytes / c.tile);
            const float us = tm.time_cold([&](cudaStream_t s) {
#define OKC_RING(N)                                                                                                 \
    if (c.stages == N)                                                                                              \
        launch(stream_ring<N>, dim3(c.gx, c.gy), smem, c.cluster, s, w, T, c.tile, c.lead, c.flags, out, tm.sink, xbuf, \
               c.x_bytes);
                OKC_RING(4) OKC_RING(5) OKC_RING(7) OKC_RING(8) OKC_RING(9) OKC_RING(10) OKC_RING(11) OKC_RING(12) OKC_RING(16) OKC_RING(18)
                OKC_RING(20) OKC_RING(22)
            });
            const double floor_us = launch_floor + c.bytes / (bw * 1e12) * 1e6;
            printf("%-52s %8.2f   x floor %.3f  (smem %d)\n", c.name, us, us / floor_us, smem);
        }
    }
    return 0;
}
