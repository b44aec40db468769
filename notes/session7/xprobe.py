"""Session 7: where the plain GEMV's time goes at m = 8..32. The same dist/submission.py, its CUDA_SRC edited
by string (nothing probe-only lives in kernels_src/), compiled under another extension name per variant:
  base    unchanged
  xl1     x's address wraps within 4 K blocks (x served from L1 after the first trip): x's L2 traffic removed
  nomma   each mma.sync replaced by an integer fold of its operands: the tensor pipe removed
  both    xl1 + nomma: what is left is the weight stream and the kernel's structure
Outputs are wrong in every variant but base; the probe only times.

usage: python xprobe.py build VARIANT        (compile only; run the four in parallel)
       python xprobe.py time OUT.json VARIANT...  (time every variant in one process, interleaved per shape)"""

import json
import sys

import torch
from torch.utils.cpp_extension import load_inline

from generator.judge.loader import load_submission
from generator.judge.timing import L2Flusher, launch_floor_us, read_bandwidth, time_cold_us
from generator.judge.weights import make_weights, make_x
from generator.problem import load_problem

X_LOAD = "tr.x[u][nb] = (ok && xvalid[nb]) ? ld_x(xp[nb] + kb * 4) : zero_frag();"
X_L1 = "tr.x[u][nb] = (ok && xvalid[nb]) ? ld_x(xp[nb] + (kb & 3) * 4) : zero_frag();"
MMA = "mma_bf16_m16n8k16(acc[r][nb], tr.w[r][u][y].r, b0, b1);"
MMA2 = "if constexpr (DUAL) mma_bf16_m16n8k16(acc[r][nb], tr.w2[r][u][y].r, b0, b1);"


def fold(w):
    return (f"acc[r][nb][0] += __uint_as_float(({w}[0] ^ {w}[1] ^ {w}[2] ^ {w}[3] ^ b0 ^ b1) & 0x3f800000u);")


EDITS = {
    "base": [],
    "xl1": [(X_LOAD, X_L1)],
    "nomma": [(MMA2, "if constexpr (DUAL) " + fold("tr.w2[r][u][y].r")), (MMA, fold("tr.w[r][u][y].r"))],
}
EDITS["both"] = EDITS["xl1"] + EDITS["nomma"]


def variant(mod, name):
    src = mod.CUDA_SRC
    for old, new in EDITS[name]:
        assert src.count(old) == 1, (name, old, src.count(old))
        src = src.replace(old, new)
    return load_inline(name="okc_probe_" + name, cpp_sources=mod.BINDING_SRC, cuda_sources=src,
                       functions=["gemv", "tma_gemv", "zgemv"], extra_cuda_cflags=mod.CUDA_FLAGS, verbose=False)


# (layer, m, configs): the CTABLE entry first, then alternatives with more rows per x read or more CTAs.
PLAN = [
    ("router", 1, [(16, 4, 4, 0, 1, 1)]),
    ("router", 8, [(8, 8, 4, 0, 1, 1)]),
    ("router", 16, [(16, 4, 4, 2, 1, 1), (16, 4, 2, 0, 2, 1)]),
    ("router", 32, [(16, 8, 2, 2, 1, 0), (16, 4, 1, 0, 2, 1), (8, 8, 1, 0, 2, 1)]),
    ("qkv_gate", 1, [(16, 1, 2, 1, 2, 0)]),
    ("qkv_gate", 8, [(16, 1, 2, 1, 2, 0)]),
    ("qkv_gate", 16, [(16, 1, 1, 1, 2, 0), (4, 4, 2, 0, 1, 1)]),
    ("qkv_gate", 32, [(4, 4, 1, 1, 1, 1), (16, 1, 1, 0, 2, 0)]),
    ("o", 8, [(8, 1, 4, 0, 2, 0)]),
    ("pooler", 16, [(8, 1, 2, 1, 1, 0)]),
    ("pooler", 32, [(4, 2, 4, 0, 1, 1)]),
]


def main():
    mod = load_submission("dist/submission.py")
    if sys.argv[1] == "build":
        variant(mod, sys.argv[2])
        return
    out, names = sys.argv[2], sys.argv[3:]
    exts = {name: variant(mod, name) for name in names}
    problem = load_problem()
    weights = make_weights(problem, "normal", 0, "cuda")
    layers = sorted({layer for layer, _, _ in PLAN})
    state = {}
    for layer in layers:
        w = weights[layer].contiguous()
        parts = mod.split_hi_lo(w) if w.dtype == torch.float32 else (w,)
        state["packed:" + layer] = tuple(mod.pack_mma_a(p) for p in parts)
    state["ws"] = torch.empty(mod.WORKSPACE_FLOATS, dtype=torch.float32, device="cuda")
    state["sem"] = torch.zeros(mod.SEMAPHORES, dtype=torch.int32, device="cuda")
    flush = L2Flusher()
    print(f"launch floor {launch_floor_us(flush):.2f} us, read {read_bandwidth(flush) / 1e12:.2f} TB/s", flush=True)
    gen = torch.Generator(device="cuda").manual_seed(1)
    rows = []
    for layer, m, cfgs in PLAN:
        n = problem.layers[layer].n_for(m)
        x = make_x(m, problem.layers[layer].k, gen, "cuda")
        for cfg in cfgs:
            times = {}
            for name in names:
                mod._EXTENSION = exts[name]
                times[name] = time_cold_us(lambda: mod._gemv(x, layer, n, cfg, state), flush)
            rows.append(dict(layer=layer, m=m, cfg=cfg, **times))
            print(f"{layer:9s} {m:3d} {str(cfg):22s} " + "  ".join(f"{k} {v:6.2f}" for k, v in times.items()),
                  flush=True)
    json.dump(rows, open(out, "w"), indent=1)


if __name__ == "__main__":
    main()
