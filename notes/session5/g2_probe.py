"""G=1 vs G=2 consumer warpgroups of the TMA GEMV: each config launched eagerly with a line before and after (a hang
shows which), checked against float64, then timed cold (same process) on the shapes the bar misses."""
import json, sys, time
import torch
from generator.judge.loader import load_submission
from generator.judge.reference import compare, reference
from generator.judge.timing import L2Flusher, time_cold_us
from generator.judge.weights import make_weights, make_x
from generator.problem import load_problem

T0 = time.time()
def log(*a):
    print(f"[{time.time() - T0:6.1f}s]", *a, flush=True)

mod = load_submission(sys.argv[1]); out_json = sys.argv[2]
mod._extension(); log("extension ready")
problem = load_problem()
weights = make_weights(problem, "normal", 0, "cuda")
state = {"ws": torch.empty(mod.WORKSPACE_FLOATS, device="cuda"), "sem": torch.zeros(4096, dtype=torch.int32, device="cuda")}
for name, w in weights.items():
    parts = mod.split_hi_lo(w) if problem.layers[name].dual else (w,)
    state["tiles:" + name] = tuple(mod.pack_tma_tiles(p.contiguous()) for p in parts)
    state["packed:" + name] = tuple(mod.pack_mma_a(p.contiguous()) for p in parts)
log("packed")
gen = torch.Generator(device="cuda"); gen.manual_seed(7)
flush = L2Flusher()
SHAPES = [("qkv_gate", 32), ("qkv_gate", 16), ("pooler", 32), ("router", 32), ("router", 16), ("o", 8), ("qkv_gate", 1)]
results = []
for layer, m in SHAPES:
    L = problem.layers[layer]; n = L.n_for(m); x = make_x(m, L.k, gen, "cuda")
    ref, scale = reference(x, weights[layer], n)
    gcfg = mod._engine(layer, m)
    row = {"layer": layer, "m": m, "engine": list(map(str, gcfg)), "t": {}}
    cfgs = [(s, st, c, g) for s in (1, 2, 3, 4, 6, 8, 12, 16) for st in (4, 8, 12) for c in (0, 1) for g in (1, 2)]
    cfgs = [c for c in cfgs if mod.tma_config_error(c, m, L.dual, n, L.k) is None]
    for cfg in cfgs:
        if not results:  # the first shape: a line before every launch, so a hang names its config
            log(layer, m, cfg, "launch")
        out = mod._tma_gemv(x, layer, n, cfg, state); torch.cuda.synchronize()
        ok = compare(out, ref, scale, fp32_out=L.dual).ok
        if not ok:
            log("WRONG", layer, m, cfg); continue
        row["t"][str(cfg)] = time_cold_us(lambda: mod._tma_gemv(x, layer, n, cfg, state), flush, 20)
    if gcfg[0] == "gemv":
        row["gemv_us"] = time_cold_us(lambda: mod._gemv(x, layer, n, gcfg[1], state), flush, 60)
    best = {g: min(((v, k) for k, v in row["t"].items() if k.endswith(f"{g})")), default=None) for g in (1, 2)}
    fin = {}
    for g, b in best.items():
        if b:
            cfg = tuple(int(v) for v in b[1].strip("()").split(","))
            fin[g] = (b[1], time_cold_us(lambda: mod._tma_gemv(x, layer, n, cfg, state), flush, 80))
    row["final"] = fin
    log(layer, m, "gemv", round(row.get("gemv_us", 0), 2), "best G=1", fin.get(1), "best G=2", fin.get(2))
    results.append(row)
    json.dump(results, open(out_json, "w"), indent=1)
log("done")
