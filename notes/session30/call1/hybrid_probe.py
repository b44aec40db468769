"""Hybrid probe (session 30, call 1): can o at m = 16 / 32 read fewer bytes without a consumer-latency tail?

Idea: split o's 8192 rows in two parts and run them at once, on every SM:
  * part T (rows [0, Nt)): the bf16 half-tile TMA GEMV (C = 3), a bandwidth-bound stream with an idle consumer;
  * part Z (rows [Nt, 8192)): the 12-bit compressed GEMV (zgemv), issue- and latency-bound, 25 % fewer bytes.
The two kernels go on two streams of one graph (fork / join), so their CTAs share the SMs: the decode hides under
the TMA stream, and the DRAM reads fewer bytes in total (Nt = 4096: 14.7 MB instead of 16.8 MB).
Timing only, plus a check of each part against float32; the judge's timing (graph, L2 read-flushed, events).
Run on the H200 from the repo root: PYTHONPATH=. python3 notes/session30/call1/hybrid_probe.py
"""

import statistics
import sys

import torch

from generator.judge.loader import load_submission
from generator.judge.timing import L2Flusher, launch_floor_us, time_cold_us
from generator.judge.weights import make_weight

ROUNDS = int(sys.argv[1]) if len(sys.argv) > 1 else 5
MS = [16, 32]
N, K = 8192, 1024

mod = load_submission("dist/submission.py")
mod._extension()
dev = "cuda"
gen = torch.Generator(device=dev).manual_seed(0)
w = make_weight(N, K, "bfloat16", "normal", gen, dev)
flush = L2Flusher()

state = {"ws": torch.empty(mod.WORKSPACE_FLOATS, dtype=torch.float32, device=dev),
         "sem": torch.zeros(mod.SEMAPHORES, dtype=torch.int32, device=dev)}
state["tiles:o"] = (mod.pack_tma_bulk(w),)
state["z:o"] = mod.compress(w, "o")
state["cublas:o"] = w


def add_part(name, rows):
    """A pseudo layer over w[rows]: both packings, so either engine can run it."""
    part = w[rows].contiguous()
    mod.LAYERS[name] = dict(mod.LAYERS["o"], n=part.shape[0])
    state["halftiles:" + name] = (mod.pack_tma_half_bulk(part),)
    state["tiles:" + name] = (mod.pack_tma_bulk(part),)
    z = mod.compress(part, name)
    state["z:" + name] = z
    print(f"{name}: {part.shape[0]} rows, capr {z['exceptions'].shape[1] if z['exceptions'].dim() > 1 else 0}")
    return part


parts = {}
for nt in (4096, 6144):
    parts[f"t{nt}"] = add_part(f"t{nt}", slice(0, nt))
    parts[f"z{nt}"] = add_part(f"z{nt}", slice(nt, N))

side = torch.cuda.Stream()


def hybrid(t_call, z_call, z_first):
    def run():
        cur = torch.cuda.current_stream()
        side.wait_stream(cur)
        if z_first:
            with torch.cuda.stream(side):
                oz = z_call()
            ot = t_call()
        else:
            with torch.cuda.stream(side):
                ot = t_call()
            oz = z_call()
        cur.wait_stream(side)
        return ot, oz
    return run


def cases(m, x):
    zc = (8, 1, 1, 0, 1, 0)
    c = {
        "tma full (1,8,0)": lambda: mod._tma_gemv(x, "o", N, (1, 8, 0), state),
        "z full (8,1,1,0,1,0)": lambda: mod._zgemv(x, "o", N, zc, state),
        "cublas full": lambda: mod._cublas(x, "o", N, state),
    }
    for nt in (4096, 6144):
        tn, zn = f"t{nt}", f"z{nt}"
        nz = N - nt
        t_half = lambda tn=tn, nt=nt: mod._tma_gemv(x, tn, nt, (1, 8, 3), state)
        t_full = lambda tn=tn, nt=nt: mod._tma_gemv(x, tn, nt, (1, 8, 0), state)
        zcall = lambda zn=zn, nz=nz: mod._zgemv(x, zn, nz, zc, state)
        c[f"{nt}: T half alone"] = t_half
        c[f"{nt}: T 64-row alone"] = t_full
        c[f"{nt}: Z alone"] = zcall
        c[f"{nt}: T half + Z, z first"] = hybrid(t_half, zcall, True)
        c[f"{nt}: T half + Z, t first"] = hybrid(t_half, zcall, False)
        c[f"{nt}: T 64-row + Z, z first"] = hybrid(t_full, zcall, True)
    return c


def check(m, x, c):
    ref = x.float() @ w.float().t()
    scale = ref.abs().max().item()
    for name, fn in c.items():
        out = fn()
        torch.cuda.synchronize()
        if isinstance(out, tuple):
            full, want = torch.cat([out[0].float(), out[1].float()], dim=1), ref
        else:  # a part alone: T parts are rows [0, nt), Z parts rows [nt, N)
            full = out.float()
            nt = int(name.split(":")[0]) if ":" in name else 0
            want = ref if full.shape[1] == N else (ref[:, :nt] if " T " in name else ref[:, nt:])
        err = (full - want).abs().max().item() / scale
        print(f"  check m={m} {name:<32} max err / max|ref| = {err:.2e} {'OK' if err < 1e-2 else 'WRONG'}")


floor = launch_floor_us(flush)
print(f"launch floor {floor:.2f} us")
for m in MS:
    x = torch.randn(m, K, generator=gen, device=dev).to(torch.bfloat16)
    c = cases(m, x)
    check(m, x, c)
    names = list(c)
    times = {n: [] for n in names}
    for r in range(ROUNDS):
        order = names[r % len(names):] + names[: r % len(names)]
        for n in order:
            times[n].append(time_cold_us(c[n], flush, reps=100))
    base = statistics.median(times[names[0]])
    print(f"m = {m}: medians of {ROUNDS} rounds (median of 100 each), us; ratio to the first")
    for n in names:
        med = statistics.median(times[n])
        print(f"  {n:<32} {med:7.2f}  {med / base:6.3f}   [{min(times[n]):.2f} - {max(times[n]):.2f}]")
print(f"launch floor again {launch_floor_us(flush):.2f} us")
