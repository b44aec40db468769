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
// Values: x and weights random; exceptions none (capr = 1 padding) unless EXC below. Timing + a check against
// zgemv_kernel (another summation order: compared with a tolerance).
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

template <int NB, int R, int WPR>
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
        for (int g = lane; g < G; g += 32) mbar_arrive_expect_tx(&bars[g], R * kGroupBytes);
        __syncwarp();
        for (int t = lane; t < a.M; t += 32) bulk_load_1d(xsm + (size_t)t * xs, a.x + (size_t)t * a.K, a.K * 2, &bars[G]);
        const size_t row_frags = (size_t)G * kZFragsPerGroup;
        for (int c = lane; c < G * R; c += 32) {  // copy c: group c / R, row block c % R (one warp instruction: 32 copies in order)
            const int g = c / R, rr = c % R;
            bulk_load_1d(wsm + (size_t)c * kGroupBytes, a.w + (size_t)(rb0 + rr) * row_frags + (size_t)g * kZFragsPerGroup,
                         kGroupBytes, &bars[g]);
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
        mbar_wait(&bars[g], 0);
#pragma unroll
        for (int p = 0; p < kZParts; ++p)
            w[p] = *reinterpret_cast<const Frag*>(wl + (size_t)g * R * kGroupBytes + p * 512);
#pragma unroll
        for (int b = 0; b < 2; ++b)
#pragma unroll
            for (int nb = 0; nb < NB; ++nb)
                xf[b][nb] = *reinterpret_cast<const Frag*>(xl + (size_t)nb * 8 * xs + (2 * g + b) * 64);
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

template <int NB, int R, int WPR>
probekit::Case flow_case(const char* name, size_t bytes, const FlowArgs& args) {
    const size_t smem = flow_smem_bytes(R, NB, args.K, WPR, args.capr);
    CK(cudaFuncSetAttribute(zflow_kernel<NB, R, WPR>, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem));
    return probekit::Case{name, bytes, [=](cudaStream_t s) {
                              zflow_kernel<NB, R, WPR><<<args.N / (16 * R), 32 * R * WPR, smem, s>>>(args);
                          }};
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
    auto fargs = [&](int m) { return FlowArgs{x, w, exceptions, row_starts, out, table, m, N, K, capr}; };
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
    auto flow_launch = [&](auto kernel, int R, int WPR, int NB) {
        return [=](int m) {
            const size_t smem = flow_smem_bytes(R, NB, K, WPR, capr);
            CK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem));
            kernel<<<N / (16 * R), 32 * R * WPR, smem>>>(FlowArgs{x, w, exceptions, row_starts, out, table, m, N, K, capr});
        };
    };
    for (int m : {1, 5, 8}) {
        check("zflow<1,4,1>", m, flow_launch(zflow_kernel<1, 4, 1>, 4, 1, 1));
        check("zflow<1,4,2>", m, flow_launch(zflow_kernel<1, 4, 2>, 4, 2, 1));
        check("zflow<1,2,4>", m, flow_launch(zflow_kernel<1, 2, 4>, 2, 4, 1));
    }
    for (int m : {9, 13, 16}) {
        check("zflow<2,4,1>", m, flow_launch(zflow_kernel<2, 4, 1>, 4, 1, 2));
        check("zflow<2,4,2>", m, flow_launch(zflow_kernel<2, 4, 2>, 4, 2, 2));
        check("zflow<2,2,4>", m, flow_launch(zflow_kernel<2, 2, 4>, 2, 4, 2));
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
        flow_case<1, 4, 1>("zflow <NB1,R4,WPR1> 128 x 128 m=1", o_bytes, fargs(1)),
        flow_case<1, 4, 1>("zflow <NB1,R4,WPR1> 128 x 128 m=8", o_bytes, fargs(8)),
        flow_case<1, 4, 2>("zflow <NB1,R4,WPR2> 128 x 256 m=8", o_bytes, fargs(8)),
        flow_case<1, 4, 4>("zflow <NB1,R4,WPR4> 128 x 512 m=8", o_bytes, fargs(8)),
        flow_case<1, 2, 1>("zflow <NB1,R2,WPR1> 256 x 64 m=8", o_bytes, fargs(8)),
        flow_case<1, 2, 2>("zflow <NB1,R2,WPR2> 256 x 128 m=8", o_bytes, fargs(8)),
        flow_case<1, 2, 4>("zflow <NB1,R2,WPR4> 256 x 256 m=8", o_bytes, fargs(8)),
        flow_case<1, 1, 4>("zflow <NB1,R1,WPR4> 512 x 128 m=8", o_bytes, fargs(8)),
        flow_case<2, 4, 1>("zflow <NB2,R4,WPR1> 128 x 128 m=16", o_bytes, fargs(16)),
        flow_case<2, 4, 2>("zflow <NB2,R4,WPR2> 128 x 256 m=16", o_bytes, fargs(16)),
        flow_case<2, 2, 2>("zflow <NB2,R2,WPR2> 256 x 128 m=16", o_bytes, fargs(16)),
        flow_case<2, 2, 4>("zflow <NB2,R2,WPR4> 256 x 256 m=16", o_bytes, fargs(16)),
    };
    probekit::run_rounds(tm, cases, bw, 3);
    return bad ? 1 : 0;
}
