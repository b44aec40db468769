"""compressed_ring's operands (kernels_src/compressed_ring.py) are the 12-bit format, losslessly: reading the ring
slots at the kernel's own offsets (compressed_ring.cuh: piece q, group u of a slot at (q G + u) x 1536, part p at
+ 512 p, lane at + 16 lane; the headers after the 4 G pieces) and decoding them with the kernel's recipe
(tests/zdecode_model.py), then adding the per-row overflow list as the kernel's add_overflow does, gives back every
weight's 16 bits, on adversarial matrices; a model of the kernel's arithmetic matches a float64 product."""

import pytest
import torch

from generator.candidates import candidates
from generator.judge.weights import make_weight
from kernels_src.compress import CompressionError, compress
from kernels_src.compressed_ring import (
    COMPRESSED_RING,
    CompressedRingConfig,
    ring_operands,
    ring_overflow,
    ring_slots,
    STAGED_ENTRIES,
    ring_smem,
    slot_bytes,
    wgmma_columns,
)
from kernels_src.engine import Layer
from zdecode_model import apply_patches, decode_stream
from test_compress import SPECIAL_BITS, bf16_of, bits_of, scattered


def read_slots(slots: torch.Tensor, n: int, k: int, groups: int):
    """The stream [N/16, K/64, 3, 32, 16] and headers [N/16, K/64, 4] the kernel reads out of the ring slots, at
    its own offsets."""
    tiles, n_k = n // 64, k // (64 * groups)
    per_slot = slot_bytes(groups)
    s = slots.reshape(tiles, n_k, per_slot)
    stream = torch.empty(n // 16, k // 64, 3, 32, 16, dtype=torch.uint8)
    headers = torch.empty(n // 16, k // 64, 4, dtype=torch.int32)
    for q in range(4):
        for u in range(groups):
            piece = s[:, :, (q * groups + u) * 1536 : (q * groups + u + 1) * 1536]
            at = 4 * groups * 1536 + (q * groups + u) * 16
            header = s[:, :, at : at + 16].contiguous().view(torch.int32)  # [tiles, n_k, 4]
            for p in range(3):
                for lane in range(0, 32, 8):  # lane l's 16 bytes at p * 512 + 16 l
                    chunk = piece[:, :, p * 512 + 16 * lane : p * 512 + 16 * (lane + 8)]
                    stream[q::4, u::groups, p, lane : lane + 8] = chunk.reshape(tiles, n_k, 8, 16)
            headers[q::4, u::groups] = header
    return stream, headers


def wgmma_positions(regs: torch.Tensor, n: int, k: int) -> torch.Tensor:
    """Decoded registers [N/16, K/64, 4 fragments, 32 lanes, 4 regs] as the [N, K] weights wgmma multiplies them
    by (PTX's register fragment of A, m64nNk16, per warp's 16 rows): register j, half h of lane (g, t) in fragment
    f is row g + 8 (j & 1), column 16 f + 2 t + 8 (j >> 1) + h of its 16-row block and K group."""
    out = torch.empty(n, k, dtype=torch.int64)
    for f in range(4):
        for lane in range(32):
            g, t = lane >> 2, lane & 3
            for j in range(4):
                for h in range(2):
                    col = 16 * f + 2 * t + 8 * (j >> 1) + h
                    rows = torch.arange(n // 16) * 16 + g + 8 * (j & 1)
                    value = (regs[:, :, f, lane, j] >> (16 * h)) & 0xFFFF  # [N/16, K/64]
                    out[rows.unsqueeze(1), torch.arange(k // 64) * 64 + col] = value
    return out


def ring_decompress(w: torch.Tensor, groups: int) -> torch.Tensor:
    """The bf16 bits the ring engine's operands stand for, as the kernel meets them: slots read at its offsets,
    decoded and patched, each register put where wgmma takes it; then each overflow entry (row, k | bits << 16)
    put into its place, which must have decoded to 0x0000."""
    n, k = w.shape
    r = ring_operands(w, "w", groups, refuse=False)
    stream, headers = read_slots(r["slots"], n, k, groups)
    bits = wgmma_positions(apply_patches(decode_stream(stream, r["table_words"]), headers), n, k)
    row_starts, rows, entries = r["row_starts"], r["rows"], r["entries"]
    assert int(row_starts[0]) == 0 and int(row_starts[-1]) == entries.numel() == rows.numel()
    counts = (row_starts[1:] - row_starts[:-1]).long()
    assert torch.equal(torch.repeat_interleave(torch.arange(n), counts), rows.long())
    e = entries.to(torch.int64) & 0xFFFFFFFF
    col, value = e & 0xFFFF, e >> 16
    key = rows.to(torch.int64) * k + col
    assert bool((key[1:] > key[:-1]).all()), "entries sorted by row, then k, no repeats"
    assert bool((bits[rows.long(), col] == 0).all()), "an overflow entry whose slot is not +0.0"
    bits[rows.long(), col] = value
    return bits.to(torch.int32).to(torch.int16).view(torch.bfloat16)


@pytest.mark.parametrize("groups", [1, 2])
def test_ring_slots_and_overflow_are_lossless_on_adversarial_weights(groups):
    gen = torch.Generator().manual_seed(31)
    w = (torch.randn(128, 512, generator=gen) * 0.03).to(torch.bfloat16)
    w[16:32, :256] = scattered(16, 256, gen)  # a block of exceptions: patches and a long overflow
    w[70] = (w[70].float() * 2.0**40).to(torch.bfloat16)  # a row of outliers
    specials = torch.tensor(SPECIAL_BITS * (512 // len(SPECIAL_BITS) + 1), dtype=torch.int32)[:512]
    w[101] = bf16_of(specials.tolist())  # NaN payloads, +-inf, +-0, subnormals
    hi = torch.arange(256, dtype=torch.int32).repeat(2)
    w[120, :512] = bf16_of(
        ((hi << 8) | torch.randint(0, 256, (512,), generator=gen)).tolist()
    )  # every hi byte
    assert torch.equal(bits_of(ring_decompress(w, groups)), bits_of(w))


def test_heavy_weights_round_trip_through_the_ring_operands():
    """Exact with the limits lifted; with them, prepare() refuses these weights (their outlier rows put hundreds of
    overflow entries in a tile) and the layer keeps its other engines."""
    w = make_weight(256, 2048, "bfloat16", "heavy", torch.Generator().manual_seed(9), "cpu")
    for groups in (1, 2):
        assert torch.equal(bits_of(ring_decompress(w, groups)), bits_of(w))
    with pytest.raises(CompressionError, match="overflow entries in one 64-row tile"):
        ring_operands(w, "pooler", 2)


def test_every_bf16_bit_pattern_round_trips_through_the_ring():
    w = torch.arange(-32768, 32768, dtype=torch.int32).to(torch.int16).view(torch.bfloat16).reshape(128, 512)
    assert torch.equal(bits_of(ring_decompress(w, 2)), bits_of(w))


def test_the_first_rows_are_a_prefix_of_the_operands():
    """The unpooler's 1024-row slice at m <= 8 reads the first tiles of the same slots and row starts: the
    operands of the matrix's first 64 rows (its first row blocks, with the same table) are their prefixes."""
    gen = torch.Generator().manual_seed(32)
    w = (torch.randn(256, 256, generator=gen) * 0.02).to(torch.bfloat16)
    w[5, 3], w[200, 9] = 1e30, -1e30
    w[40, 100:120] = scattered(1, 20, gen)[0]  # one bucket past its three patches
    z = compress(w)
    groups = 256 // 64
    cut = int(z["overflow_starts"][4 * groups])
    first = dict(z, stream=z["stream"][:4], patches=z["patches"][:4])
    first.update(overflow_starts=z["overflow_starts"][: 4 * groups + 1], overflow=z["overflow"][:cut])
    slots = ring_slots(first, 2)
    assert torch.equal(ring_slots(z, 2)[: slots.numel()], slots)
    starts, rows, entries = ring_overflow(z, 256, 256, wgmma_columns())
    starts64, _, entries64 = ring_overflow(first, 64, 256, wgmma_columns())
    assert entries64.numel() > 3 and torch.equal(starts[:65], starts64)
    assert torch.equal(entries[: entries64.numel()], entries64)


def model_output(w: torch.Tensor, x: torch.Tensor, groups: int) -> torch.Tensor:
    """The kernel's sum in float64: the slots' decoded and patched registers where wgmma takes them, times x, then
    each row's overflow entries in list order (add_overflow)."""
    n, k = w.shape
    r = ring_operands(w, "w", groups, refuse=False)
    stream, headers = read_slots(r["slots"], n, k, groups)
    bits = wgmma_positions(apply_patches(decode_stream(stream, r["table_words"]), headers), n, k)
    streamed = bits.to(torch.int32).to(torch.int16).view(torch.bfloat16).double()
    out = x.double() @ streamed.T
    e = r["entries"].to(torch.int64) & 0xFFFFFFFF
    values = ((e >> 16).to(torch.int32).to(torch.int16)).view(torch.bfloat16).double()
    for j in range(e.numel()):
        out[:, int(r["rows"][j])] += values[j] * x[:, int(e[j] & 0xFFFF)].double()
    return out


def test_the_kernel_arithmetic_matches_float64_on_heavy_weights():
    gen = torch.Generator().manual_seed(33)
    w = make_weight(128, 1024, "bfloat16", "heavy", gen, "cpu")
    x = torch.randn(17, 1024, generator=gen).to(torch.bfloat16)
    ref = x.double() @ w.double().T
    for groups in (1, 2):
        out = model_output(w, x, groups)
        assert torch.allclose(out, ref, rtol=1e-12, atol=1e-9 * float(ref.abs().max()))


def test_the_rule_counts_the_ring_and_refuses_in_one_line():
    unpooler = Layer("unpooler", 8192, 4096, "bfloat16", 1024, 8)
    router = Layer("router", 256, 8192, "float32")
    ok = CompressedRingConfig(stages=8, warpgroups=4, groups=2)
    assert COMPRESSED_RING.config_error(ok, unpooler, 32) is None
    assert "never compressed" in COMPRESSED_RING.config_error(ok, router, 16)
    wrong = CompressedRingConfig(stages=6, warpgroups=4, groups=2)
    assert "multiple of warpgroups=4" in COMPRESSED_RING.config_error(wrong, unpooler, 16)
    big = CompressedRingConfig(stages=16, warpgroups=4, groups=2)
    assert "bytes of shared memory" in COMPRESSED_RING.config_error(big, unpooler, 32)
    wide = Layer("wide", 256, 1 << 17, "bfloat16")
    assert "K <= 65536" in COMPRESSED_RING.config_error(ok, wide, 16)  # an entry's k is 16 bits
    # the ring and StagedOverflow (4 + 69 bytes an entry; compressed_ring.cuh asserts its layout fits the sum)
    assert ring_smem(ok, 4) == 8 * (13312 + 2 * 4096) + 4 + 69 * STAGED_ENTRIES + 1024
    # what sweep times at m = 32: every depth that fits, 1 / 2 / 4 warpgroups, 1 or 2 groups a slot
    got = {tuple(c) for c in candidates(COMPRESSED_RING, unpooler, 32)}
    assert (8, 4, 2) in got and (16, 4, 1) in got and (12, 4, 2) not in got and (6, 4, 1) not in got
    assert len(got) == 28


def test_a_tile_past_the_staging_is_refused_and_the_layer_keeps_its_other_engines(capsys):
    """More overflow entries in one 64-row tile than a CTA stages: ring_operands refuses in one line, and
    prepare()'s routing (runtime.layer_routes) sends the layer's m's elsewhere and says why; with normal weights
    the same layer stays on the ring."""
    from kernels_src import runtime
    from kernels_src.compressed_gemv import CompressedGemvConfig
    from generator.problem import load_problem
    from generator.tables import load_tables

    zgemv = CompressedGemvConfig(warps=8, splits=1, groups=1, pipeline="batch", row_blocks=1, reduce="none")
    tables = tuple(  # the register GEMV at m <= 8 beside the ring
        t._replace(entries=t.entries | {("unpooler", 8): zgemv}) if t.engine.name == "compressed_gemv" else t
        for t in load_tables(load_problem())
    )
    layer = Layer("unpooler", 256, 1024, "bfloat16")
    gen = torch.Generator().manual_seed(34)
    w = (torch.randn(256, 1024, generator=gen) / 32).to(torch.bfloat16)
    assert ring_operands(w, "unpooler", 2)["entries"].numel() <= STAGED_ENTRIES

    def routes(weight):
        state = runtime.Prepared(32)
        state.parts[layer.name], state.operands[layer.name] = (weight,), {}
        return state, runtime.layer_routes(state, layer, tables)

    state, out = routes(w)
    assert out[16][0] is COMPRESSED_RING and out[32][0] is COMPRESSED_RING and not state.refused
    assert out[8][0].name == "compressed_gemv"
    w[70] = scattered(1, 1024, gen)[0]  # a row of ~120 rare hi bytes: hundreds of overflow entries in tile 1
    with pytest.raises(CompressionError) as refused:
        ring_operands(w, "unpooler", 2)
    assert str(refused.value).startswith("unpooler: ") and "\n" not in str(refused.value)
    assert "overflow entries in one 64-row tile, over the 64" in str(refused.value)
    state, out = routes(w)
    assert out[16][0].name == "tma_gemv" and out[32][0].name == "tma_gemv"
    assert out[8][0].name == "compressed_gemv"  # only the engine that refused is passed over
    assert "over the 64 compressed_ring stages" in state.refused["unpooler"]
    assert capsys.readouterr().out.count("\n") == 1  # prepare() says it in one line


def test_the_table_words_become_the_launchers_two_signed_scalars():
    from kernels_src.compress import table_scalars

    words = (0x3C3B3A00, 0xBC3D3E3F, 0xFFFFFFFF, 0x80000001)
    lo, hi = table_scalars(words)
    assert lo == (0x3C3B3A00 | 0xBC3D3E3F << 32) - (1 << 64) and hi == (0xFFFFFFFF | 0x80000001 << 32) - (
        1 << 64
    )
    assert all(-(1 << 63) <= v < 1 << 63 for v in (lo, hi))
    assert table_scalars((1, 2, 3, 4)) == (1 | 2 << 32, 3 | 4 << 32)
