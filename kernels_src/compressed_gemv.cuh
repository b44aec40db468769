// The mma.sync GEMV on 12-bit lossless weights (engine compressed_gemv, m <= 32, format: compress.py), on
// mma_gemv.cuh's skeleton: a 64-wide K group is three 16-byte loads a lane (25 % fewer bytes than bf16), each
// fragment rebuilt in registers by byte permutes just before its mmas. A group's first three exceptions ride in
// its header and add one mma each (mma_patches); the rest, the overflow, are multiplied after the loop
// (overflow_pass) from buckets staged by cp.async meanwhile. Design and figures: docs/compressed-gemv.md.
#pragma once
#include "common.cuh"
#include "generated/constants.h"

namespace okc {

constexpr int kCompressedParts = 3;                              // 16-byte parts per lane per row block and K group
constexpr int kCompressedFragsPerGroup = kCompressedParts * 32;  // Frags (16 bytes) per row block and K group
constexpr int kOverflowTileBytes = 16 * 64 * 2;                  // a warp's overflow tile: one bucket, 16 x 64 bf16

struct CompressedGemvArgs {
    const Frag* x;               // [M, K] bf16, row-major, 16-byte aligned
    const Frag* w;               // compressed stream: [N/16][K/64][3][32 lanes] Frags
    const uint32_t* patches;     // [N/16][K/64][4] group headers: n <= 3, patch words p0, p1, p2
    const uint32_t* overflow;    // [n_overflow] entries p | bf16 bits << 16 (p: 256 f + 8 lane + e), by bucket, p
    const int* overflow_starts;  // [N/16 * K/64 + 1]: bucket b = rb * K/64 + g holds entries [starts[b], starts[b+1])
    __nv_bfloat16* out;          // [M, N]
    float* ws;                   // split-K partials: [N/(16R)][S][R*NB*128]
    int* sem;                    // arrival counter per CTA row group; 0 between launches
    uint4 table;                 // the 16 hi bytes as four words (compress.py: table_words)
    int M, N, K, S, n_overflow;  // n_overflow: the entries of the whole matrix (0: no staging, no pass)
    int cluster;
};

__device__ __forceinline__ uint32_t prmt(uint32_t a, uint32_t b, uint32_t sel) {
    uint32_t d;
    asm("prmt.b32 %0, %1, %2, %3;" : "=r"(d) : "r"(a), "r"(b), "r"(sel));
    return d;
}

// cp.async (L1-cached): the overflow offsets land while the main loop streams.
template <int Bytes>
__device__ __forceinline__ void cp_async(void* smem, const void* gmem) {
    const uint32_t dst = static_cast<uint32_t>(__cvta_generic_to_shared(smem));
    asm volatile("cp.async.ca.shared.global [%0], [%1], %2;" ::"r"(dst), "l"(gmem), "n"(Bytes) : "memory");
}
__device__ __forceinline__ void cp_async_wait_all() { asm volatile("cp.async.wait_all;" ::: "memory"); }

// Shared memory of a CTA: the warps' partial tiles, then (cluster only, `inbox_tiles` = S - 1) rank 0's cluster
// inbox, then, for a matrix with overflow entries, one 2 KB overflow tile per warp and the CTA's R x (K groups / S
// + 1) staged bucket offsets (compressed_gemv.py, overflow_smem).
__host__ __device__ constexpr size_t compressed_gemv_inbox_offset(int nw, int r, int nb) {
    return (size_t)nw * r * nb * 4 * 32 * sizeof(float);
}
__host__ __device__ constexpr size_t compressed_gemv_overflow_offset(int nw, int r, int nb, int inbox_tiles) {
    return compressed_gemv_inbox_offset(nw, r, nb) + (size_t)inbox_tiles * r * nb * 4 * 32 * sizeof(float);
}
// Four hi bytes from four 4-bit codes (the low 16 bits of c).
__device__ __forceinline__ uint32_t hi_bytes(uint32_t c, const uint4& t) {
    const uint32_t idx = c & 0x7777u;
    const uint32_t low8 = prmt(t.x, t.y, idx), high8 = prmt(t.z, t.w, idx);
    const uint32_t take_high = prmt(0x0000FF00u, 0u, (c >> 3) & 0x1111u);  // 0xFF where code >= 8
    return (low8 & ~take_high) | (high8 & take_high);
}

// Fragment f (0..3) of a K group from its lane's three parts -> the mma A registers (as pack_mma_a lays them).
__device__ __forceinline__ void decode_fragment(uint32_t (&a)[4], const Frag (&part)[kCompressedParts], int f,
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

// A trip's headers, one 4-byte word a lane (lane l: word l % 4 of group l / 4); group u's patch count n.
__device__ __forceinline__ uint32_t hdr_count(uint32_t word, int u) { return __shfl_sync(0xFFFFFFFFu, word, 4 * u); }

// A patched group's correction after its mmas: patch q as an A operand that is zero but in the lane and register
// it names, through one more mma against its fragment's x (the slot decoded to 0). Apart from the decode, so that
// the common group (n = 0, ~3 in 4) runs without it.
template <int NB>
__device__ __forceinline__ void mma_patches(float (&acc)[NB][4], uint32_t word, int u, uint32_t n,
                                            const Frag (&x)[2][NB], int lane) {
#pragma unroll 1
    for (uint32_t q = 0; q < n; ++q) {
        const uint32_t p = __shfl_sync(0xFFFFFFFFu, word, 4 * u + 1 + q);
        const uint32_t j = (p >> 8) & 3u;
        const uint32_t value = (int)(p & 31u) == lane ? (p >> 10) << (16 * ((p >> 7) & 1u)) : 0u;
        const uint32_t a[4] = {j == 0 ? value : 0u, j == 1 ? value : 0u, j == 2 ? value : 0u, j == 3 ? value : 0u};
        const uint32_t f = (p >> 5) & 3u;  // warp-uniform; x's registers picked by value (no local-memory array)
#pragma unroll
        for (int nb = 0; nb < NB; ++nb) {
            const Frag &x0 = x[0][nb], &x1 = x[1][nb];  // K blocks 2G, 2G + 1: fragments 0, 1 and 2, 3
            const uint32_t b0 = f == 0 ? x0.r[0] : f == 1 ? x0.r[2] : f == 2 ? x1.r[0] : x1.r[2];
            const uint32_t b1 = f == 0 ? x0.r[1] : f == 1 ? x0.r[3] : f == 2 ? x1.r[1] : x1.r[3];
            mma_bf16_m16n8k16(acc[nb], a, b0, b1);
        }
    }
}

template <int Groups, int NB, int RowBlocks>
struct CompressedTrip {
    Frag w[RowBlocks][Groups][kCompressedParts];
    uint32_t hdr[RowBlocks];  // the trip's headers, a word a lane (hdr_count, mma_patches)
    Frag x[Groups][2][NB];    // K blocks 2G and 2G + 1 of each group
};

// hp: the CTA's first row block's headers; 4 `groups` words per row block.
template <int Groups, int NB, int RowBlocks>
__device__ __forceinline__ void load_compressed_trip(CompressedTrip<Groups, NB, RowBlocks>& tr, const Frag* wp,
                                                     size_t row_frags, const uint32_t* hp, int groups,
                                                     const Frag* const (&xp)[NB], const bool (&xvalid)[NB], int g0,
                                                     int g_end) {
    const int lane = threadIdx.x & 31;
    const bool hdr_ok = lane < 4 * Groups && g0 + (lane >> 2) < g_end;  // this lane's word: group g0 + lane / 4
#pragma unroll
    for (int r = 0; r < RowBlocks; ++r) tr.hdr[r] = hdr_ok ? __ldg(hp + ((size_t)r * groups + g0) * 4 + lane) : 0u;
#pragma unroll
    for (int u = 0; u < Groups; ++u) {
        const int g = g0 + u;
        const bool ok = g < g_end;  // warp-uniform
#pragma unroll
        for (int r = 0; r < RowBlocks; ++r)
#pragma unroll
            for (int p = 0; p < kCompressedParts; ++p)
                tr.w[r][u][p] =
                    ok ? ld_weights(wp + r * row_frags + (size_t)g * kCompressedFragsPerGroup + p * 32) : zero_frag();
#pragma unroll
        for (int b = 0; b < 2; ++b)
#pragma unroll
            for (int nb = 0; nb < NB; ++nb)
                tr.x[u][b][nb] = (ok && xvalid[nb]) ? ld_x(xp[nb] + (2 * g + b) * 4) : zero_frag();
    }
}

// A trip's mmas: each fragment decoded, then multiplied; then a patched group's correction.
template <int Groups, int NB, int RowBlocks>
__device__ __forceinline__ void mma_compressed_trip(float (&acc)[RowBlocks][NB][4],
                                                    const CompressedTrip<Groups, NB, RowBlocks>& tr, const uint4& t,
                                                    int lane) {
#pragma unroll
    for (int u = 0; u < Groups; ++u)
#pragma unroll
        for (int r = 0; r < RowBlocks; ++r) {
#pragma unroll
            for (int f = 0; f < 4; ++f) {
                uint32_t a[4];
                decode_fragment(a, tr.w[r][u], f, t);
                const int b = f >> 1, y = f & 1;  // K block 2G + b, mma step y
#pragma unroll
                for (int nb = 0; nb < NB; ++nb)
                    mma_bf16_m16n8k16(acc[r][nb], a, tr.x[u][b][nb].r[2 * y], tr.x[u][b][nb].r[2 * y + 1]);
            }
            const uint32_t n = hdr_count(tr.hdr[r], u);
            if (n) mma_patches<NB>(acc[r], tr.hdr[r], u, n, tr.x[u], lane);
        }
}

// An overflow entry into its 16-bit slot of a warp's tile, in PTX with a memory clobber: never reordered with the
// tile's 16-byte loads and stores.
__device__ __forceinline__ void scatter_entry(Frag* tile, uint32_t entry) {
    const uint32_t slot = smem_addr(tile) + 2u * (entry & 1023u);
    asm volatile("st.shared.u16 [%0], %1;" ::"r"(slot), "h"((unsigned short)(entry >> 16)) : "memory");
}

// A group's x fragments (K blocks 2g, 2g + 1), as load_compressed_trip loads them.
template <int NB>
__device__ __forceinline__ void load_group_x(Frag (&x)[2][NB], const Frag* const (&xp)[NB], const bool (&xvalid)[NB],
                                             int g) {
#pragma unroll
    for (int b = 0; b < 2; ++b)
#pragma unroll
        for (int nb = 0; nb < NB; ++nb) x[b][nb] = xvalid[nb] ? ld_x(xp[nb] + (2 * g + b) * 4) : zero_frag();
}

// The first bucket after gl whose entries end past entry e (the one that holds e), 32 buckets a step.
__device__ __forceinline__ int next_bucket(const int* st, int ng, int gl, int e, int lane) {
#pragma unroll 1
    for (int base = gl + 1;; base += 32) {
        const int c = base + lane;
        const uint32_t found = __ballot_sync(0xFFFFFFFFu, c < ng && st[c + 1] > e);
        if (found) return base + __ffs(found) - 1;
    }
}

// One bucket's tile (the stream's fragment order) times the group's x into acc; each lane zeroes what it read.
template <int NB>
__device__ __forceinline__ void mma_overflow_tile(float (&acc)[NB][4], Frag* tile, const Frag (&x)[2][NB], int lane) {
#pragma unroll
    for (int f = 0; f < 4; ++f) {
        const Frag v = tile[f * 32 + lane];
        tile[f * 32 + lane] = zero_frag();
        const uint32_t a[4] = {v.r[0], v.r[1], v.r[2], v.r[3]};
        const int b = f >> 1, y = f & 1;  // K block 2G + b, mma step y
#pragma unroll
        for (int nb = 0; nb < NB; ++nb) mma_bf16_m16n8k16(acc[nb], a, x[b][nb].r[2 * y], x[b][nb].r[2 * y + 1]);
    }
}

// One warp's overflow pass: per row block, the w-th of nw equal shares of the CTA's entries, walked in 32-entry
// chunks, each bucket scattered into the warp's tile and multiplied where it ends; into acc, so deterministic.
template <int NB, int RowBlocks>
__device__ __forceinline__ void overflow_pass(float (&acc)[RowBlocks][NB][4], const CompressedGemvArgs& a, Frag* tile,
                                              const int* starts, int ng, int g_begin, const Frag* const (&xp)[NB],
                                              const bool (&xvalid)[NB], int warp, int lane) {
    const int nw = blockDim.x >> 5;
#pragma unroll
    for (int f = 0; f < 4; ++f) tile[f * 32 + lane] = zero_frag();
    __syncwarp();
#pragma unroll
    for (int r = 0; r < RowBlocks; ++r) {  // unrolled: acc[r] stays in registers
        const int* st = starts + r * (ng + 1);
        const int first = st[0], len = st[ng] - first;
        const int e_begin = first + len * warp / nw, e_end = first + len * (warp + 1) / nw;
        if (e_begin == e_end) continue;                   // warp-uniform
        int gl = next_bucket(st, ng, -1, e_begin, lane);  // the bucket holding e_begin
        int bend = min(st[gl + 1], e_end);
        Frag x[2][NB];
        load_group_x<NB>(x, xp, xvalid, g_begin + gl);
        int c0 = e_begin, done = e_begin;  // this chunk's first entry; entries before `done` are multiplied
        uint32_t cur = c0 + lane < e_end ? __ldg(a.overflow + c0 + lane) : 0u;
        uint32_t nxt = c0 + 32 + lane < e_end ? __ldg(a.overflow + c0 + 32 + lane) : 0u;
#pragma unroll 1
        for (;;) {
            const int e = c0 + lane;
            if (e >= done && e < bend) scatter_entry(tile, cur);
            if (bend > c0 + 32) {  // the bucket goes on in the next chunk
                c0 += 32;
                cur = nxt;
                nxt = c0 + 32 + lane < e_end ? __ldg(a.overflow + c0 + 32 + lane) : 0u;
                continue;
            }
            __syncwarp();  // the scatter before the tile's loads
            mma_overflow_tile<NB>(acc[r], tile, x, lane);
            __syncwarp();  // the zeroes before the next scatter
            done = bend;
            if (done == e_end) break;
            gl = next_bucket(st, ng, gl, done, lane);
            bend = min(st[gl + 1], e_end);
            load_group_x<NB>(x, xp, xvalid, g_begin + gl);
            if (done == c0 + 32) {  // the bucket ended with the chunk
                c0 += 32;
                cur = nxt;
                nxt = c0 + 32 + lane < e_end ? __ldg(a.overflow + c0 + 32 + lane) : 0u;
            }
        }
    }
}

// Element idx of a partial tile (the mma C layout) <-> (row block r, row i, token): tile_coords, tile_index.
template <int NB>
__host__ __device__ constexpr void tile_coords(int idx, int& r, int& i, int& token) {
    const int lane = idx & 31, c = idx >> 5, j = c & 3;
    r = c / (NB * 4);
    i = (lane >> 2) + ((j & 2) ? 8 : 0);
    token = ((c >> 2) % NB) * 8 + (lane & 3) * 2 + (j & 1);
}
template <int NB>
__host__ __device__ constexpr int tile_index(int r, int i, int token) {
    const int nb = token >> 3, lane = 4 * (i & 7) + ((token & 7) >> 1), j = (i >= 8 ? 2 : 0) + (token & 1);
    return ((r * NB + nb) * 4 + j) * 32 + lane;
}

template <int NB>
__device__ __forceinline__ void write_compressed_element(const CompressedGemvArgs& a, int rb0, int idx, float v) {
    int r = 0, i = 0, token = 0;
    tile_coords<NB>(idx, r, i, token);
    if (token < a.M) store_out(a.out + (size_t)token * a.N + (rb0 + r) * 16 + i, v);
}

// Before the main loop: this CTA's bucket offsets into shared memory by cp.async; nothing waits here.
template <int NB, int RowBlocks>
__device__ __forceinline__ void stage_offsets(const CompressedGemvArgs& a, float* red, int inbox_tiles, int rb0,
                                              int groups, int g_begin, int g_per_split) {
    const int nw = blockDim.x >> 5;
    int* starts = reinterpret_cast<int*>(reinterpret_cast<uint8_t*>(red) +
                                         compressed_gemv_overflow_offset(nw, RowBlocks, NB, inbox_tiles) +
                                         (size_t)nw * kOverflowTileBytes);
    for (int e = threadIdx.x; e < RowBlocks * (g_per_split + 1); e += blockDim.x) {
        const int r = e / (g_per_split + 1), gl = e - r * (g_per_split + 1);
        cp_async<4>(starts + e, a.overflow_starts + (size_t)(rb0 + r) * groups + g_begin + gl);
    }
}

// After the main loop (a matrix with overflow entries): the staged offsets complete, then the overflow pass into
// acc, on this warp's tile of the overflow region (after the warps' tiles and the inbox).
template <int NB, int RowBlocks>
__device__ __forceinline__ void compressed_gemv_overflow(float (&acc)[RowBlocks][NB][4], const CompressedGemvArgs& a,
                                                         float* red, int inbox_tiles, int g_per_split, int g_begin,
                                                         const Frag* const (&xp)[NB], const bool (&xvalid)[NB],
                                                         int warp, int lane) {
    const int nw = blockDim.x >> 5;
    cp_async_wait_all();
    __syncthreads();  // every thread's staged offsets
    uint8_t* region = reinterpret_cast<uint8_t*>(red) + compressed_gemv_overflow_offset(nw, RowBlocks, NB, inbox_tiles);
    overflow_pass<NB, RowBlocks>(acc, a, reinterpret_cast<Frag*>(region) + warp * (kOverflowTileBytes / sizeof(Frag)),
                                 reinterpret_cast<const int*>(region + (size_t)nw * kOverflowTileBytes), g_per_split,
                                 g_begin, xp, xvalid, warp, lane);
}

template <int Groups, int NB, int RowBlocks, MmaPipeline Pipeline>
__global__ void __launch_bounds__(512, 1) compressed_gemv_kernel(const CompressedGemvArgs a) {
    extern __shared__ float red[];  // [NW][R * NB * 4][32], inbox, overflow tiles [NW][2 KB], offsets [R][ng + 1]
    __shared__ __align__(8) uint64_t inbox_full;
    constexpr int kTile = RowBlocks * NB * 4 * 32;
    const int nw = blockDim.x >> 5;
    if (a.cluster) open_inbox(&inbox_full, cluster_rank() == 0 ? (uint32_t)((a.S - 1) * kTile * sizeof(float)) : 0u);
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    const int group = blockIdx.x, rb0 = group * RowBlocks, split = blockIdx.y;
    const int groups = a.K >> 6;
    const int g_per_split = groups / a.S;
    const int g_begin = split * g_per_split, g_end = g_begin + g_per_split;
    const int inbox_tiles = a.cluster ? a.S - 1 : 0;

    // n_overflow is the same for every CTA: the branch is uniform.
    if (a.n_overflow) stage_offsets<NB, RowBlocks>(a, red, inbox_tiles, rb0, groups, g_begin, g_per_split);

    const Frag* xp[NB];
    bool xvalid[NB];
    x_operand<NB>(a.x, a.M, a.K, lane, xp, xvalid);
    const size_t row_frags = (size_t)groups * kCompressedFragsPerGroup;
    const Frag* wp = a.w + (size_t)rb0 * row_frags + lane;
    const uint32_t* hp = a.patches + (size_t)rb0 * groups * 4;
    const uint4 t = a.table;

    float acc[RowBlocks][NB][4];
    zero_accumulators<RowBlocks, NB>(acc);

    const int stride = nw * Groups;
    const int first = g_begin + warp * Groups;
    if constexpr (Pipeline == MmaPipeline::kBatch) {
        for (int g = first; g < g_end; g += stride) {
            CompressedTrip<Groups, NB, RowBlocks> tr;
            load_compressed_trip<Groups, NB, RowBlocks>(tr, wp, row_frags, hp, groups, xp, xvalid, g, g_end);
            mma_compressed_trip<Groups, NB, RowBlocks>(acc, tr, t, lane);
        }
    } else {
        CompressedTrip<Groups, NB, RowBlocks> t0, t1;
        load_compressed_trip<Groups, NB, RowBlocks>(t0, wp, row_frags, hp, groups, xp, xvalid, first, g_end);
        for (int g = first; g < g_end; g += 2 * stride) {
            load_compressed_trip<Groups, NB, RowBlocks>(t1, wp, row_frags, hp, groups, xp, xvalid, g + stride, g_end);
            mma_compressed_trip<Groups, NB, RowBlocks>(acc, t0, t, lane);
            load_compressed_trip<Groups, NB, RowBlocks>(t0, wp, row_frags, hp, groups, xp, xvalid, g + 2 * stride,
                                                        g_end);
            mma_compressed_trip<Groups, NB, RowBlocks>(acc, t1, t, lane);
        }
    }

    if (a.n_overflow)
        compressed_gemv_overflow<NB, RowBlocks>(acc, a, red, inbox_tiles, g_per_split, g_begin, xp, xvalid, warp, lane);

    park_accumulators<RowBlocks, NB>(red, acc, warp, lane);
    __syncthreads();

    float* inbox =
        reinterpret_cast<float*>(reinterpret_cast<uint8_t*>(red) + compressed_gemv_inbox_offset(nw, RowBlocks, NB));
    finish_tile(a, red, inbox, &inbox_full, kTile, group, split,
                [&](int idx, float v) { write_compressed_element<NB>(a, rb0, idx, v); });
}

// Whether case L's layout fits the shared memory its engine's rule gives it: the warps' tiles and the cluster inbox
// in smem_bytes, the overflow tiles (and the bucket offsets, which K sizes) in overflow_bytes.
template <typename L>
constexpr bool compressed_gemv_layout_fits() {
    const int inbox_tiles = L::reduce == Reduce::kCluster ? L::splits - 1 : 0;
    return compressed_gemv_overflow_offset(L::warps, L::row_blocks, L::NB, inbox_tiles) <= L::smem_bytes &&
           L::warps * kOverflowTileBytes < L::overflow_bytes &&
           L::smem_bytes + L::overflow_bytes <= (int)kSmemOptInLimit;
}

// Launch-table case L (generator/launch_table.py: the engine's variant(), by name). call.operand: [0] the 12-bit
// stream, [1] the group headers (patches), [2] the overflow entries, [3] their bucket offsets; call.scalar: [0] table
// words T0 | T1 << 32, [1] T2 | T3 << 32, [2] the number of overflow entries (0: none, the pass after the loop skipped
// and L::overflow_bytes not taken).
template <typename L>
const char* launch_compressed_gemv(const Call& c) {
    constexpr bool cluster = L::reduce == Reduce::kCluster;
    static_assert(compressed_gemv_layout_fits<L>(), "the tiles, the inbox and the overflow fit the engine's budget");
    if (c.M < 1 || c.M > 8 * L::NB) return "compressed_gemv: M does not fit this kernel's column blocks";
    CompressedGemvArgs a{};
    a.x = static_cast<const Frag*>(c.x);
    a.w = static_cast<const Frag*>(c.operand[0]);
    a.patches = static_cast<const uint32_t*>(c.operand[1]);
    a.overflow = static_cast<const uint32_t*>(c.operand[2]);
    a.overflow_starts = static_cast<const int*>(c.operand[3]);
    a.out = static_cast<__nv_bfloat16*>(c.out);
    a.ws = c.ws;
    a.sem = c.sem;
    a.table = make_uint4((uint32_t)c.scalar[0], (uint32_t)(c.scalar[0] >> 32), (uint32_t)c.scalar[1],
                         (uint32_t)(c.scalar[1] >> 32));
    a.M = c.M, a.N = c.N, a.K = c.K, a.S = L::splits, a.n_overflow = (int)c.scalar[2], a.cluster = cluster;
    const size_t smem = L::smem_bytes + (a.n_overflow ? L::overflow_bytes : 0);
    auto kernel = compressed_gemv_kernel<L::groups, L::NB, L::row_blocks, L::pipeline>;
    return launch_splits(kernel, dim3(c.N / (16 * L::row_blocks), L::splits), dim3(L::warps * 32), smem,
                         static_cast<cudaStream_t>(c.stream), cluster, a);
}

}  // namespace okc
