"""Weight layouts made once in prepare(): mma A-fragment order, 64 x 64 tiles for the TMA GEMV (pre-swizzled
for its bulk copies; stacked half tiles for its tile=half), and the router's bf16 hi+lo split."""

import torch

# mma.sync.m16n8k16 with bf16 A (16 rows x 16 k). PTX ISA, "Matrix Fragments for mma.m16n8k16": lane = 4*g + t
# (g = groupID 0..7, t = thread in group 0..3) holds four 32-bit registers of two bf16 each:
#   reg 0: row g,   k = 2t, 2t+1          reg 2: row g,   k = 2t+8, 2t+9
#   reg 1: row g+8, k = 2t, 2t+1          reg 3: row g+8, k = 2t+8, 2t+9
# A dot product may visit k in any order, so we choose which real k each mma k-slot carries: for a 32-wide K
# block, mma step y in {0, 1} and lane (g, t), slot pair z in {0, 1} (regs 0/1 vs 2/3) carries the real k
#   k = 8t + 4y + 2z + e        (e: the element in the register)
# Then the B operand (x, tokens as columns) of lane (g, t) over both steps is x[token g][8t .. 8t+7]: one
# contiguous 16-byte load per 8-token block, and the weights for one lane are 16 contiguous bytes per step.
#
# Packed order, outermost first: [row block rb][K block kb][step y][g][t][z][a][e] where row = 16rb + 8a + g
# and k = 32kb + 8t + 4y + 2z + e; (z, a, e) is the lane's 8 bf16 = regs (z=0,a=0) (z=0,a=1) (z=1,a=0) (z=1,a=1).
# Row blocks are outermost, so the first n rows of a packed matrix are a prefix of it (the unpooler's slice).


def pack_mma_a(w):
    """[N, K] bf16 -> flat bf16 tensor in mma A-fragment order (see above). N % 16 == 0, K % 32 == 0."""
    n, k = w.shape
    if n % 16 or k % 32:
        raise ValueError(f"pack_mma_a: weight [{n}, {k}] must have N % 16 == 0 and K % 32 == 0")
    # dims of the view: rb, a, g, kb, t, y, z, e
    blocks = w.reshape(n // 16, 2, 8, k // 32, 4, 2, 2, 2)
    return blocks.permute(0, 3, 5, 2, 4, 6, 1, 7).contiguous().reshape(-1)


def pack_tma_tiles(w):
    """[N, K] bf16 -> [N/64, K/64, 64, 64] contiguous: the 64-row x 64-k tile (t, kt) is one 8 KB block, and one
    row tile's K tiles follow each other, so a CTA of the TMA GEMV streams one contiguous range (row-major W
    would scatter each tile over 64 rows 2K bytes apart). Row tiles are outermost: the first n rows are a prefix.
    """
    n, k = w.shape
    if n % 64 or k % 64:
        raise ValueError(f"pack_tma_tiles: weight [{n}, {k}] must have N % 64 == 0 and K % 64 == 0")
    return w.reshape(n // 64, 64, k // 64, 64).permute(0, 2, 1, 3).contiguous()


def swizzle_128b(tiles):
    """[..., 64, 64] bf16 tiles -> each tile laid out as the 128-byte swizzle that wgmma's shared-memory
    descriptors read (tma_gemv.cuh, sw128_desc), so that one plain 8 KB bulk copy per tile lands a ready operand:
    no tensor map, no descriptor fetch on the kernel's critical path (faster than tensor-map copies: the figures
    are in docs/tma-gemv.md). A row of 64 bf16 is 128 bytes = eight 16-byte chunks; chunk c of
    row r is stored at chunk c XOR (r mod 8), the address bits 4-6 XOR bits 7-9 rule of a 1024-byte-aligned slot.
    An involution: applying it twice restores the tiles."""
    if tiles.dim() < 2 or tuple(tiles.shape[-2:]) != (64, 64):
        raise ValueError(f"swizzle_128b: tiles must end in [64, 64], got {list(tiles.shape)}")
    rows = torch.arange(64, device=tiles.device)
    chunks = torch.arange(8, device=tiles.device)
    source = chunks[None, :] ^ (rows[:, None] % 8)  # [row, stored chunk] -> the logical chunk stored there
    view = tiles.reshape(-1, 64, 8, 8)
    return view[:, rows[:, None], source, :].reshape(tiles.shape).contiguous()


def pack_tma_bulk(w):
    """[N, K] bf16 -> the TMA GEMV's weight operand: pack_tma_tiles' 8 KB tiles, each pre-swizzled."""
    return swizzle_128b(pack_tma_tiles(w))


def pack_tma_half_tiles(w):
    """[N, K] bf16 -> [N/32, K/128, 64, 64] contiguous, for the TMA GEMV's half tiles (tile=half): a CTA owns 32 rows
    and the whole K, and block (h, kb) stacks rows h..h+31 over K [128 kb, 128 kb + 64) on top of the same rows
    over [128 kb + 64, 128 kb + 128). Read as one 64 x 64 wgmma A tile, its upper half meets x's first 64-wide
    box and its lower half x's second (tma_gemv.cuh): each 8 KB copy carries 128 of K for 32 rows, so twice as
    many CTAs stream as there are 64-row tiles, with no split-K reduction. Row groups are outermost: the first n
    rows are a prefix."""
    n, k = w.shape
    if n % 32 or k % 128:
        raise ValueError(f"pack_tma_half_tiles: weight [{n}, {k}] must have N % 32 == 0 and K % 128 == 0")
    # dims of the view: row group, row, K block, half, k
    return (
        w.reshape(n // 32, 32, k // 128, 2, 64)
        .permute(0, 2, 3, 1, 4)
        .reshape(n // 32, k // 128, 64, 64)
        .contiguous()
    )


def pack_tma_half_bulk(w):
    """[N, K] bf16 -> the TMA GEMV's tile=half weight operand: pack_tma_half_tiles' 8 KB blocks, each pre-swizzled
    (the 128-byte swizzle depends on a row's index mod 8 only, so the two stacked halves swizzle as one tile).
    """
    return swizzle_128b(pack_tma_half_tiles(w))


def split_hi_lo(w):
    """fp32 [N, K] -> (hi, lo) bf16 with hi + lo == w to about 2^-16 relative (hi = bf16(w), lo = bf16(w - hi))."""
    hi = w.to(torch.bfloat16)
    lo = (w - hi.float()).to(torch.bfloat16)
    return hi.contiguous(), lo.contiguous()
