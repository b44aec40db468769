"""The TMA GEMV on compressed weights (kernels_src/tma_gemv.cuh, Z = 1), without a GPU: the natural-k fragment
order, the 6 KB tiles, and an emulation of what the kernel computes from its own index formulas (which bytes a
warp reads, the decode recipe, the wgmma register-A layout, the exception pass per split), on adversarial data."""

import pytest
import torch

from kernels_src import dispatch
from kernels_src.compress import MAX_EXCEPTIONS_PER_BLOCK, compress, tma_tiles
from kernels_src.packing import pack_wgmma_a
from zdecode_model import decode_stream, decompress


def adversarial_bf16(n, k, seed):
    """Gaussian weights with more than 16 distinct hi bytes, specials (+-0, +-inf, NaN, subnormals) and a few
    big outliers: a table that cannot hold every hi byte, so exceptions are spread over rows and K splits."""
    gen = torch.Generator().manual_seed(seed)
    w = (torch.randn(n, k, generator=gen) * torch.logspace(-3, 1, k).roll(seed)).to(torch.bfloat16)
    bits = w.view(torch.int16)
    specials = torch.tensor([0x0000, -0x8000, 0x7F80, -0x80, 0x7FC0, 0x0001, -0x7FFF], dtype=torch.int16)
    where = torch.randint(0, n * k, (40,), generator=gen)
    bits.view(-1)[where] = specials[torch.arange(40) % len(specials)]
    return w


def test_wgmma_fragments_follow_the_mma_register_layout():
    """pack_wgmma_a: lane 4g + t, register 2z + a, element e of k16 step f is W[16 rb + 8 a + g, 16 f + 8 z + 2 t + e]."""
    n, k = 32, 48
    w = torch.arange(n * k, dtype=torch.float32).reshape(n, k)
    packed = pack_wgmma_a(w).reshape(n // 16, k // 16, 32, 4, 2)  # rb, f, lane, reg, e
    for rb, f, lane, reg, e in [(0, 0, 0, 0, 0), (1, 2, 31, 3, 1), (0, 1, 6, 2, 0), (1, 0, 13, 1, 1)]:
        g, t, z, a = lane // 4, lane % 4, reg // 2, reg % 2
        assert packed[rb, f, lane, reg, e] == w[16 * rb + 8 * a + g, 16 * f + 8 * z + 2 * t + e]
    assert sorted(packed.flatten().tolist()) == list(range(n * k))


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_wgmma_order_round_trips_bit_exactly(seed):
    n, k = 64, 256
    w = adversarial_bf16(n, k, seed)
    z = compress(w, "w", order="wgmma")
    assert z["count"] > 0  # the exception path is exercised
    got = decompress(z, n, k, order="wgmma")
    assert torch.equal(got.view(torch.int16), w.view(torch.int16))


def test_tma_tiles_are_the_stream_regrouped_with_row_tiles_outermost():
    stream = torch.randint(0, 256, (8, 3, 3, 32, 16), dtype=torch.uint8)  # 8 row blocks, 3 K groups
    tiles = tma_tiles(stream)
    assert tiles.shape == (2, 3, 4, 3, 32, 16)
    assert torch.equal(tiles[1, 2, 3], stream[7, 2])  # warp 3 of row tile 1, K tile 2: row block 7
    assert torch.equal(tiles.flatten()[: tiles[0].numel()], tma_tiles(stream[:4].contiguous()).flatten())
    with pytest.raises(ValueError, match="N % 64"):
        tma_tiles(stream[:6])


def emulate_ztma_gemv(zt, x, n, k, s_splits):
    """What the kernel computes at Z = 1, from its index formulas: CTA (tile, split) copies 6 KB block
    (tile * K/64 + kt); consumer warp j reads bytes [1536 j, 1536 (j + 1)) of it as three 16-byte parts per lane,
    decodes four fragments (zdecode_model, the kernel's prmt recipe), and its wgmma takes fragment kk as A rows
    16 j + 8 a + g, k = 16 kk + 8 z + 2 t + e; x from its 64-wide box. Thread (j, lane) adds its rows' exception
    entries with k in the split's range. Splits summed in split order; accumulators written by tma_write's map."""
    m = x.shape[0]
    nb = 1 if m <= 8 else 2 if m <= 16 else 4
    k_tiles = k // 64
    blocks = zt["stream"].reshape(-1, 6144)
    xs = torch.zeros(8 * nb, k, dtype=torch.float64)
    xs[:m] = x.double()
    out = torch.full((m, n), float("nan"), dtype=torch.float64)
    exc, starts = zt["exceptions"], zt["row_starts"]
    for tile in range(n // 64):
        total = torch.zeros(64, 8 * nb, dtype=torch.float64)
        for split in range(s_splits):
            kt0, kt1 = split * k_tiles // s_splits, (split + 1) * k_tiles // s_splits
            part = torch.zeros(64, 8 * nb, dtype=torch.float64)
            for kt in range(kt0, kt1):
                a_tile = torch.zeros(64, 64, dtype=torch.int64)
                for j in range(4):
                    parts = blocks[tile * k_tiles + kt, 1536 * j : 1536 * (j + 1)].reshape(1, 1, 3, 32, 16)
                    regs = decode_stream(parts, zt["table_words"])[0, 0]  # [4 fragments, 32 lanes, 4 regs]
                    for f in range(4):
                        for lane in range(32):
                            g, t = lane // 4, lane % 4
                            for reg in range(4):
                                zz, a = reg // 2, reg % 2
                                word = int(regs[f, lane, reg])
                                for e in range(2):
                                    a_tile[16 * j + 8 * a + g, 16 * f + 8 * zz + 2 * t + e] = (word >> (16 * e)) & 0xFFFF
                w_tile = (a_tile.to(torch.int32) << 16).view(torch.float32).double()  # bf16 bits -> exact value
                part += w_tile @ xs[:, kt * 64 : kt * 64 + 64].t()
            k_begin, k_end = kt0 * 64, kt1 * 64
            for r in range(64):  # the exception pass: row r = 16 j + i of the tile
                rb, i = 4 * tile + r // 16, r % 16
                for e in range(int(starts[rb, i]), int(starts[rb, i + 1])):
                    key, value = exc[rb, e].tolist()
                    kk = key & 0xFFFF
                    if k_begin <= kk < k_end:
                        wv = torch.tensor([value << 16]).to(torch.int32).view(torch.float32).double()  # wraps like the bits
                        part[r] += xs[:, kk] * wv
            total += part
        for thread in range(128):
            warp, lane = thread // 32, thread % 32
            for e in range(4 * nb):
                r = warp * 16 + lane // 4 + (8 if e & 2 else 0)
                token = (e // 4) * 8 + (lane % 4) * 2 + (e & 1)
                if token < m:
                    out[token, tile * 64 + r] = total[r, token]
    return out


@pytest.mark.parametrize("m, splits", [(1, 1), (9, 3), (32, 2)])
def test_emulated_ztma_kernel_computes_the_product(m, splits):
    n, k = 64, 192  # one row tile, 3 K tiles (uneven splits at S = 2)
    w = adversarial_bf16(n, k, m)
    w.view(torch.int16)[torch.isinf(w) | torch.isnan(w)] = 0x3F80  # finite, so the product is comparable
    zt = compress(w, "w", order="wgmma")
    zt = {**zt, "stream": tma_tiles(zt["stream"])}
    assert zt["count"] > 0
    x = torch.randn(m, k, generator=torch.Generator().manual_seed(7)).to(torch.bfloat16)
    got = emulate_ztma_gemv(zt, x, n, k, splits)
    torch.testing.assert_close(got, x.double() @ w.double().t(), rtol=1e-9, atol=1e-9)


def test_dispatch_knows_the_kernels_z_sizes():
    assert dispatch.TMA_Z_TILE_BYTES == 6144 == 4 * 1536
    assert dispatch.TMA_Z_ENTRY_BYTES == 4 * (MAX_EXCEPTIONS_PER_BLOCK * 8 + 17 * 4)
    assert dispatch.tma_exception_bytes(4) == 64 * 32 * 4 + dispatch.TMA_Z_ENTRY_BYTES


def test_tma_config_errors_for_z():
    assert "expected 4 integers" in dispatch.tma_config_error((3, 8, 2), 32, False, 2304, 8192)
    assert "Z=2" in dispatch.tma_config_error((3, 8, 2, 2), 32, False, 2304, 8192)
    assert "never compressed" in dispatch.tma_config_error((4, 8, 1, 1), 32, True, 256, 8192)
    assert dispatch.tma_config_error((3, 8, 2, 1), 32, False, 2304, 8192) is None
    # 16 stages fit compressed (16 x 10 KB + exceptions) but not as the Z = 0 fallback with a C = 1 inbox
    error = dispatch.tma_config_error((16, 16, 1, 1), 32, False, 2304, 8192)
    assert error is not None and "fallback" in error
