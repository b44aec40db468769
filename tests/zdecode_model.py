"""A bit-level model of the compressed GEMV's decoder (kernels_src/compressed_gemv.cuh): PTX prmt.b32 on integers,
and the decode recipe of kernels_src/compress.py applied to a whole stream. The tests decode with it, so they prove
the recipe the kernel runs, not only the format."""

import torch

from kernels_src.compress import unfragment


def prmt(a: torch.Tensor, b: torch.Tensor, sel: torch.Tensor) -> torch.Tensor:
    """PTX prmt.b32 d, a, b, sel (default mode) on int64 tensors holding uint32: byte i of d is byte (nibble i of
    sel) & 7 of the 8-byte value {b, a}; when the nibble's bit 3 is set, that byte's sign bit fills all 8 bits.
    """
    src = (b.to(torch.int64) << 32) | (a.to(torch.int64) & 0xFFFFFFFF)
    out = torch.zeros(torch.broadcast_shapes(src.shape, sel.shape), dtype=torch.int64)
    for i in range(4):
        nib = (sel.to(torch.int64) >> (4 * i)) & 0xF
        byte = (src >> (8 * (nib & 7))) & 0xFF
        byte = torch.where((nib & 8) != 0, torch.where((byte & 0x80) != 0, 0xFF, 0x00), byte)
        out |= byte << (8 * i)
    return out


def decode_stream(stream: torch.Tensor, table_words: tuple[int, int, int, int]) -> torch.Tensor:
    """The kernel's decode of a stream: [N/16, K/64, 3, 32, 16] uint8 -> the lanes' bf16 registers as int64
    [N/16, K/64, 4 fragments, 32 lanes, 4 regs] (uint32 each: element 2j in the low half, 2j + 1 in the high).
    """
    s = stream.to(torch.int64)
    word = (
        (s[..., 0::4]) | (s[..., 1::4] << 8) | (s[..., 2::4] << 16) | (s[..., 3::4] << 24)
    )  # [..., 3, 32, 4]
    t = torch.tensor(table_words, dtype=torch.int64)
    regs = []
    for f in range(4):
        lo_part = word[:, :, f // 2]  # [RB, G, 32, 4 words]: fragment f's lo bytes are words 2(f%2), 2(f%2)+1
        L = (lo_part[..., 2 * (f % 2)], lo_part[..., 2 * (f % 2) + 1])
        C = word[:, :, 2, :, f]
        frag = []
        for h in range(2):
            c = (C >> (16 * h)) & 0xFFFF
            lo8 = prmt(t[0], t[1], c & 0x7777)
            hi8 = prmt(t[2], t[3], c & 0x7777)
            m = prmt(torch.tensor(0x0000FF00), torch.tensor(0), (c >> 3) & 0x1111)
            H = (lo8 & ~m) | (hi8 & m)
            frag.append(prmt(L[h], H, torch.tensor(0x5140)))
            frag.append(prmt(L[h], H, torch.tensor(0x7362)))
        regs.append(torch.stack(frag, dim=-1))
    return torch.stack(regs, dim=2)


def apply_patches(regs: torch.Tensor, patches: torch.Tensor) -> torch.Tensor:
    """What the kernel does with a group's header before its mmas: OR each of its first n patch words' 16 bits into
    the register it names (lane bits 0-4, fragment 5-6, element 7-9: register e >> 1, half e & 1; bits 10-25).
    regs: [N/16, K/64, 4, 32, 4] decoded registers; patches: int32 [N/16, K/64, 4]."""
    regs = regs.clone()
    for rb, g in torch.nonzero(patches[..., 0] > 0).tolist():
        for q in range(int(patches[rb, g, 0])):
            p = int(patches[rb, g, 1 + q]) & 0xFFFFFFFF
            lane, f, e, value = p & 31, (p >> 5) & 3, (p >> 7) & 7, (p >> 10) & 0xFFFF
            regs[rb, g, f, lane, e >> 1] |= value << (16 * (e & 1))
    return regs


def apply_overflow(regs: torch.Tensor, z: dict) -> torch.Tensor:
    """Each overflow entry's 16 bits ORed into the register its position names (p = 256 f + 8 lane + e: fragment
    f, lane, register e >> 1, half e & 1) of its bucket (rb, g): what the kernel's tile adds on top of the
    stream. Every such slot must decode to 0x0000 and no position may repeat. regs: [N/16, K/64, 4, 32, 4]."""
    regs = regs.clone()
    rb, groups = regs.shape[:2]
    starts = z["overflow_starts"].to(torch.int64)
    entries = z["overflow"].to(torch.int64) & 0xFFFFFFFF
    assert starts.numel() >= rb * groups + 1 and int(starts[0]) == 0
    assert bool((starts[1:] >= starts[:-1]).all()), "bucket offsets must not decrease"
    used = int(starts[rb * groups])
    if used == 0:
        return regs
    bucket = torch.repeat_interleave(
        torch.arange(rb * groups), starts[1 : rb * groups + 1] - starts[: rb * groups]
    )
    e = entries[:used]
    assert bool((e & 0xFC00 == 0).all()), "entry bits 10-15 must be zero"
    p, value = e & 1023, e >> 16
    key = bucket * 1024 + p
    assert bool(
        (key[1:] > key[:-1]).all()
    ), "entries must be sorted by bucket, then position, without repeats"
    f, lane, el = p // 256, (p // 8) % 32, p % 8
    flat = regs.reshape(rb * groups, 4, 32, 4)
    target = flat[bucket, f, lane, el >> 1]
    half = (target >> (16 * (el & 1))) & 0xFFFF
    assert bool((half == 0).all()), "an overflow entry whose slot is not +0.0"
    # two entries may share a register (its two halves): add, which is OR into slots that read 0x0000
    flat.index_put_((bucket, f, lane, el >> 1), value << (16 * (el & 1)), accumulate=True)
    return flat.reshape(regs.shape)


def decompress(z: dict, n: int, k: int) -> torch.Tensor:
    """The exact bf16 [N, K] a compressed matrix stands for: the decoded stream (exceptions read +0.0 there), the
    groups' patches ORed in, then the overflow entries ORed in. What the kernel computes is
    x . decompress(z)^T."""
    regs = apply_patches(decode_stream(z["stream"], z["table_words"]), z["patches"])  # [RB, G, 4, 32, 4]
    regs = apply_overflow(regs, z)
    elems = torch.stack([regs & 0xFFFF, (regs >> 16) & 0xFFFF], dim=-1)
    bits = unfragment(elems, n, k)
    return (bits.to(torch.int32).to(torch.int16)).view(torch.bfloat16)


def _bf16_of(bits: torch.Tensor) -> torch.Tensor:
    return (bits.to(torch.int32).to(torch.int16)).view(torch.bfloat16).to(torch.float64)


def _next_bucket(st: list, ng: int, gl: int, e: int) -> int:
    """compressed_gemv.cuh's next_bucket: the first bucket after gl whose entries end past entry e (32 candidates a
    round, the lowest found wins)."""
    base = gl + 1
    while True:
        found = [c for c in range(base, base + 32) if c < ng and st[c + 1] > e]
        if found:
            return found[0]
        base += 32


def overflow_pass_model(
    z: dict, x: torch.Tensor, n: int, k: int, S: int, R: int, NW: int, trace=None
) -> torch.Tensor:
    """compressed_gemv.cuh's overflow_pass on the CPU, step by step as the kernel's source runs it: per CTA (R row
    blocks, split s of S: K groups [s G/S, (s + 1) G/S)), the staged offsets st of its buckets, for each row block the
    warp's equal share [e_begin, e_end) of [st[0], st[ng]), the 32-entry chunks, the scatter of the current
    bucket's entries into a zeroed 16 x 64 tile, the tile's product with the group's x where the bucket ends
    (in float64: bf16 x bf16 products are exact, as in the mma) and the next bucket found by next_bucket.
    Returns the pass's contribution [M, n] (float64). trace, a list, collects (cta, warp, row block, group,
    entries) for every tile multiplied."""
    groups = k // 64
    ng = groups // S
    starts = z["overflow_starts"].tolist()
    entries = (z["overflow"].to(torch.int64) & 0xFFFFFFFF).tolist()
    xd = x.to(torch.float64)
    m = x.shape[0]
    out = torch.zeros(m, n, dtype=torch.float64)
    if len(entries) == 0:  # n_overflow = 0: the kernel stages nothing and skips the pass
        return out
    for cta_group in range(n // (16 * R)):
        rb0 = cta_group * R
        for split in range(S):
            g_begin = split * ng
            staged = [
                [starts[(rb0 + r) * groups + g_begin + gl] for gl in range(ng + 1)] for r in range(R)
            ]  # the cp.async copy: R x (ng + 1) offsets
            for warp in range(NW):
                for r in range(R):
                    st = staged[r]
                    first, length = st[0], st[ng] - st[0]
                    e_begin, e_end = first + length * warp // NW, first + length * (warp + 1) // NW
                    if e_begin == e_end:
                        continue
                    tile = [
                        0
                    ] * 1024  # 16-bit slots, fragment order; the kernel zeroes it once, the mma after
                    gl = _next_bucket(st, ng, -1, e_begin)
                    bend = min(st[gl + 1], e_end)
                    c0 = done = e_begin
                    got = []

                    def chunk(c):
                        return [entries[c + lane] if c + lane < e_end else 0 for lane in range(32)]

                    cur, nxt = chunk(c0), chunk(c0 + 32)
                    while True:
                        for lane in range(32):
                            e = c0 + lane
                            if done <= e < bend:
                                p = cur[lane] & 1023
                                assert tile[p] == 0, "two entries in one tile slot"
                                tile[p] = cur[lane] >> 16
                                got.append(e)
                        if bend > c0 + 32:
                            c0, cur, nxt = c0 + 32, nxt, chunk(c0 + 64)
                            continue
                        g = g_begin + gl
                        frags = torch.tensor(tile, dtype=torch.int64).reshape(1, 1, 4, 32, 8)
                        w_tile = _bf16_of(unfragment(frags, 16, 64))  # [16, 64]
                        rows = slice(16 * (rb0 + r), 16 * (rb0 + r) + 16)
                        out[:, rows] += xd[:, 64 * g : 64 * g + 64] @ w_tile.T
                        if trace is not None:
                            trace.append(((cta_group, split), warp, rb0 + r, g, tuple(got)))
                        got = []
                        tile = [0] * 1024  # mma_overflow_tile zeroes what it read
                        done = bend
                        if done == e_end:
                            break
                        gl = _next_bucket(st, ng, gl, done)
                        bend = min(st[gl + 1], e_end)
                        if done == c0 + 32:
                            c0, cur, nxt = c0 + 32, nxt, chunk(c0 + 64)
    return out


def zgemv_model(z: dict, x: torch.Tensor, n: int, k: int, S: int = 1, R: int = 1, NW: int = 4, trace=None):
    """x . W[:n]^T as the compressed GEMV computes it, in float64: the main loop's decoded stream with its
    patches (every slot of an overflow entry reads +0.0 there), plus overflow_pass_model. n: a prefix of the
    matrix's rows (the unpooler's slice), as the kernel reads it."""
    rb = n // 16
    regs = apply_patches(decode_stream(z["stream"][:rb], z["table_words"]), z["patches"][:rb])
    elems = torch.stack([regs & 0xFFFF, (regs >> 16) & 0xFFFF], dim=-1)
    w_main = _bf16_of(unfragment(elems, n, k))
    return x.to(torch.float64) @ w_main.T + overflow_pass_model(z, x, n, k, S, R, NW, trace)
