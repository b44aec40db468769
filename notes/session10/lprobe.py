"""Session 10: does the cluster split-K (C = 1) lose its tail when rank 0 gets more of K than the other ranks?

Why: with C = 1 the S CTAs of a tile stream equal K ranges, finish together, and rank 0 then waits for the
pushes of ranks 1..S-1 (st.async into its inbox) before it can add and write: that hop is exposed at the very end
of the kernel. If rank 0 is given LEAD more K units (64-wide K tiles in the TMA GEMV, 32-wide K blocks in the
register GEMV) and the other ranks share the rest, they finish first, push while rank 0 still streams, and rank
0 finds its inbox full. session9/tprobe.py measured the TMA GEMV without any reduction ("notail") 1.6-1.9 us
faster than with one; the push made C = 1 only 0.1-0.3 us faster than the semaphore.

The same dist/submission.py, its CUDA_SRC edited by string (nothing probe-only lives in kernels_src/): GemvArgs
and TmaGemvArgs get an `int lead`, which the two launchers fill from the OKC_LEAD environment variable at every
launch (read at graph capture), and the kernels' K split uses it for C = 1 only. One extension, one process: every
lead of a shape is timed in the same run, interleaved, two rounds. Every (config, lead) is first checked against
float64 on a NaN-poisoned output: an uneven split must stay exact.

usage: python lprobe.py source > edited.cu        (the edited CUDA_SRC, for nvcc alone)
       python lprobe.py time OUT.json"""

import json
import os
import sys
import time

import torch
from torch.utils.cpp_extension import load_inline

from generator.judge.loader import load_submission
from generator.judge.reference import compare, reference
from generator.judge.timing import L2Flusher, launch_floor_us, read_bandwidth, time_cold_us
from generator.judge.verify import poisoned_allocations
from generator.judge.weights import make_weights, make_x
from generator.problem import load_problem

LEAD_FN = """
#include <cstdlib>
static int okc_probe_lead() {
    const char* v = getenv("OKC_LEAD");
    return v ? atoi(v) : 0;
}
"""

EDITS = [
    # the argument structs and their two constructions
    ("    int cluster;     // 1: the S split CTAs are one cluster and reduce through distributed shared memory\n};",
     "    int cluster;     // 1: the S split CTAs are one cluster and reduce through distributed shared memory\n"
     "    int lead;\n};"),
    ("    int cluster;  // 1: the S split CTAs of a tile are one cluster and reduce through distributed shared memory\n};",
     "    int cluster;  // 1: the S split CTAs of a tile are one cluster and reduce through distributed shared memory\n"
     "    int lead;\n};"),
    ("TmaGemvArgs a{out, ws, sem, M, N, K, S, cluster ? 1 : 0};",
     "TmaGemvArgs a{out, ws, sem, M, N, K, S, cluster ? 1 : 0, okc_probe_lead()};"),
    ("static_cast<const okc::Frag*>(w2), out, ws, sem, M, N, K, S, cluster ? 1 : 0};",
     "static_cast<const okc::Frag*>(w2), out, ws, sem, M, N, K, S, cluster ? 1 : 0, okc_probe_lead()};"),
    # the register GEMV's K split (32-wide blocks)
    ("    const int kb_per_split = (a.K >> 5) / a.S;\n    const int kb_begin = split * kb_per_split, kb_end = kb_begin + kb_per_split;",
     "    const int kb_per_split = (a.K >> 5) / a.S;\n"
     "    int kb_begin = split * kb_per_split, kb_end = kb_begin + kb_per_split;\n"
     "    if (a.cluster && a.lead != 0) {\n"
     "        const int q0 = kb_per_split + a.lead, rest = (a.K >> 5) - q0;\n"
     "        kb_begin = split == 0 ? 0 : q0 + (int)((long long)(split - 1) * rest / (a.S - 1));\n"
     "        kb_end = split == 0 ? q0 : q0 + (int)((long long)split * rest / (a.S - 1));\n"
     "    }"),
    # the TMA GEMV's K split (64-wide tiles)
    ("    const int kt0 = (int)((long long)split * k_tiles / a.S);  // uneven splits differ by at most one K tile\n"
     "    const int n_k = (int)((long long)(split + 1) * k_tiles / a.S) - kt0;",
     "    int kt0 = (int)((long long)split * k_tiles / a.S);\n"
     "    int n_k = (int)((long long)(split + 1) * k_tiles / a.S) - kt0;\n"
     "    if (a.cluster && a.lead != 0) {\n"
     "        const int q0 = k_tiles / a.S + a.lead, rest = k_tiles - q0;\n"
     "        kt0 = split == 0 ? 0 : q0 + (int)((long long)(split - 1) * rest / (a.S - 1));\n"
     "        n_k = (split == 0 ? q0 : q0 + (int)((long long)split * rest / (a.S - 1))) - kt0;\n"
     "    }"),
]


def edited_source(src):
    for old, new in EDITS:
        assert src.count(old) == 1, (old, src.count(old))
        src = src.replace(old, new)
    at = src.index("const char* okc_launch_gemv(")
    return src[:at] + LEAD_FN + src[at:]


# (layer, m, engine, config, leads); the config is the table's entry or its C = 1 neighbour
PLAN = [
    ("qkv_gate", 32, "tma", (3, 8, 1), [0, 1, 2, 3, 4, 6]),
    ("qkv_gate", 16, "tma", (3, 8, 1), [0, 1, 2, 3, 4, 6]),
    ("qkv_gate", 32, "tma", (4, 8, 1), [0, 1, 2, 4]),
    ("pooler", 32, "tma", (2, 8, 1), [0, 1, 2, 3, 4, 6]),
    ("qkv_gate", 32, "gemv", (4, 4, 1, 1, 1, 1), [0, 2, 4, 8, 12]),
    ("router", 32, "gemv", (16, 4, 1, 1, 1, 1), [0, 2, 4, 8, 12]),
    ("router", 16, "gemv", (16, 4, 4, 2, 1, 1), [0, 2, 4, 8, 12]),
    ("router", 1, "gemv", (16, 4, 4, 0, 1, 1), [0, 2, 4, 8, 12]),
]
REFERENCE = [("qkv_gate", 16, "gemv", (16, 1, 2, 4, 2, 0)), ("pooler", 32, "gemv", (4, 2, 4, 0, 1, 1))]


def main():
    mod = load_submission("dist/submission.py")
    if sys.argv[1] == "source":
        sys.stdout.write(edited_source(mod.CUDA_SRC))
        return
    out_path = sys.argv[2]
    t0 = time.time()
    mod._EXTENSION = load_inline(name="okc_lprobe", cpp_sources=mod.BINDING_SRC,
                                 cuda_sources=edited_source(mod.CUDA_SRC), functions=["gemv", "tma_gemv", "zgemv"],
                                 extra_cuda_cflags=mod.CUDA_FLAGS, verbose=False)
    print(f"extension loaded in {time.time() - t0:.0f} s", flush=True)
    problem = load_problem()
    weights = make_weights(problem, "normal", 0, "cuda")
    state = mod.prepare({name: w.clone() for name, w in weights.items()})
    for name in weights:
        state.setdefault("packed:" + name, tuple(mod.pack_mma_a(p) for p in state[name]))
        state.setdefault("tiles:" + name, tuple(mod.pack_tma_tiles(p) for p in state[name]))
    flush = L2Flusher()
    print(f"launch floor {launch_floor_us(flush):.2f} us, read {read_bandwidth(flush) / 1e12:.2f} TB/s "
          f"(set-up {time.time() - t0:.0f} s)", flush=True)
    gen = torch.Generator(device="cuda").manual_seed(5)
    launch = {"gemv": mod._gemv, "tma": mod._tma_gemv}
    rows = []
    for layer, m, engine, cfg, leads in PLAN + [(l, m, e, c, [0]) for l, m, e, c in REFERENCE]:
        lay = problem.layers[layer]
        n = lay.n_for(m)
        x = make_x(m, lay.k, gen, "cuda")
        ref, scale = reference(x, weights[layer], n)
        call = launch[engine]
        ok = {}
        for lead in leads:
            os.environ["OKC_LEAD"] = str(lead)
            try:
                with poisoned_allocations():
                    got = call(x, layer, n, cfg, state)
                torch.cuda.synchronize()
                cmp = compare(got, ref, scale, fp32_out=lay.dual)
                ok[lead] = (cmp.ok, cmp.problem)
            except RuntimeError as refused:
                torch.cuda.synchronize()
                ok[lead] = (False, str(refused).splitlines()[0])
        times = {lead: [] for lead in leads if ok[lead][0]}
        for _ in range(2):  # two interleaved rounds: drift shows as a round-to-round difference
            for lead in times:
                os.environ["OKC_LEAD"] = str(lead)
                times[lead].append(time_cold_us(lambda: call(x, layer, n, cfg, state), flush, 100))
        for lead in leads:
            us = times.get(lead, [float("nan")] * 2)
            rows.append(dict(layer=layer, m=m, engine=engine, cfg=cfg, lead=lead, ok=ok[lead][0],
                             problem=ok[lead][1], us=us))
            print(f"{layer:9s} {m:3d} {engine:4s} {str(cfg):20s} lead {lead:3d} {'ok ' if ok[lead][0] else 'BAD'} "
                  f"{us[0]:6.2f} {us[1]:6.2f} {ok[lead][1]}", flush=True)
    os.environ.pop("OKC_LEAD", None)
    json.dump(rows, open(out_path, "w"), indent=1)


if __name__ == "__main__":
    main()
