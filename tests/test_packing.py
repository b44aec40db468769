"""The fragment packing, proven on the CPU: emulate how mma.sync.m16n8k16 consumes per-lane registers (PTX ISA
fragment layouts) and check that packed weights x the kernel's x fragments give W @ x^T."""

import pytest
import torch

from kernels_src.packing import pack_mma_a, split_hi_lo


def a_fragment_coords(lane, reg, half):
    """(row, col) of A (16x16) held by `lane`, register `reg` (0..3), element `half` (0, 1): PTX ISA layout."""
    g, t = lane // 4, lane % 4
    row = g + 8 * (reg % 2)
    col = 2 * t + half + 8 * (reg // 2)
    return row, col


def b_fragment_coords(lane, reg, half):
    """(k, n) of B (16x8) held by `lane`, register `reg` (0, 1), element `half`."""
    g, t = lane // 4, lane % 4
    return 2 * t + half + 8 * reg, g


def c_fragment_coords(lane, index):
    """(row, col) of C/D (16x8) for accumulator element `index` (0..3)."""
    g, t = lane // 4, lane % 4
    return g + 8 * (index // 2), 2 * t + index % 2


def emulate_gemv(packed, x, n, k):
    """What the kernel computes: per row block and K block, two mma steps whose A comes from the packed lanes'
    16 bytes and whose B comes from each lane's 16-byte x load (x[token g][32 kb + 8 t .. + 7])."""
    m = x.shape[0]
    frags = packed.float().reshape(n // 16, k // 32, 2, 32, 8)  # rb, kb, step, lane, 8 values
    xs = torch.zeros(8 * ((m + 7) // 8), k)
    xs[:m] = x.float()
    out = torch.zeros(xs.shape[0], n)
    for rb in range(n // 16):
        for nb in range(xs.shape[0] // 8):
            acc = torch.zeros(16, 8)
            for kb in range(k // 32):
                for step in range(2):
                    a = torch.zeros(16, 16)
                    b = torch.zeros(16, 8)
                    for lane in range(32):
                        g, t = lane // 4, lane % 4
                        for reg in range(4):
                            for half in range(2):
                                a[a_fragment_coords(lane, reg, half)] = frags[
                                    rb, kb, step, lane, 2 * reg + half
                                ]
                        lane_x = xs[nb * 8 + g, kb * 32 + 8 * t : kb * 32 + 8 * t + 8]
                        for reg in range(2):  # step s uses x elements 4s .. 4s+3 (registers 2s, 2s+1)
                            for half in range(2):
                                b[b_fragment_coords(lane, reg, half)] = lane_x[4 * step + 2 * reg + half]
                    acc += a @ b
            for lane in range(32):
                for index in range(4):
                    r, c = c_fragment_coords(lane, index)
                    out[nb * 8 + c, rb * 16 + r] = acc[r, c]
    return out[:m]


@pytest.mark.parametrize("m", [1, 5, 8, 13])
def test_packed_fragments_reproduce_the_product(m):
    n, k = 32, 64
    gen = torch.Generator().manual_seed(m)
    w = torch.randn(n, k, generator=gen).to(torch.bfloat16)
    x = torch.randn(m, k, generator=gen).to(torch.bfloat16)
    got = emulate_gemv(pack_mma_a(w), x, n, k)
    want = x.float() @ w.float().t()
    torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-5)


def test_distinct_weights_land_in_distinct_slots():
    """A permutation, not just a matching sum: every weight appears exactly once in the packed order."""
    n, k = 32, 64
    w = torch.arange(n * k, dtype=torch.float32).reshape(n, k)  # exact in fp32, stands in for bf16 indices
    packed = pack_mma_a(w)
    assert sorted(packed.tolist()) == list(range(n * k))


def test_slice_of_rows_is_a_prefix():
    w = torch.randn(64, 64).to(torch.bfloat16)
    assert torch.equal(pack_mma_a(w)[: 32 * 64], pack_mma_a(w[:32].contiguous()))


def test_pack_rejects_unaligned_shapes():
    with pytest.raises(ValueError, match="N % 16"):
        pack_mma_a(torch.zeros(24, 64, dtype=torch.bfloat16))


def test_hi_lo_split_is_accurate_to_2_pow_16():
    gen = torch.Generator().manual_seed(0)
    w = torch.randn(64, 256, generator=gen) * torch.logspace(-6, 3, 256)
    hi, lo = split_hi_lo(w)
    assert hi.dtype == lo.dtype == torch.bfloat16
    rel = ((hi.double() + lo.double()) - w.double()).abs() / w.double().abs()
    assert float(rel.max()) <= 2.0**-16
