"""Weight layouts made in prepare() (docs/mma-gemv.md, docs/tma-gemv.md), rows outermost: a slice is a prefix."""

import torch


def pack_mma_a(w):
    """[N, K] bf16 -> flat [rb][kb][step y][g][t][z][a][e]: row 16 rb + 8a + g, k 32 kb + 8t + 4y + 2z + e."""
    n, k = w.shape
    if n % 16 or k % 32:
        raise ValueError(f"pack_mma_a: weight [{n}, {k}] must have N % 16 == 0 and K % 32 == 0")
    blocks = w.reshape(n // 16, 2, 8, k // 32, 4, 2, 2, 2)
    return blocks.permute(0, 3, 5, 2, 4, 6, 1, 7).contiguous().reshape(-1)


def pack_tma_tiles(w):
    """[N, K] bf16 -> [N/64, K/64, 64, 64]: each 64 x 64 tile one contiguous 8 KB block, a row tile's in K order."""
    n, k = w.shape
    if n % 64 or k % 64:
        raise ValueError(f"pack_tma_tiles: weight [{n}, {k}] must have N % 64 == 0 and K % 64 == 0")
    return w.reshape(n // 64, 64, k // 64, 64).permute(0, 2, 1, 3).contiguous()


def swizzle_128b(tiles):
    """[..., 64, 64] bf16 tiles in wgmma's 128-byte swizzle: 16-byte chunk c of row r at chunk c XOR (r mod 8)
    (an involution)."""
    if tiles.dim() < 2 or tuple(tiles.shape[-2:]) != (64, 64):
        raise ValueError(f"swizzle_128b: tiles must end in [64, 64], got {list(tiles.shape)}")
    rows = torch.arange(64, device=tiles.device)
    chunks = torch.arange(8, device=tiles.device)
    source = chunks[None, :] ^ (rows[:, None] % 8)  # the logical chunk each stored one holds
    view = tiles.reshape(-1, 64, 8, 8)
    return view[:, rows[:, None], source, :].reshape(tiles.shape).contiguous()


def pack_tma_bulk(w):
    """[N, K] bf16 -> the TMA GEMV's full tiles, pre-swizzled."""
    return swizzle_128b(pack_tma_tiles(w))


def pack_tma_half_tiles(w):
    """[N, K] bf16 -> [N/32, K/128, 64, 64]: 32 rows' two 64-wide K halves stacked (tile=half)."""
    n, k = w.shape
    if n % 32 or k % 128:
        raise ValueError(f"pack_tma_half_tiles: weight [{n}, {k}] must have N % 32 == 0 and K % 128 == 0")
    return (
        w.reshape(n // 32, 32, k // 128, 2, 64)
        .permute(0, 2, 3, 1, 4)
        .reshape(n // 32, k // 128, 64, 64)
        .contiguous()
    )


def pack_tma_half_bulk(w):
    """[N, K] bf16 -> the TMA GEMV's half tiles, pre-swizzled (the two halves swizzle as one tile)."""
    return swizzle_128b(pack_tma_half_tiles(w))


def split_hi_lo(w):
    """fp32 [N, K] -> (hi, lo) bf16, hi + lo == w to about 2^-16 relative."""
    hi = w.to(torch.bfloat16)
    lo = (w - hi.float()).to(torch.bfloat16)
    return hi.contiguous(), lo.contiguous()
