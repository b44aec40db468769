"""Does a refused call raise RuntimeError (not crash)? usage: python probe/throw_probe.py FILE gemv|tma"""
import sys
import torch
from generator.judge.loader import load_submission
mod = load_submission(sys.argv[1])
ext = mod._extension()
dev = "cuda"
x = torch.randn(1, 8192, device=dev).to(torch.bfloat16)
w = torch.randn(256 * 8192, device=dev).to(torch.bfloat16)
out = torch.empty(1, 256, device=dev, dtype=torch.float32)
ws = torch.empty(1 << 20, device=dev); sem = torch.zeros(4096, dtype=torch.int32, device=dev)
stream = torch.cuda.current_stream().cuda_stream
try:
    if sys.argv[2] == "gemv":
        ext.gemv(x, w, w, out, ws, sem, 256, 8192, 4, 1, 3, 1, 1, False, True, 0, stream)  # U=3: refused
    else:
        ext.tma_gemv(x, w, w, out, ws, sem, 256, 8192, 32, 1, 16, True, stream)  # ring too big: refused
    print(sys.argv[2], "RAN?!")
except RuntimeError as exc:
    print(sys.argv[2], "refused cleanly:", str(exc).splitlines()[0])
