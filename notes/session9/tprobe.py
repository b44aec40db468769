"""Session 8's tprobe.py, run in session 9: where the TMA GEMV's time goes. Its time hardly moves with m
(TTABLE comments: qkv_gate m = 1 15.9 us against the register GEMV's 14.5, m = 32 16.8), so its excess over the
floor is a fixed cost. The same dist/submission.py, its CUDA_SRC edited by string (nothing probe-only lives in
kernels_src/), compiled under another extension name per variant, as session 7's xprobe.py does for the GEMV:
  base     unchanged
  nowg     no wgmma issued (fences, commits and waits stay): the tensor pipe removed
  notail   every split CTA writes its partial straight to the output (S = 1's epilogue): no workspace, fence,
           counter or last-CTA sum; C = 0 configs only
  both     nowg + notail: what is left is the TMA stream, the barriers and the launch
Outputs are wrong in every variant but base; the probe only times. The register GEMV's entry for the same shape
is timed alongside (base extension) as the reference.

Session 9: session 8's version loaded the four extensions into one process, and its first TMA launch failed there
("invalid argument"); each variant now runs in a process of its own (one extension per process) and a refused
config is recorded instead of ending the run.

usage: python tprobe.py build VARIANT            (compile only; the four can build in parallel)
       python tprobe.py time OUT.json VARIANT    (time one variant; the register GEMV's entry timed alongside)"""

import json
import sys
import time

import torch
from torch.utils.cpp_extension import load_inline

from generator.judge.loader import load_submission
from generator.judge.timing import L2Flusher, launch_floor_us, read_bandwidth, time_cold_us
from generator.judge.weights import make_weights, make_x
from generator.problem import load_problem

WGMMA = "wgmma_bf16<NB>(acc, sw128_desc(slot + kk * 32), b);"
WGMMA2 = "if constexpr (DUAL) wgmma_bf16<NB>(acc, sw128_desc(slot + kTmaWBytes + kk * 32), b);"
TAIL = "    if (a.S == 1) {\n#pragma unroll\n        for (int e = 0; e < kAcc; ++e) tma_write<OutT>"
NO_TAIL = "    if (true) {\n#pragma unroll\n        for (int e = 0; e < kAcc; ++e) tma_write<OutT>"

EDITS = {
    "base": [],
    "nowg": [(WGMMA2, "(void)b;"), (WGMMA, "(void)b;")],
    "notail": [(TAIL, NO_TAIL)],
}
EDITS["both"] = EDITS["nowg"] + EDITS["notail"]


def edited_source(src, name):
    for old, new in EDITS[name]:
        assert src.count(old) == 1, (name, old, src.count(old))
        src = src.replace(old, new)
    return src


def variant(mod, name):
    return load_inline(name="okc_tprobe_" + name, cpp_sources=mod.BINDING_SRC,
                       cuda_sources=edited_source(mod.CUDA_SRC, name), functions=["gemv", "tma_gemv", "zgemv"],
                       extra_cuda_cflags=mod.CUDA_FLAGS, verbose=False)


# (layer, m, TMA configs (S, STAGES, C = 0), the register GEMV's config for reference)
PLAN = [
    ("qkv_gate", 1, [(3, 8, 0), (4, 8, 0), (1, 16, 0)], (16, 1, 2, 1, 2, 0)),
    ("qkv_gate", 32, [(3, 8, 0), (4, 8, 0), (2, 12, 0), (1, 16, 0)], (4, 4, 1, 1, 1, 1)),
    ("pooler", 32, [(2, 8, 0), (1, 16, 0)], (4, 2, 4, 0, 1, 1)),
    ("o", 32, [(1, 8, 0), (2, 8, 0)], (8, 1, 1, 4, 2, 0)),
]


def main():
    mod = load_submission("dist/submission.py")
    if sys.argv[1] == "build":
        variant(mod, sys.argv[2])
        return
    if sys.argv[1] == "source":  # the edited CUDA_SRC, to compile it with nvcc alone (no GPU needed)
        sys.stdout.write(edited_source(mod.CUDA_SRC, sys.argv[2]))
        return
    out, name = sys.argv[2], sys.argv[3]
    t0 = time.time()
    mod._EXTENSION = variant(mod, name)
    print(f"{name}: extension loaded in {time.time() - t0:.0f} s", flush=True)
    problem = load_problem()
    weights = make_weights(problem, "normal", 0, "cuda")
    state = {}
    for layer in sorted({layer for layer, _, _, _ in PLAN}):
        w = weights[layer].contiguous()
        state["tiles:" + layer] = (mod.pack_tma_tiles(w),)
        state["packed:" + layer] = (mod.pack_mma_a(w),)
    state["ws"] = torch.empty(mod.WORKSPACE_FLOATS, dtype=torch.float32, device="cuda")
    state["sem"] = torch.zeros(mod.SEMAPHORES, dtype=torch.int32, device="cuda")
    flush = L2Flusher()
    print(f"launch floor {launch_floor_us(flush):.2f} us, read {read_bandwidth(flush) / 1e12:.2f} TB/s "
          f"(set-up {time.time() - t0:.0f} s)", flush=True)
    gen = torch.Generator(device="cuda").manual_seed(1)
    rows = []
    for layer, m, cfgs, gemv_cfg in PLAN:
        n = problem.layers[layer].n_for(m)
        x = make_x(m, problem.layers[layer].k, gen, "cuda")
        for engine, cfg, call in [("gemv", gemv_cfg, mod._gemv)] + [("tma", c, mod._tma_gemv) for c in cfgs]:
            try:
                us = time_cold_us(lambda: call(x, layer, n, cfg, state), flush)
            except RuntimeError as refused:
                us, why = float("nan"), str(refused).splitlines()[0]
                torch.cuda.synchronize()
            else:
                why = ""
            rows.append(dict(variant=name, layer=layer, m=m, engine=engine, cfg=cfg, us=us, error=why))
            print(f"{name:6s} {layer:9s} {m:3d} {engine:4s} {str(cfg):22s} {us:6.2f} {why}", flush=True)
    json.dump(rows, open(out, "w"), indent=1)

if __name__ == "__main__":
    main()
