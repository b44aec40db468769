"""The fragment packing, proven on the CPU: emulate how mma.sync.m16n8k16 consumes per-lane registers (PTX ISA
fragment layouts) and check that packed weights x the kernel's x fragments give W @ x^T."""

import pytest
import torch

from kernels_src.packing import (
    pack_mma_a,
    pack_tma_bulk,
    pack_tma_half_bulk,
    pack_tma_half_tiles,
    pack_tma_tiles,
    split_hi_lo,
    swizzle_128b,
)


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


# ---- the TMA GEMV (kernels_src/tma_gemv.cuh): tile packing, box addressing, K splits, accumulator layout


def tma_accumulator_coords(thread, e):
    """(row in the 64-row tile, token) of consumer thread `thread`'s accumulator e: the wgmma D layout for
    m64nNk16 (warp w owns rows 16w..16w+15, each 8-token block laid out like mma.sync's C), as tma_write maps it.
    """
    warp, lane = thread // 32, thread % 32
    return warp * 16 + lane // 4 + (8 if e & 2 else 0), (e // 4) * 8 + (lane % 4) * 2 + (e & 1)


def sw128_read(slot):
    """The [64, 64] tile a wgmma 128-byte-swizzle descriptor reads from a 1024-byte-aligned 8 KB slot holding
    `slot` (4096 bf16 as copied): logical byte b of row-major [64 x 128 B] sits at physical byte
    b XOR (((b >> 7) & 7) << 4), address bits 4-6 XOR bits 7-9 (PTX ISA, the 128B swizzling mode)."""
    logical = torch.arange(4096) * 2
    physical = logical ^ (((logical >> 7) & 7) << 4)
    return slot[physical // 2].reshape(64, 64)


def padded_x(x):
    """(m, NB, x as the kernel's boxes see it): NB column blocks of 8 tokens, rows m..8 NB - 1 zero (TMA's
    out-of-bounds fill)."""
    m = x.shape[0]
    nb = 1 if m <= 8 else 2 if m <= 16 else 4
    xs = torch.zeros(8 * nb, x.shape[1])
    xs[:m] = x.float()
    return m, nb, xs


def emulate_tma_gemv(operand, x, n, k, s_splits):
    """What the TMA GEMV computes, from the kernel's own index formulas: CTA (tile, split) bulk-copies the 8 KB
    block (tile * K/64 + kt) of the packed operand into a ring slot, which wgmma reads through the 128-byte
    swizzle, and x's 64-wide boxes (rows >= m are zeros), for kt in its uneven share of the K tiles; the split
    partials are summed in split order; each consumer thread writes its accumulators to out[token, row]."""
    m, nb, xs = padded_x(x)
    k_tiles = k // 64
    blocks = operand.float().reshape(-1, 4096)  # one bulk copy each
    out = torch.full((m, n), float("nan"))
    covered = torch.zeros(n // 64, k_tiles, dtype=torch.int64)
    for tile in range(n // 64):
        total = torch.zeros(64, 8 * nb)
        for split in range(s_splits):
            kt0 = split * k_tiles // s_splits
            kt1 = (split + 1) * k_tiles // s_splits
            part = torch.zeros(64, 8 * nb)
            for kt in range(kt0, kt1):
                covered[tile, kt] += 1
                a_tile = sw128_read(blocks[tile * k_tiles + kt])
                part += a_tile @ xs[:, kt * 64 : kt * 64 + 64].t()
            total += part
        for thread in range(128):
            for e in range(4 * nb):
                r, token = tma_accumulator_coords(thread, e)
                if token < m:
                    out[token, tile * 64 + r] = total[r, token]
    assert torch.equal(covered, torch.ones_like(covered)), "every K tile exactly once per row tile"
    return out


@pytest.mark.parametrize("m, splits", [(1, 1), (5, 3), (9, 2), (16, 5), (17, 1), (32, 4)])
def test_tma_tiles_reproduce_the_product(m, splits):
    n, k = 128, 320  # 2 row tiles, 5 K tiles: splits of 5 K tiles in 3 or 4 are uneven
    gen = torch.Generator().manual_seed(m)
    w = torch.randn(n, k, generator=gen).to(torch.bfloat16)
    x = torch.randn(m, k, generator=gen).to(torch.bfloat16)
    got = emulate_tma_gemv(pack_tma_bulk(w), x, n, k, splits)
    torch.testing.assert_close(got, x.float() @ w.float().t(), rtol=1e-5, atol=1e-4)


def test_tma_tiles_are_a_permutation_with_row_tiles_outermost():
    n, k = 128, 192
    w = torch.arange(n * k, dtype=torch.float32).reshape(n, k)
    tiles = pack_tma_tiles(w)
    assert sorted(tiles.flatten().tolist()) == list(range(n * k))
    assert torch.equal(tiles[1, 2], w[64:128, 128:192])  # tile (t, kt) is one contiguous 64 x 64 block
    assert torch.equal(tiles.flatten()[: 64 * k], pack_tma_tiles(w[:64].contiguous()).flatten())


def test_swizzle_128b_is_the_address_swizzle_and_an_involution():
    """swizzle_128b's chunk formula against the address-bit rule (sw128_read), element by element."""
    tiles = torch.randn(3, 64, 64).to(torch.bfloat16)
    stored = swizzle_128b(tiles)
    for t in range(3):
        assert torch.equal(sw128_read(stored[t].flatten()), tiles[t])
    assert not torch.equal(stored, tiles)
    assert torch.equal(swizzle_128b(stored), tiles)


def test_swizzle_128b_rejects_other_tile_shapes():
    with pytest.raises(ValueError, match=r"\[64, 64\]"):
        swizzle_128b(torch.zeros(64, 32, dtype=torch.bfloat16))


def test_tma_accumulators_cover_the_tile_once():
    seen = [tma_accumulator_coords(t, e) for t in range(128) for e in range(16)]
    assert sorted(seen) == [(r, c) for r in range(64) for c in range(32)]


def test_pack_tma_rejects_unaligned_shapes():
    with pytest.raises(ValueError, match="N % 64"):
        pack_tma_tiles(torch.zeros(96, 64, dtype=torch.bfloat16))


def emulate_tma_half_tiles(operand, x, n, k):
    """What C = 3 computes, from tma_gemv.cuh's formulas: CTA `tile` (32 rows) copies block tile * K/128 + i into
    a slot, which the wgmma reads as one 64 x 64 A tile through the 128-byte swizzle; x's boxes at K 128 i and
    128 i + 64 lie one after the other as one B of 16 NB token rows (box 1's 8 NB, then box 2's), so one D of
    N = 16 NB holds both sets: thread t's acc[e] is box 1's, acc[4 NB + e] box 2's. Thread t < 64 writes acc[e]
    plus thread t + 64's acc[4 NB + e] (32 D rows further down, 8 NB columns over) to out[token, 32 tile + row].
    """
    m, nb, xs = padded_x(x)
    slots = k // 128
    blocks = operand.float().reshape(-1, 4096)
    out = torch.full((m, n), float("nan"))
    for tile in range(n // 32):
        d = torch.zeros(64, 16 * nb)
        for i in range(slots):
            a_tile = sw128_read(blocks[tile * slots + i])
            b = torch.cat([xs[:, 128 * i : 128 * i + 64], xs[:, 128 * i + 64 : 128 * i + 128]])  # [16 NB, 64]
            d += a_tile @ b.t()
        for thread in range(64):
            for e in range(4 * nb):
                r, token = tma_accumulator_coords(thread, e)
                r2, col2 = tma_accumulator_coords(thread + 64, 4 * nb + e)
                assert (r2, col2) == (r + 32, 8 * nb + token)  # the fold pairs the same output element
                if token < m:
                    out[token, tile * 32 + r] = d[r, token] + d[r2, col2]
    return out


@pytest.mark.parametrize("m", [1, 5, 9, 16, 17, 32])
def test_tma_half_tiles_reproduce_the_product(m):
    n, k = 96, 384  # 3 row groups of 32, 3 slots of 128
    gen = torch.Generator().manual_seed(100 + m)
    w = torch.randn(n, k, generator=gen).to(torch.bfloat16)
    x = torch.randn(m, k, generator=gen).to(torch.bfloat16)
    got = emulate_tma_half_tiles(pack_tma_half_bulk(w), x, n, k)
    torch.testing.assert_close(got, x.float() @ w.float().t(), rtol=1e-5, atol=1e-4)


def test_tma_half_tiles_stack_the_two_k_halves_and_keep_row_groups_outermost():
    n, k = 64, 256
    w = torch.arange(n * k, dtype=torch.float32).reshape(n, k)
    tiles = pack_tma_half_tiles(w)
    assert tiles.shape == (2, 2, 64, 64)
    assert sorted(tiles.flatten().tolist()) == list(range(n * k))
    assert torch.equal(tiles[1, 1, :32], w[32:64, 128:192])  # upper half: K [128 kb, 128 kb + 64)
    assert torch.equal(tiles[1, 1, 32:], w[32:64, 192:256])  # lower half: the next 64 of K, same rows
    assert torch.equal(tiles.flatten()[: 32 * k], pack_tma_half_tiles(w[:32].contiguous()).flatten())
    with pytest.raises(ValueError, match="K % 128"):
        pack_tma_half_tiles(torch.zeros(32, 64, dtype=torch.bfloat16))


def emulate_tma_cluster_reduction(partials):
    """C = 2 (scattered) as tma_gemv.cuh does it, from its formulas: partials[r][t] = consumer thread t's kAcc
    accumulators on rank r. Thread t belongs to rank owner(t) = ((t + 1) S - 1) // 128, which owns
    [128 r // S, 128 (r+1) // S); every other rank pushes t's accumulators into the owner's inbox slot (its rank,
    skipping the owner's), at float ((slot * owned + t - from) * kAcc); the owner sums the S partials in rank
    order. Returns the summed [128, kAcc] tile and, per rank, how many inbox floats were written (each at most
    once)."""
    s_splits, _, k_acc = partials.shape
    inbox_floats = (s_splits - 1) * -(-128 // s_splits) * k_acc  # the inbox of tma_gemv.py smem_bytes, / 4
    inboxes = torch.full((s_splits, inbox_floats), float("nan"), dtype=partials.dtype)
    written = torch.zeros(s_splits, inbox_floats, dtype=torch.int64)

    def owner_and_offset(t, sender):
        """(owner of thread t, where sender's accumulators of t sit in the owner's inbox)."""
        owner = ((t + 1) * s_splits - 1) // 128
        start, owned = 128 * owner // s_splits, 128 * (owner + 1) // s_splits - 128 * owner // s_splits
        assert start <= t < start + owned
        slot = sender if sender < owner else sender - 1
        return owner, (slot * owned + (t - start)) * k_acc

    for rank in range(s_splits):
        for t in range(128):
            owner, at = owner_and_offset(t, rank)
            if owner != rank:
                inboxes[owner, at : at + k_acc] = partials[rank, t]
                written[owner, at : at + k_acc] += 1
    out = torch.full((128, k_acc), float("nan"), dtype=partials.dtype)
    for t in range(128):
        total = torch.zeros(k_acc, dtype=partials.dtype)
        for r in range(s_splits):
            owner, at = owner_and_offset(t, r)
            total += partials[r, t] if r == owner else inboxes[owner, at : at + k_acc]
        out[t] = total
    assert int(written.max()) <= 1, "two pushes into one inbox float"
    return out, written.sum(dim=1)


@pytest.mark.parametrize("s_splits", [2, 3, 5, 7, 12, 16])
def test_tma_cluster_reduction_sums_every_thread_once_in_rank_order(s_splits):
    for nb in (1, 4):
        partials = torch.randn(s_splits, 128, 4 * nb, dtype=torch.float64)
        out, received = emulate_tma_cluster_reduction(partials)
        expected = torch.zeros(128, 4 * nb, dtype=torch.float64)
        for r in range(s_splits):
            expected += partials[r]
        assert torch.equal(out, expected)  # the same additions in the same order: bit for bit
        for rank in range(s_splits):  # what open_inbox arms: S - 1 partials of the threads the rank owns
            owned = 128 * (rank + 1) // s_splits - 128 * rank // s_splits
            assert int(received[rank]) == (s_splits - 1) * owned * 4 * nb
