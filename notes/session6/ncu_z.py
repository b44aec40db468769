"""Launch chosen plain / compressed GEMV configs once each inside cudaProfilerStart/Stop, for
ncu --profile-from-start off (notes/session6/next.sh). Session 4's probe plus the compressed engine.

usage: python notes/session6/ncu_z.py FILE layer:m:NW,S,U,P,R,C ... layer:m:z:NW,S,UG,P,R,C ..."""

import sys

import torch

from generator.judge.loader import load_submission
from generator.judge.weights import make_weights, make_x
from generator.problem import load_problem

mod = load_submission(sys.argv[1])
problem = load_problem()
weights = make_weights(problem, "normal", 0, "cuda")
state = mod.prepare({name: w.clone() for name, w in weights.items()})
gen = torch.Generator(device="cuda").manual_seed(1)
plan = []
for spec in sys.argv[2:]:
    layer, m, cfg = spec.split(":", 2)
    m, shape = int(m), problem.layers[layer]
    n = shape.n_for(m)
    x = make_x(m, shape.k, gen, "cuda")
    if cfg.startswith("z:"):
        state.setdefault("z:" + layer, mod.compress(state[layer][0], layer))
        c = tuple(int(v) for v in cfg[2:].split(","))
        fn = lambda x=x, layer=layer, n=n, c=c: mod._zgemv(x, layer, n, c, state)  # noqa: E731
    else:
        state.setdefault("packed:" + layer, tuple(mod.pack_mma_a(p) for p in state[layer]))
        c = tuple(int(v) for v in cfg.split(","))
        fn = lambda x=x, layer=layer, n=n, c=c: mod._gemv(x, layer, n, c, state)  # noqa: E731
    fn()
    plan.append((spec, fn))
torch.cuda.synchronize()
for i, (spec, fn) in enumerate(plan):
    print(f"PROBE {i}: {spec}", flush=True)
    torch.cuda.cudart().cudaProfilerStart()
    fn()
    torch.cuda.synchronize()
    torch.cuda.cudart().cudaProfilerStop()
