// Session 10: how many thread-block clusters of each size can be resident at once on this GPU, for a CTA that
// owns a whole SM (the GEMVs' C = 1 configs: 512 threads at up to 128 registers, or ~200 KB of shared memory)?
// If fewer clusters fit than a config launches, the rest wait for a second wave. Built here with nvcc, run there.
//   nvcc -O2 -gencode=arch=compute_90a,code=sm_90a -o occ occ.cu && ./occ
#include <cstdio>
#include <cuda_runtime.h>

__global__ void one_sm_kernel(int* out) {
    extern __shared__ int smem[];
    smem[threadIdx.x] = threadIdx.x;
    if (out != nullptr) out[blockIdx.x] = smem[0];
}

int main() {
    cudaDeviceProp prop;
    cudaGetDeviceProperties(&prop, 0);
    printf("%s: %d SMs, %zu B shared memory per block opt-in\n", prop.name, prop.multiProcessorCount,
           prop.sharedMemPerBlockOptin);
    cudaFuncSetAttribute(one_sm_kernel, cudaFuncAttributeNonPortableClusterSizeAllowed, 1);
    const int threads[] = {128, 160, 256, 512};
    const int smems[] = {48 * 1024, 120 * 1024, 200 * 1024};
    const int sizes[] = {1, 2, 3, 4, 6, 8, 12, 16};
    for (int smem : smems) {
        cudaFuncSetAttribute(one_sm_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, smem);
        for (int t : threads) {
            printf("smem %3d KB, %3d threads: max active clusters by size", smem / 1024, t);
            for (int s : sizes) {
                cudaLaunchConfig_t cfg = {};
                cfg.gridDim = dim3(s * 64, 1, 1);
                cfg.blockDim = dim3(t, 1, 1);
                cfg.dynamicSmemBytes = smem;
                cudaLaunchAttribute attr;
                attr.id = cudaLaunchAttributeClusterDimension;
                attr.val.clusterDim.x = s;
                attr.val.clusterDim.y = 1;
                attr.val.clusterDim.z = 1;
                cfg.attrs = &attr;
                cfg.numAttrs = 1;
                int n = -1;
                cudaError_t e = cudaOccupancyMaxActiveClusters(&n, one_sm_kernel, &cfg);
                if (e != cudaSuccess) {
                    printf("  %d:err(%s)", s, cudaGetErrorName(e));
                    cudaGetLastError();
                } else {
                    printf("  %d:%d (%d CTAs)", s, n, n * s);
                }
            }
            printf("\n");
        }
    }
    // The register GEMV at NW = 16 holds the whole register file (512 threads x 128): at most one CTA per SM, as
    // with 200 KB of shared memory above. Its clusters span grid.y (launch_splits); the count does not depend on it.
    return 0;
}
