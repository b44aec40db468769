// Host-side launcher of the compressed GEMV (zgemv.cuh): plain pointers and a stream handle in, an error message
// (or nullptr) out, like launch.cu.
#include "zgemv.cuh"

namespace okc {

template <int UG, int NB, int R, int P>
const char* launch_zgemv_variant(const ZGemvArgs& a, int nw, cudaStream_t stream) {
    if constexpr (!zgemv_fits(UG, NB, R, P)) {
        return "this (UG, NB, R, P) holds too many fragment registers and is not compiled in";
    } else {
        const size_t smem = zgemv_smem_bytes(nw, R, NB, a.n_overflow ? a.K / 64 / a.S : 0, a.cluster ? a.S - 1 : 0);
        if (smem > kSmemOptInLimit) return "the warps' tiles, overflow tiles and offsets and cluster inbox exceed the 226 KB of shared memory a block may take";
        auto kernel = zgemv_kernel<UG, NB, R, P>;
        if (smem > 48 * 1024) {
            const cudaError_t err = cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem);
            if (err != cudaSuccess) return cudaGetErrorString(err);
        }
        return launch_splits(kernel, dim3(a.N / (16 * R), a.S), dim3(nw * 32), smem, stream, a.cluster, a);
    }
}

template <int UG, int NB, int R>
const char* z_by_pipe(const ZGemvArgs& a, int nw, int p, cudaStream_t s) {
    return p == 1 ? launch_zgemv_variant<UG, NB, R, 1>(a, nw, s) : launch_zgemv_variant<UG, NB, R, 0>(a, nw, s);
}

template <int UG, int NB>
const char* z_by_rows(const ZGemvArgs& a, int nw, int r, int p, cudaStream_t s) {
    switch (r) {
        case 1: return z_by_pipe<UG, NB, 1>(a, nw, p, s);
        case 2: return z_by_pipe<UG, NB, 2>(a, nw, p, s);
        case 4: return z_by_pipe<UG, NB, 4>(a, nw, p, s);
    }
    return "R must be 1, 2 or 4";
}

template <int UG>
const char* z_by_nb(const ZGemvArgs& a, int nw, int nb, int r, int p, cudaStream_t s) {
    switch (nb) {
        case 1: return z_by_rows<UG, 1>(a, nw, r, p, s);
        case 2: return z_by_rows<UG, 2>(a, nw, r, p, s);
        case 4: return z_by_rows<UG, 4>(a, nw, r, p, s);
    }
    return "NB must be 1, 2 or 4";
}

}  // namespace okc

// Called by binding.cpp; every argument has been checked there. table: compress.py's four table words;
// n_overflow (overflow's length) may be 0: overflow and overflow_starts are then never read.
const char* okc_launch_zgemv(const void* x, const void* w, const void* patches, const void* overflow,
                             const int* overflow_starts, void* out,
                             float* ws, int* sem, int t0, int t1, int t2, int t3, int M, int N, int K, int n_overflow,
                             int NW, int S, int UG, int NB, int R, int P, bool cluster, long long stream) {
    okc::ZGemvArgs a{};
    a.x = static_cast<const okc::Frag*>(x);
    a.w = static_cast<const okc::Frag*>(w);
    a.patches = static_cast<const uint32_t*>(patches);
    a.overflow = static_cast<const uint32_t*>(overflow);
    a.overflow_starts = overflow_starts;
    a.out = static_cast<__nv_bfloat16*>(out);
    a.ws = ws;
    a.sem = sem;
    a.table = make_uint4((uint32_t)t0, (uint32_t)t1, (uint32_t)t2, (uint32_t)t3);
    a.M = M, a.N = N, a.K = K, a.S = S, a.n_overflow = n_overflow, a.cluster = cluster ? 1 : 0;
    const cudaStream_t s = reinterpret_cast<cudaStream_t>(stream);
    if (P != 0 && P != 1) return "P must be 0 or 1";
    switch (UG) {
        case 1: return okc::z_by_nb<1>(a, NW, NB, R, P, s);
        case 2: return okc::z_by_nb<2>(a, NW, NB, R, P, s);
        case 4: return okc::z_by_nb<4>(a, NW, NB, R, P, s);
    }
    return "UG must be 1, 2 or 4";
}
