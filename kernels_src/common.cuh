// Small device helpers shared by the kernels: 16-byte loads with explicit cache policy, and the bf16 mma.
#pragma once
#include <cuda_runtime.h>
#include <cuda_bf16.h>
#include <stdint.h>

namespace okc {

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

// Host side, shared by every GEMV launcher: launch `kernel` on a grid whose blockIdx.y is the K split, either
// plainly or (cluster) with each column of grid.y CTAs as one thread-block cluster, so that the splits can reduce
// through distributed shared memory. Returns nullptr, or the CUDA error's text.
template <typename... Params, typename... Args>
const char* launch_splits(void (*kernel)(Params...), dim3 grid, dim3 block, size_t smem, cudaStream_t stream,
                          bool cluster, Args... args) {
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

__device__ __forceinline__ void store_out(float* p, float v) { *p = v; }
__device__ __forceinline__ void store_out(__nv_bfloat16* p, float v) { *p = __float2bfloat16_rn(v); }

}  // namespace okc
