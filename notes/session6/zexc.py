"""Session 6: what the exception pass costs. For each (layer, m), the 3 best z configs of the previous sweep,
timed cold with the real exception tables and with them emptied (row_starts zeroed: wrong output, pure timing),
plus cuBLAS and the table's current engine, all in one process."""
import json, sys, torch
from generator.judge.loader import load_submission
from generator.judge.timing import L2Flusher, time_cold_us, launch_floor_us, read_bandwidth
from generator.judge.weights import make_weights, make_x
from generator.problem import load_problem

mod = load_submission(sys.argv[1])
problem = load_problem()
weights = make_weights(problem, "normal", 0, "cuda")
state = mod.prepare({k: v.clone() for k, v in weights.items()})
flush = L2Flusher()
gen = torch.Generator(device="cuda").manual_seed(1)
prev = json.load(open("notes/session6/call1_sweep_z.json"))
rows = []
print(f"launch floor {launch_floor_us(flush):.2f} us, read {read_bandwidth(flush)/1e12:.2f} TB/s")
for name in ("qkv_gate", "o", "pooler", "unpooler"):
    z = mod.compress(state[name][0], name)
    state["z:" + name] = z
    stripped = dict(z, row_starts=torch.zeros_like(z["row_starts"]))
    print(f"{name}: {z['count']} exceptions, capr {z['exceptions'].shape[1]}, "
          f"max per row {int((z['row_starts'][:,1:]-z['row_starts'][:,:-1]).max())}")
for p in prev:
    name, m = p["layer"], p["m"]
    layer = problem.layers[name]
    n = layer.n_for(m)
    x = make_x(m, layer.k, gen, "cuda")
    cub = time_cold_us(lambda: mod._cublas(x, name, n, state), flush)
    cur = time_cold_us(lambda: mod.kernel_fn({"x": x, "config": {"m": m, "n": n, "k": layer.k, "layer": name}}, state), flush)
    cfgs = [tuple(c) for c, _ in sorted(p["timings"], key=lambda t: t[1])[:3]]
    z = state["z:" + name]
    for cfg in cfgs:
        real = time_cold_us(lambda: mod._zgemv(x, name, n, cfg, state), flush)
        state["z:" + name] = dict(z, row_starts=torch.zeros_like(z["row_starts"]))
        nox = time_cold_us(lambda: mod._zgemv(x, name, n, cfg, state), flush)
        state["z:" + name] = z
        rows.append(dict(layer=name, m=m, cfg=cfg, real=real, noexc=nox, cublas=cub, current=cur, s5=dict((tuple(c), t) for c, t in p["timings"])[cfg]))
        print(f"{name:9s} {m:3d} {str(cfg):22s} z {real:6.2f} (no exc {nox:6.2f}; s5 {rows[-1]['s5']:6.2f})  current {cur:6.2f}  cuBLAS {cub:6.2f}", flush=True)
json.dump(rows, open(sys.argv[2], "w"), indent=1)
