// The TMA intake probe (`python -m generator probe-intake`, docs/tma-gemm.md "What limits a CTA's intake"): how
// many bytes per second one SM takes in through the bulk copy engine, as a function of the ring a CTA keeps in
// flight. Nothing but the ring runs: a producer lane streams slots of `distinct + shared` bytes into `slots`
// ring slots, and a consumer lane waits for each slot to land and hands it straight back. `distinct` bytes of
// a slot come from the CTA's own region (the GEMM's weights), `shared` bytes from one region every CTA reads
// (x). Each CTA stamps its SM clock when it starts, when its first slot lands and when its last does, so the
// steady intake (slots 1 .. n - 1 over the time between the first and the last landing) is apart from the
// launch and the first copy's latency.
#include "generated/constants.h"
#include "tma_gemv.cuh"  // bf16_rows_map: x's tensor map as the GEMM encodes it

namespace okc {

struct IntakeArgs {
    const uint8_t* distinct;    // CTA c reads distinct + c * distinct_region ..., wrapping within its region
    const uint8_t* shared;      // every CTA reads the same shared_region bytes, wrapping
    long long distinct_region;  // bytes of each CTA's own region (a multiple of distinct_bytes)
    long long shared_region;    // bytes of the shared region (a multiple of shared_bytes)
    int distinct_bytes;         // per slot, in copies of at most copy_bytes
    int shared_bytes;           // per slot, likewise
    int copy_bytes;             // the largest single bulk copy (a multiple of 16)
    int slots;                  // ring slots in flight, per ring
    int n;                      // slots streamed per ring
    int rings;                  // independent rings a CTA (a producer warp and a consumer warp each)
    int test_wait;              // 1: wait by polling mbarrier.test_wait instead of the suspending try_wait
    int lanes;                  // lanes of a producer warp that issue copies, lane j every slot i = j mod lanes
    int shared_box;             // 1: the shared bytes come as the GEMM's x box (a tensor-map copy of shared_bytes
                                // / 128 rows of 64 bf16, 128-byte swizzle) from a [rows, 8192] bf16 matrix
    long long hold;             // SM clock cycles the consumer holds each slot before handing it back (the
                                // GEMM's wgmmas on it)
    long long* stamps;          // [grid][rings][6]: SM clock at start, first landing, last landing; SM id; global
                                // timer (ns) at the first and the last landing (the clock's rate)
};

__device__ __forceinline__ long long sm_clock() {
    long long t;
    asm volatile("mov.u64 %0, %%clock64;" : "=l"(t));
    return t;
}

__device__ __forceinline__ long long global_ns() {
    long long t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
    return t;
}

// Wait for the barrier's phase of this parity with mbarrier.test_wait (never suspends) or try_wait (mbar_wait).
__device__ __forceinline__ void ring_wait(uint64_t* bar, uint32_t parity, bool poll) {
    if (!poll) return mbar_wait(bar, parity);
    asm volatile(
        "{\n"
        ".reg .pred done;\n"
        "TEST_WAIT_%=:\n"
        "mbarrier.test_wait.parity.shared::cta.b64 done, [%0], %1;\n"
        "@!done bra TEST_WAIT_%=;\n"
        "}\n" ::"r"(smem_addr(bar)),
        "r"(parity)
        : "memory");
}

__device__ __forceinline__ void copy_span(uint8_t* dst, const uint8_t* src, int bytes, int piece, uint64_t* bar) {
    for (int off = 0; off < bytes; off += piece) {
        const int len = bytes - off < piece ? bytes - off : piece;
        bulk_load_1d(dst + off, src + off, (uint32_t)len, bar);
    }
}

__global__ void __launch_bounds__(256) tma_intake_kernel(const __grid_constant__ CUtensorMap x_map, IntakeArgs a) {
    extern __shared__ __align__(1024) uint8_t smem[];
    const int slot_bytes = a.distinct_bytes + a.shared_bytes;
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, ring = warp / 2;
    uint64_t* full = reinterpret_cast<uint64_t*>(smem + (size_t)a.rings * a.slots * slot_bytes) + ring * 2 * a.slots;
    uint64_t* empty = full + a.slots;
    uint8_t* slots = smem + (size_t)ring * a.slots * slot_bytes;
    const long long start = sm_clock();
    if ((warp & 1) == 0 && lane == 0) {
        for (int s = 0; s < a.slots; ++s) mbar_init(&full[s], 1), mbar_init(&empty[s], 1);
        fence_mbarrier_init();
    }
    __syncthreads();
    const int stream = blockIdx.x * a.rings + ring;  // each ring reads its own region
    const uint8_t* own = a.distinct + (size_t)stream * a.distinct_region;
    if ((warp & 1) == 0 && lane < a.lanes) {  // the ring's producer lanes
        for (int i = lane; i < a.n; i += a.lanes) {
            const int s = i % a.slots;
            if (i >= a.slots) ring_wait(&empty[s], ((i / a.slots) - 1) & 1, a.test_wait);
            uint8_t* slot = slots + (size_t)s * slot_bytes;
            mbar_arrive_expect_tx(&full[s], slot_bytes);
            if (a.distinct_bytes)
                copy_span(slot, own + ((long long)i * a.distinct_bytes) % a.distinct_region, a.distinct_bytes,
                          a.copy_bytes, &full[s]);
            if (a.shared_bytes && a.shared_box)
                tma_load_2d(slot + a.distinct_bytes, &x_map, (i * kTmaTileK) % 8192, 0, &full[s]);
            else if (a.shared_bytes)
                copy_span(slot + a.distinct_bytes, a.shared + ((long long)i * a.shared_bytes) % a.shared_region,
                          a.shared_bytes, a.copy_bytes, &full[s]);
        }
    } else if ((warp & 1) == 1 && lane == 0) {  // its consumer: wait for each slot, hand it straight back
        long long first = 0, last = 0, first_ns = 0;
        for (int i = 0; i < a.n; ++i) {
            const int s = i % a.slots;
            ring_wait(&full[s], (i / a.slots) & 1, a.test_wait);
            if (i == 0) first = sm_clock(), first_ns = global_ns();
            if (a.hold)
                for (const long long until = sm_clock() + a.hold; sm_clock() < until;) {
                }
            mbar_arrive(&empty[s]);
        }
        last = sm_clock();
        const long long last_ns = global_ns();
        unsigned smid;
        asm volatile("mov.u32 %0, %%smid;" : "=r"(smid));
        long long* out = a.stamps + (size_t)stream * 6;
        out[0] = start, out[1] = first, out[2] = last, out[3] = smid, out[4] = first_ns, out[5] = last_ns;
    }
}

}  // namespace okc

// grid CTAs of the probe on `stream`, its arguments as plain integers (the pybind11 shim, intake.py, knows no CUDA
// types); "" once launched, else why not.
const char* tma_intake_launch(int grid, long long distinct, long long shared, long long distinct_region,
                              long long shared_region, int distinct_bytes, int shared_bytes, int copy_bytes, int slots,
                              int n, int rings, int test_wait, int lanes, int shared_box, long long hold,
                              long long stamps, long long stream) {
    okc::IntakeArgs a{reinterpret_cast<const uint8_t*>(distinct),
                      reinterpret_cast<const uint8_t*>(shared),
                      distinct_region,
                      shared_region,
                      distinct_bytes,
                      shared_bytes,
                      copy_bytes,
                      slots,
                      n,
                      rings,
                      test_wait,
                      lanes,
                      shared_box,
                      hold,
                      reinterpret_cast<long long*>(stamps)};
    CUtensorMap x_map{};
    if (shared_box) {
        if (shared_bytes % 1024 || distinct_bytes % 1024 || shared_region != (long long)shared_bytes / 128 * 8192 * 2)
            return "shared_box: 1 KB-aligned parts, the shared region [shared_bytes / 128, 8192] bf16";
        const char* err = okc::bf16_rows_map(&x_map, a.shared, shared_bytes / 128, 8192, shared_bytes / 128, 1);
        if (err != nullptr) return err;
    }
    const size_t smem = (size_t)rings * slots * (distinct_bytes + shared_bytes + 16);
    if (rings < 1 || rings > 4) return "rings must be 1..4";
    if (lanes < 1 || lanes > 32 || slots % lanes) return "lanes must be 1..32 and divide slots";
    if (smem > okc::kSmemOptInLimit) return "the ring does not fit in shared memory";
    if (cudaFuncSetAttribute(okc::tma_intake_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem) !=
        cudaSuccess)
        return "cudaFuncSetAttribute failed";
    okc::tma_intake_kernel<<<grid, 64 * rings, smem, reinterpret_cast<cudaStream_t>(stream)>>>(x_map, a);
    return cudaGetLastError() == cudaSuccess ? "" : "launch failed";
}
