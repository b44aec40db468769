// Host-side launcher of the bulk-copy + wgmma GEMV (tma_gemv.cuh): builds x's tensor map and launches.
// Plain pointers and a stream handle in, an error message (or nullptr) out, like launch.cu.
#include "tma_gemv.cuh"

#include <cudaTypedefs.h>

#include <string>
#include <type_traits>

namespace okc {

// cuTensorMapEncodeTiled is a driver-API function: fetched through the runtime, so nothing links libcuda.
static PFN_cuTensorMapEncodeTiled_v12000 tensor_map_encoder(const char** error) {
    static PFN_cuTensorMapEncodeTiled_v12000 encode = nullptr;
    if (encode == nullptr) {
        void* fn = nullptr;
        cudaDriverEntryPointQueryResult found;
        const cudaError_t err =
            cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &fn, 12000, cudaEnableDefault, &found);
        if (err != cudaSuccess || found != cudaDriverEntryPointSuccess || fn == nullptr) {
            *error = "cuTensorMapEncodeTiled is not available from the driver";
            return nullptr;
        }
        encode = reinterpret_cast<PFN_cuTensorMapEncodeTiled_v12000>(fn);
    }
    return encode;
}

// A [rows, K] row-major bf16 matrix read in boxes of `box_rows` x 64 (128 bytes), 128-byte swizzled, rows past
// the end read as zeros. k_chunks = 2 (half tiles) makes it 3-D, [K/64][rows][64], with boxes of two 64-wide K
// chunks: the two boxes a half-tile slot needs arrive in one copy instead of two. (Tried because the launchprobe
// streams slowed from 13.7 to 22.1 us when their copies per byte doubled, notes/session14 call 9; it changed
// nothing measurable on half tiles, notes/session15 call 2: their consumer loop was the limit. One copy stays.)
static const char* bf16_rows_map(CUtensorMap* map, const void* base, int rows, int K, int box_rows, int k_chunks) {
    const char* error = nullptr;
    auto encode = tensor_map_encoder(&error);
    if (encode == nullptr) return error;
    const cuuint64_t dims[3] = {(cuuint64_t)kTmaTileK, (cuuint64_t)rows, (cuuint64_t)(K / kTmaTileK)};
    const cuuint64_t strides[2] = {(cuuint64_t)K * 2, (cuuint64_t)kTmaTileK * 2};  // bytes between rows, chunks
    const cuuint32_t box[3] = {(cuuint32_t)kTmaTileK, (cuuint32_t)box_rows, (cuuint32_t)k_chunks};
    const cuuint32_t steps[3] = {1, 1, 1};
    // 2-D: [rows, K] itself, boxes of box_rows x 64.
    const cuuint64_t dims2[2] = {(cuuint64_t)K, (cuuint64_t)rows};
    const cuuint32_t box2[2] = {(cuuint32_t)kTmaTileK, (cuuint32_t)box_rows};
    const bool flat = k_chunks == 1;
    const CUresult r = encode(map, CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, flat ? 2 : 3, const_cast<void*>(base),
                              flat ? dims2 : dims, strides, flat ? box2 : box, steps, CU_TENSOR_MAP_INTERLEAVE_NONE,
                              CU_TENSOR_MAP_SWIZZLE_128B, CU_TENSOR_MAP_L2_PROMOTION_L2_256B,
                              CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
    return r == CUDA_SUCCESS ? nullptr : "cuTensorMapEncodeTiled rejected the tensor";
}

template <int NB, int STAGES, bool DUAL, bool HALF>
const char* launch_tma_variant(const CUtensorMap& x, const TmaGemvArgs& a, cudaStream_t stream) {
    if constexpr (!tma_fits(NB, STAGES, DUAL, HALF)) {
        return "this (NB, STAGES, dual, half) ring does not fit in shared memory and is not compiled in";
    } else {
        using OutT = std::conditional_t<DUAL, float, __nv_bfloat16>;
        auto kernel = tma_gemv_kernel<NB, STAGES, DUAL, HALF, OutT>;
        const int smem = tma_smem_bytes(NB, STAGES, DUAL, HALF) + tma_inbox_bytes(NB, a.S, a.cluster);
        if (smem > (int)kSmemOptInLimit) return "the ring and the cluster inbox exceed the 226 KB of shared memory a block may take";
        static int opted_in = 0;  // per instantiation, the most asked for so far (not a stream operation: capture-safe)
        if (smem > opted_in) {
            const cudaError_t err = cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, smem);
            if (err != cudaSuccess) return cudaGetErrorString(err);
            opted_in = smem;
        }
        return launch_splits(kernel, dim3(a.N / (HALF ? kTmaHalfRows : kTmaTileRows), a.S), dim3(kTmaThreads),
                             (size_t)smem, stream, a.cluster != 0, x, a);
    }
}

// "STAGES must be one of 2, 4, ...", from TmaRingDepths.
template <int... Depths>
const char* ring_depths_message(RingDepths<Depths...>) {
    static const std::string message = [] {
        std::string text = "STAGES must be one of";
        const char* separator = " ";
        for (int depth : {Depths...}) text += separator + std::to_string(depth), separator = ", ";
        return text;
    }();
    return message.c_str();
}

template <int NB, int STAGES>
const char* launch_tma_ring(const CUtensorMap& x, const TmaGemvArgs& a, bool dual, int c, cudaStream_t s) {
    return c == 3 ? launch_tma_variant<NB, STAGES, false, true>(x, a, s)
           : dual ? launch_tma_variant<NB, STAGES, true, false>(x, a, s)
                  : launch_tma_variant<NB, STAGES, false, false>(x, a, s);
}

// The kernel of the ring depth `stages` (one of Depths), launched; or why not.
template <int NB, int... Depths>
const char* tma_by_stages(RingDepths<Depths...> depths, const CUtensorMap& x, const TmaGemvArgs& a, int stages,
                          bool dual, int c, cudaStream_t s) {
    const char* result = nullptr;
    const bool known = ((stages == Depths && (result = launch_tma_ring<NB, Depths>(x, a, dual, c, s), true)) || ...);
    return known ? result : ring_depths_message(depths);
}

}  // namespace okc

// Why (NB, STAGES, dual) cannot run, or nullptr: binding.cpp asks before anything is built or launched.
const char* okc_tma_config_error(int NB, int STAGES, bool dual, int S, int cluster) {
    if (NB != 1 && NB != 2 && NB != 4) return "NB must be 1, 2 or 4";
    if (!okc::TmaRingDepths::contains(STAGES)) return okc::ring_depths_message(okc::TmaRingDepths{});
    const bool half = cluster == 3;
    if (!okc::tma_fits(NB, STAGES, dual, half)) return "the ring (STAGES x (weights + x)) exceeds the 226 KB of shared memory a block may take";
    if (cluster < 0 || cluster > 3)
        return "C must be 0 (semaphore), 1 (cluster, gathered), 2 (cluster, scattered) or 3 (half tiles, no split)";
    if (half && (S != 1 || dual)) return "C = 3 (half tiles) runs plain bf16 weights with S = 1";
    if (half) return nullptr;
    if (cluster && (S < 2 || S > 16)) return "a cluster split needs 2 <= S <= 16";
    if (okc::tma_smem_bytes(NB, STAGES, dual) + okc::tma_inbox_bytes(NB, S, cluster) > (int)okc::kSmemOptInLimit)
        return "the ring and the cluster inbox (S - 1 partials) exceed the 226 KB of shared memory a block may take";
    return nullptr;
}

// Called by binding.cpp; every argument has been checked there. w, w2: packing.pack_tma_bulk tiles of >= N rows
// (w2: the router's lo half, dual only), or pack_tma_half_bulk's for C = 3; x: [M, K] bf16.
const char* okc_launch_tma_gemv(const void* x, const void* w, const void* w2, void* out, float* ws, int* sem, int M,
                                int N, int K, int S, int NB, int STAGES, int cluster, bool dual,
                                long long stream) {
    // The weights need no tensor map: their tiles are copied whole, by address (bulk_load_1d).
    const bool half = cluster == 3;  // half tiles: no split, so no cluster either
    CUtensorMap x_map;
    const char* err = okc::bf16_rows_map(&x_map, x, M, K, NB * 8, half ? 2 : 1);
    if (err != nullptr) return err;
    const okc::TmaGemvArgs a{static_cast<const uint8_t*>(w), static_cast<const uint8_t*>(dual ? w2 : w), out, ws,
                             sem, M, N, K, S, half ? 0 : cluster};
    const cudaStream_t s = reinterpret_cast<cudaStream_t>(stream);
    switch (NB) {
        case 1: return okc::tma_by_stages<1>(okc::TmaRingDepths{}, x_map, a, STAGES, dual, cluster, s);
        case 2: return okc::tma_by_stages<2>(okc::TmaRingDepths{}, x_map, a, STAGES, dual, cluster, s);
        case 4: return okc::tma_by_stages<4>(okc::TmaRingDepths{}, x_map, a, STAGES, dual, cluster, s);
    }
    return "NB must be 1, 2 or 4";
}
