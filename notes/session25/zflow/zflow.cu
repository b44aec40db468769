// Session 25 probe: the compressed GEMV fed in arrival order ("zflow"), timed beside the shipped engines on o
// (8192 x 1024) in the probes' harness (notes/probekit.cuh), and checked against main's zgemv_kernel.
//
// Why: o's 12-bit bytes stream ~1 us faster than its bf16 bytes in the compressed GEMV's grid (session 24,
// ostream), yet the compressed GEMV lands with the register GEMV (~9.3 us) because its decode comes after the
// bytes (z-probe: 0.57 us at m = 1) and, in session 23's bulk variant (z-bulk), every warp waited for its whole
// slice, so all of an SM's decode came at the end. Here a CTA owns R 16-row blocks and the whole K (o: 24 KB per
// block, 96 KB at R = 4: it all fits in shared memory, so there is no ring and nothing to recycle). At the start
// warp 0 asks the bulk copy engine for x and then every weight byte of the CTA, K group by K group, one mbarrier
// per group; each warp owns one row block (and 1 / WPR of its groups) and walks the groups in the order they were
// requested, so a group's decode runs while the later groups are still on their way, and only the last group's
// decode and mmas follow the last byte.
// Values: x and weights random; exceptions 0-3 a row (24 a block of capacity). Timing + a check against
// zgemv_kernel (another summation order: compared with a tolerance).
// Builds against kernels_src as of commit 7343a40 (before the compressed GEMV's patch headers: its ZGemvArgs here
// set no `patches`); call 1's script ran it there. Part 6 (the exception warp) lives on branch z-ew.
#include <cuda_runtime.h>
#include <cuda_bf16.h>

#include <cmath>
#include <random>

#include "../../probekit.cuh"
#include "gemv.cuh"
#include "zgemv.cuh"
#include "tma_gemv.cuh"

using namespace okc;
using probekit::Timer;

constexpr int kGroupBytes = kZFragsPerGroup * 16;  // 1536: one row block's K group

struct FlowArgs {
    const __nv_bfloat16* x;  // [M, K]
    const Frag* w;           // compress.py stream [N/16][K/64][3][32] Frags
    const int2* exceptions;  // [N/16][capr]
    const int* row_starts;   // [N/16][17]
    __nv_bfloat16* out;      // [M, N]
    uint4 table;
    int M, N, K, capr;
    int regrouped;  // 1: w holds the stream regrouped for R ([N/16R][G][R] groups): a CTA's K groups contiguous
};

// x rows in shared memory are K * 2 + 64 bytes apart: a lane's 16-byte x fragment (token lane / 4, K offset
// 16 (lane % 4) bytes) then hits every bank once per 8 lanes (tokens t and t + 1 sit 64 bytes apart mod 128).
__host__ __device__ constexpr int flow_x_stride(int k) { return k * 2 + 64; }
__host__ __device__ constexpr size_t flow_smem_bytes(int r, int nb, int k, int wpr, int capr) {
    return (size_t)(k / 64) * r * kGroupBytes              // weights, group-major: [G][R][1536]
           + (size_t)nb * 8 * flow_x_stride(k)             // x tile
           + (size_t)wpr * r * nb * 4 * 32 * 4             // partial tiles (WPR > 1)
           + (((size_t)r * capr * 8 + r * 17 * 4 + 15) & ~(size_t)15);  // exception entries, row starts
}

// GPC: K groups per copy and per mbarrier (regrouped streams only: one copy of GPC x R x 1536 bytes; otherwise
// one 1536-byte copy per row block and group). DECODE = false: no decode, no mma (the words are folded into the
// accumulators with adds): the stream and its waits alone.
template <int NB, int R, int WPR, int GPC = 1, bool DECODE = true>
__global__ void __launch_bounds__(32 * R * WPR, 1) zflow_kernel(const FlowArgs a) {
    extern __shared__ __align__(128) uint8_t smem[];
    __shared__ __align__(8) uint64_t bars[65];  // [0, G): weight groups; G: x
    const int G = a.K >> 6;
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    const int r = warp / WPR, part = warp % WPR;  // this warp's row block and its share of the groups
    const int rb0 = blockIdx.x * R;
    const int xs = flow_x_stride(a.K);
    uint8_t* wsm = smem;
    uint8_t* xsm = wsm + (size_t)G * R * kGroupBytes;
    float* tiles = reinterpret_cast<float*>(xsm + (size_t)NB * 8 * xs);
    int2* entries = reinterpret_cast<int2*>(tiles + WPR * R * NB * 4 * 32);
    int* starts = reinterpret_cast<int*>(entries + R * a.capr);

    if (threadIdx.x == 0) {
        for (int i = 0; i < G + 1; ++i) mbar_init(&bars[i], 1);
        asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
    }
    __syncthreads();
    if (warp == 0) {
        // Arm every barrier first (one lane each), then request in consumption order: x, then the groups.
        if (lane == 0) mbar_arrive_expect_tx(&bars[G], a.M * a.K * 2);
        for (int c = lane; c < G / GPC; c += 32) mbar_arrive_expect_tx(&bars[c], GPC * R * kGroupBytes);
        __syncwarp();
        for (int t = lane; t < a.M; t += 32) bulk_load_1d(xsm + (size_t)t * xs, a.x + (size_t)t * a.K, a.K * 2, &bars[G]);
        if (a.regrouped) {
            for (int c = lane; c < G / GPC; c += 32)
                bulk_load_1d(wsm + (size_t)c * GPC * R * kGroupBytes,
                             a.w + ((size_t)blockIdx.x * G + c * GPC) * R * kZFragsPerGroup, GPC * R * kGroupBytes,
                             &bars[c]);
        } else {
            const size_t row_frags = (size_t)G * kZFragsPerGroup;
            for (int c = lane; c < G * R; c += 32) {  // copy c: group c / R, row block c % R (32 copies in order)
                const int g = c / R, rr = c % R;
                bulk_load_1d(wsm + (size_t)c * kGroupBytes,
                             a.w + (size_t)(rb0 + rr) * row_frags + (size_t)g * kZFragsPerGroup, kGroupBytes,
                             &bars[g / GPC]);
            }
        }
    }
    // The warp that ends row block r stages its exception entries and row starts (cp.async, waited at the end).
    if (part == 0) {
        for (int e = lane; e < a.capr; e += 32)
            cp_async<8>(entries + r * a.capr + e, a.exceptions + (size_t)(rb0 + r) * a.capr + e);
        if (lane < 17) cp_async<4>(starts + r * 17 + lane, a.row_starts + (rb0 + r) * 17 + lane);
    }

    float acc[NB][4];
#pragma unroll
    for (int nb = 0; nb < NB; ++nb)
#pragma unroll
        for (int j = 0; j < 4; ++j) acc[nb][j] = 0.f;
    const uint4 t = a.table;
    // This lane's x fragment of K block kb, column block nb: xsm + token * xs + kb * 64 + 16 (lane % 4).
    const uint8_t* xl = xsm + (size_t)(lane >> 2) * xs + (lane & 3) * 16;
    const uint8_t* wl = wsm + (size_t)r * kGroupBytes + lane * 16;
    mbar_wait(&bars[G], 0);
    for (int g = part; g < G; g += WPR) {
        Frag w[kZParts], xf[2][NB];
        mbar_wait(&bars[g / GPC], 0);
#pragma unroll
        for (int p = 0; p < kZParts; ++p)
            w[p] = *reinterpret_cast<const Frag*>(wl + (size_t)g * R * kGroupBytes + p * 512);
#pragma unroll
        for (int b = 0; b < 2; ++b)
#pragma unroll
            for (int nb = 0; nb < NB; ++nb)
                xf[b][nb] = *reinterpret_cast<const Frag*>(xl + (size_t)nb * 8 * xs + (2 * g + b) * 64);
        if constexpr (!DECODE) {
#pragma unroll
            for (int p = 0; p < kZParts; ++p)
#pragma unroll
                for (int q = 0; q < 4; ++q) acc[0][q] += __uint_as_float((w[p].r[q] ^ xf[0][0].r[q]) & 0x3FFFFFFFu);
            continue;
        }
#pragma unroll
        for (int f = 0; f < 4; ++f) {
            uint32_t af[4];
            decode_fragment(af, w, f, t);
            const int b = f >> 1, y = f & 1;
#pragma unroll
            for (int nb = 0; nb < NB; ++nb) mma_bf16_m16n8k16(acc[nb], af, xf[b][nb].r[2 * y], xf[b][nb].r[2 * y + 1]);
        }
    }

    // End. The lane owns rows lane / 4 and + 8 of row block r, tokens 8 nb + 2 (lane % 4) + (j & 1).
    if constexpr (WPR > 1) {
        float* mine = tiles + ((size_t)(part * R + r) * NB * 4) * 32;
#pragma unroll
        for (int nb = 0; nb < NB; ++nb)
#pragma unroll
            for (int j = 0; j < 4; ++j) mine[(nb * 4 + j) * 32 + lane] = acc[nb][j];
        __syncthreads();
        if (part != 0) return;
#pragma unroll
        for (int nb = 0; nb < NB; ++nb)
#pragma unroll
            for (int j = 0; j < 4; ++j) {
                float v = 0.f;
#pragma unroll
                for (int q = 0; q < WPR; ++q) v += tiles[((size_t)(q * R + r) * NB * 4 + nb * 4 + j) * 32 + lane];
                acc[nb][j] = v;
            }
    }
    cp_async_wait_all();
    __syncwarp();
#pragma unroll
    for (int nb = 0; nb < NB; ++nb)
#pragma unroll
        for (int j = 0; j < 4; ++j) {
            const int i = (lane >> 2) + ((j & 2) ? 8 : 0);
            const int token = nb * 8 + (lane & 3) * 2 + (j & 1);
            if (token >= a.M) continue;
            float v = acc[nb][j];
            const int e_end = starts[r * 17 + i + 1];
            const __nv_bfloat16* xrow = reinterpret_cast<const __nv_bfloat16*>(xsm + (size_t)token * xs);
            for (int e = starts[r * 17 + i]; e < e_end; ++e) {
                const int2 entry = entries[r * a.capr + e];
                v += __bfloat162float(xrow[entry.x & 0xFFFF]) * __uint_as_float((uint32_t)entry.y << 16);
            }
            a.out[(size_t)token * a.N + (rb0 + r) * 16 + i] = __float2bfloat16_rn(v);
        }
}

template <int NB, int R, int WPR, int GPC = 1, bool DECODE = true>
probekit::Case flow_case(const char* name, size_t bytes, const FlowArgs& args) {
    const size_t smem = flow_smem_bytes(R, NB, args.K, WPR, args.capr);
    auto kernel = zflow_kernel<NB, R, WPR, GPC, DECODE>;
    CK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem));
    return probekit::Case{name, bytes, [=](cudaStream_t s) {
                              kernel<<<args.N / (16 * R), 32 * R * WPR, smem, s>>>(args);
                          }};
}


// zcp: the same arrival-ordered walk, fed by cp.async (LDGSTS: per-thread 16-byte copies, the load path and
// memory-level parallelism of ld.global, no register held while in flight) instead of the bulk copy engine,
// whose per-SM rate capped zflow (call 1: ~20 GB/s a SM without any decode). Each lane copies its own three
// 16-byte weight parts and its 2 NB x fragments of each of its warp's groups into its own shared-memory slot and
// later reads back only those, so no barrier of any kind is needed: cp.async.wait_group orders a lane's groups.
// D groups per warp are in flight (a window: issue D, then one more per group consumed).
__device__ __forceinline__ void cp_async_cg16(void* smem, const void* gmem) {
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16;" ::"r"(smem_addr(smem)), "l"(gmem) : "memory");
}
__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;" ::: "memory"); }
template <int N>
__device__ __forceinline__ void cp_async_wait_group() { asm volatile("cp.async.wait_group %0;" ::"n"(N) : "memory"); }

__host__ __device__ constexpr int zcp_slot_bytes(int nb) { return kGroupBytes + nb * 2 * 512; }
__host__ __device__ constexpr size_t zcp_smem_bytes(int r, int nb, int wpr, int d, int capr) {
    return (size_t)r * wpr * d * zcp_slot_bytes(nb) + (size_t)wpr * r * nb * 4 * 32 * 4 +
           (((size_t)r * capr * 8 + r * 17 * 4 + 15) & ~(size_t)15);
}

template <int NB, int R, int WPR, int D, bool DECODE = true>
__global__ void __launch_bounds__(32 * R * WPR, 1) zcp_kernel(const FlowArgs a) {
    extern __shared__ __align__(128) uint8_t smem[];
    constexpr int kSlot = zcp_slot_bytes(NB);
    const int G = a.K >> 6;
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    const int r = warp / WPR, part = warp % WPR;
    const int rb0 = blockIdx.x * R;
    uint8_t* slots = smem + (size_t)warp * D * kSlot + lane * 16;  // this lane's bytes of slot 0
    float* tiles = reinterpret_cast<float*>(smem + (size_t)R * WPR * D * kSlot);
    int2* entries = reinterpret_cast<int2*>(tiles + WPR * R * NB * 4 * 32);
    int* starts = reinterpret_cast<int*>(entries + R * a.capr);
    const Frag* wp = a.w + (size_t)(rb0 + r) * G * kZFragsPerGroup + lane;
    const Frag* xp[NB];
    bool xvalid[NB];  // rows of x past M: the pointer repeats row 0 (in bounds); those columns are never stored
    x_operand<NB>(reinterpret_cast<const Frag*>(a.x), a.M, a.K, lane, xp, xvalid);
    const int n = (G - part + WPR - 1) / WPR;  // this warp's groups: part, part + WPR, ...
    auto issue = [&](int i) {
        const int g = part + i * WPR;
        uint8_t* slot = slots + (size_t)(i % D) * kSlot;
#pragma unroll
        for (int p = 0; p < kZParts; ++p) cp_async_cg16(slot + p * 512, wp + (size_t)g * kZFragsPerGroup + p * 32);
#pragma unroll
        for (int b = 0; b < 2; ++b)
#pragma unroll
            for (int nb = 0; nb < NB; ++nb) cp_async<16>(slot + kGroupBytes + (b * NB + nb) * 512, xp[nb] + (2 * g + b) * 4);
    };
    if (part == 0) {  // exceptions of row block r, staged for the end: in commit group 0, with group 0's bytes
        for (int e = lane; e < a.capr; e += 32)
            cp_async<8>(entries + r * a.capr + e, a.exceptions + (size_t)(rb0 + r) * a.capr + e);
        if (lane < 17) cp_async<4>(starts + r * 17 + lane, a.row_starts + (rb0 + r) * 17 + lane);
    }
#pragma unroll
    for (int i = 0; i < D; ++i) {
        if (i < n) issue(i);
        cp_async_commit();
    }

    float acc[NB][4];
#pragma unroll
    for (int nb = 0; nb < NB; ++nb)
#pragma unroll
        for (int j = 0; j < 4; ++j) acc[nb][j] = 0.f;
    const uint4 t = a.table;
    for (int i = 0; i < n; ++i) {
        cp_async_wait_group<D - 1>();  // commit group i (D + i committed so far) has landed
        const uint8_t* slot = slots + (size_t)(i % D) * kSlot;
        Frag w[kZParts], xf[2][NB];
#pragma unroll
        for (int p = 0; p < kZParts; ++p) w[p] = *reinterpret_cast<const Frag*>(slot + p * 512);
#pragma unroll
        for (int b = 0; b < 2; ++b)
#pragma unroll
            for (int nb = 0; nb < NB; ++nb)
                xf[b][nb] = *reinterpret_cast<const Frag*>(slot + kGroupBytes + (b * NB + nb) * 512);
        if (i + D < n) issue(i + D);  // refills the slot just read (this lane's own bytes)
        cp_async_commit();
        if constexpr (!DECODE) {
#pragma unroll
            for (int p = 0; p < kZParts; ++p)
#pragma unroll
                for (int q = 0; q < 4; ++q) acc[0][q] += __uint_as_float((w[p].r[q] ^ xf[0][0].r[q]) & 0x3FFFFFFFu);
        } else {
#pragma unroll
            for (int f = 0; f < 4; ++f) {
                uint32_t af[4];
                decode_fragment(af, w, f, t);
                const int b = f >> 1, y = f & 1;
#pragma unroll
                for (int nb = 0; nb < NB; ++nb)
                    mma_bf16_m16n8k16(acc[nb], af, xf[b][nb].r[2 * y], xf[b][nb].r[2 * y + 1]);
            }
        }
    }

    if constexpr (WPR > 1) {
        float* mine = tiles + ((size_t)(part * R + r) * NB * 4) * 32;
#pragma unroll
        for (int nb = 0; nb < NB; ++nb)
#pragma unroll
            for (int j = 0; j < 4; ++j) mine[(nb * 4 + j) * 32 + lane] = acc[nb][j];
        __syncthreads();
        if (part != 0) return;
#pragma unroll
        for (int nb = 0; nb < NB; ++nb)
#pragma unroll
            for (int j = 0; j < 4; ++j) {
                float v = 0.f;
#pragma unroll
                for (int q = 0; q < WPR; ++q) v += tiles[((size_t)(q * R + r) * NB * 4 + nb * 4 + j) * 32 + lane];
                acc[nb][j] = v;
            }
    }
    cp_async_wait_all();
    __syncwarp();
    const __nv_bfloat16* x = a.x;
#pragma unroll
    for (int nb = 0; nb < NB; ++nb)
#pragma unroll
        for (int j = 0; j < 4; ++j) {
            const int i = (lane >> 2) + ((j & 2) ? 8 : 0);
            const int token = nb * 8 + (lane & 3) * 2 + (j & 1);
            if (token >= a.M) continue;
            float v = acc[nb][j];
            const int e_end = starts[r * 17 + i + 1];
            for (int e = starts[r * 17 + i]; e < e_end; ++e) {
                const int2 entry = entries[r * a.capr + e];
                v += __bfloat162float(x[(size_t)token * a.K + (entry.x & 0xFFFF)]) * __uint_as_float((uint32_t)entry.y << 16);
            }
            a.out[(size_t)token * a.N + (rb0 + r) * 16 + i] = __float2bfloat16_rn(v);
        }
}

template <int NB, int R, int WPR, int D, bool DECODE = true>
probekit::Case zcp_case(const char* name, size_t bytes, const FlowArgs& args) {
    const size_t smem = zcp_smem_bytes(R, NB, WPR, D, args.capr);
    auto kernel = zcp_kernel<NB, R, WPR, D, DECODE>;
    CK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem));
    return probekit::Case{name, bytes, [=](cudaStream_t s) { kernel<<<args.N / (16 * R), 32 * R * WPR, smem, s>>>(args); }};
}

// zknobs: main's zgemv_kernel (P = 0, S = 1) with parts switchable, to price the decode on o (call 1, part 4).
// DEC: 0 the shipped decode (compress.py's recipe, ~20 instructions a fragment); 1 a cheaper stand-in with
// the instruction count an 8-entry table would need (mask + one lookup per 4 hi bytes, the 4 interleaves: ~8;
// values wrong); 2 none (the raw lo words as the A registers). MMA = false: the A words folded into the
// accumulators with adds instead. EXC = false: no exception pass (the harness's entries then add nothing anyway).
template <int DEC>
__device__ __forceinline__ void knob_decode(uint32_t (&a)[4], const Frag (&part)[kZParts], int f, const uint4& t) {
    if constexpr (DEC == 0) {
        decode_fragment(a, part, f, t);
    } else if constexpr (DEC == 1) {
        const Frag& lo = part[f >> 1];
        const uint32_t l0 = lo.r[2 * (f & 1)], l1 = lo.r[2 * (f & 1) + 1];
        const uint32_t c = part[2].r[f];
        const uint32_t h0 = prmt(t.x, t.y, c & 0x7777u), h1 = prmt(t.x, t.y, (c >> 16) & 0x7777u);
        a[0] = prmt(l0, h0, 0x5140u);
        a[1] = prmt(l0, h0, 0x7362u);
        a[2] = prmt(l1, h1, 0x5140u);
        a[3] = prmt(l1, h1, 0x7362u);
    } else {
        const Frag& lo = part[f >> 1];
        a[0] = lo.r[0] ^ part[2].r[f], a[1] = lo.r[1], a[2] = lo.r[2], a[3] = lo.r[3];
    }
}

template <int UG, int NB, int DEC, bool MMA, bool EXC>
__global__ void __launch_bounds__(512, 1) zknobs_kernel(const ZGemvArgs a) {
    constexpr int R = 1;
    extern __shared__ float red[];
    constexpr int kTile = R * NB * 4 * 32;
    const int nw = blockDim.x >> 5;
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    const int rb0 = blockIdx.x * R;
    const int groups = a.K >> 6;
    int2* entries = reinterpret_cast<int2*>(red + nw * kTile);
    int* starts = reinterpret_cast<int*>(entries + R * a.capr);
    if constexpr (EXC) {
        for (int e = threadIdx.x; e < R * a.capr; e += blockDim.x)
            cp_async<8>(entries + e, a.exceptions + (size_t)rb0 * a.capr + e);
        for (int e = threadIdx.x; e < R * 17; e += blockDim.x) cp_async<4>(starts + e, a.row_starts + rb0 * 17 + e);
    }
    const Frag* xp[NB];
    bool xvalid[NB];
    x_operand<NB>(a.x, a.M, a.K, lane, xp, xvalid);
    const size_t row_frags = (size_t)groups * kZFragsPerGroup;
    const Frag* wp = a.w + (size_t)rb0 * row_frags + lane;
    const uint4 t = a.table;
    float acc[R][NB][4];
    zero_accumulators<R, NB>(acc);
    for (int g = warp * UG; g < groups; g += nw * UG) {
        ZTrip<UG, NB, R> tr;
        load_ztrip<UG, NB, R>(tr, wp, row_frags, xp, xvalid, g, groups);
#pragma unroll
        for (int u = 0; u < UG; ++u)
#pragma unroll
            for (int f = 0; f < 4; ++f) {
                uint32_t af[4];
                knob_decode<DEC>(af, tr.w[0][u], f, t);
                const int b = f >> 1, y = f & 1;
#pragma unroll
                for (int nb = 0; nb < NB; ++nb) {
                    if constexpr (MMA) {
                        mma_bf16_m16n8k16(acc[0][nb], af, tr.x[u][b][nb].r[2 * y], tr.x[u][b][nb].r[2 * y + 1]);
                    } else {
#pragma unroll
                        for (int q = 0; q < 4; ++q)
                            acc[0][nb][q] += __uint_as_float((af[q] ^ tr.x[u][b][nb].r[q]) & 0x3FFFFFFFu);
                    }
                }
            }
    }
    park_accumulators<R, NB>(red, acc, warp, lane);
    __syncthreads();
    if constexpr (EXC) {
        cp_async_wait_all();
        __syncthreads();
        const __nv_bfloat16* x = reinterpret_cast<const __nv_bfloat16*>(a.x);
        for (int idx = threadIdx.x; idx < R * 16 * a.M; idx += blockDim.x) {
            const int token = idx % a.M, i = (idx / a.M) & 15;
            const int e_end = starts[i + 1];
            float v = 0.f;
            for (int e = starts[i]; e < e_end; ++e) {
                const int2 entry = entries[e];
                v += __bfloat162float(x[(size_t)token * a.K + (entry.x & 0xFFFF)]) * __uint_as_float((uint32_t)entry.y << 16);
            }
            red[ztile_index<NB>(0, i, token)] += v;
        }
        __syncthreads();
    }
    for (int idx = threadIdx.x; idx < kTile; idx += blockDim.x)
        zwrite_tile_element<NB>(a, rb0, idx, sum_over_warps(red, kTile, idx));
}

template <int UG, int NB, int DEC, bool MMA, bool EXC>
probekit::Case knob_case(const char* name, size_t bytes, ZGemvArgs args, int nw) {
    const size_t smem = zgemv_smem_bytes(nw, 1, NB, args.capr, 0);
    auto kernel = zknobs_kernel<UG, NB, DEC, MMA, EXC>;
    return probekit::Case{name, bytes, [=](cudaStream_t s) { kernel<<<args.N / 16, 32 * nw, smem, s>>>(args); }};
}

int main() {
    Timer tm;
    const int N = 8192, K = 1024, G = K / 64;
    const size_t stream_bytes = (size_t)N / 16 * G * kGroupBytes;  // 12.6 MB
    std::mt19937 rng(25);
    // Weights: random stream bytes (any byte is a valid lo byte or pair of codes); table of realistic hi bytes.
    std::vector<uint8_t> hs(stream_bytes);
    for (auto& b : hs) b = rng() & 0xFF;
    std::vector<__nv_bfloat16> hx((size_t)32 * K);
    std::normal_distribution<float> nd;
    for (auto& v : hx) v = __float2bfloat16(nd(rng));
    // Exceptions: EXC per row block spread over its rows (k distinct enough), to exercise the end's pass.
    const int exc_per_block = 24, capr = exc_per_block;
    std::vector<int2> he((size_t)N / 16 * capr);
    std::vector<int> hstarts((size_t)N / 16 * 17);
    for (int b = 0; b < N / 16; ++b) {
        int e = 0;
        for (int i = 0; i < 16; ++i) {
            hstarts[b * 17 + i] = e;
            const int cnt = (i * 7 + b) % 4;  // 0..3 per row
            for (int c = 0; c < cnt && e < capr; ++c, ++e) {
                const int k = (int)(rng() % K);
                const uint16_t bits = (uint16_t)(0x4100 | (rng() & 0x80FF));  // hi byte 0x41 / 0xC1: outside the table
                he[(size_t)b * capr + e] = make_int2(k | (i << 16), bits);
            }
        }
        hstarts[b * 17 + 16] = e;
    }
    Frag* w;
    __nv_bfloat16 *x, *out_ref, *out;
    int2* exceptions;
    int* row_starts;
    CK(cudaMalloc(&w, stream_bytes));
    CK(cudaMemcpy(w, hs.data(), stream_bytes, cudaMemcpyHostToDevice));
    CK(cudaMalloc(&x, hx.size() * 2));
    CK(cudaMemcpy(x, hx.data(), hx.size() * 2, cudaMemcpyHostToDevice));
    CK(cudaMalloc(&exceptions, he.size() * 8));
    CK(cudaMemcpy(exceptions, he.data(), he.size() * 8, cudaMemcpyHostToDevice));
    CK(cudaMalloc(&row_starts, hstarts.size() * 4));
    CK(cudaMemcpy(row_starts, hstarts.data(), hstarts.size() * 4, cudaMemcpyHostToDevice));
    CK(cudaMalloc(&out_ref, (size_t)32 * N * 2));
    CK(cudaMalloc(&out, (size_t)32 * N * 2));
    const uint4 table = make_uint4(0x3c3b3a00u, 0x3f3e3d39u, 0xbcbbbab9u, 0xc0bfbebdu);

    auto zargs = [&](int m) {
        ZGemvArgs a{};
        a.x = reinterpret_cast<const Frag*>(x), a.w = w, a.exceptions = exceptions, a.row_starts = row_starts;
        a.out = out_ref, a.table = table;
        a.M = m, a.N = N, a.K = K, a.S = 1, a.capr = capr, a.cluster = 0;
        return a;
    };
    // The stream regrouped per CTA of R row blocks: group g of row block r of CTA c at chunk (c G + g) R + r.
    auto regroup = [&](int R) {
        std::vector<uint8_t> h(stream_bytes);
        for (int c = 0; c < N / 16 / R; ++c)
            for (int g = 0; g < G; ++g)
                for (int r = 0; r < R; ++r)
                    memcpy(&h[(((size_t)c * G + g) * R + r) * kGroupBytes], &hs[(((size_t)c * R + r) * G + g) * kGroupBytes],
                           kGroupBytes);
        Frag* d;
        CK(cudaMalloc(&d, stream_bytes));
        CK(cudaMemcpy(d, h.data(), stream_bytes, cudaMemcpyHostToDevice));
        return d;
    };
    Frag* const w_by_r[5] = {nullptr, nullptr, regroup(2), nullptr, regroup(4)};
    // Args for m tokens; R > 0: the stream regrouped for R.
    auto fargs = [&](int m, int regroup_r = 0) {
        return FlowArgs{x, regroup_r ? w_by_r[regroup_r] : w, exceptions, row_starts, out, table, m, N, K, capr,
                        regroup_r ? 1 : 0};
    };
    const size_t zsmem = zgemv_smem_bytes(8, 1, 1, capr, 0), zsmem2 = zgemv_smem_bytes(8, 1, 2, capr, 0);

    // Check: every zflow variant against zgemv_kernel<1, NB, 1, 0> on m = 1, 5, 8, 13, 16.
    int bad = 0;
    auto check = [&](const char* name, int m, auto launch_flow) {
        const int nb = m <= 8 ? 1 : 2;
        CK(cudaMemset(out_ref, 0xFF, (size_t)32 * N * 2));
        CK(cudaMemset(out, 0xFF, (size_t)32 * N * 2));
        if (nb == 1) zgemv_kernel<1, 1, 1, 0><<<N / 16, 256, zsmem>>>(zargs(m));
        else zgemv_kernel<1, 2, 1, 0><<<N / 16, 256, zsmem2>>>(zargs(m));
        launch_flow(m);
        CK(cudaDeviceSynchronize());
        std::vector<__nv_bfloat16> a((size_t)m * N), b((size_t)m * N);
        CK(cudaMemcpy(a.data(), out_ref, a.size() * 2, cudaMemcpyDeviceToHost));
        CK(cudaMemcpy(b.data(), out, b.size() * 2, cudaMemcpyDeviceToHost));
        double worst = 0, scale = 0;
        for (size_t i = 0; i < a.size(); ++i) scale = std::max(scale, (double)fabsf(__bfloat162float(a[i])));
        for (size_t i = 0; i < a.size(); ++i) {
            const double d = fabs((double)__bfloat162float(a[i]) - (double)__bfloat162float(b[i]));
            worst = std::isnan(d) ? 1e30 : std::max(worst, d);
        }
        const bool ok = worst <= 1e-2 * scale && scale > 0;
        bad += !ok;
        printf("check %-28s m=%2d  max|diff| %.4g  (max|out| %.4g)  %s\n", name, m, worst, scale, ok ? "ok" : "WRONG");
    };
    auto flow_launch = [&](auto kernel, int R, int WPR, int NB, bool regrouped) {
        return [=](int m) {
            const size_t smem = flow_smem_bytes(R, NB, K, WPR, capr);
            CK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem));
            kernel<<<N / (16 * R), 32 * R * WPR, smem>>>(fargs(m, regrouped ? R : 0));
        };
    };
    for (int m : {1, 5, 8}) {
        check("zflow<1,4,1>", m, flow_launch(zflow_kernel<1, 4, 1>, 4, 1, 1, false));
        check("zflow<1,2,4>", m, flow_launch(zflow_kernel<1, 2, 4>, 2, 4, 1, false));
        check("zflow<1,4,2> regrouped GPC 1", m, flow_launch(zflow_kernel<1, 4, 2, 1>, 4, 2, 1, true));
        check("zflow<1,4,2> regrouped GPC 2", m, flow_launch(zflow_kernel<1, 4, 2, 2>, 4, 2, 1, true));
        check("zflow<1,2,4> regrouped GPC 4", m, flow_launch(zflow_kernel<1, 2, 4, 4>, 2, 4, 1, true));
    }
    for (int m : {9, 13, 16}) {
        check("zflow<2,4,1>", m, flow_launch(zflow_kernel<2, 4, 1>, 4, 1, 2, false));
        check("zflow<2,4,2> regrouped GPC 2", m, flow_launch(zflow_kernel<2, 4, 2, 2>, 4, 2, 2, true));
        check("zflow<2,2,4> regrouped GPC 4", m, flow_launch(zflow_kernel<2, 2, 4, 4>, 2, 4, 2, true));
    }
    auto zcp_launch = [&](auto kernel, int R, int WPR, int D, int NB) {
        return [=](int m) {
            const size_t smem = zcp_smem_bytes(R, NB, WPR, D, capr);
            CK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem));
            kernel<<<N / (16 * R), 32 * R * WPR, smem>>>(fargs(m));
        };
    };
    for (int m : {1, 5, 8}) {
        check("zcp<1,4,2,4>", m, zcp_launch(zcp_kernel<1, 4, 2, 4>, 4, 2, 4, 1));
        check("zcp<1,2,2,8>", m, zcp_launch(zcp_kernel<1, 2, 2, 8>, 2, 2, 8, 1));
        check("zcp<1,1,4,2>", m, zcp_launch(zcp_kernel<1, 1, 4, 2>, 1, 4, 2, 1));
    }
    for (int m : {9, 16}) {
        check("zcp<2,1,4,2>", m, zcp_launch(zcp_kernel<2, 1, 4, 2>, 1, 4, 2, 2));
        check("zcp<2,2,2,4>", m, zcp_launch(zcp_kernel<2, 2, 2, 4>, 2, 2, 4, 2));
    }
    printf("checks: %s\n", bad ? "SOME WRONG" : "all ok");

    const double bw = tm.read_bandwidth();
    printf("read bandwidth %.3f TB/s (flush kernel, 1 GiB)\n", bw);
    const size_t o_bytes = (size_t)N * K * 2;  // the floor counts o's bf16 bytes
    Frag* wb;  // o's bf16 weights for the register GEMV's entries (a byte pattern: timing only)
    CK(cudaMalloc(&wb, o_bytes));
    CK(cudaMemset(wb, 0x11, o_bytes));
    auto gargs = [&](int m) {
        return GemvArgs{reinterpret_cast<const Frag*>(x), wb, nullptr, out_ref, nullptr, nullptr, m, N, K, 1, 0};
    };
    const size_t g1 = gemv_smem_bytes(8, 2, 1, 0), g2 = gemv_smem_bytes(8, 2, 2, 0);
    std::vector<probekit::Case> cases = {
        probekit::Case{"gemv <4,1,2,0> 256 x 256 m=8 (o m=8 entry)", o_bytes,
                       [=](cudaStream_t s) { gemv_kernel<4, 1, 2, 0, false, false, __nv_bfloat16><<<N / 32, 256, g1, s>>>(gargs(8)); }},
        probekit::Case{"gemv <4,2,2,0> 256 x 256 m=16", o_bytes,
                       [=](cudaStream_t s) { gemv_kernel<4, 2, 2, 0, false, false, __nv_bfloat16><<<N / 32, 256, g2, s>>>(gargs(16)); }},
        probekit::Case{"zgemv <1,1,1,0> 512 x 256 m=1", o_bytes,
                       [=](cudaStream_t s) { zgemv_kernel<1, 1, 1, 0><<<N / 16, 256, zsmem, s>>>(zargs(1)); }},
        probekit::Case{"zgemv <1,1,1,0> 512 x 256 m=8", o_bytes,
                       [=](cudaStream_t s) { zgemv_kernel<1, 1, 1, 0><<<N / 16, 256, zsmem, s>>>(zargs(8)); }},
        zcp_case<1, 1, 4, 2>("zcp R1 WPR4 D2 m=8 (part 3's best)", o_bytes, fargs(8)),
        knob_case<1, 1, 0, true, true>("knobs <1,NB1> NW8 as shipped m=8", o_bytes, zargs(8), 8),
        knob_case<1, 1, 0, true, false>("knobs NW8 no exc m=8", o_bytes, zargs(8), 8),
        knob_case<1, 1, 1, true, false>("knobs NW8 no exc, cheap decode m=8", o_bytes, zargs(8), 8),
        knob_case<1, 1, 2, true, false>("knobs NW8 no exc, no decode m=8", o_bytes, zargs(8), 8),
        knob_case<1, 1, 0, false, false>("knobs NW8 no exc, decode, no mma m=8", o_bytes, zargs(8), 8),
        knob_case<1, 1, 2, false, false>("knobs NW8 no exc, no decode, no mma m=8", o_bytes, zargs(8), 8),
        knob_case<1, 1, 0, true, false>("knobs NW8 no exc m=1", o_bytes, zargs(1), 8),
        knob_case<1, 1, 1, true, false>("knobs NW8 no exc, cheap decode m=1", o_bytes, zargs(1), 8),
        knob_case<1, 1, 2, true, false>("knobs NW8 no exc, no decode m=1", o_bytes, zargs(1), 8),
        knob_case<2, 1, 0, true, false>("knobs <2,NB1> NW4 no exc m=8", o_bytes, zargs(8), 4),
        knob_case<2, 1, 1, true, false>("knobs <2,NB1> NW4 no exc, cheap decode m=8", o_bytes, zargs(8), 4),
        knob_case<1, 2, 0, true, false>("knobs <1,NB2> NW8 no exc m=16", o_bytes, zargs(16), 8),
        knob_case<1, 2, 1, true, false>("knobs <1,NB2> NW8 no exc, cheap decode m=16", o_bytes, zargs(16), 8),
        knob_case<1, 2, 2, true, false>("knobs <1,NB2> NW8 no exc, no decode m=16", o_bytes, zargs(16), 8),
    };
    probekit::run_rounds(tm, cases, bw, 3);
    return bad ? 1 : 0;
}
