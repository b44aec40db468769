"""The 12-bit format (kernels_src/compress.py) is lossless: decoding with the kernel's own recipe (an integer model of
prmt.b32) gives back every weight's 16 bits, on adversarial matrices as well as Gaussian and heavy-tailed ones; the
CPU model of the kernel's overflow pass adds every entry once, in its CTA's K range, against a float64 product;
only a matrix whose whole format does not pay is refused."""

import math

import pytest
import torch

import kernels_src.compress as compress_mod
from generator.compression import format_report, report
from generator.judge.weights import make_weight
from generator.problem import load_problem
from kernels_src.compress import (
    MAX_BITS_PER_WEIGHT,
    PATCHES_PER_GROUP,
    CompressionError,
    _fragments,
    compress,
    footprint,
    hi_byte_table,
    unfragment,
)
from kernels_src.packing import pack_mma_a
from zdecode_model import apply_patches, decode_stream, decompress, overflow_pass_model, prmt, zgemv_model

UNLIMITED = math.inf  # max_bits_per_weight that refuses nothing: losslessness alone


def bits_of(w):
    return w.view(torch.int16)


def scattered(rows, k, gen):
    """Weights spread over 2^40 .. 2^100: some 120 sign/exponent bytes, each too rare to make the table."""
    exponent = torch.randint(40, 100, (rows, k), generator=gen).float()
    return (torch.randn(rows, k, generator=gen) * torch.exp2(exponent)).to(torch.bfloat16)


def few_hi_bytes(rows, k, gen):
    """Magnitudes in [0.5, 128): 8 exponents, 4 hi bytes a sign, so the table holds them all."""
    mags = torch.tensor([0.5, 1.0, 2.0, 4.0, 8.0, 16.0, 32.0, 64.0])
    w = mags[torch.randint(0, 8, (rows, k), generator=gen)] * torch.sign(torch.randn(rows, k, generator=gen))
    return (w * (1 + torch.rand(rows, k, generator=gen))).to(torch.bfloat16)


def four_plus_one_exceptions():
    """A 16 x 128 block whose table is full and which has five weights outside it: four in K group 0, one in
    group 1 (row, col, value in `outside`)."""
    w = few_hi_bytes(16, 128, torch.Generator().manual_seed(6))  # 8 hi bytes, each frequent
    for i in range(7):  # 7 more hi bytes (2^-20 .. 2^-32), 3 each: the table's 15 are now full
        w[12:15, 100 + i] = 2.0 ** (-20 - 2 * i)
    outside = [(0, 5, 1e30), (3, 9, -1e30), (7, 60, 2e30), (9, 2, -3e30), (2, 70, 4e30)]
    for row, col, v in outside:
        w[row, col] = v
    return w, outside


def assert_lossless(w, max_bits=None, **kwargs):
    z = compress(w, max_bits_per_weight=max_bits, **kwargs)
    back = decompress(z, *w.shape)
    assert torch.equal(bits_of(back), bits_of(w))  # bit for bit: NaN payloads and -0.0 included
    return z


def test_prmt_model_follows_the_ptx_byte_permute():
    a, b = torch.tensor(0x33221100), torch.tensor(0x77665544)
    assert int(prmt(a, b, torch.tensor(0x3210))) == 0x33221100
    assert int(prmt(a, b, torch.tensor(0x7654))) == 0x77665544
    assert int(prmt(a, b, torch.tensor(0x5140))) == 0x55114400  # interleave: what the decoder uses
    # bit 3 of a selector nibble: the selected byte's sign bit fills the byte
    assert int(prmt(torch.tensor(0x00008000), b, torch.tensor(0x0009))) == 0x000000FF
    assert int(prmt(torch.tensor(0x00007F00), b, torch.tensor(0x0009))) == 0x00000000


def test_gaussian_weights_round_trip_with_few_exceptions():
    gen = torch.Generator().manual_seed(0)
    w = (torch.randn(64, 512, generator=gen) / 512**0.5).to(torch.bfloat16)
    z = assert_lossless(w)
    assert z["count"] < 0.005 * w.numel()
    assert z["stream"].numel() * 8 == 12 * w.numel()  # 12 bits a weight, nothing else in the stream


def test_specials_in_one_block_round_trip():
    gen = torch.Generator().manual_seed(1)
    w = (torch.randn(16, 128, generator=gen) * 0.02).to(torch.bfloat16)
    specials = [float("nan"), float("inf"), float("-inf"), -0.0, 0.0, 1e38, -1e-38, 9.2e-41, 3.0e38]
    for i, v in enumerate(specials):
        w[i, 7 * i] = v
    bits = bits_of(w)
    bits[15, 127] = 0x7FC1  # a NaN with a payload
    bits[14, 126] = -0x7F3F  # 0x80C1: a negative NaN-free pattern far outside the table
    assert_lossless(w)


def test_every_bf16_bit_pattern_round_trips():
    # 65536 patterns have 256 hi bytes, so most are exceptions: lift the refusal rule to test exactness alone
    w = torch.arange(-32768, 32768, dtype=torch.int32).to(torch.int16).view(torch.bfloat16).reshape(256, 256)
    z = assert_lossless(w, UNLIMITED)
    # each hi byte heads 256 patterns; the table's 16 distinct bytes are served by the stream, the rest are not
    assert len(set(z["table"].tolist())) == 16 and z["count"] == 65536 - 16 * 256


def test_an_all_exception_block_round_trips():
    gen = torch.Generator().manual_seed(2)
    w = (torch.randn(48, 128, generator=gen) * 0.05).to(torch.bfloat16)
    w[16:32] = scattered(16, 128, gen)
    z = assert_lossless(w, UNLIMITED)  # a third of this small matrix is exceptions: ~23 bits a weight
    # most of the middle block (a few of its bytes make the table): 3 patched a K group, the rest overflow
    assert int(z["patches"][1, :, 0].sum()) == 2 * PATCHES_PER_GROUP and z["overflow"].numel() > 1500
    starts = z["overflow_starts"]
    assert int(starts[4] - starts[2]) > 1500  # row block 1's two buckets (bucket b = 2 rb + g)


def test_at_most_16_hi_bytes_means_no_exceptions():
    z = assert_lossless(few_hi_bytes(32, 128, torch.Generator().manual_seed(3)))
    assert z["count"] == 0 and int(z["patches"][..., 0].sum()) == 0
    assert z["overflow"].numel() == 0  # n_overflow = 0: the kernel stages nothing and skips its overflow pass
    assert z["overflow_starts"].shape == (2 * 2 + 1,) and int(z["overflow_starts"].abs().sum()) == 0


def test_table_is_zero_then_most_frequent():
    bits = torch.tensor([0x3F00] * 5 + [0xBF00] * 3 + [0x4000] * 3 + [0x0001] * 9, dtype=torch.int32)
    table = hi_byte_table(bits).tolist()
    assert table[:4] == [0x00, 0x3F, 0x40, 0xBF]  # 0x00 fixed; then by count, ties by byte
    assert table[4:] == [0] * 12


def test_decoded_registers_are_the_plain_packing():
    """Where there are no exceptions, the decoder's registers are exactly pack_mma_a's bytes: the same fragment
    order, so the compressed kernel can reuse the plain GEMV's x operand and reduction unchanged."""
    w = few_hi_bytes(32, 256, torch.Generator().manual_seed(4))
    z = compress(w)
    assert z["count"] == 0
    regs = decode_stream(z["stream"], z["table_words"])  # [RB, G, 4, 32, 4] uint32
    words = pack_mma_a(w).view(torch.int32).to(torch.int64) & 0xFFFFFFFF  # two bf16 per word, low first
    assert torch.equal(regs.reshape(-1), words)


def test_a_matrix_that_does_not_pay_is_refused_in_one_line():
    """Half of this matrix is exceptions: ~28 bits a weight, more than bf16's 16."""
    gen = torch.Generator().manual_seed(5)
    w = (torch.randn(32, 1024, generator=gen) * 0.05).to(torch.bfloat16)
    w[16:32] = scattered(16, 1024, gen)
    with pytest.raises(CompressionError) as info:
        compress(w, "pooler")
    message = str(info.value)
    bits = report(w, "pooler")["bits"]["total"]
    assert bits > 16
    assert "\n" not in message
    assert message.startswith(f"pooler: {bits:.2f} bits per weight") and "plain GEMV" in message
    assert report(w, "pooler")["refused"]


@pytest.mark.parametrize(
    "w, expected",
    [
        (torch.zeros(16, 64), "expected a 2-D bfloat16 matrix"),
        (torch.zeros(16, 64, 2, dtype=torch.bfloat16), "expected a 2-D bfloat16 matrix"),
        (torch.zeros(24, 64, dtype=torch.bfloat16), "needs N % 16 == 0 and K % 64 == 0"),
        (torch.zeros(16, 96, dtype=torch.bfloat16), "needs N % 16 == 0 and K % 64 == 0"),
    ],
)
def test_wrong_inputs_are_refused(w, expected):
    with pytest.raises(CompressionError, match=expected):
        compress(w, "o")


def test_unfragment_inverts_the_fragment_order():
    idx = torch.arange(32 * 128, dtype=torch.int32).reshape(32, 128)
    # _fragments works on 16-bit values: the index mod 2^16 is enough to see every position
    assert torch.equal(unfragment(_fragments(idx), 32, 128), idx & 0xFFFF)


def test_a_groups_first_three_exceptions_are_patches_and_the_rest_overflow():
    """The fourth exception of a K group and later ones go to the overflow table; the first three are patch
    words, each restoring exactly one decoded register half (the kernel ORs them in: tests/zdecode_model.py).
    """
    w, outside = four_plus_one_exceptions()
    z = assert_lossless(w)
    assert z["count"] == 5 and z["patches"][0, :, 0].tolist() == [3, 1]
    assert z["overflow"].numel() == 1 and z["overflow_starts"].tolist() == [0, 1, 1]  # bucket (0, 0) holds it
    regs = decode_stream(z["stream"], z["table_words"])
    patched = apply_patches(regs, z["patches"])
    assert int((patched != regs).sum()) == 4
    words = [int(v) for v in z["patches"][0, 0, 1:].tolist() + z["patches"][0, 1, 1:2].tolist()]
    assert all(0 <= p < 1 << 26 for p in words)  # lane, fragment, element and 16 bits: 26 bits
    assert {p >> 10 for p in words} <= {
        int(b) & 0xFFFF for b in bits_of(w[[r for r, _, _ in outside], :]).flatten()
    }


def test_gaussian_weights_leave_the_overflow_nearly_empty():
    """The premise of the patches: at the judge's kind of weights (0.02-0.03 % exceptions) a K group has far fewer
    than four, so the pass after the main loop has (almost) nothing to do."""
    gen = torch.Generator().manual_seed(7)
    w = (torch.randn(256, 1024, generator=gen) * 0.02).to(torch.bfloat16)
    z = assert_lossless(w)
    overflow = z["overflow"].numel()
    assert z["count"] > 0 and overflow <= 0.01 * z["count"]


@pytest.mark.parametrize("limit", [0, 1, 2, 3])
def test_fewer_patches_a_group_move_the_rest_to_the_overflow_and_stay_lossless(limit):
    """patches_per_group (ztable.yaml's per-layer `patches`): a group's header carries its first `limit`
    exceptions, every other one is in the overflow table; lossless at every limit, on a group of 4 + 1 exceptions
    and on scattered weights where most weights are exceptions."""
    w, _ = four_plus_one_exceptions()
    z = compress(w, "w", patches_per_group=limit)
    assert z["patches"][0, :, 0].tolist() == [min(4, limit), min(1, limit)]
    assert z["overflow"].numel() == 5 - min(4, limit) - min(1, limit)
    assert torch.equal(bits_of(decompress(z, 16, 128)), bits_of(w))
    s = scattered(32, 256, torch.Generator().manual_seed(9))
    z = compress(
        s, "s", patches_per_group=limit, max_bits_per_weight=UNLIMITED
    )  # most weights are exceptions
    assert torch.equal(bits_of(decompress(z, 32, 256)), bits_of(s))


def test_a_patch_count_out_of_range_is_one_clear_line():
    w = torch.zeros(16, 64, dtype=torch.bfloat16)
    with pytest.raises(CompressionError, match=r"^o: patches_per_group must be 0\.\.3, got 4$"):
        compress(w, "o", patches_per_group=4)


# Bit patterns the format must carry through exactly: NaNs with several payloads and both signs (quiet and
# signalling), infinities, signed zeros, subnormals, the extremes of the normal range.
SPECIAL_BITS = [
    0x7FC0,
    0x7FC1,
    0x7FFF,
    0x7F81,
    0xFFC0,
    0xFFFF,
    0xFF81,  # NaNs
    0x7F80,
    0xFF80,  # +-inf
    0x0000,
    0x8000,  # +-0
    0x0001,
    0x007F,
    0x8001,
    0x8040,  # subnormals
    0x0080,
    0x7F7F,
    0xFF7F,  # smallest normal, +-largest finite
]


def bf16_of(bits):
    return torch.tensor(bits, dtype=torch.int32).to(torch.int16).view(torch.bfloat16)


def assert_model_matches_float64(z, w, m, S, R, NW, n=None, gen=None):
    """The CPU model of the kernel (main loop + overflow pass) against float64 x . W[:n]^T, on finite weights:
    bf16 products are exact in float64, so only the sums' rounding may differ."""
    n = w.shape[0] if n is None else n
    gen = gen or torch.Generator().manual_seed(m + 100 * S + 10 * R + NW)
    x = torch.randn(m, w.shape[1], generator=gen).to(torch.bfloat16)
    trace = []
    got = zgemv_model(z, x, n, w.shape[1], S=S, R=R, NW=NW, trace=trace)
    ref = x.to(torch.float64) @ w[:n].to(torch.float64).T
    scale = x.to(torch.float64).abs() @ w[:n].to(torch.float64).abs().T
    assert bool(((got - ref).abs() <= 1e-12 * scale + 1e-300).all()), (m, S, R, NW)
    return trace


def test_special_values_round_trip_through_patches_and_overflow():
    """Every special pattern, spread thinly (each its own patch) and packed 18 to a K group (most of them in the
    overflow), on top of Gaussian weights."""
    w = few_hi_bytes(64, 256, torch.Generator().manual_seed(21))  # ~10 frequent hi bytes
    for i in range(7):  # and 7 more, 64 each: the specials' bytes (at most 18 each) stay out of the table
        w[48:64, 10 * i : 10 * i + 4] = 2.0 ** (-20 - 2 * i)
    for i, b in enumerate(SPECIAL_BITS):
        w[3 + (i % 5), 64 + 7 * i] = bf16_of([b])[0]  # group 1 of row block 0: 18 in one bucket
        w[17 + i, 131 + i] = bf16_of([b])[0]  # row block 1, group 2: one a row
        w[32 + (i % 16), 192 + (3 * i) % 64] = bf16_of([b])[0]  # row block 2, group 3
    z = assert_lossless(w)
    # hi byte 0x00 (+0, the positive subnormals, the smallest normal) is the table's: the other 14 are exceptions
    assert z["overflow"].numel() >= 2 * (14 - PATCHES_PER_GROUP)
    # a block made only of specials, every lo byte of them
    bits = torch.tensor(SPECIAL_BITS * 57, dtype=torch.int32)[: 16 * 64].reshape(16, 64)
    assert_lossless(bf16_of(bits.tolist()), UNLIMITED)


def test_every_high_byte_in_one_row_block_round_trips():
    """All 256 sign/exponent bytes, with random lo bytes, in one 16-row block of an otherwise Gaussian matrix."""
    gen = torch.Generator().manual_seed(22)
    w = (torch.randn(64, 1024, generator=gen) * 0.03).to(torch.bfloat16)
    hi = torch.arange(256, dtype=torch.int32).repeat(16 * 1024 // 256)[
        torch.randperm(16 * 1024, generator=gen)
    ]
    lo = torch.randint(0, 256, (16 * 1024,), generator=gen, dtype=torch.int32)
    w[16:32] = bf16_of(((hi << 8) | lo).reshape(16, 1024).tolist())
    z = assert_lossless(w, UNLIMITED)
    assert len(set(((bits_of(w).to(torch.int32) >> 8) & 0xFF)[16:32].flatten().tolist())) == 256
    assert z["max_block_count"] > 15000


def test_an_all_equal_matrix_has_no_exceptions():
    for value in (0.5, -3.0, 0.0, float("nan")):
        w = torch.full((32, 128), value, dtype=torch.bfloat16)
        z = assert_lossless(w)
        assert z["count"] == 0 and z["overflow"].numel() == 0


def test_an_exception_only_matrix_round_trips_and_is_refused(monkeypatch):
    """A table that serves no weight (every hi byte outside it): every weight is a patch or an overflow entry.
    Exact all the same; at ~44 bits a weight the format does not pay, so compress() refuses it."""
    monkeypatch.setattr(compress_mod, "hi_byte_table", lambda bits: torch.zeros(16, dtype=torch.int32))
    gen = torch.Generator().manual_seed(23)
    w = (torch.randn(32, 256, generator=gen) + 4.0).to(torch.bfloat16)  # no hi byte 0x00
    z = assert_lossless(w, UNLIMITED)
    assert z["count"] == w.numel() and z["overflow"].numel() == w.numel() - 3 * (2 * 4)
    assert footprint(z)["total"] > 40
    with pytest.raises(CompressionError, match=r"^o: 4\d\.\d\d bits per weight .*plain GEMV$"):
        compress(w, "o")


def test_a_block_past_any_fixed_capacity_is_served():
    """5,000 exceptions in one 16-row block (ten times the former per-block limit): a local cluster, so the matrix
    as a whole still pays and compress() keeps it, exactly; the kernel's model adds them all."""
    gen = torch.Generator().manual_seed(24)
    w = (torch.randn(128, 4096, generator=gen) / 64).to(torch.bfloat16)
    where = torch.randperm(16 * 4096, generator=gen)[:5400]
    block = w[48:64].reshape(-1)
    block[where] = scattered(1, 5400, gen)[0]  # ~120 hi bytes, nearly all too rare for the table
    w[48:64] = block.reshape(16, 4096)
    z = assert_lossless(w)
    assert z["max_block_count"] >= 5000 and z["max_block_overflow"] > 4000
    assert footprint(z)["total"] < 13.5
    for S, R, NW in ((1, 1, 8), (4, 2, 4), (16, 1, 16)):
        trace = assert_model_matches_float64(z, w, 9, S, R, NW)
        assert sum(len(t[4]) for t in trace) == z["overflow"].numel()


def test_a_row_of_outliers_is_kept_and_shared_by_the_warps():
    """An outlier row (2^40 x): most of its weights are exceptions (its commonest bytes take a few table slots),
    ~3300 past the patches in its row block. The matrix is kept; in the model, each CTA adds only its own K range
    and its warps take equal shares."""
    gen = torch.Generator().manual_seed(25)
    w = (torch.randn(256, 8192, generator=gen) / 64).to(torch.bfloat16)
    w[37] = (w[37].float() * 2.0**40).to(torch.bfloat16)
    z = assert_lossless(w)
    assert z["max_block_overflow"] > 3000 and not report(w)["refused"]
    for S, R, NW in ((1, 1, 8), (2, 1, 4), (8, 2, 16), (128, 4, 1)):
        trace = assert_model_matches_float64(z, w, 5, S, R, NW)
        used = [e for t in trace for e in t[4]]
        assert sorted(used) == list(range(z["overflow"].numel()))  # every entry exactly once
        g_per_split = 8192 // 64 // S
        for (cta_group, split), warp, rb, g, _ in trace:
            assert split * g_per_split <= g < (split + 1) * g_per_split  # the CTA's own K range only
            assert cta_group * R <= rb < (cta_group + 1) * R
        shares = {}
        for (cta, split), warp, rb, _, got in trace:
            shares.setdefault((cta, split, rb), {}).setdefault(warp, 0)
            shares[(cta, split, rb)][warp] += len(got)
        for (cta, split, rb), per_warp in shares.items():
            counts = [per_warp.get(wp, 0) for wp in range(NW)]
            assert max(counts) - min(counts) <= 1, (
                S,
                R,
                NW,
                counts,
            )  # equal shares of the row block's entries


@pytest.fixture(scope="module")
def heavy():
    """Heavy-tailed weights as the judge makes them (outlier rows and columns, spikes), compressed losslessly."""
    w = make_weight(256, 2048, "bfloat16", "heavy", torch.Generator().manual_seed(26), "cpu")
    z = assert_lossless(w)
    assert z["overflow"].numel() > 100
    return w, z


@pytest.mark.parametrize("m", [1, 8, 17, 32])
def test_kernel_model_matches_float64_on_heavy_weights(m, heavy):
    """On heavy weights: every token count class, K splits, row blocks per CTA and warp counts; and the
    unpooler-style prefix of the rows."""
    w, z = heavy
    for S, R, NW in ((1, 1, 8), (2, 2, 4), (4, 4, 16), (32, 1, 2)):
        assert_model_matches_float64(z, w, m, S, R, NW)
    assert_model_matches_float64(z, w, m, 2, 1, 8, n=64)  # the first 64 rows: prefixes of every tensor


def test_the_overflow_pass_adds_exactly_the_entries_the_main_loop_reads_as_zero():
    """On a group of 4 + 1 exceptions: the pass's contribution is exactly the one overflow entry's products, and the
    main loop's part (stream + patches) is the rest of the matrix."""
    w, outside = four_plus_one_exceptions()
    z = compress(w)
    x = torch.randn(3, 128, generator=torch.Generator().manual_seed(27)).to(torch.bfloat16)
    extra = overflow_pass_model(z, x, 16, 128, S=1, R=1, NW=4)
    row, col, _ = outside[2]  # (7, 60): in fragment 3, the last of group 0's four in fragment order
    expected = torch.zeros(3, 16, dtype=torch.float64)
    expected[:, row] = x.to(torch.float64)[:, col] * w.to(torch.float64)[row, col]
    assert torch.equal(extra, expected)
    no_pass = dict(z, overflow=z["overflow"][:0])  # n_overflow = 0: the kernel's main loop alone
    main = zgemv_model(no_pass, x, 16, 128)
    w_main = w.to(torch.float64).clone()
    w_main[row, col] = 0
    assert torch.allclose(main, x.to(torch.float64) @ w_main.T, rtol=1e-12, atol=0)


def test_report_splits_the_bits_per_weight():
    w, _ = four_plus_one_exceptions()  # 16 x 128: 2 buckets, 5 exceptions, 1 past the headers
    r = report(w, "o")
    assert r["name"] == "o" and r["shape"] == (16, 128)
    assert r["bits"]["payload"] == 12.0
    assert r["bits"]["headers"] == 8 * (2 * 16 + 16) / 2048  # two 16-byte headers and the table
    assert r["bits"]["exceptions"] == 8 * (1 * 4 + 3 * 4) / 2048  # one entry, three offsets
    assert r["bits"]["total"] == sum(r["bits"][p] for p in ("payload", "headers", "exceptions"))
    assert r["exceptions"] == 5 and r["exception_rate"] == 5 / 2048 and r["overflow"] == 1
    assert r["max_block_exceptions"] == 5 and r["max_block_overflow"] == 1 and not r["refused"]
    assert footprint(compress(w)) == r["bits"]
    lines = format_report([r, report(w, "pooler")]).splitlines()
    assert len(lines) == 3 and lines[1].split()[:3] == ["o", "16x128", "12.250"]


def test_refusal_is_on_the_whole_matrix_bits():
    """At or over the limit the matrix is refused in one line naming it and its bits per weight; a matrix with a
    16-row block made only of exceptions (16,384 of them) is not, as the whole still pays."""
    gen = torch.Generator().manual_seed(28)
    w = (torch.randn(1024, 1024, generator=gen) * 0.02).to(torch.bfloat16)
    w[512:528] = scattered(16, 1024, gen)
    bits = report(w, "o")["bits"]["total"]
    assert 12.5 < bits < MAX_BITS_PER_WEIGHT
    compress(w, "o")  # kept
    with pytest.raises(CompressionError) as info:
        compress(w, "o", max_bits_per_weight=bits)
    assert str(info.value).startswith(f"o: {bits:.2f} bits per weight") and "\n" not in str(info.value)
    compress(w, "o", max_bits_per_weight=bits + 1e-9)


DENSE_K = {}  # each dense layer's K -> the layers of that K
for _layer in load_problem().layers.values():
    if not _layer.dual:
        DENSE_K.setdefault(_layer.k, []).append(_layer.name)


@pytest.mark.parametrize("k", sorted(DENSE_K), ids=["-".join(DENSE_K[k]) for k in sorted(DENSE_K)])
def test_heavy_weights_of_every_dense_layer_compress_without_refusal(k):
    """The judge's heavy weights (generator/judge/weights.py) at each dense layer's K, on 512 of its rows: kept, at
    ~12.2 bits a weight. The distribution's outliers come one row and one column per 512 of each, so 512 rows
    hold the full matrices' rates and their worst 16-row block (12.174-12.189 bits, 2882 exceptions in pooler's at
    the full shape; kernels_src/compress.py). The worst 16-row block (an outlier row's) holds hundreds (o) to
    thousands of exceptions, past the 512 a block that the former fixed capacity allowed (it refused qkv_gate,
    pooler and unpooler)."""
    w = make_weight(512, k, "bfloat16", "heavy", torch.Generator().manual_seed(8), "cpu")
    z = compress(w, DENSE_K[k][0])
    bits = footprint(z)
    assert bits["total"] < 12.3
    assert z["max_block_count"] > (200 if "o" in DENSE_K[k] else 512)
