"""A/B on the H200: the TMA GEMV's weights by tensor-map copies (bulk=False, packing.pack_tma_tiles) against plain
8 KB bulk copies of pre-swizzled tiles (bulk=True, + packing.swizzle_128b), same configs, same process.

usage: python probe/bulk_probe.py FILE OUT_JSON
"""

import json
import sys

import torch

from generator.judge.loader import load_submission
from generator.judge.reference import compare, reference
from generator.judge.timing import L2Flusher, launch_floor_us, read_bandwidth, time_cold_us
from generator.judge.weights import make_weights, make_x
from generator.problem import load_problem

path, out_json = sys.argv[1], sys.argv[2]
mod = load_submission(path)
problem = load_problem()
dev = "cuda"
weights = make_weights(problem, "normal", 0, dev)
heavy = make_weights(problem, "heavy", 5, dev)
state = mod.prepare({k: v.clone() for k, v in weights.items()})
ws, sem = state["ws"], state["sem"]
gen = torch.Generator(device=dev)
gen.manual_seed(3)


def tiles_of(w, bulk):
    parts = mod.split_hi_lo(w) if w.dtype == torch.float32 else (w, w)
    t = tuple(mod.pack_tma_tiles(p) for p in parts)
    return tuple(mod.swizzle_128b(p) for p in t) if bulk else t


def run(x, tl, n, cfg, bulk, dual, out=None):
    s, st, c = cfg
    m = x.shape[0]
    if out is None:
        out = torch.empty((m, n), dtype=torch.float32 if dual else torch.bfloat16, device=dev)
    mod._launch("tma_gemv", x, tl[0], tl[1], out, ws, sem, n, x.shape[1], s, mod.column_blocks(m), st, bool(c),
                bulk, dual, torch.cuda.current_stream().cuda_stream)
    return out


fails = checks = 0
for dist_name, wset in (("normal", weights), ("heavy", heavy)):
    for name, lay in problem.layers.items():
        tl = tiles_of(wset[name], True)
        for m in (1, 5, 9, 16, 17, 32):
            n = lay.n_for(m)
            x = make_x(m, lay.k, gen, dev)
            ref, scale = reference(x, wset[name], n)
            for cfg in ((1, 8, 0), (3, 8, 0), (4, 4, 1), (7, 4, 0)):
                if mod.tma_config_error(cfg, m, lay.dual, n, lay.k) is not None:
                    continue
                out = torch.full((m, n), float("nan"), dtype=torch.float32 if lay.dual else torch.bfloat16, device=dev)
                run(x, tl, n, cfg, True, lay.dual, out)
                torch.cuda.synchronize()
                c = compare(out, ref, scale, fp32_out=lay.dual)
                checks += 1
                if not c.ok:
                    fails += 1
                    print(f"WRONG {dist_name} {name} m={m} {cfg}: {c.problem}", flush=True)
print(f"bulk correctness: {fails} failures of {checks}", flush=True)

flush = L2Flusher()
floor, bw = launch_floor_us(flush), read_bandwidth(flush)
print(f"launch floor {floor:.2f} us, read {bw / 1e12:.2f} TB/s", flush=True)
report = {"floor_us": floor, "read_Bps": bw, "fails": fails, "rows": []}
CFGS = [(s, st, c) for s in (1, 2, 3, 4, 6, 8, 16) for st in (4, 8, 12) for c in (0, 1)]
print(f"{'layer':9} {'m':>3} {'tensor us':>9} {'cfg':>11} {'bulk us':>8} {'cfg':>11} {'gemv/ttable us':>14}", flush=True)
for name, lay in problem.layers.items():
    tl = {b: tiles_of(weights[name], b) for b in (False, True)}
    for m in (1, 16, 32):
        n = lay.n_for(m)
        x = make_x(m, lay.k, gen, dev)
        shipped = time_cold_us(lambda: mod.kernel_fn({"x": x, "config": {"m": m, "n": n, "k": lay.k, "layer": name}},
                                                      state), flush, 100)
        best = {}
        for bulk in (False, True):
            t = {}
            for cfg in CFGS:
                if mod.tma_config_error(cfg, m, lay.dual, n, lay.k) is None:
                    t[cfg] = time_cold_us(lambda: run(x, tl[bulk], n, cfg, bulk, lay.dual), flush, 25)
            top = sorted(t, key=t.get)[:3]
            fin = {c: time_cold_us(lambda: run(x, tl[bulk], n, c, bulk, lay.dual), flush, 100) for c in top}
            best[bulk] = min(fin.items(), key=lambda kv: kv[1])
        print(f"{name:9} {m:>3} {best[False][1]:9.2f} {str(best[False][0]):>11} {best[True][1]:8.2f}"
              f" {str(best[True][0]):>11} {shipped:14.2f}", flush=True)
        report["rows"].append({"layer": name, "m": m, "tensor": [list(best[False][0]), best[False][1]],
                               "bulk": [list(best[True][0]), best[True][1]], "shipped_us": shipped})
        json.dump(report, open(out_json, "w"), indent=1)
