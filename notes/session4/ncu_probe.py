"""Launch chosen GEMV configs once each inside cudaProfilerStart/Stop, for ncu --profile-from-start off.

usage: python probe/ncu_probe.py FILE layer:m:NW,S,U,P,R,C ... [layer:m:cublas]
"""

import sys

import torch

from generator.judge.loader import load_submission
from generator.judge.weights import make_weights, make_x
from generator.problem import load_problem

path, specs = sys.argv[1], sys.argv[2:]
mod = load_submission(path)
problem = load_problem()
weights = make_weights(problem, "normal", 0, "cuda")
state = mod.prepare({k: v.clone() for k, v in weights.items()})
for name in weights:
    if "packed:" + name not in state:
        state["packed:" + name] = tuple(mod.pack_mma_a(p) for p in state[name])
    if "tiles:" + name not in state:
        state["tiles:" + name] = tuple(mod.pack_tma_tiles(p) for p in state[name])
mod._extension()
gen = torch.Generator(device="cuda")
gen.manual_seed(1)
plan = []
for spec in specs:
    layer, m, cfg = spec.split(":", 2)
    m = int(m)
    lay = problem.layers[layer]
    n = lay.n_for(m)
    x = make_x(m, lay.k, gen, "cuda")
    if cfg == "cublas":
        fn = (lambda x=x, layer=layer, n=n: mod._cublas(x, layer, n, state))
    elif cfg.startswith("tma:"):
        c = tuple(int(v) for v in cfg[4:].split(","))
        fn = (lambda x=x, layer=layer, n=n, c=c: mod._tma_gemv(x, layer, n, c, state))
    else:
        c = tuple(int(v) for v in cfg.split(","))
        fn = (lambda x=x, layer=layer, n=n, c=c: mod._gemv(x, layer, n, c, state))
    fn()
    plan.append((spec, fn))
torch.cuda.synchronize()
for i, (spec, fn) in enumerate(plan):
    print(f"PROBE {i}: {spec}", flush=True)
    torch.cuda.cudart().cudaProfilerStart()
    fn()
    torch.cuda.synchronize()
    torch.cuda.cudart().cudaProfilerStop()
