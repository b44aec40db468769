"""12-bit lossless weights for the compressed engines (compressed_gemv.cuh, compressed_ring.cuh): the format and
the compressor prepare() runs on every layer their tables route there.

Why: for m <= 32 a GEMV's time is the weight bytes over HBM bandwidth, and the tensor-core GEMVs already stream
near that floor at m = 1. Fewer bytes is the remaining lever: 12 bits per weight is 25 % fewer.

The format. A bf16 weight is two bytes: hi = sign + top 7 exponent bits, lo = lowest exponent bit + 7 mantissa
bits. A weight matrix uses few distinct hi bytes (its magnitudes span a few powers of 4), so each weight is
stored as its lo byte plus a 4-bit code: an index into a per-matrix table T of 16 hi bytes.
  * T[0] = 0x00 always; T[1..15] are the 15 most frequent other hi bytes (ties: the smaller byte first).
  * A weight whose hi byte is not in T is an exception: its stream slot holds code 0 and lo 0, which decodes to
    +0.0 exactly, and its own 16 bits travel apart. The unit of both ways is a bucket: one 16-row block x one
    64-wide K group (1024 weights, four mma fragments), and within a bucket a weight's position is its index
    p = 256 f + 8 lane + e in the stream's fragment order (fragment f, lane, element e of the lane's 8):
      - patches: a bucket's first n <= 3 exceptions (in p order) are patch words in its 16-byte header
        [n, p0, p1, p2]. The kernel loads the header with the group's bytes and, for n > 0, adds the patched
        weights' products with one more mma per patch after the group's own (an A operand holding only the
        patch): no pass, no extra round trip. An exception pass after the main loop, run for every exception,
        was most of what the compressed GEMV paid over a plain stream of its bytes (docs/compressed-gemv.md has
        the figures);
      - overflow: a bucket's exceptions past the third are overflow entries, in one flat list sorted by
        (row block, K group, p), with one offset per bucket into it. Capacity is where the exceptions are: no
        bucket, row block or row has a limit. After its main loop each warp of a CTA takes an equal share of the
        CTA's own entries (its row blocks x its K range: never another split's), scatters each bucket's entries
        into a zeroed 16 x 64 bf16 tile in shared memory at their fragment positions, and multiplies that tile
        like a stream group (four mmas against the group's x fragments, into the same accumulators). Normal
        weights (~0.25 exceptions a bucket) leave a handful of entries in a whole layer; heavy ones
        (generator/judge/weights.py: outlier rows and columns 30x) a few in most row blocks and up to ~2500 in
        an outlier row's, which the CTA's warps share evenly.
  * Decoding is exact by construction: every stream weight decodes to its own 16 bits, every exception to +0.0
    plus its patch or entry (ORed in / added into a slot that is 0x0000). tests/test_compress.py proves it on
    adversarial inputs (every bf16 bit pattern, NaN payloads, inf, -0.0, subnormals, more than 16 hi bytes, all-
    exception matrices, 5000 exceptions in one row block), and tests/zdecode_model.py models the kernel's
    decode, patches and overflow pass, its K-range selection included, against a float64 product.

Stream layout (what a warp loads), built on packing.pack_mma_a's fragment order (8 bf16 per lane per fragment):
per 16-row block and 64-wide K group (two 32-wide K blocks = four fragments f = 2 kb + step),
  [row block][K group][part][lane][16 bytes]
    part 0: lo bytes of fragments 0, 1 (8 each, in the fragment's element order)
    part 1: lo bytes of fragments 2, 3
    part 2: the four fragments' code words (uint32; nibble e is element e's code)
so a lane issues three 16-byte loads per K group and every warp-wide load is 512 contiguous bytes (1536 bytes
per 16 x 64 weights, against 2048 in bf16).

Decode (per lane and fragment; lo words L0 = elements 0..3, L1 = 4..7; code word C; table words T0..T3 = T's
bytes 0..3, 4..7, 8..11, 12..15), with PTX prmt.b32 (byte permute, default mode):
  for half h in (0, 1): c = (C >> 16 h) & 0xFFFF       four 4-bit codes, elements 4h .. 4h+3
      lo8 = prmt(T0, T1, c & 0x7777)                   hi bytes for codes 0..7
      hi8 = prmt(T2, T3, c & 0x7777)                   hi bytes for codes 8..15
      m   = prmt(0x0000FF00, 0, (c >> 3) & 0x1111)     0xFF where the code's bit 3 is set
      H_h = (lo8 & ~m) | (hi8 & m)                     one lop3
  reg 2h   = prmt(L_h, H_h, 0x5140)                    elements 4h, 4h+1: lo, hi, lo, hi bytes
  reg 2h+1 = prmt(L_h, H_h, 0x7362)                    elements 4h+2, 4h+3
tests/zdecode_model.py runs exactly this recipe on integers (a model of prmt), so the tests check the recipe,
not just the format; kernels_src/compressed_gemv.cuh runs it on the GPU.

Patch word (uint32, int32 storage): bits 0-4 the lane, 5-6 the fragment f, 7-9 the element e of the lane's 8
(register j = e >> 1, half e & 1), 10-25 the weight's bf16 bits. Patches int32 [N/16, K/64, 4] (the headers).

Overflow (the exceptions past a bucket's third):
  overflow         int32 [E]: entry = p | bits << 16 (p = 256 f + 8 lane + e as above, bits 10-15 zero; the
                   weight's bf16 bits in 16-31), sorted by (row block, K group, p); E may be 0.
  overflow_starts  int32 [N/16 * K/64 + 1]: bucket b = row block * K/64 + K group holds entries
                   overflow_starts[b] .. overflow_starts[b + 1] - 1 (overflow_starts[0] = 0, the last = E).
Row blocks are outermost everywhere, so the first n' rows of a matrix (the unpooler's 1024-row slice) are
served by the same tensors: their buckets' offsets and entries are prefixes. The kernel reads a CTA's R x
(K/64 / S + 1) offsets (staged in shared memory while its main loop runs) and its own entries from global
memory / L2: its shared memory does not depend on how many exceptions there are.

Size: 12 bits of payload a weight; 16 bytes of header per 1024 weights (0.125 bits) and the 16-byte table; 4 bytes
per overflow entry and 4 per bucket offset (0.031 bits). compress() refuses a matrix only when the whole costs
MAX_BITS_PER_WEIGHT or more (7/8 of bf16's 16), with a one-line CompressionError naming the layer and its bits per
weight; generator/compression.py's report() gives the figures for any matrix without refusing it. On the local
judge's weights (generator/judge/weights.py; CPU, report()): normal (seed 3) 12.156 bits per weight on every dense
layer (0.018-0.034 % exceptions, 1-19 overflow entries a layer); heavy (seed 8) 12.174-12.189 (0.22-0.23 %
exceptions, 6042-33950 overflow entries a layer, up to 2882 exceptions in one 16-row block: pooler's, an outlier
row's; the fixed per-block capacity of 512 this layout replaced refused qkv_gate, pooler and unpooler).
"""

import torch

from kernels_src.packing import pack_mma_a

TABLE_SIZE = 16
K_GROUP = 64  # weights per row per K group: two 32-wide K blocks
BUCKET = 16 * K_GROUP  # weights per (16-row block, K group): a header and one overflow offset each
PATCHES_PER_GROUP = 3  # patch words in a K group's 16-byte header (after its count)
HEADER_BYTES = 4 * (1 + PATCHES_PER_GROUP)
ENTRY_BYTES = 4  # one overflow entry (int32)
OFFSET_BYTES = 4  # one overflow offset (int32)
# The refusal rule: a matrix whose whole format (payload, headers, table, overflow entries and offsets) costs this
# many bits per weight or more stays on the plain GEMV. 7/8 of bf16's 16 bits: past 14 bits (~5.7 % of weights in
# the overflow, ~58 entries a bucket) the bytes the stream saves (at most 1/8) are about what the overflow pass
# costs on top of its bytes (an estimate from the pass's shape, a few hundred cycles a bucket per warp; not measured).
MAX_BITS_PER_WEIGHT = 14.0


class CompressionError(ValueError):
    """A weight matrix the 12-bit format does not pay for (its bits per weight), or a wrong input."""


def hi_byte_table(bits: torch.Tensor) -> torch.Tensor:
    """The 16 hi bytes of the format's table for int16-viewed bf16 `bits`: 0x00 first, then the 15 most frequent
    others (ties: smaller byte first). Fewer distinct bytes than 16: the unused entries repeat 0x00."""
    hi = (bits.to(torch.int32) >> 8) & 0xFF
    counts = torch.bincount(hi.reshape(-1), minlength=256).cpu()
    counts[0] = -1  # 0x00 has its fixed slot
    # stable sort on -count keeps byte order among equal counts
    order = torch.sort(-counts, stable=True).indices
    chosen = [int(b) for b in order[: TABLE_SIZE - 1] if counts[int(b)] > 0]
    return torch.tensor([0] + chosen + [0] * (TABLE_SIZE - 1 - len(chosen)), dtype=torch.int32)


def _fragments(bits: torch.Tensor) -> torch.Tensor:
    """int32 bf16 bits [N, K] -> [N/16, K/64, 4 fragments, 32 lanes, 8 elements] in pack_mma_a's order."""
    n, k = bits.shape
    flat = pack_mma_a(bits.to(torch.int16)).to(torch.int32) & 0xFFFF
    return flat.reshape(n // 16, k // K_GROUP, 4, 32, 8)


def unfragment(frags: torch.Tensor, n: int, k: int) -> torch.Tensor:
    """The inverse of _fragments: [N/16, K/64, 4, 32, 8] in fragment order -> [N, K] (any dtype)."""
    # fragment f = 2 kb_local + step; a lane's 8 elements: pack_mma_a's (row half, k half, pair) order
    blocks = frags.reshape(n // 16, k // 32, 2, 8, 4, 2, 2, 2)  # rb, kb, step, g, t, z, a, e
    return blocks.permute(0, 6, 3, 1, 4, 2, 5, 7).reshape(n, k)


def patch_words(
    bits_f: torch.Tensor, exc_f: torch.Tensor, limit: int = PATCHES_PER_GROUP
) -> tuple[torch.Tensor, torch.Tensor]:
    """Per (row block, K group): the header [n, p0, p1, p2] of its first n <= limit (<= PATCHES_PER_GROUP)
    exceptions (in fragment order: f, lane, element), and the mask of the exceptions past those (the overflow).
    bits_f, exc_f: [RB, G, 4, 32, 8] fragment-ordered bits and exception flags."""
    rb, groups = exc_f.shape[:2]
    flags = exc_f.reshape(rb, groups, 4 * 32 * 8).to(torch.int64)
    rank = torch.cumsum(flags, dim=-1) - 1
    inline = (flags == 1) & (rank < limit)
    header = torch.zeros(rb, groups, 1 + PATCHES_PER_GROUP, dtype=torch.int64, device=exc_f.device)
    header[..., 0] = flags.sum(dim=-1).clamp(max=limit)
    b, g, p = torch.nonzero(inline, as_tuple=True)
    f, lane, e = p // 256, (p // 8) % 32, p % 8
    value = bits_f.reshape(rb, groups, -1)[b, g, p].to(torch.int64) & 0xFFFF
    header[b, g, 1 + rank[b, g, p]] = lane | (f << 5) | (e << 7) | (value << 10)
    overflow = ((flags == 1) & (rank >= limit)).reshape(exc_f.shape)
    return header.to(torch.int32), overflow


def overflow_entries(bits_f: torch.Tensor, overflow_f: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """The overflow list and its bucket offsets (the layout in the module docstring) from fragment-ordered bits
    and overflow flags [RB, G, 4, 32, 8]: (entries int32 [E], starts int32 [RB * G + 1])."""
    buckets = overflow_f.shape[0] * overflow_f.shape[1]
    flags = overflow_f.reshape(buckets, BUCKET)
    b, p = torch.nonzero(flags, as_tuple=True)  # row-major: sorted by bucket, then by p
    value = bits_f.reshape(buckets, BUCKET)[b, p].to(torch.int64) & 0xFFFF
    entries = p.to(torch.int64) | (value << 16)
    entries = torch.where(entries >= 1 << 31, entries - (1 << 32), entries).to(torch.int32)  # uint32 as int32
    starts = torch.zeros(buckets + 1, dtype=torch.int64, device=overflow_f.device)
    starts[1:] = torch.cumsum(flags.sum(dim=1), dim=0)
    return entries, starts.to(torch.int32)


def _codes(bits: torch.Tensor, table: torch.Tensor) -> torch.Tensor:
    """Each weight's 4-bit code into `table`, or -1 for an exception."""
    code_of = torch.full((256,), -1, dtype=torch.int32)
    for code in range(TABLE_SIZE - 1, -1, -1):  # a repeated 0x00 keeps code 0
        code_of[int(table[code])] = code
    return code_of.to(bits.device)[(bits >> 8).reshape(-1).long()].reshape(bits.shape)


def _check_input(w: torch.Tensor, name: str, patches_per_group: int) -> None:
    if not 0 <= patches_per_group <= PATCHES_PER_GROUP:
        raise CompressionError(
            f"{name}: patches_per_group must be 0..{PATCHES_PER_GROUP}, got {patches_per_group}"
        )
    if w.dtype != torch.bfloat16 or w.dim() != 2:
        raise CompressionError(f"{name}: expected a 2-D bfloat16 matrix, got {w.dtype} {tuple(w.shape)}")
    n, k = w.shape
    if n % 16 or k % K_GROUP:
        raise CompressionError(f"{name}: [{n}, {k}] needs N % 16 == 0 and K % {K_GROUP} == 0")


def _build(w: torch.Tensor, patches_per_group: int) -> dict:
    """compress() without the refusal rule."""
    n, k = w.shape
    bits = w.contiguous().view(torch.int16).to(torch.int32) & 0xFFFF
    device = w.device
    table = hi_byte_table(bits)  # on the CPU: 16 entries
    codes = _codes(bits, table)
    is_exc = codes < 0
    bits_f = _fragments(bits)
    patches, overflow_f = patch_words(bits_f, _fragments(is_exc.to(torch.int32)), patches_per_group)
    overflow, overflow_starts = overflow_entries(bits_f, overflow_f)
    rb, groups = n // 16, k // K_GROUP
    block_exc = is_exc.reshape(rb, 16 * k).sum(dim=1)
    block_ovf = overflow_f.reshape(rb, -1).sum(dim=1)

    codes = torch.where(is_exc, torch.zeros_like(codes), codes)
    lo = torch.where(is_exc, torch.zeros_like(bits), bits & 0xFF)
    lo_f = _fragments(lo)  # [RB, G, 4, 32, 8]
    code_f = _fragments(codes)
    stream = torch.empty(rb, groups, 3, 32, 16, dtype=torch.uint8, device=device)
    stream[:, :, 0] = torch.cat([lo_f[:, :, 0], lo_f[:, :, 1]], dim=-1).to(torch.uint8)
    stream[:, :, 1] = torch.cat([lo_f[:, :, 2], lo_f[:, :, 3]], dim=-1).to(torch.uint8)
    shifts = torch.arange(8, dtype=torch.int64, device=device) * 4
    words = (code_f.to(torch.int64) << shifts).sum(dim=-1)  # [RB, G, 4, 32]: nibble e = element e
    word_bytes = torch.stack([(words >> (8 * b)) & 0xFF for b in range(4)], dim=-1)  # little-endian
    stream[:, :, 2] = word_bytes.permute(0, 1, 3, 2, 4).reshape(rb, groups, 32, 16).to(torch.uint8)
    return {
        "stream": stream,
        "patches": patches,
        "table": table,
        "table_words": tuple(sum(int(table[4 * i + b]) << (8 * b) for b in range(4)) for i in range(4)),
        "overflow": overflow,
        "overflow_starts": overflow_starts,
        "count": int(is_exc.sum()),
        "max_block_count": int(block_exc.max()) if rb else 0,
        "max_block_overflow": int(block_ovf.max()) if rb else 0,
    }


def table_scalars(table_words: tuple) -> tuple:
    """The table's four uint32 words as the two signed int64 call scalars the compressed kernels read (T0 | T1 << 32,
    T2 | T3 << 32: compressed_gemv.cuh's and compressed_ring.cuh's launchers split them back)."""
    pairs = ((table_words[0], table_words[1]), (table_words[2], table_words[3]))
    return tuple((lo | hi << 32) - ((lo | hi << 32) >> 63 << 64) for lo, hi in pairs)


def footprint(z: dict) -> dict:
    """The bytes of a compressed matrix (compress()'s dict), as bits per weight: payload (the 12-bit stream),
    headers (the groups' 16-byte headers and the 16-byte table), exceptions (overflow entries and bucket
    offsets), and their total."""
    rb, groups = z["stream"].shape[:2]
    weights = rb * groups * BUCKET
    parts = {
        "payload": z["stream"].numel(),
        "headers": z["patches"].numel() * 4 + TABLE_SIZE,
        "exceptions": z["overflow"].numel() * ENTRY_BYTES + z["overflow_starts"].numel() * OFFSET_BYTES,
    }
    bits = {part: 8 * size / weights for part, size in parts.items()}
    bits["total"] = sum(bits.values())
    return bits


def compress(
    w: torch.Tensor,
    name: str = "weight",
    patches_per_group: int = PATCHES_PER_GROUP,
    max_bits_per_weight: float | None = None,
) -> dict:
    """bf16 [N, K] (N % 16 == 0, K % 64 == 0) -> {"stream": uint8 [N/16, K/64, 3, 32, 16], "table": int32 [16]
    hi bytes, "table_words": the table as four uint32 ints T0..T3 (the kernel's prmt operands, little-endian),
    "patches": int32 [N/16, K/64, 4] (the groups' headers), "overflow": int32 [E] (entries; E may be 0),
    "overflow_starts": int32 [N/16 * K/64 + 1] (bucket offsets), "count": int (all exceptions),
    "max_block_count" / "max_block_overflow": the largest 16-row block's exceptions / overflow entries}; the
    stream, patches and overflow tensors on w's device, the 16-entry table on the CPU.
    patches_per_group (0..PATCHES_PER_GROUP): how many of a group's exceptions its header carries; the rest go to
    the overflow (0: every exception to the pass after the loop). prepare() uses 3: on every layer it was the
    faster (pooler m = 1 18.73 us against 18.86 at 0, o m = 16 9.74 against 10.46); the other values are for
    such measurements.
    Raises CompressionError (one line, naming `name`) for a wrong input, or when the matrix costs
    max_bits_per_weight (None: MAX_BITS_PER_WEIGHT) bits per weight or more (footprint()'s total)."""
    _check_input(w, name, patches_per_group)
    limit = MAX_BITS_PER_WEIGHT if max_bits_per_weight is None else max_bits_per_weight
    z = _build(w, patches_per_group)
    bits = footprint(z)["total"]
    if bits >= limit:
        n, k = w.shape
        raise CompressionError(
            f"{name}: {bits:.2f} bits per weight in the 12-bit format, at or over its limit of {limit:g}"
            f" ({z['count']} of {n * k} weights are exceptions, {z['overflow'].numel()} past the headers):"
            " serve this layer with the plain GEMV"
        )
    return z
