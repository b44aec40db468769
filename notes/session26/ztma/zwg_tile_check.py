"""Session 26: the CPU check of zwg's tile construction (notes/session26/ztma/ztma.cu, zwg_kernel): each lane's decoded
registers (tests/zdecode_model.decode_stream) stored as zwg stores them, two 4-k runs a fragment, give back W exactly.
Run from the repository root: .venv/bin/python notes/session26/ztma/zwg_tile_check.py (prints 0 mismatches)."""
import sys, torch
sys.path.insert(0, "tests"); sys.path.insert(0, ".")
from kernels_src.compress import compress
from zdecode_model import decode_stream
g = torch.Generator().manual_seed(0)
mags = torch.tensor([0.5, 1.0, 2.0, 4.0])
W = (mags[torch.randint(0, 4, (64, 64), generator=g)] * torch.sign(torch.randn(64, 64, generator=g)) * (1 + torch.rand(64, 64, generator=g))).to(torch.bfloat16)
z = compress(W)
assert z["count"] == 0
regs = decode_stream(z["stream"], z["table_words"])  # [4 rb, 1 G, 4 f, 32 lanes, 4 regs]
tile = torch.zeros(64, 64, dtype=torch.int64)
for w in range(4):
    for f in range(4):
        for lane in range(32):
            gg, tt = lane >> 2, lane & 3
            r = regs[w, 0, f, lane]
            k = 32 * (f >> 1) + 8 * tt + 4 * (f & 1)
            # uint2{r0, r2} at row g: 4 contiguous k: r0 lo, r0 hi, r2 lo, r2 hi
            for row, (x0, x1) in ((16 * w + gg, (r[0], r[2])), (16 * w + gg + 8, (r[1], r[3]))):
                vals = [int(x0) & 0xFFFF, (int(x0) >> 16) & 0xFFFF, int(x1) & 0xFFFF, (int(x1) >> 16) & 0xFFFF]
                for q in range(4):
                    tile[row, k + q] = vals[q]
ref = W.view(torch.int16).to(torch.int64) & 0xFFFF
print("mismatches:", int((tile != ref).sum()), "of", tile.numel())
bad = (tile != ref).nonzero()
print(bad[:10].tolist())
