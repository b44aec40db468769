// Host-side launchers: plain pointers and a stream handle in, an error message (or nullptr) out.
// No torch headers here, so `python -m generator compile` can build this file alone with the local nvcc;
// kernels_src/binding.cpp does the tensor checks and passes the caller's current stream (graph-capture safe).
#include "gemv.cuh"

#include <type_traits>

namespace okc {

template <int U, int NB, int R, int P, bool DUAL, bool ATOMIC>
const char* launch_gemv_variant(const GemvArgs& a, int nw, cudaStream_t stream) {
    if constexpr (!gemv_fits(U, NB, R, P, DUAL)) {
        return "this (U, NB, R, P, dual) holds too many fragment registers and is not compiled in";
    } else {
        using OutT = std::conditional_t<DUAL, float, __nv_bfloat16>;
        const size_t smem = gemv_smem_bytes(nw, R, NB, a.cluster ? a.S - 1 : 0);  // 128 KB at NW=16, R=NB=4, C=0
        if (smem > kSmemOptInLimit) return "the warps' tiles and the cluster inbox exceed the 226 KB of shared memory a block may take";
        auto kernel = gemv_kernel<U, NB, R, P, DUAL, ATOMIC, OutT>;
        if (smem > 48 * 1024) {  // past the default dynamic shared-memory limit: opt in (not a stream operation)
            const cudaError_t err = cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem);
            if (err != cudaSuccess) return cudaGetErrorString(err);
        }
        return launch_splits(kernel, dim3(a.N / (16 * R), a.S), dim3(nw * 32), smem, stream, a.cluster, a);
    }
}

// mode: 0 plain, 1 dual, 2 dual with the atomic split (C = 2).
template <int U, int NB, int R, int P>
const char* by_mode(const GemvArgs& a, int nw, int mode, cudaStream_t s) {
    switch (mode) {
        case 0: return launch_gemv_variant<U, NB, R, P, false, false>(a, nw, s);
        case 1: return launch_gemv_variant<U, NB, R, P, true, false>(a, nw, s);
        case 2: return launch_gemv_variant<U, NB, R, P, true, true>(a, nw, s);
    }
    return "C = 2 (atomic split) needs dual mode";
}

template <int U, int NB, int R>
const char* by_pipe(const GemvArgs& a, int nw, int p, int mode, cudaStream_t s) {
    switch (p) {
        case 0: return by_mode<U, NB, R, 0>(a, nw, mode, s);
        case 1: return by_mode<U, NB, R, 1>(a, nw, mode, s);
        case 2: return by_mode<U, NB, R, 2>(a, nw, mode, s);
        case 3: return by_mode<U, NB, R, 3>(a, nw, mode, s);
        case 4: return by_mode<U, NB, R, 4>(a, nw, mode, s);
        case 5: return by_mode<U, NB, R, 5>(a, nw, mode, s);
    }
    return "P must be 0..5";
}

template <int U, int NB>
const char* by_rows(const GemvArgs& a, int nw, int r, int p, int mode, cudaStream_t s) {
    switch (r) {
        case 1: return by_pipe<U, NB, 1>(a, nw, p, mode, s);
        case 2: return by_pipe<U, NB, 2>(a, nw, p, mode, s);
        case 4: return by_pipe<U, NB, 4>(a, nw, p, mode, s);
    }
    return "R must be 1, 2 or 4";
}

template <int U>
const char* by_nb(const GemvArgs& a, int nw, int nb, int r, int p, int mode, cudaStream_t s) {
    switch (nb) {
        case 1: return by_rows<U, 1>(a, nw, r, p, mode, s);
        case 2: return by_rows<U, 2>(a, nw, r, p, mode, s);
        case 4: return by_rows<U, 4>(a, nw, r, p, mode, s);
    }
    return "NB must be 1, 2 or 4";
}

}  // namespace okc

// Called by binding.cpp; every argument has been checked there.
const char* okc_launch_gemv(const void* x, const void* w, const void* w2, void* out, float* ws, int* sem, int M,
                            int N, int K, int NW, int S, int U, int NB, int R, int P, int C, bool dual,
                            long long stream) {
    const okc::GemvArgs a{static_cast<const okc::Frag*>(x), static_cast<const okc::Frag*>(w),
                          static_cast<const okc::Frag*>(w2), out, ws, sem, M, N, K, S, C == 1 ? 1 : 0};
    const int mode = !dual ? (C == 2 ? -1 : 0) : (C == 2 ? 2 : 1);
    const cudaStream_t s = reinterpret_cast<cudaStream_t>(stream);
    switch (U) {
        case 1: return okc::by_nb<1>(a, NW, NB, R, P, mode, s);
        case 2: return okc::by_nb<2>(a, NW, NB, R, P, mode, s);
        case 4: return okc::by_nb<4>(a, NW, NB, R, P, mode, s);
        case 8: return okc::by_nb<8>(a, NW, NB, R, P, mode, s);
    }
    return "U must be 1, 2, 4 or 8";
}

int okc_ticket_groups() { return okc::kTicketGroups; }
int okc_semaphore_ints() { return okc::kSemaphoreInts; }
