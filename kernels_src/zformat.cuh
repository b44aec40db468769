// The 12-bit lossless weight format of kernels_src/compress.py on the device: how a lane rebuilds its mma A
// fragments from a K group's three 16-byte parts. Shared by the compressed register GEMV (zgemv.cuh, fragments
// in pack_mma_a's order) and the TMA GEMV at Z = 1 (tma_gemv.cuh, pack_wgmma_a's natural order): the decode is
// the same, only which k each element slot carries differs, and that is the packing's business.
#pragma once
#include "common.cuh"

namespace okc {

constexpr int kZParts = 3;                          // 16-byte parts per lane per row block and K group
constexpr int kZFragsPerGroup = kZParts * 32;       // Frags (16 bytes) per row block and K group

__device__ __forceinline__ uint32_t prmt(uint32_t a, uint32_t b, uint32_t sel) {
    uint32_t d;
    asm("prmt.b32 %0, %1, %2, %3;" : "=r"(d) : "r"(a), "r"(b), "r"(sel));
    return d;
}

// Asynchronous global -> shared copies (Ampere+ cp.async, L1-cached): the exception entries are staged while
// the main loop streams; cp_async_wait_all() before they are read.
template <int Bytes>
__device__ __forceinline__ void cp_async(void* smem, const void* gmem) {
    const uint32_t dst = static_cast<uint32_t>(__cvta_generic_to_shared(smem));
    asm volatile("cp.async.ca.shared.global [%0], [%1], %2;" ::"r"(dst), "l"(gmem), "n"(Bytes) : "memory");
}
__device__ __forceinline__ void cp_async_wait_all() { asm volatile("cp.async.wait_all;" ::: "memory"); }

// Four hi bytes from four 4-bit codes (the low 16 bits of c).
__device__ __forceinline__ uint32_t hi_bytes(uint32_t c, const uint4& t) {
    const uint32_t idx = c & 0x7777u;
    const uint32_t low8 = prmt(t.x, t.y, idx), high8 = prmt(t.z, t.w, idx);
    const uint32_t take_high = prmt(0x0000FF00u, 0u, (c >> 3) & 0x1111u);  // 0xFF where code >= 8
    return (low8 & ~take_high) | (high8 & take_high);
}

// Fragment f (0..3) of a K group from its lane's three parts -> the mma A registers (in the stream's fragment
// order: pack_mma_a's or pack_wgmma_a's).
__device__ __forceinline__ void decode_fragment(uint32_t (&a)[4], const Frag (&part)[kZParts], int f,
                                                const uint4& t) {
    const Frag& lo = part[f >> 1];
    const uint32_t l0 = lo.r[2 * (f & 1)], l1 = lo.r[2 * (f & 1) + 1];
    const uint32_t c = part[2].r[f];
    const uint32_t h0 = hi_bytes(c & 0xFFFFu, t), h1 = hi_bytes(c >> 16, t);
    a[0] = prmt(l0, h0, 0x5140u);
    a[1] = prmt(l0, h0, 0x7362u);
    a[2] = prmt(l1, h1, 0x5140u);
    a[3] = prmt(l1, h1, 0x7362u);
}

}  // namespace okc
