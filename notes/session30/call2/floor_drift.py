"""Does the launch floor drift within a run, and does a kernel's cold time drift with it? (session 30, call 2)

Call 1's probe measured the launch floor at 4.50 us at its start and 5.09 us at its end, ~15 s later. bench
measures the floor once, before its 30 shapes. Here: for ITER rounds, back to back, the launch floor (200 reps),
o m = 16 / 32 through kernel_fn and cuBLAS (100 reps each, cold, read-flushed), the read bandwidth, and the
GPU's clocks, power and temperature (nvidia-smi), so the floor's samples can be set beside the kernels' times.
Run on the H200 from the repo root: PYTHONPATH=. python3 notes/session30/call2/floor_drift.py [ITER]
"""

import subprocess
import sys
import time

import torch

from generator.judge.loader import load_submission
from generator.judge.timing import L2Flusher, launch_floor_us, read_bandwidth, time_cold_us
from generator.judge.weights import make_weight

ITER = int(sys.argv[1]) if len(sys.argv) > 1 else 20
mod = load_submission("dist/submission.py")
gen = torch.Generator(device="cuda").manual_seed(0)
w = make_weight(8192, 1024, "bfloat16", "normal", gen, "cuda")
state = mod.prepare({"o": w.clone()})
flush = L2Flusher()
xs = {m: torch.randn(m, 1024, generator=gen, device="cuda").to(torch.bfloat16) for m in (16, 32)}
calls = {}
for m, x in xs.items():
    data = {"x": x, "config": {"m": m, "n": 8192, "k": 1024, "layer": "o"}}
    calls[f"o{m}"] = lambda data=data: mod.kernel_fn(data, state)
    calls[f"cublas{m}"] = lambda x=x: x @ w.t()


def smi():
    q = "clocks.sm,clocks.mem,power.draw,temperature.gpu,clocks_throttle_reasons.active"
    out = subprocess.run(["nvidia-smi", f"--query-gpu={q}", "--format=csv,noheader,nounits"],
                         capture_output=True, text=True).stdout.strip()
    return out


t0 = time.time()
print(f"{'s':>5} {'floor':>6} {'o16':>6} {'o32':>6} {'cub16':>6} {'cub32':>6} {'TB/s':>5} {'floor2':>6} "
      "| sm MHz, mem MHz, W, C, throttle")
for i in range(ITER):
    f1 = launch_floor_us(flush)
    t = {name: time_cold_us(fn, flush, 100) for name, fn in calls.items()}
    bw = read_bandwidth(flush) / 1e12
    f2 = launch_floor_us(flush)
    print(f"{time.time() - t0:5.1f} {f1:6.2f} {t['o16']:6.2f} {t['o32']:6.2f} {t['cublas16']:6.2f} "
          f"{t['cublas32']:6.2f} {bw:5.2f} {f2:6.2f} | {smi()}", flush=True)
