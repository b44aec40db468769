"""12-bit lossless weights for the compressed engines: each bf16 weight as its lo byte and a 4-bit code into a
table of 16 hi bytes, the exceptions patched in bucket headers or listed apart. The format, byte by byte:
docs/compressed-gemv.md."""

import torch

from kernels_src.packing import pack_mma_a

TABLE_SIZE = 16
K_GROUP = 64  # weights per row per K group: two 32-wide K blocks
BUCKET = 16 * K_GROUP  # weights per (16-row block, K group): a header and one overflow offset each
PATCHES_PER_GROUP = 3  # patch words in a K group's 16-byte header (after its count)
HEADER_BYTES = 4 * (1 + PATCHES_PER_GROUP)
ENTRY_BYTES = 4  # one overflow entry (int32)
OFFSET_BYTES = 4  # one overflow offset (int32)
MAX_BITS_PER_WEIGHT = 14.0  # a matrix costing this or more stays on the bf16 engines (7/8 of 16 bits)


class CompressionError(ValueError):
    """A weight matrix the 12-bit format does not pay for (its bits per weight), or a wrong input."""


def hi_byte_table(bits: torch.Tensor) -> torch.Tensor:
    """The table's 16 hi bytes for int16-viewed bf16 `bits` (0x00, then the 15 most frequent others)."""
    hi = (bits.to(torch.int32) >> 8) & 0xFF
    counts = torch.bincount(hi.reshape(-1), minlength=256).cpu()
    counts[0] = -1  # 0x00 has its fixed slot
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
    blocks = frags.reshape(n // 16, k // 32, 2, 8, 4, 2, 2, 2)  # rb, kb, step, g, t, z, a, e
    return blocks.permute(0, 6, 3, 1, 4, 2, 5, 7).reshape(n, k)


def patch_words(
    bits_f: torch.Tensor, exc_f: torch.Tensor, limit: int = PATCHES_PER_GROUP
) -> tuple[torch.Tensor, torch.Tensor]:
    """(each bucket's header of its first `limit` exceptions, the mask of the rest) from fragment-ordered bits
    and exception flags [RB, G, 4, 32, 8]."""
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
    """(overflow entries int32 [E], bucket offsets int32 [RB * G + 1]) from fragment-ordered bits and
    overflow flags [RB, G, 4, 32, 8]."""
    buckets = overflow_f.shape[0] * overflow_f.shape[1]
    flags = overflow_f.reshape(buckets, BUCKET)
    b, p = torch.nonzero(flags, as_tuple=True)  # sorted by bucket, then by p
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
    table = hi_byte_table(bits)  # on the CPU
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
    words = (code_f.to(torch.int64) << shifts).sum(dim=-1)  # nibble e = element e
    word_bytes = torch.stack([(words >> (8 * b)) & 0xFF for b in range(4)], dim=-1)
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
    """The table's four uint32 words as two signed int64 call scalars: T0 | T1 << 32, T2 | T3 << 32."""
    pairs = ((table_words[0], table_words[1]), (table_words[2], table_words[3]))
    return tuple((lo | hi << 32) - ((lo | hi << 32) >> 63 << 64) for lo, hi in pairs)


def footprint(z: dict) -> dict:
    """A compressed matrix's bits per weight: payload, headers (with the table), exceptions, total."""
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
    """bf16 [N, K] -> the 12-bit format's tensors; CompressionError for a matrix it does not pay for."""
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
