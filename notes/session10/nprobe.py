"""Session 10, after lprobe.py: what does the split-K reduction cost, measured in one process?

lprobe showed that giving rank 0 of a C = 1 cluster more of K never helps (and costs the router up to 10 %), so
the push into rank 0's inbox is not exposed latency at the kernel's end. Yet session 9's tprobe measured the TMA
GEMV without any reduction 1.6-1.9 us faster than with one, in another process (launch floors 4.80 vs 4.32 us:
not the same machine state). This probe times both in the same run: lprobe's edits (an `int lead` in the three
argument structs, from OKC_LEAD at each launch) plus one more: lead = -1 skips the reduction, every split CTA
writing its own partial straight to the output (racy and wrong, for timing only; a C = 1 CTA still waits on the
cluster barrier it arrived on, so no CTA leaves while another may address its shared memory).
lead = 0 is the unedited kernel and is checked against float64 first.

usage: python nprobe.py source > edited.cu
       python nprobe.py time OUT.json"""

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

sys.path.insert(0, os.path.dirname(__file__))
import lprobe  # noqa: E402

NOTAIL = [
    ("    int M, N, K, S, capr;\n    int cluster;\n};", "    int M, N, K, S, capr;\n    int cluster;\n    int lead;\n};"),
    # the TMA GEMV: before its cluster / S = 1 / semaphore epilogues
    ("    if (a.cluster) {  // common.cuh: ranks 1..S-1 push",
     "    if (a.lead == -1) {\n        if (a.cluster) inbox_ready();\n#pragma unroll\n"
     "        for (int e = 0; e < kAcc; ++e) tma_write<OutT>(a, tile, t, e, acc[e]);\n        return;\n    }\n"
     "    if (a.cluster) {  // common.cuh: ranks 1..S-1 push"),
    # the register GEMVs (finish_tile): S = 1's epilogue for every split
    ("    const int nw = blockDim.x >> 5;\n    if (a.S == 1) {\n",
     "    const int nw = blockDim.x >> 5;\n    if (a.S == 1 || a.lead == -1) {\n        if (a.S > 1 && a.cluster) inbox_ready();\n"),
]


# lead = -2: the semaphore split-K (C = 0) arrives with one atom.acq_rel.gpu by thread 0 between the CTA barriers
# (branch semaphore-acqrel) instead of a __threadfence() by every thread before and after the counter.
ARRIVE_LAST = """
__device__ __forceinline__ bool okc_arrive_last(int* counter, int last) {
    int old;
    asm volatile("atom.acq_rel.gpu.global.add.s32 %0, [%1], 1;" : "=r"(old) : "l"(counter) : "memory");
    return old == last;
}
"""
ACQREL = [
    ("    __threadfence();  // the partial is visible device-wide before this CTA counts itself in\n"
     "    consumers_sync();\n    if (t == 0) is_last = atomicAdd(a.sem + tile, 1) == a.S - 1;\n"
     "    consumers_sync();\n    if (!is_last) return;\n    __threadfence();  // acquire: the other CTAs' partials",
     "    if (a.lead != -2) __threadfence();\n    consumers_sync();\n"
     "    if (t == 0) is_last = a.lead == -2 ? okc_arrive_last(a.sem + tile, a.S - 1) : atomicAdd(a.sem + tile, 1) == a.S - 1;\n"
     "    consumers_sync();\n    if (!is_last) return;\n    if (a.lead != -2) __threadfence();"),
    ("    __threadfence();  // make the tile visible device-wide before this CTA counts itself in\n"
     "    __syncthreads();\n    __shared__ int is_last;\n"
     "    if (threadIdx.x == 0) is_last = atomicAdd(a.sem + group, 1) == a.S - 1;\n"
     "    __syncthreads();\n    if (!is_last) return;\n    __threadfence();  // acquire: the other CTAs' tiles",
     "    if (a.lead != -2) __threadfence();\n    __syncthreads();\n    __shared__ int is_last;\n"
     "    if (threadIdx.x == 0) is_last = a.lead == -2 ? okc_arrive_last(a.sem + group, a.S - 1) : atomicAdd(a.sem + group, 1) == a.S - 1;\n"
     "    __syncthreads();\n    if (!is_last) return;\n    if (a.lead != -2) __threadfence();"),
]


def edited_source(src):
    src = ARRIVE_LAST + lprobe.edited_source(src)
    for old, new in ACQREL:
        assert src.count(old) == 1, (old, src.count(old))
        src = src.replace(old, new)
    for old, new in NOTAIL:
        assert src.count(old) == 1, (old, src.count(old))
        src = src.replace(old, new)
    return src


# (layer, m, engine, config): each timed with the reduction (lead 0), without (lead -1) and, C = 0 only, with the
# acq_rel arrival (lead -2, checked against float64 like lead 0)
PLAN = [
    ("router", 32, "gemv", (16, 8, 2, 2, 1, 0)),
    ("router", 32, "gemv", (16, 4, 1, 1, 1, 0)),
    ("router", 16, "gemv", (16, 8, 4, 2, 1, 0)),
    ("qkv_gate", 32, "gemv", (4, 4, 1, 1, 1, 0)),
    ("qkv_gate", 1, "tma", (3, 8, 1)),
    ("qkv_gate", 1, "tma", (3, 8, 0)),
    ("qkv_gate", 1, "gemv", (16, 1, 2, 1, 2, 0)),
    ("qkv_gate", 16, "tma", (3, 8, 1)),
    ("qkv_gate", 16, "gemv", (16, 1, 2, 4, 2, 0)),
    ("qkv_gate", 32, "tma", (3, 8, 1)),
    ("qkv_gate", 32, "tma", (3, 8, 0)),
    ("pooler", 32, "tma", (2, 8, 1)),
    ("pooler", 32, "tma", (2, 8, 0)),
    ("router", 32, "gemv", (16, 4, 1, 1, 1, 1)),
    ("router", 1, "gemv", (16, 4, 4, 0, 1, 1)),
]


def main():
    mod = load_submission("dist/submission.py")
    if sys.argv[1] == "source":
        sys.stdout.write(edited_source(mod.CUDA_SRC))
        return
    out_path = sys.argv[2]
    t0 = time.time()
    mod._EXTENSION = load_inline(name="okc_nprobe", cpp_sources=mod.BINDING_SRC,
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
    gen = torch.Generator(device="cuda").manual_seed(7)
    launch = {"gemv": mod._gemv, "tma": mod._tma_gemv}
    rows = []
    for layer, m, engine, cfg in PLAN:
        lay = problem.layers[layer]
        n = lay.n_for(m)
        x = make_x(m, lay.k, gen, "cuda")
        ref, scale = reference(x, weights[layer], n)
        call = launch[engine]
        checked = [0, -2] if engine == "gemv" and cfg[5] == 0 or engine == "tma" and cfg[2] == 0 else [0]
        ok = {}
        for lead in checked:  # 20 launches each on a poisoned output: a missed acquire would show as wrong sums
            os.environ["OKC_LEAD"] = str(lead)
            ok[lead] = True, ""
            for _ in range(20):
                try:
                    with poisoned_allocations():
                        got = call(x, layer, n, cfg, state)
                    torch.cuda.synchronize()
                except RuntimeError as refused:
                    ok[lead] = False, "refused: " + str(refused).splitlines()[0]
                    break
                cmp = compare(got, ref, scale, fp32_out=lay.dual)
                if not cmp.ok:
                    ok[lead] = False, cmp.problem
                    break
        if not ok[0][0]:
            print(f"{layer:9s} {m:3d} {engine:4s} {str(cfg):20s} {ok[0][1]}", flush=True)
            continue
        times = {lead: [] for lead in [0, -1] + [lead for lead in checked if lead == -2 and ok[lead][0]]}
        for _ in range(3):  # three interleaved rounds
            for lead in times:
                os.environ["OKC_LEAD"] = str(lead)
                times[lead].append(time_cold_us(lambda: call(x, layer, n, cfg, state), flush, 100))
        rows.append(dict(layer=layer, m=m, engine=engine, cfg=cfg, ok={str(k): v for k, v in ok.items()},
                         times={str(k): v for k, v in times.items()}))
        med = {lead: sorted(v)[1] for lead, v in times.items()}
        line = f"{layer:9s} {m:3d} {engine:4s} {str(cfg):20s} " + "ok " * ok[0][0] + "BAD " * (not ok[0][0])
        line += "reduced " + " ".join(f"{v:6.2f}" for v in times[0])
        line += "  no reduction " + " ".join(f"{v:6.2f}" for v in times[-1]) + f"  cost {med[0] - med[-1]:+.2f} us"
        if -2 in ok:
            line += "  acq_rel " + ("ok " if ok[-2][0] else "BAD " + ok[-2][1])
            if -2 in med:
                line += " ".join(f"{v:6.2f}" for v in times[-2]) + f"  cost {med[-2] - med[-1]:+.2f} us"
        print(line + " " + ok[0][1], flush=True)
    os.environ.pop("OKC_LEAD", None)
    json.dump(rows, open(out_path, "w"), indent=1)


if __name__ == "__main__":
    main()
