// Host-side launchers: plain pointers and a stream handle in, an error message (or nullptr) out.
// No torch headers here, so `python -m generator compile` can build this file alone with the local nvcc;
// kernels_src/binding.cpp does the tensor checks and passes the caller's current stream (graph-capture safe).
#include "gemv.cuh"

#include <type_traits>

namespace okc {

template <int U, int NB, int R, int P, bool DUAL>
const char* launch_gemv_variant(const GemvArgs& a, int nw, cudaStream_t stream) {
    if constexpr (!gemv_fits(U, NB, R, P, DUAL)) {
        return "this (U, NB, R, P, dual) holds too many fragment registers and is not compiled in";
    } else {
        using OutT = std::conditional_t<DUAL, float, __nv_bfloat16>;
        const size_t smem = gemv_smem_bytes(nw, R, NB, a.cluster ? a.S - 1 : 0);  // 128 KB at NW=16, R=NB=4, C=0
        if (smem > kSmemOptInLimit) return "the warps' tiles and the cluster inbox exceed the 226 KB of shared memory a block may take";
        auto kernel = gemv_kernel<U, NB, R, P, DUAL, OutT>;
        if (smem > 48 * 1024) {  // past the default dynamic shared-memory limit: opt in (not a stream operation)
            const cudaError_t err = cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem);
            if (err != cudaSuccess) return cudaGetErrorString(err);
        }
        return launch_splits(kernel, dim3(a.N / (16 * R), a.S), dim3(nw * 32), smem, stream, a.cluster, a);
    }
}

template <int U, int NB, int R, int P>
const char* by_dual(const GemvArgs& a, int nw, bool dual, cudaStream_t s) {
    return dual ? launch_gemv_variant<U, NB, R, P, true>(a, nw, s)
                : launch_gemv_variant<U, NB, R, P, false>(a, nw, s);
}

template <int U, int NB, int R>
const char* by_pipe(const GemvArgs& a, int nw, int p, bool dual, cudaStream_t s) {
    switch (p) {
        case 0: return by_dual<U, NB, R, 0>(a, nw, dual, s);
        case 1: return by_dual<U, NB, R, 1>(a, nw, dual, s);
        case 2: return by_dual<U, NB, R, 2>(a, nw, dual, s);
        case 3: return by_dual<U, NB, R, 3>(a, nw, dual, s);
        case 4: return by_dual<U, NB, R, 4>(a, nw, dual, s);
        case 5: return by_dual<U, NB, R, 5>(a, nw, dual, s);
    }
    return "P must be 0..5";
}

template <int U, int NB>
const char* by_rows(const GemvArgs& a, int nw, int r, int p, bool dual, cudaStream_t s) {
    switch (r) {
        case 1: return by_pipe<U, NB, 1>(a, nw, p, dual, s);
        case 2: return by_pipe<U, NB, 2>(a, nw, p, dual, s);
        case 4: return by_pipe<U, NB, 4>(a, nw, p, dual, s);
    }
    return "R must be 1, 2 or 4";
}

template <int U>
const char* by_nb(const GemvArgs& a, int nw, int nb, int r, int p, bool dual, cudaStream_t s) {
    switch (nb) {
        case 1: return by_rows<U, 1>(a, nw, r, p, dual, s);
        case 2: return by_rows<U, 2>(a, nw, r, p, dual, s);
        case 4: return by_rows<U, 4>(a, nw, r, p, dual, s);
    }
    return "NB must be 1, 2 or 4";
}

}  // namespace okc

// Called by binding.cpp; every argument has been checked there.
const char* okc_launch_gemv(const void* x, const void* w, const void* w2, void* out, float* ws, int* sem, int M,
                            int N, int K, int NW, int S, int U, int NB, int R, int P, bool cluster, bool dual,
                            long long stream) {
    const okc::GemvArgs a{static_cast<const okc::Frag*>(x), static_cast<const okc::Frag*>(w),
                          static_cast<const okc::Frag*>(w2), out, ws, sem, M, N, K, S, cluster ? 1 : 0};
    const cudaStream_t s = reinterpret_cast<cudaStream_t>(stream);
    switch (U) {
        case 1: return okc::by_nb<1>(a, NW, NB, R, P, dual, s);
        case 2: return okc::by_nb<2>(a, NW, NB, R, P, dual, s);
        case 4: return okc::by_nb<4>(a, NW, NB, R, P, dual, s);
        case 8: return okc::by_nb<8>(a, NW, NB, R, P, dual, s);
    }
    return "U must be 1, 2, 4 or 8";
}
