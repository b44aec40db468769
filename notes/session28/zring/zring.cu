// Session 28 probe (timing only; nothing here ships): a compressed ring. Call 4 found that the TMA GEMV on o runs
// as fast with no x at all as with x's boxes in its ring (9.44 / 9.57 us against 9.34 / 9.55 at m = 16 / 32): x is
// free there, and what is left is the stream of 16.8 MB of bf16 weights. The compressed GEMV streams 25 % fewer
// bytes but pays for x in registers at m = 16 (4 x fragments a trip beside 3 of weights) and cannot run m = 32 in
// 64 registers. Earlier compressed rings (session 26, ztma / zwg) lost 1-3 us; their copies were 1.5 KB a row
// block (session 14: halving the copy size nearly doubled a ring's time) and their decode was a serial chain
// through shared memory or through mma.sync with x loaded from shared memory.
//
// zring: a 64-row tile a CTA (128 CTAs on o), a slot = its 4 row blocks x 128 of K of compress.py's stream (the
// four blocks' two groups and their headers, repacked contiguous: ONE 12,416-byte bulk copy) + x's two 64-wide
// boxes (one 3-D tensor-map copy, as the half tiles take them). WG consumer warpgroups take alternate slots; in
// each, warp q decodes row block q's fragments straight into wgmma's A registers (the mma.sync A layout, per
// warp), a patch goes into its register by a select, and one m64nNk16 wgmma per 16 of K reads x from the slot. No
// x in registers, no decoded tile in shared memory. The probe's bytes are random (codes, lo bytes; a group in four
// carries one patch), so the outputs are meaningless: it times the structure against the TMA GEMV's entry and the
// compressed GEMV's, built from kernels_src as they ship.
#include "../../probekit.cuh"
#include "../../../kernels_src/tma_launch.cu"
#include "../../../kernels_src/zlaunch.cu"

#include <cuda_profiler_api.h>

#include <cstring>
#include <deque>
#include <random>
#include <string>

using probekit::Case;

namespace zr {

// G 64-wide K groups a slot (calls 5-8: 2; call 11: 1 too): 4 row blocks x (stream + header) bytes, 12,416 at
// G = 2; x's G boxes start 1 KB-aligned after them.
__host__ __device__ constexpr int w_bytes(int g) { return 4 * g * 1536 + 4 * g * 16; }
__host__ __device__ constexpr int w_pad(int g) { return (w_bytes(g) + 1023) / 1024 * 1024; }
__host__ __device__ constexpr int stage_bytes(int nb, int g = 2) { return w_pad(g) + g * okc::tma_x_bytes(nb); }
__host__ __device__ constexpr int smem_bytes(int nb, int stages, int g = 2) { return stages * stage_bytes(nb, g) + 1024; }
constexpr int kGroups = 2, kSlotK = 128, kWBytes = w_bytes(2);  // the operand main() builds for G = 2

// D[64 x 8NB] += A[64 x 16] (registers: this warp's 16 rows in mma.sync's A layout) . B[16 x 8NB] (shared memory)
template <int NB>
__device__ __forceinline__ void wgmma_rs(float (&d)[4 * NB], const uint32_t (&a)[4], uint64_t b);

template <>
__device__ __forceinline__ void wgmma_rs<1>(float (&d)[4], const uint32_t (&a)[4], uint64_t b) {
    asm volatile(
        "{\n.reg .pred p;\nsetp.ne.b32 p, 1, 0;\n"
        "wgmma.mma_async.sync.aligned.m64n8k16.f32.bf16.bf16 {%0, %1, %2, %3}, {%4, %5, %6, %7}, %8, p, 1, 1, 0;\n}\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(b));
}

template <>
__device__ __forceinline__ void wgmma_rs<2>(float (&d)[8], const uint32_t (&a)[4], uint64_t b) {
    asm volatile(
        "{\n.reg .pred p;\nsetp.ne.b32 p, 1, 0;\n"
        "wgmma.mma_async.sync.aligned.m64n16k16.f32.bf16.bf16 {%0, %1, %2, %3, %4, %5, %6, %7}, {%8, %9, %10, %11}, "
        "%12, p, 1, 1, 0;\n}\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(b));
}

template <>
__device__ __forceinline__ void wgmma_rs<4>(float (&d)[16], const uint32_t (&a)[4], uint64_t b) {
    asm volatile(
        "{\n.reg .pred p;\nsetp.ne.b32 p, 1, 0;\n"
        "wgmma.mma_async.sync.aligned.m64n32k16.f32.bf16.bf16 {%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, "
        "%12, %13, %14, %15}, {%16, %17, %18, %19}, %20, p, 1, 1, 0;\n}\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]),
          "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(b));
}

// Patch word p (compress.py: lane p & 31, fragment (p >> 5) & 3, half (p >> 7) & 1, register (p >> 8) & 3, value
// p >> 10) into this lane's decoded registers, by selects (no local-memory indexing).
__device__ __forceinline__ void patch_into(uint32_t (&a)[4][4], uint32_t p, int lane) {
    const uint32_t f = (p >> 5) & 3u, j = (p >> 8) & 3u;
    const uint32_t v = (int)(p & 31u) == lane ? (p >> 10) << (16 * ((p >> 7) & 1u)) : 0u;
#pragma unroll
    for (int ff = 0; ff < 4; ++ff)
#pragma unroll
        for (int jj = 0; jj < 4; ++jj) a[ff][jj] |= (ff == (int)f && jj == (int)j) ? v : 0u;
}

// PIPE: each group's wgmmas are issued (and committed) as soon as that group is decoded, so the second group's
// decode runs beside the first group's wgmmas; else one batch of wgmmas a slot (call 5). PARTS (call 7), what the
// consumers do with a slot: 0 everything; 1 decode and patch but no wgmma (the registers folded into one word
// that reaches the output, so the decode stays); 2 nothing (wait for the slot, hand it back): the bare ring.
// Both kernels' producer side: the ring's barriers (empty counts `arrivals` warps), then one lane's copies of n_k
// slots of G groups from `w` (one bulk copy of w_bytes a slot, then x's G boxes at w_pad: a 2-D box for G = 1, one
// 3-D copy of G chunks otherwise). stamp: call 12's issue times, or nullptr.
template <int STAGES>
__device__ __forceinline__ void init_ring(uint64_t* full, uint64_t* empty, int arrivals, const CUtensorMap* x_map) {
    asm volatile("prefetch.tensormap [%0];" ::"l"(reinterpret_cast<uint64_t>(x_map)) : "memory");
    for (int s = 0; s < STAGES; ++s) okc::mbar_init(&full[s], 1), okc::mbar_init(&empty[s], arrivals);
    asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
}

template <int NB, int STAGES, int G>
__device__ __forceinline__ void produce(uint64_t* full, uint64_t* empty, uint8_t* ring, int stage_bytes,
                                        const uint8_t* w, int w_bytes, int w_pad, const CUtensorMap* x_map, int n_k,
                                        long long* stamp) {
    for (int i = 0; i < n_k; ++i) {
        const int s = i % STAGES;
        if (i >= STAGES) okc::mbar_wait(&empty[s], ((i / STAGES) - 1) & 1);
        uint8_t* slot = ring + s * stage_bytes;
        if (stamp && i < 16) stamp[i] = clock64();
        okc::mbar_arrive_expect_tx(&full[s], w_bytes + G * okc::tma_x_bytes(NB));
        okc::bulk_load_1d(slot, w + (size_t)i * w_bytes, w_bytes, &full[s]);
        if constexpr (G == 1)
            okc::tma_load_2d(slot + w_pad, x_map, i * 64, 0, &full[s]);
        else
            okc::tma_load_3d(slot + w_pad, x_map, 0, 0, i * G, &full[s]);
    }
}

// The end of both kernels: warpgroups 1.. hand their partial tiles to warpgroup 0 through the idle ring, which
// adds them in order and writes the output. True on the thread that wrote row 0's first element (the trace stamp).
template <int NB, int WG>
__device__ __forceinline__ bool fold_and_write(float (&acc)[4 * NB], uint8_t* ring, int g, __nv_bfloat16* out, int M,
                                               int N, int K, int tile) {
    constexpr int kAcc = 4 * NB;
    asm volatile("bar.sync 1, %0;" ::"n"(WG * 128) : "memory");
    float* fold = reinterpret_cast<float*>(ring);
    const int t = threadIdx.x & 127;
    if (g > 0) {
#pragma unroll
        for (int e = 0; e < kAcc; ++e) fold[((g - 1) * kAcc + e) * 128 + t] = acc[e];
    }
    asm volatile("bar.sync 1, %0;" ::"n"(WG * 128) : "memory");
    if (g != 0) return false;
    for (int h = 1; h < WG; ++h)
#pragma unroll
        for (int e = 0; e < kAcc; ++e) acc[e] += fold[((h - 1) * kAcc + e) * 128 + t];
    const okc::TmaGemvArgs a{nullptr, nullptr, out, nullptr, nullptr, M, N, K, 1, 0};
#pragma unroll
    for (int e = 0; e < kAcc; ++e) okc::tma_write<__nv_bfloat16>(a, tile * 64, t, e, acc[e]);
    return t == 0;
}

// Call 12 (TRACE): SM clock64 stamps of CTAs 0, 32, 64, 96: [0] start, [1 + i] slot i seen landed by its
// warpgroup's warp 0, [17 + i] slot i's work done there, [33] the output written, [34 + i] slot i's copies issued.
__device__ long long zr_trace[4][64];
__device__ __forceinline__ long long clk() { return clock64(); }

template <int NB, int STAGES, int WG, bool PIPE, int PARTS = 0, int G = 2, bool TRACE = false>
__global__ void __launch_bounds__(WG * 128 + 32, 1)
    zring_kernel(const __grid_constant__ CUtensorMap x_map, const uint8_t* w, __nv_bfloat16* out, int M, int N,
                 int K, uint4 table) {
    constexpr int kAcc = 4 * NB;
    constexpr int kStage = stage_bytes(NB, G);
    constexpr int kGroups = G, kSlotK = 64 * G, kWBytes = w_bytes(G), kWPad = w_pad(G);
    constexpr int kConsumers = WG * 128;
    extern __shared__ uint8_t smem_raw[];
    __shared__ __align__(8) uint64_t full[STAGES], empty[STAGES];
    uint8_t* ring = smem_raw + ((1024 - (okc::smem_addr(smem_raw) & 1023)) & 1023);
    const int tile = blockIdx.x, n_k = K / kSlotK;
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    const bool traced = TRACE && (tile & 31) == 0;
    long long* tr = zr_trace[(tile >> 5) & 3];
    if (traced && threadIdx.x == 0) tr[0] = clk();
    if (threadIdx.x == kConsumers) init_ring<STAGES>(full, empty, 4, &x_map);
    __syncthreads();
    if (warp == kConsumers / 32) {
        if (lane == 0)
            produce<NB, STAGES, G>(full, empty, ring, kStage, w + (size_t)tile * n_k * kWBytes, kWBytes, kWPad, &x_map, n_k,
                                   traced ? tr + 34 : nullptr);
        return;
    }
    const int g = warp >> 2, q = warp & 3;  // warpgroup g; warp q of it decodes row block q of the tile
    float acc[kAcc];
#pragma unroll
    for (int e = 0; e < kAcc; ++e) acc[e] = 0.f;
    const uint64_t x_desc0 = okc::sw128_desc(okc::smem_addr(ring) + kWPad);
    uint32_t sink = 0;
    for (int i = g; i < n_k; i += WG) {
        const int s = i % STAGES;
        okc::mbar_wait(&full[s], (i / STAGES) & 1);
        if (traced && q == 0 && lane == 0 && i < 16) tr[1 + i] = clk();
        const uint8_t* slot = ring + s * kStage;
        if constexpr (PARTS == 2) {
            __syncwarp();
            if (lane == 0) okc::mbar_arrive(&empty[s]);
            continue;
        }
        okc::Frag part[kGroups][okc::kZParts];
#pragma unroll
        for (int u = 0; u < kGroups; ++u)
#pragma unroll
            for (int p = 0; p < okc::kZParts; ++p)
                part[u][p] = *reinterpret_cast<const okc::Frag*>(slot + (q * kGroups + u) * 1536 + p * 512 + lane * 16);
        const uint32_t hdr =
            lane < 4 * kGroups
                ? *reinterpret_cast<const uint32_t*>(slot + 4 * kGroups * 1536 + (q * kGroups + (lane >> 2)) * 16 + (lane & 3) * 4)
                : 0u;
        uint32_t a[kGroups][4][4];
#pragma unroll
        for (int u = 0; u < kGroups; ++u) {
#pragma unroll
            for (int f = 0; f < 4; ++f) okc::decode_fragment(a[u][f], part[u], f, table);
            const uint32_t n = __shfl_sync(0xFFFFFFFFu, hdr, 4 * u);
#pragma unroll 1
            for (uint32_t k = 0; k < n; ++k) patch_into(a[u], __shfl_sync(0xFFFFFFFFu, hdr, 4 * u + 1 + k), lane);
            if constexpr (PARTS == 1) {
#pragma unroll
                for (int f = 0; f < 4; ++f) sink ^= a[u][f][0] ^ a[u][f][1] ^ a[u][f][2] ^ a[u][f][3];
            } else if constexpr (PIPE) {
                okc::fence_regs(acc);
                okc::wgmma_fence();
#pragma unroll
                for (int f = 0; f < 4; ++f)
                    wgmma_rs<NB>(acc, a[u][f],
                                 okc::desc_plus(x_desc0, (s * kStage + u * okc::tma_x_bytes(NB) + f * 32) / 16));
                okc::wgmma_commit();
                okc::fence_regs(acc);
            }
        }
        if constexpr (PARTS == 1) {
            __syncwarp();
            if (traced && q == 0 && lane == 0 && i < 16) tr[17 + i] = clk();
            if (lane == 0) okc::mbar_arrive(&empty[s]);
            continue;
        }
        if constexpr (!PIPE) {
            okc::fence_regs(acc);
            okc::wgmma_fence();
#pragma unroll
            for (int u = 0; u < kGroups; ++u)
#pragma unroll
                for (int f = 0; f < 4; ++f)
                    wgmma_rs<NB>(acc, a[u][f],
                                 okc::desc_plus(x_desc0, (s * kStage + u * okc::tma_x_bytes(NB) + f * 32) / 16));
            okc::wgmma_commit();
        }
        okc::fence_regs(acc);
        okc::wgmma_wait<0>();
        okc::fence_regs(acc);
        if (traced && q == 0 && lane == 0 && i < 16) tr[17 + i] = clk();
        if (lane == 0) okc::mbar_arrive(&empty[s]);
    }
    acc[0] += __uint_as_float(sink & 0x3FFFFFFFu) * 1e-30f;  // keeps PARTS = 1's decode; 0 otherwise
    if (fold_and_write<NB, WG>(acc, ring, g, out, M, N, K, tile) && traced) tr[33] = clk();
}

template <int NB, int STAGES, int WG, bool PIPE, int PARTS = 0, int G = 2, bool TRACE = false>
void launch(const CUtensorMap& map, const uint8_t* w, __nv_bfloat16* out, int M, int N, int K, uint4 table,
            cudaStream_t s) {
    auto kernel = zring_kernel<NB, STAGES, WG, PIPE, PARTS, G, TRACE>;
    static bool opted = false;
    if (!opted) {
        CK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, smem_bytes(NB, STAGES, G)));
        opted = true;
    }
    kernel<<<N / 64, WG * 128 + 32, smem_bytes(NB, STAGES, G), s>>>(map, w, out, M, N, K, table);
}

// Call 8: zunits. Call 7 timed the parts: the bare ring of compressed slots streams at 1.00-1.02 x floor (m = 8,
// 16), decode alone adds ~0.8 us and the wgmmas 0.4-0.75 more, i.e. about one slot's work per warpgroup, which is
// what is left after the last slot lands. So here the unit of work is a (slot, group), not a slot: a slot carries
// GPS groups (GPS x 64 of K, one bulk copy of 4 x GPS x 1,552 bytes, and one x copy of GPS boxes), warpgroup g
// takes groups g, g + WG, ... of EVERY slot, and every warp of every warpgroup hands each slot back (empty counts
// 4 WG). With GPS = WG = 4 the last slot's work is split four ways: a quarter of what call 7's tail held.
template <int GPS>
__host__ __device__ constexpr int unit_w_bytes() { return 4 * GPS * 1536 + 4 * GPS * 16; }
template <int GPS>
__host__ __device__ constexpr int unit_w_pad() { return (unit_w_bytes<GPS>() + 1023) / 1024 * 1024; }
template <int NB, int GPS>
__host__ __device__ constexpr int unit_stage_bytes() { return unit_w_pad<GPS>() + GPS * okc::tma_x_bytes(NB); }

template <int NB, int STAGES, int WG, int GPS, int PARTS>
__global__ void __launch_bounds__(WG * 128 + 32, 1)
    zunits_kernel(const __grid_constant__ CUtensorMap x_map, const uint8_t* w, __nv_bfloat16* out, int M, int N,
                  int K, uint4 table) {
    constexpr int kAcc = 4 * NB;
    constexpr int kWBytesU = unit_w_bytes<GPS>();
    constexpr int kWPadU = unit_w_pad<GPS>();
    constexpr int kStage = unit_stage_bytes<NB, GPS>();
    constexpr int kConsumers = WG * 128;
    extern __shared__ uint8_t smem_raw[];
    __shared__ __align__(8) uint64_t full[STAGES], empty[STAGES];
    uint8_t* ring = smem_raw + ((1024 - (okc::smem_addr(smem_raw) & 1023)) & 1023);
    const int tile = blockIdx.x, n_k = K / (64 * GPS);
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    if (threadIdx.x == kConsumers) init_ring<STAGES>(full, empty, 4 * WG, &x_map);
    __syncthreads();
    if (warp == kConsumers / 32) {
        if (lane == 0)
            produce<NB, STAGES, GPS>(full, empty, ring, kStage, w + (size_t)tile * n_k * kWBytesU, kWBytesU, kWPadU, &x_map,
                                     n_k, nullptr);
        return;
    }
    const int g = warp >> 2, q = warp & 3;
    float acc[kAcc];
#pragma unroll
    for (int e = 0; e < kAcc; ++e) acc[e] = 0.f;
    uint32_t sink = 0;
    const uint64_t x_desc0 = okc::sw128_desc(okc::smem_addr(ring) + kWPadU);
    for (int i = 0; i < n_k; ++i) {
        const int s = i % STAGES;
        okc::mbar_wait(&full[s], (i / STAGES) & 1);
        const uint8_t* slot = ring + s * kStage;
        if constexpr (PARTS != 2) {
#pragma unroll
            for (int u = g; u < GPS; u += WG) {
                okc::Frag part[okc::kZParts];
#pragma unroll
                for (int p = 0; p < okc::kZParts; ++p)
                    part[p] = *reinterpret_cast<const okc::Frag*>(slot + (q * GPS + u) * 1536 + p * 512 + lane * 16);
                const uint32_t hdr =
                    lane < 4 ? *reinterpret_cast<const uint32_t*>(slot + 4 * GPS * 1536 + (q * GPS + u) * 16 + lane * 4)
                             : 0u;
                uint32_t a[4][4];
#pragma unroll
                for (int f = 0; f < 4; ++f) okc::decode_fragment(a[f], part, f, table);
                const uint32_t n = __shfl_sync(0xFFFFFFFFu, hdr, 0);
#pragma unroll 1
                for (uint32_t k = 0; k < n; ++k) zr::patch_into(a, __shfl_sync(0xFFFFFFFFu, hdr, 1 + k), lane);
                if constexpr (PARTS == 1) {
#pragma unroll
                    for (int f = 0; f < 4; ++f) sink ^= a[f][0] ^ a[f][1] ^ a[f][2] ^ a[f][3];
                } else {
                    okc::fence_regs(acc);
                    okc::wgmma_fence();
#pragma unroll
                    for (int f = 0; f < 4; ++f)
                        zr::wgmma_rs<NB>(acc, a[f],
                                         okc::desc_plus(x_desc0, (s * kStage + u * okc::tma_x_bytes(NB) + f * 32) / 16));
                    okc::wgmma_commit();
                    okc::fence_regs(acc);
                    okc::wgmma_wait<0>();  // a[] is rewritten by the next unit
                    okc::fence_regs(acc);
                }
            }
        }
        __syncwarp();
        if (lane == 0) okc::mbar_arrive(&empty[s]);
    }
    acc[0] += __uint_as_float(sink & 0x3FFFFFFFu) * 1e-30f;
    fold_and_write<NB, WG>(acc, ring, g, out, M, N, K, tile);
}

template <int NB, int STAGES, int WG, int GPS, int PARTS>
void launch_units(const CUtensorMap& map, const uint8_t* w, __nv_bfloat16* out, int M, int N, int K, uint4 table,
                  cudaStream_t s) {
    auto kernel = zunits_kernel<NB, STAGES, WG, GPS, PARTS>;
    constexpr int smem = STAGES * unit_stage_bytes<NB, GPS>() + 1024;
    static_assert(smem <= 227 * 1024, "ring too deep");
    static bool opted = false;
    if (!opted) {
        CK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
        opted = true;
    }
    kernel<<<N / 64, WG * 128 + 32, smem, s>>>(map, w, out, M, N, K, table);
}

}  // namespace zr

int main(int argc, char** argv) {
    // --callN: the cases session 28's call N timed (5, 6, 7, 8, 11; the default is 11). --ncu (call 10): call 7's
    // cases at m = 16, each once, eagerly, between cudaProfilerStart / Stop (ncu --profile-from-start off).
    const bool for_ncu = argc > 1 && strcmp(argv[1], "--ncu") == 0;
    const int call = for_ncu ? 10 : argc > 1 && strncmp(argv[1], "--call", 6) == 0 ? atoi(argv[1] + 6) : 11;
    // --trace (call 12): zring <NB 2, 8 stages, 4 warpgroups> at m = 16, PARTS 0, 1, 2, each once cold, its
    // traced CTAs' clock64 stamps printed relative to the CTA's start, in microseconds at 1.98 GHz.
    const bool for_trace = argc > 1 && strcmp(argv[1], "--trace") == 0;
    const int N = 8192, K = 1024;  // o
    probekit::Timer tm;
    const double bw = tm.read_bandwidth();
    printf("flush read bandwidth %.2f TB/s\n", bw);
    std::mt19937 rng(28);
    auto random_bytes = [&](size_t n) {
        std::vector<uint8_t> v(n);
        for (auto& b : v) b = (uint8_t)rng();
        return v;
    };
    // A group in four carries one patch; the rest none (n = 0).
    auto header = [&](uint32_t* h) {
        const bool patched = rng() % 4 == 0;
        h[0] = patched ? 1u : 0u;
        h[1] = (rng() & 1023u) | ((rng() & 0xFFFFu) << 10);
        h[2] = h[3] = 0u;
    };
    // The ring's operand: [N/64][K/128] slots of 4 row blocks x 2 groups of stream, then their 8 headers.
    std::vector<uint8_t> zr_host = random_bytes((size_t)(N / 64) * (K / zr::kSlotK) * zr::kWBytes);
    for (size_t slot = 0; slot < (size_t)(N / 64) * (K / zr::kSlotK); ++slot)
        for (int h = 0; h < 4 * zr::kGroups; ++h)
            header(reinterpret_cast<uint32_t*>(zr_host.data() + slot * zr::kWBytes + 4 * zr::kGroups * 1536 + h * 16));
    // zgemv's operands: the stream [N/16][K/64][1536 bytes] and headers [N/16][K/64][4 words].
    std::vector<uint8_t> zs_host = random_bytes((size_t)(N / 16) * (K / 64) * 1536);
    std::vector<uint32_t> zh_host((size_t)(N / 16) * (K / 64) * 4);
    for (size_t i = 0; i < zh_host.size() / 4; ++i) header(&zh_host[4 * i]);
    // zunits' operands, GPS = 4 and 2: [N/64][K/(64 GPS)] slots of 4 row blocks x GPS groups, then their headers.
    auto units_operand = [&](int gps) {
        const size_t wb = 4 * gps * 1536 + 4 * gps * 16, slots = (size_t)(N / 64) * (K / (64 * gps));
        std::vector<uint8_t> v = random_bytes(slots * wb);
        for (size_t slot = 0; slot < slots; ++slot)
            for (int h = 0; h < 4 * gps; ++h) header(reinterpret_cast<uint32_t*>(v.data() + slot * wb + 4 * gps * 1536 + h * 16));
        return v;
    };
    std::vector<uint8_t> u4_host = units_operand(4), u2_host = units_operand(2), u1_host = units_operand(1);
    std::vector<uint8_t> tma_host = random_bytes((size_t)N * K * 2);  // the TMA GEMV's bf16 tiles (any bits)
    std::vector<uint16_t> x_host(32 * K);
    for (auto& v : x_host) v = 0x3F80u ^ (rng() & 0x807Fu);  // +-1.x
    uint8_t *zr_w, *zs_w, *tma_w, *u4_w, *u2_w, *u1_w;
    CK(cudaMalloc(&u1_w, u1_host.size()));
    CK(cudaMemcpy(u1_w, u1_host.data(), u1_host.size(), cudaMemcpyHostToDevice));
    CK(cudaMalloc(&u4_w, u4_host.size()));
    CK(cudaMalloc(&u2_w, u2_host.size()));
    CK(cudaMemcpy(u4_w, u4_host.data(), u4_host.size(), cudaMemcpyHostToDevice));
    CK(cudaMemcpy(u2_w, u2_host.data(), u2_host.size(), cudaMemcpyHostToDevice));
    uint32_t* zh;
    __nv_bfloat16 *x, *out;
    float* ws;
    int* sem;
    CK(cudaMalloc(&zr_w, zr_host.size()));
    CK(cudaMalloc(&zs_w, zs_host.size()));
    CK(cudaMalloc(&zh, zh_host.size() * 4));
    CK(cudaMalloc(&tma_w, tma_host.size()));
    CK(cudaMalloc(&x, x_host.size() * 2));
    CK(cudaMalloc(&out, (size_t)32 * N * 2));
    CK(cudaMalloc(&ws, (size_t)8 << 20));
    CK(cudaMalloc(&sem, 4096 * 4));
    CK(cudaMemset(sem, 0, 4096 * 4));
    CK(cudaMemcpy(zr_w, zr_host.data(), zr_host.size(), cudaMemcpyHostToDevice));
    CK(cudaMemcpy(zs_w, zs_host.data(), zs_host.size(), cudaMemcpyHostToDevice));
    CK(cudaMemcpy(zh, zh_host.data(), zh_host.size() * 4, cudaMemcpyHostToDevice));
    CK(cudaMemcpy(tma_w, tma_host.data(), tma_host.size(), cudaMemcpyHostToDevice));
    CK(cudaMemcpy(x, x_host.data(), x_host.size() * 2, cudaMemcpyHostToDevice));
    const uint4 table = make_uint4(0x3c3b3a39u, 0x403f3e3du, 0xbcbbbab9u, 0xc0bfbebdu);
    const size_t bf16_bytes = (size_t)N * K * 2;  // every case's floor: o's bf16 bytes (as the bar's)

    std::vector<Case> cases;
    for (int m : {8, 16, 32}) {
        const int nb = m <= 8 ? 1 : m <= 16 ? 2 : 4;
        CUtensorMap map3, map5, map2;
        const char* err = okc::bf16_rows_map(&map3, x, m, K, nb * 8, 2);
        if (!err) err = okc::bf16_rows_map(&map2, x, m, K, nb * 8, 1);  // G = 1: one 2-D box a slot
        if (!err) err = okc::bf16_rows_map(&map5, x, m, K, nb * 8, 4);  // GPS = 4: four boxes a copy
        if (err) {
            fprintf(stderr, "%s\n", err);
            return 1;
        }
        auto name = [m](const char* what) {
            static std::deque<std::string> names;  // stable addresses
            names.push_back("m=" + std::to_string(m) + " " + what);
            return names.back().c_str();
        };
        cases.push_back({name("tma (1, 8, 0) entry at 16 / 32"), bf16_bytes, [=](cudaStream_t s) {
                             const char* e = okc_launch_tma_gemv(x, tma_w, tma_w, out, ws, sem, m, N, K, 1, nb, 8, 0,
                                                                 false, (long long)s);
                             if (e) fprintf(stderr, "tma: %s\n", e), exit(1);
                         }});
        if (m <= 16)
            cases.push_back({name("zgemv (8, 1, 1, 0, 1, 0) entry at 8"), bf16_bytes, [=](cudaStream_t s) {
                                 const char* e = okc_launch_zgemv(x, zs_w, zh, nullptr, nullptr, out, ws, sem,
                                                                  (int)table.x, (int)table.y, (int)table.z, (int)table.w,
                                                                  m, N, K, 0, 8, 1, 1, nb, 1, 0, false, (long long)s);
                                 if (e) fprintf(stderr, "zgemv: %s\n", e), exit(1);
                             }});
#define ZR_CASE(NB_, ST_, WG_, PIPE_)                                                                        \
    if (nb == NB_)                                                                                           \
        cases.push_back({name("zring <NB " #NB_ ", " #ST_ " stages, " #WG_ " warpgroups, pipe " #PIPE_ ">"), \
                         bf16_bytes, [=](cudaStream_t s) {                                                   \
                             zr::launch<NB_, ST_, WG_, PIPE_>(map3, zr_w, out, m, N, K, table, s);           \
                         }});
#define ZR_PARTS(NB_, PARTS_)                                                                               \
    if (nb == NB_)                                                                                          \
        cases.push_back({name("zring <NB " #NB_ ", 8 stages, 4 warpgroups>, parts " #PARTS_), bf16_bytes, \
                         [=](cudaStream_t s) { zr::launch<NB_, 8, 4, false, PARTS_>(map3, zr_w, out, m, N, K, table, s); }});
#define ZU_CASE(NB_, ST_, WG_, GPS_, PARTS_)                                                                  \
    if (nb == NB_)                                                                                            \
        cases.push_back({name("zunits <NB " #NB_ ", " #ST_ " stages, " #WG_ " wg, " #GPS_ " groups a slot>, parts " #PARTS_), \
                         bf16_bytes, [=](cudaStream_t s) {                                                    \
                             zr::launch_units<NB_, ST_, WG_, GPS_, PARTS_>(GPS_ == 4 ? map5 : map3,         \
                                                                           GPS_ == 4 ? u4_w : u2_w, out, m, N, K, table, s); \
                         }});
#define ZG1_CASE(NB_, ST_, WG_, PARTS_)                                                                         \
    if (nb == NB_)                                                                                               \
        cases.push_back({name("zring <NB " #NB_ ", " #ST_ " stages, " #WG_ " wg, 1 group a slot>, parts " #PARTS_), \
                         bf16_bytes, [=](cudaStream_t s) {                                                      \
                             zr::launch<NB_, ST_, WG_, false, PARTS_, 1>(map2, u1_w, out, m, N, K, table, s);   \
                         }});
        switch (call) {
            case 5:  // zring's warpgroups and ring depth
                ZR_CASE(1, 4, 1, 0) ZR_CASE(1, 4, 2, 0) ZR_CASE(1, 8, 2, 0) ZR_CASE(1, 8, 4, 0)
                ZR_CASE(2, 4, 1, 0) ZR_CASE(2, 4, 2, 0) ZR_CASE(2, 8, 2, 0) ZR_CASE(2, 8, 4, 0)
                ZR_CASE(4, 4, 2, 0) ZR_CASE(4, 8, 2, 0) ZR_CASE(4, 8, 4, 0)
                break;
            case 6:  // more warpgroups (6 at NB 4 spill, C7512: 5 there), wgmmas issued per group (pipe 1)
                ZR_CASE(1, 8, 4, 0) ZR_CASE(1, 8, 4, 1) ZR_CASE(1, 8, 6, 0) ZR_CASE(1, 8, 6, 1)
                ZR_CASE(2, 8, 4, 0) ZR_CASE(2, 8, 4, 1) ZR_CASE(2, 8, 6, 0) ZR_CASE(2, 8, 6, 1) ZR_CASE(2, 12, 6, 1)
                ZR_CASE(4, 8, 4, 0) ZR_CASE(4, 8, 4, 1) ZR_CASE(4, 8, 5, 0) ZR_CASE(4, 8, 5, 1)
                break;
            case 7:  // the parts of <NB, 8, 4, pipe 0>
            case 10:  // --ncu: the same at m = 16 only (the --ncu branch below picks m = 16)
                ZR_PARTS(1, 0) ZR_PARTS(1, 1) ZR_PARTS(1, 2)
                ZR_PARTS(2, 0) ZR_PARTS(2, 1) ZR_PARTS(2, 2)
                ZR_PARTS(4, 0) ZR_PARTS(4, 1) ZR_PARTS(4, 2)
                break;
            case 8:  // zunits beside call 7's best
                ZR_PARTS(1, 0) ZR_PARTS(2, 0) ZR_PARTS(4, 0)
                ZU_CASE(1, 4, 4, 4, 0) ZU_CASE(1, 4, 4, 4, 1) ZU_CASE(1, 4, 4, 4, 2) ZU_CASE(1, 8, 2, 2, 0) ZU_CASE(1, 4, 2, 4, 0)
                ZU_CASE(2, 4, 4, 4, 0) ZU_CASE(2, 4, 4, 4, 1) ZU_CASE(2, 4, 4, 4, 2) ZU_CASE(2, 8, 2, 2, 0) ZU_CASE(2, 4, 2, 4, 0)
                ZU_CASE(4, 3, 4, 4, 0) ZU_CASE(4, 3, 4, 4, 1) ZU_CASE(4, 3, 4, 4, 2) ZU_CASE(4, 8, 2, 2, 0) ZU_CASE(4, 8, 4, 2, 0)
                break;
            case 11:  // one group a slot (6,208-byte copies, 16 slots a CTA all in flight at once)
                ZR_PARTS(1, 0) ZR_PARTS(2, 0) ZR_PARTS(4, 0)
                ZG1_CASE(1, 16, 4, 0) ZG1_CASE(1, 16, 2, 0) ZG1_CASE(1, 16, 4, 2) ZG1_CASE(1, 8, 4, 0)
                ZG1_CASE(2, 16, 4, 0) ZG1_CASE(2, 16, 2, 0) ZG1_CASE(2, 16, 4, 2) ZG1_CASE(2, 8, 4, 0)
                ZG1_CASE(4, 16, 4, 0) ZG1_CASE(4, 16, 2, 0) ZG1_CASE(4, 16, 4, 2) ZG1_CASE(4, 8, 4, 0)
                break;
        }
    }
    if (for_trace) {
        const int m = 16;
        CUtensorMap map;
        if (const char* e = okc::bf16_rows_map(&map, x, m, K, 16, 2)) return fprintf(stderr, "%s\n", e), 1;
        auto traced = [&](const char* what, auto launch_fn) {
            for (int rep = 0; rep < 2; ++rep) {  // the first run warms up; the second is printed
                long long zero[4][64] = {};
                CK(cudaMemcpyToSymbol(zr::zr_trace, zero, sizeof(zero)));
                tm.flush(tm.stream);
                launch_fn(tm.stream);
                CK(cudaStreamSynchronize(tm.stream));
            }
            long long t[4][64];
            CK(cudaMemcpyFromSymbol(t, zr::zr_trace, sizeof(t)));
            printf("=== %s (us after the CTA's first stamp, SM clock at 1.98 GHz)\n", what);
            for (int c = 0; c < 4; ++c) {
                auto us = [&](long long v) { return v ? (v - t[c][0]) / 1980.0 : -1.0; };
                printf("CTA %3d issued:", 32 * c);
                for (int i = 0; i < 8; ++i) printf(" %5.2f", us(t[c][34 + i]));
                printf("\n        landed:");
                for (int i = 0; i < 8; ++i) printf(" %5.2f", us(t[c][1 + i]));
                printf("\n        done:  ");
                for (int i = 0; i < 8; ++i) printf(" %5.2f", us(t[c][17 + i]));
                printf("\n        output written %.2f\n", us(t[c][33]));
            }
        };
        traced("zring, all of it", [&](cudaStream_t s) { zr::launch<2, 8, 4, false, 0, 2, true>(map, zr_w, out, m, N, K, table, s); });
        traced("zring, decode only", [&](cudaStream_t s) { zr::launch<2, 8, 4, false, 1, 2, true>(map, zr_w, out, m, N, K, table, s); });
        traced("zring, bare ring", [&](cudaStream_t s) { zr::launch<2, 8, 4, false, 2, 2, true>(map, zr_w, out, m, N, K, table, s); });
        return 0;
    }
    if (for_ncu) {
        for (const Case& c : cases) {
            if (strncmp(c.name, "m=16 ", 5) != 0) continue;
            c.run(tm.stream);  // warm-up
            CK(cudaStreamSynchronize(tm.stream));
            tm.flush(tm.stream);
            CK(cudaStreamSynchronize(tm.stream));
            CK(cudaProfilerStart());
            c.run(tm.stream);
            CK(cudaStreamSynchronize(tm.stream));
            CK(cudaProfilerStop());
            printf("profiled: %s\n", c.name);
        }
        return 0;
    }
    probekit::run_rounds(tm, cases, bw, 3);
    return 0;
}
