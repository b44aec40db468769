// The 12-bit weights through a TMA ring (engine compressed_ring, m <= 32, bf16 layers): a CTA owns a 64-row tile
// and the whole K; a slot is the tile's four row blocks x Groups K groups of compress.py's stream and their headers
// (one bulk copy) beside x's boxes (one tensor copy), so each x byte serves 64 rows. Warp q of a warpgroup decodes
// row block q straight into wgmma's A registers; a stager warp puts the tile's overflow in shared memory meanwhile.
// Phases: start, produce, stage, consume, fold, add_overflow, write. Design and figures: docs/compressed-ring.md.
#pragma once
#include "tma_gemv.cuh"
#include "compressed_gemv.cuh"
#include "generated/constants.h"

namespace okc {

// kStagedOverflowEntries and kCompressedHeaderBytes (compressed_ring.py, compress.py) come from the prelude.
constexpr int kCompressedGroupBytes = kCompressedFragsPerGroup * sizeof(Frag);  // 1536: one 16-row block x one K group
// The tile's overflow entries, staged (count past kStagedOverflowEntries: none; add_overflow reads them itself).
struct StagedOverflow {
    int count;
    uint8_t row[kStagedOverflowEntries];          // the entry's row in the tile
    uint32_t entry[kStagedOverflowEntries];       // k | bits << 16
    __nv_bfloat16 x[kStagedOverflowEntries][32];  // x[token, k] for tokens < M, else 0
};

struct CompressedRingArgs {
    const uint8_t* slots;     // [N/64][K/(64 G)] slots of kWBytes (compressed_ring.py, ring_slots)
    const int* row_starts;    // [N + 1]: row r's overflow entries are [row_starts[r], row_starts[r + 1])
    const int* entry_rows;    // [E] each entry's row
    const uint32_t* entries;  // [E] k | bf16 bits << 16, by row, then k
    const __nv_bfloat16* x;   // [M, K]
    __nv_bfloat16* out;       // [M, N]
    uint4 table;              // the 16 hi bytes as four words (compress.py: table_words)
    int M, N, K, n_overflow;  // n_overflow: the whole matrix's entries (0: nothing staged, nothing added)
};

// The stager warp: the tile's overflow entries and the x values each meets.
__device__ __forceinline__ void stage_overflow(const CompressedRingArgs& a, StagedOverflow& st, int row0, int lane) {
    const int s0 = __ldg(a.row_starts + row0), count = __ldg(a.row_starts + row0 + kTmaTileRows) - s0;
    if (lane == 0) st.count = count;
    if (count > kStagedOverflowEntries) return;
    for (int j = lane; j < count; j += 32) {
        const uint32_t entry = __ldg(a.entries + s0 + j);
        st.row[j] = (uint8_t)(__ldg(a.entry_rows + s0 + j) - row0);
        st.entry[j] = entry;
        const int k = entry & 0xFFFF;
        for (int token = 0; token < 32; ++token)
            st.x[j][token] = token < a.M ? a.x[(size_t)token * a.K + k] : __float2bfloat16_rn(0.f);
    }
}

__device__ __forceinline__ float entry_weight(uint32_t entry) {
    return __bfloat162float(__ushort_as_bfloat16((unsigned short)(entry >> 16)));
}

// Warpgroup 0: thread t adds its two rows' entries (rA = 16 warp + lane / 4, rA + 8), in the list's order.
template <int NB>
__device__ __forceinline__ void add_overflow(const CompressedRingArgs& a, const StagedOverflow& st,
                                             float (&acc)[4 * NB], int row0, int t) {
    const int lane = t & 31, r_a = (t >> 5) * 16 + (lane >> 2);
    if (st.count <= kStagedOverflowEntries) {
        for (int j = 0; j < st.count; ++j) {
            const int r = st.row[j];
            if (r != r_a && r != r_a + 8) continue;
            const float w = entry_weight(st.entry[j]);
#pragma unroll
            for (int e = 0; e < 4 * NB; ++e) {
                int row, token;
                tma_element(t, e, 0, row, token);
                if (row == r) acc[e] += w * __bfloat162float(st.x[j][token]);
            }
        }
        return;
    }
    for (int h = 0; h < 2; ++h) {  // a tile past the staging: its rows' entries from global memory
        const int r = r_a + 8 * h;
        const int end = __ldg(a.row_starts + row0 + r + 1);
        for (int j = __ldg(a.row_starts + row0 + r); j < end; ++j) {
            const uint32_t entry = __ldg(a.entries + j);
            const float w = entry_weight(entry);
            const int k = entry & 0xFFFF;
#pragma unroll
            for (int e = 0; e < 4 * NB; ++e) {
                int row, token;
                tma_element(t, e, 0, row, token);
                if (row == r && token < a.M) acc[e] += w * __bfloat162float(a.x[(size_t)token * a.K + k]);
            }
        }
    }
}

// A header's patch word (compress.py) ORed into the decoded register it names, by selects: no local memory.
__device__ __forceinline__ void patch_registers(uint32_t (&a)[4][4], uint32_t p, int lane) {
    const uint32_t f = (p >> 5) & 3u, j = (p >> 8) & 3u;
    const uint32_t v = (int)(p & 31u) == lane ? (p >> 10) << (16 * ((p >> 7) & 1u)) : 0u;
#pragma unroll
    for (int ff = 0; ff < 4; ++ff)
#pragma unroll
        for (int jj = 0; jj < 4; ++jj) a[ff][jj] |= (ff == (int)f && jj == (int)j) ? v : 0u;
}

// Threads of a CTA: the consumer warpgroups, the producer warp, the stager warp.
__host__ __device__ constexpr int compressed_ring_threads(int wg) { return tma_threads(wg) + 32; }

// One CTA's stream through the ring: slot i in stage i % Stages, warpgroup g's slots g, g + Warpgroups, ...
template <int NB, int Stages, int Warpgroups, int Groups>
struct CompressedRingStream {
    static constexpr int kAcc = 4 * NB;
    static constexpr int kWBytes = 4 * Groups * (kCompressedGroupBytes + kCompressedHeaderBytes);  // a slot's weights
    static constexpr int kWPad = (kWBytes + 1023) / 1024 * 1024;  // x's boxes 1 KB aligned: the 128-byte swizzle
    static constexpr int kStage = kWPad + Groups * tma_x_bytes(NB);
    static constexpr int kSlotK = 64 * Groups;
    static constexpr int kXBytes = tma_x_bytes(NB);
    static constexpr uint32_t kBytes =
        kWBytes + Groups * kXBytes;  // a slot's copies: x rows past M count too (as zeros)

    uint8_t* ring;
    RingBarriers<Stages>& bars;
    const CUtensorMap* x_map;
    const CompressedRingArgs& a;
    const uint8_t* src;  // the tile's slots
    int n_k;

    // Slot i's copies, counted on `full`: its weights (one bulk copy) and x's G boxes (one tensor copy).
    __device__ __forceinline__ void issue(int i, uint64_t* full) const {
        uint8_t* slot = ring + (i % Stages) * kStage;
        bulk_load_1d(slot, src + (size_t)i * kWBytes, kWBytes, full);
        if constexpr (Groups == 1)
            tma_load_2d(slot + kWPad, x_map, i * kSlotK, 0, full);
        else
            tma_load_3d(slot + kWPad, x_map, 0, 0, i * Groups, full);
    }

    // The producer's lane, before the CTA barrier: the first round leaves before it, as tma_gemv.cuh's does.
    __device__ __forceinline__ void start() const {
        prefetch_tensor_map(x_map);
        bars.init_full();
        for (int i = 0; i < Stages && i < n_k; ++i) issue(i, bars.arm(i, kBytes));
        bars.init_empty(4);  // one arrival per warp of the slot's warpgroup
    }

    __device__ __forceinline__ void produce() const {
        for (int i = Stages; i < n_k; ++i) issue(i, bars.acquire(i % Stages, (i / Stages) & 1, kBytes));
    }

    // Warp q's row block of a slot's G groups, decoded into wgmma's A registers and patched.
    __device__ __forceinline__ void decode(uint32_t (&av)[Groups][4][4], const uint8_t* slot, int q, int lane) const {
        Frag part[Groups][kCompressedParts];
#pragma unroll
        for (int u = 0; u < Groups; ++u)
#pragma unroll
            for (int p = 0; p < kCompressedParts; ++p)
                part[u][p] = *reinterpret_cast<const Frag*>(slot + (q * Groups + u) * kCompressedGroupBytes +
                                                            p * (kCompressedGroupBytes / kCompressedParts) + lane * 16);
        // the slot's headers of this warp's G groups: lane l holds word l % 4 of group l / 4 (n, p0, p1, p2)
        const uint32_t hdr =
            lane < 4 * Groups ? *reinterpret_cast<const uint32_t*>(slot + 4 * Groups * kCompressedGroupBytes +
                                                                   (q * Groups + (lane >> 2)) * kCompressedHeaderBytes +
                                                                   (lane & 3) * 4)
                              : 0u;
#pragma unroll
        for (int u = 0; u < Groups; ++u) {
#pragma unroll
            for (int f = 0; f < 4; ++f) decode_fragment(av[u][f], part[u], f, a.table);
            const uint32_t n = hdr_count(hdr, u);
#pragma unroll 1
            for (uint32_t pq = 0; pq < n; ++pq)
                patch_registers(av[u], __shfl_sync(0xFFFFFFFFu, hdr, 4 * u + 1 + pq), lane);
        }
    }

    // Warpgroup g's slots: warp q decodes row block q; the wgmmas read the registers, so each is waited for.
    __device__ __forceinline__ void consume(float (&acc)[kAcc], int g, int q, int lane) const {
        const uint64_t x_desc0 = sw128_desc(smem_addr(ring) + kWPad);
        for (int i = g; i < n_k; i += Warpgroups) {
            const int s = i % Stages;
            bars.wait_full(s, (i / Stages) & 1);
            uint32_t av[Groups][4][4];
            decode(av, ring + s * kStage, q, lane);
            fence_regs(acc);
            wgmma_fence();
#pragma unroll
            for (int u = 0; u < Groups; ++u)
#pragma unroll
                for (int f = 0; f < 4; ++f)  // fragment f: 32 bytes along x's row
                    wgmma_bf16_rs<NB>(acc, av[u][f], desc_plus(x_desc0, (s * kStage + u * kXBytes + f * 32) / 16));
            wgmma_commit();
            fence_regs(acc);
            wgmma_wait<0>();  // before av changes and before the slot is handed back
            fence_regs(acc);
            __syncwarp();
            if (lane == 0) bars.release(s);
        }
    }

    // Warpgroups 1.. hand their partials to warpgroup 0 through the idle ring, added in warpgroup order; false in
    // the warpgroups that are done.
    __device__ __forceinline__ bool fold(float (&acc)[kAcc], int g, int t) const {
        if constexpr (Warpgroups > 1) {
            named_barrier_sync<kFoldBarrier, Warpgroups * kTmaConsumers>();
            float* fold = reinterpret_cast<float*>(ring);
            if (g > 0) {
#pragma unroll
                for (int e = 0; e < kAcc; ++e) fold[((g - 1) * kAcc + e) * kTmaConsumers + t] = acc[e];
            }
            named_barrier_sync<kFoldBarrier, Warpgroups * kTmaConsumers>();
            if (g != 0) return false;
            for (int h = 1; h < Warpgroups; ++h)
#pragma unroll
                for (int e = 0; e < kAcc; ++e) acc[e] += fold[((h - 1) * kAcc + e) * kTmaConsumers + t];
        }
        return true;
    }
};

template <int NB, int Stages, int Warpgroups, int Groups>
__global__ void __launch_bounds__(compressed_ring_threads(Warpgroups), 1)
    compressed_ring_kernel(const __grid_constant__ CUtensorMap x_map, const CompressedRingArgs a) {
    using Stream = CompressedRingStream<NB, Stages, Warpgroups, Groups>;
    static_assert(Stages % Warpgroups == 0, "every stage belongs to one warpgroup");
    static_assert(NB == 1 || NB == 2 || NB == 4, "wgmma_bf16_rs: N = 8, 16 or 32");
    static_assert(Warpgroups * Stream::kAcc * kTmaConsumers * 4 <= Stages * Stream::kStage, "the fold fits the ring");
    constexpr int kConsumers = Warpgroups * kTmaConsumers;
    extern __shared__ uint8_t smem_raw[];
    __shared__ RingBarriers<Stages> bars;
    uint8_t* ring = smem_raw + ((1024 - (smem_addr(smem_raw) & 1023)) & 1023);
    StagedOverflow& staged = *reinterpret_cast<StagedOverflow*>(ring + Stages * Stream::kStage);
    const int tile = blockIdx.x, row0 = tile * kTmaTileRows, n_k = a.K / Stream::kSlotK;
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    const Stream stream{ring, bars, &x_map, a, a.slots + (size_t)tile * n_k * Stream::kWBytes, n_k};

    if (threadIdx.x == kConsumers) stream.start();
    __syncthreads();
    if (warp == kConsumers / 32) {  // the producer warp
        if (lane == 0) stream.produce();
        return;
    }
    if (warp == kConsumers / 32 + 1) {  // the stager warp
        if (a.n_overflow) {
            stage_overflow(a, staged, row0, lane);
            __syncwarp();
            named_barrier_arrive<kStagedBarrier, kTmaConsumers + 32>();
        }
        return;
    }
    const int g = warp >> 2;
    float acc[Stream::kAcc];
#pragma unroll
    for (int e = 0; e < Stream::kAcc; ++e) acc[e] = 0.f;
    stream.consume(acc, g, warp & 3, lane);
    const int t = threadIdx.x % kTmaConsumers;
    if (!stream.fold(acc, g, t)) return;
    if (a.n_overflow) {
        named_barrier_sync<kStagedBarrier, kTmaConsumers + 32>();
        add_overflow<NB>(a, staged, acc, row0, t);
    }
#pragma unroll
    for (int e = 0; e < Stream::kAcc; ++e) store_element(a.out, a.M, a.N, row0, t, e, acc[e]);
}

// Whether case L's layout fits the shared memory its engine's rule gives it: the ring (+1 KB to align it), then
// the staged overflow.
template <typename L>
constexpr bool compressed_ring_layout_fits() {
    const int ring = L::stages * CompressedRingStream<L::NB, L::stages, L::warpgroups, L::groups>::kStage + 1024;
    return ring + (int)sizeof(StagedOverflow) <= L::smem_bytes && L::smem_bytes <= (int)kSmemOptInLimit;
}

// Launch-table case L (generator/launch_table.py: the engine's variant(), by name). call.operand: [0] the ring slots,
// [1] the overflow's row starts, [2] its entries' rows, [3] its entries; call.scalar: [0] table words T0 | T1 << 32,
// [1] T2 | T3 << 32, [2] the number of overflow entries.
template <typename L>
const char* launch_compressed_ring(const Call& c) {
    static_assert(compressed_ring_layout_fits<L>(), "the ring and the staged overflow fit the engine's budget");
    if (c.M < 1 || c.M > 8 * L::NB) return "compressed_ring: M does not fit this kernel's column blocks";
    if (c.N % kTmaTileRows || c.K % (64 * L::groups)) return "compressed_ring: N or K does not fit the tile and slot";
    CUtensorMap x_map;
    const char* err = bf16_rows_map(&x_map, c.x, c.M, c.K, L::NB * 8, L::groups);
    if (err != nullptr) return err;
    CompressedRingArgs a{};
    a.slots = static_cast<const uint8_t*>(c.operand[0]);
    a.row_starts = static_cast<const int*>(c.operand[1]);
    a.entry_rows = static_cast<const int*>(c.operand[2]);
    a.entries = static_cast<const uint32_t*>(c.operand[3]);
    a.x = static_cast<const __nv_bfloat16*>(c.x);
    a.out = static_cast<__nv_bfloat16*>(c.out);
    a.table = make_uint4((uint32_t)c.scalar[0], (uint32_t)(c.scalar[0] >> 32), (uint32_t)c.scalar[1],
                         (uint32_t)(c.scalar[1] >> 32));
    a.M = c.M, a.N = c.N, a.K = c.K, a.n_overflow = (int)c.scalar[2];
    auto kernel = compressed_ring_kernel<L::NB, L::stages, L::warpgroups, L::groups>;
    return launch_splits(kernel, dim3(c.N / kTmaTileRows), dim3(compressed_ring_threads(L::warpgroups)),
                         (size_t)L::smem_bytes, static_cast<cudaStream_t>(c.stream), false, x_map, a);
}

}  // namespace okc
