"""Does a refused call come back as one line (not a crash)? usage: python -X faulthandler probe/throw_probe.py FILE"""
import sys
import torch
from generator.judge.loader import load_submission
print("loading", flush=True)
mod = load_submission(sys.argv[1])
ext = mod._extension()
print("extension loaded", flush=True)
dev = "cuda"
x = torch.randn(1, 8192, device=dev).to(torch.bfloat16)
w = torch.randn(256 * 8192, device=dev).to(torch.bfloat16)
out = torch.empty(1, 256, device=dev, dtype=torch.float32)
ws = torch.empty(1 << 20, device=dev); sem = torch.zeros(4096, dtype=torch.int32, device=dev)
stream = torch.cuda.current_stream().cuda_stream
print("tensors ready", flush=True)
cpu = torch.zeros(1, 8192, dtype=torch.bfloat16)
print("gemv x on CPU returned:", repr(ext.gemv(cpu, w, w, out, ws, sem, 256, 8192, 4, 1, 1, 1, 1, False, True, 0, stream)), flush=True)
print("gemv U=3 returned:", repr(ext.gemv(x, w, w, out, ws, sem, 256, 8192, 4, 1, 3, 1, 1, False, True, 0, stream)), flush=True)
print("tma ring too big returned:", repr(ext.tma_gemv(x, w, w, out, ws, sem, 256, 8192, 32, 1, 16, False, True, stream)), flush=True)
try:
    mod._launch("gemv", x, w, w, out, ws, sem, 256, 8192, 4, 1, 3, 1, 1, False, True, 0, stream)
    print("_launch RAN?!")
except RuntimeError as exc:
    print("_launch raised RuntimeError:", exc)
print("process still alive", flush=True)
