// The shared-memory ring every TMA kernel streams through: STAGES slots, each with a `full` mbarrier (the
// producer's expect_tx arrival plus the copy engine's bytes) and an `empty` one (one arrival per consumer party).
// Round r of a slot waits on parity r & 1; a fresh barrier counts as having completed parity 1, so the producer's
// first round passes without waiting. Design: docs/persistent-gemm.md ("The ring").
#pragma once
#include "hopper_ptx.cuh"

namespace okc {

// Named barrier ids (0 is __syncthreads), immediates: with the id in a register ptxas reserves all 16.
enum NamedBarrier : int {
    kWarpgroupBarrier = 1,  // + g: consumer warpgroup g alone (g < 4)
    kFoldBarrier = 5,       // compressed_ring's consumer warpgroups, around their fold
    kStagedBarrier = 6,     // compressed_ring's stager warp and warpgroup 0
    kConsumersBarrier = 7,  // persistent_gemm's consumer warpgroups, before they reuse the idle ring
};

template <int ID, int THREADS>
__device__ __forceinline__ void named_barrier_sync() {
    asm volatile("bar.sync %0, %1;" ::"n"(ID), "n"(THREADS) : "memory");
}

template <int ID, int THREADS>
__device__ __forceinline__ void named_barrier_arrive() {
    asm volatile("bar.arrive %0, %1;" ::"n"(ID), "n"(THREADS) : "memory");
}

// A position in the ring: the slot, and the parity of the round the slot is in.
template <int STAGES>
struct RingCursor {
    int slot = 0;
    uint32_t phase = 0;

    __device__ __forceinline__ void advance() {
        if (++slot == STAGES) slot = 0, phase ^= 1;
    }
};

template <int STAGES>
struct RingBarriers {
    uint64_t full[STAGES];
    uint64_t empty[STAGES];

    // One thread, before the CTA barrier that publishes them.
    __device__ __forceinline__ void init(uint32_t consumer_arrivals) {
        for (int s = 0; s < STAGES; ++s) mbar_init(&full[s], 1), mbar_init(&empty[s], consumer_arrivals);
        fence_mbarrier_init();
    }
    // init in two halves, for a producer whose first round (arm) leaves between them, before the CTA barrier.
    __device__ __forceinline__ void init_full() {
        for (int s = 0; s < STAGES; ++s) mbar_init(&full[s], 1);
        fence_mbarrier_init();
    }
    __device__ __forceinline__ void init_empty(uint32_t consumer_arrivals) {
        for (int s = 0; s < STAGES; ++s) mbar_init(&empty[s], consumer_arrivals);
        fence_mbarrier_init();
    }
    // Producer, a slot's first round: announce `bytes` to land on it.
    __device__ __forceinline__ uint64_t* arm(int slot, uint32_t bytes) {
        mbar_arrive_expect_tx(&full[slot], bytes);
        return &full[slot];
    }
    // Producer: wait until the slot's previous round has been handed back (wait_free); acquire also announces
    // `bytes` to land on it (the one producer arrival).
    __device__ __forceinline__ void wait_free(int slot, uint32_t phase) { mbar_wait(&empty[slot], phase ^ 1); }
    __device__ __forceinline__ uint64_t* acquire(int slot, uint32_t phase, uint32_t bytes) {
        wait_free(slot, phase);
        return arm(slot, bytes);
    }
    // Consumer: wait until the slot's bytes have landed; then, once done reading it, hand it back.
    __device__ __forceinline__ void wait_full(int slot, uint32_t phase) { mbar_wait(&full[slot], phase); }
    __device__ __forceinline__ void release(int slot) { mbar_arrive(&empty[slot]); }
};

}  // namespace okc
