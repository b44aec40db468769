"""A bit-level model of the compressed GEMV's decoder (kernels_src/zgemv.cuh): PTX prmt.b32 on integers, and the
decode recipe of kernels_src/compress.py applied to a whole stream. The tests decode with it, so they prove the
recipe the kernel runs, not only the format."""

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


def decompress(z: dict, n: int, k: int) -> torch.Tensor:
    """The exact bf16 [N, K] a compressed matrix stands for: the decoded stream (exceptions read +0.0 there), the
    groups' patches ORed in, then each overflow exception's bits put back. What the kernel computes is
    x . decompress(z)^T."""
    regs = apply_patches(decode_stream(z["stream"], z["table_words"]), z["patches"])  # [RB, G, 4, 32, 4]
    elems = torch.stack([regs & 0xFFFF, (regs >> 16) & 0xFFFF], dim=-1)
    bits = unfragment(elems, n, k).clone()
    exc, starts = z["exceptions"], z["row_starts"]
    for rb in range(exc.shape[0]):
        for i in range(16):  # the kernel's walk: row i's entries, in order
            for e in range(int(starts[rb, i]), int(starts[rb, i + 1])):
                key, value = exc[rb, e].tolist()
                assert key >> 16 == i, "an entry outside its row's range"
                assert bits[16 * rb + i, key & 0xFFFF] == 0, "an overflow exception whose slot is not +0.0"
                bits[16 * rb + i, key & 0xFFFF] = value
    return (bits.to(torch.int32).to(torch.int16)).view(torch.bfloat16)
