"""Session 13 (branch ztma, run from its tree): launch TMA-GEMV configs once each inside cudaProfilerStart/Stop,
for `ncu --profile-from-start off`: where does a Z = 1 CTA spend ~290 ns per K tile when a Z = 0 CTA spends ~100
(call 2: qkv_gate m = 1, S = 1: 46 us at STAGES 6..12 against 24 us; two consumer warpgroups did not help)?

usage (b_ztma as the working directory, PYTHONPATH=.): python3 ../notes/session13/ncu_tma.py layer:m:S,STAGES,C,Z ...

Kept as call 3 ran it; `python -m generator profile` now does the same (same ncu options, any engine)."""

import sys

import torch

from generator.judge.loader import load_submission
from generator.judge.weights import make_weights, make_x
from generator.problem import load_problem

mod = load_submission("dist/submission.py")
problem = load_problem()
weights = make_weights(problem, "normal", 0, "cuda")
state = mod.prepare({name: w.clone() for name, w in weights.items()})
gen = torch.Generator(device="cuda").manual_seed(1)
plan = []
for spec in sys.argv[1:]:
    layer, m, cfg = spec.split(":")
    m, lay = int(m), problem.layers[layer]
    state.setdefault("tiles:" + layer, tuple(mod.pack_tma_bulk(p) for p in state[layer]))
    state.setdefault("ztma:" + layer, mod.compress_for_tma(state[layer][0], layer))
    x = make_x(m, lay.k, gen, "cuda")
    c = tuple(int(v) for v in cfg.split(","))
    plan.append((spec, lambda x=x, layer=layer, n=lay.n_for(m), c=c: mod._tma_gemv(x, layer, n, c, state)))
for spec, fn in plan:
    fn()  # warm: module load, tensor-map encoder, smem opt-in
torch.cuda.synchronize()
torch.cuda.cudart().cudaProfilerStart()
for spec, fn in plan:
    fn()
    torch.cuda.synchronize()
torch.cuda.cudart().cudaProfilerStop()
print("launched", [spec for spec, _ in plan])
