"""Session 26, call 3: what the compressed GEMV's in-loop patches cost on long-K layers. Each launch below runs on
the same `normal` weights compressed two ways (kernels_src/compress.py, patches_per_group 3: a group's first three
exceptions as patch words in its header, as main ships; 0: every exception in the overflow table, walked by the
pass after the main loop, as session 24's kernel did), checked against float64, then timed interleaved (rounds x
cold graph replays, L2 read-flushed: generator/judge/timing.py). Run from the repository root, PYTHONPATH=.
"""

import statistics
import sys

import torch

from generator.judge.loader import load_submission
from generator.judge.reference import compare, reference
from generator.judge.timing import L2Flusher, time_cold_us
from generator.judge.verify import poisoned_allocations
from generator.judge.weights import make_weights, make_x
from generator.problem import load_problem
from kernels_src.compress import compress

LAUNCHES = [  # layer, m, engine, config
    ("pooler", 1, "z", (8, 1, 4, 0, 1, 0)),
    ("pooler", 8, "z", (8, 1, 4, 0, 1, 0)),
    ("pooler", 16, "z", (8, 1, 2, 0, 1, 0)),
    ("pooler", 1, "gemv", (8, 1, 4, 1, 1, 0)),
    ("unpooler", 16, "z", (8, 1, 2, 0, 2, 0)),
    ("unpooler", 16, "tma", (1, 12, 0)),
    ("o", 8, "z", (8, 1, 1, 0, 1, 0)),
    ("o", 16, "z", (8, 1, 1, 0, 1, 0)),
    ("o", 16, "tma", (1, 8, 0)),
]
ROUNDS = int(sys.argv[1]) if len(sys.argv) > 1 else 6

module = load_submission("dist/submission.py")
problem = load_problem()
weights = make_weights(problem, "normal", 0, "cuda")
state = module.prepare({name: w.clone() for name, w in weights.items()})
from generator.judge.sweep import add_engine_state  # noqa: E402

add_engine_state(module, state, problem, "tma", {"o", "unpooler", "pooler"})
forms = {}
for name in ("pooler", "unpooler", "o"):
    for limit in (3, 0):
        z = compress(state[name][0], name, patches_per_group=limit)
        forms[(name, limit)] = z
        print(f"{name} patches {limit}: capr {z['exceptions'].shape[1]}, patched groups "
              f"{int((z['patches'][..., 0] > 0).sum())} of {z['patches'][..., 0].numel()}")

gen = torch.Generator(device="cuda").manual_seed(1)
calls = []
for layer, m, engine, cfg in LAUNCHES:
    k, n = problem.layers[layer].k, problem.layers[layer].n_for(m)
    x = make_x(m, k, gen, "cuda")
    ref, scale = reference(x, weights[layer], n)
    for limit in ((3, 0) if engine == "z" else (None,)):
        st = dict(state)
        if limit is not None:
            st["z:" + layer] = forms[(layer, limit)]
        run = {"z": module._zgemv, "tma": module._tma_gemv, "gemv": module._gemv}[engine]
        call = lambda run=run, x=x, layer=layer, n=n, cfg=cfg, st=st: run(x, layer, n, cfg, st)  # noqa: E731
        with poisoned_allocations():
            out = call()
        torch.cuda.synchronize()
        result = compare(out, ref, scale, fp32_out=False)
        label = f"{layer}:{m}:{engine}:{','.join(map(str, cfg))}" + (f" patches={limit}" if limit is not None else "")
        print(label, "ok" if result.ok else f"WRONG {result.problem}")
        if result.ok:
            calls.append((label, call))

flush = L2Flusher()
times = {label: [] for label, _ in calls}
for r in range(ROUNDS):
    order = calls if r % 2 == 0 else calls[::-1]
    for label, call in order:
        times[label].append(time_cold_us(call, flush, 100))
print(f"\n{'launch':<44} {'median us':>9}  rounds")
for label, t in times.items():
    print(f"{label:<44} {statistics.median(t):9.2f}  {' '.join(f'{v:.2f}' for v in t)}")
