"""Session 11, after call 3: a cheaper signal for the TMA GEMV's cluster push (C = 1).

With bulk weight copies on main, the C = 1 reduction still costs qkv_gate (3, 8, 1) 0.26 / 0.48 / 1.07 us at
NB = 1 / 2 / 4 against none at all (call 1, modes 1 vs 9), in proportion to the data, while a reduce-scatter by
bulk copies (call 2, mode 17) was slower still. In the shipped push every 16-byte st.async of every thread
completes bytes on ONE mbarrier in rank 0 (4 NB x 128 x (S - 1) updates of one word, 1024 at qkv_gate m = 32).
Here the data goes as plain remote stores (st.shared::cluster.v4, no barrier), and only the arrival is signalled:
  mode 32  every thread arrives once on rank 0's barrier (mbarrier.arrive.release.cluster, count 128 (S - 1));
  mode 64  each warp's lanes store, __syncwarp, lane 0 arrives (count 4 (S - 1));
  mode 8   no reduction at all (wrong sums; the bound);  mode 0: as shipped.
Rank 0 waits with acquire.cluster and sums in rank order as before (same bits). Modes 0 / 32 / 64 are checked
against float64 (normal and heavy weights, NaN-poisoned outputs, 10 launches each) before timing.

usage: python aprobe.py source > edited.cu
       python aprobe.py time OUT.json"""

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

MODE_FN = """#include <cstdlib>
static int okc_probe_mode() {
    const char* v = getenv("OKC_MODE");
    return v ? atoi(v) : 0;
}
"""

EDITS = [
    ("    int cluster;  // 1: the S split CTAs of a tile are one cluster and reduce through distributed shared memory\n};",
     "    int cluster;  // 1: the S split CTAs of a tile are one cluster and reduce through distributed shared memory\n"
     "    int mode;\n};"),
    ("                             sem, M, N, K, S, cluster ? 1 : 0};",
     "                             sem, M, N, K, S, cluster ? 1 : 0, okc_probe_mode()};"),
    ("    if (a.cluster) open_inbox(&inbox_full, a.S, kAcc * kTmaConsumers);  // tma_inbox_bytes on the host",
     """    __shared__ __align__(8) uint64_t arrived;  // modes 32 / 64: rank 0 counts arrivals, not bytes
    if (a.cluster && (a.mode & 96) && threadIdx.x == 0 && cluster_rank() == 0) {
        mbar_init(&arrived, (a.S - 1) * ((a.mode & 32) ? kTmaConsumers : kTmaConsumers / 32));
        asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
    }
    if (a.cluster) open_inbox(&inbox_full, a.S, kAcc * kTmaConsumers);  // tma_inbox_bytes on the host"""),
    ("    if (a.cluster) {  // common.cuh: ranks 1..S-1 push",
     """    if (a.mode & 8) {
        if (a.cluster) inbox_ready();
#pragma unroll
        for (int e = 0; e < kAcc; ++e) tma_write<OutT>(a, tile, t, e, acc[e]);
        return;
    }
    if (a.cluster && (a.mode & 96)) {
        inbox_ready();
        const int rank = (int)cluster_rank();
        if (rank != 0) {
            float* slot = inbox + ((size_t)(rank - 1) * kTmaConsumers + t) * kAcc;
            uint32_t dst, bar;
            asm volatile("mapa.shared::cluster.u32 %0, %1, 0;" : "=r"(dst) : "r"(smem_addr(slot)));
            asm volatile("mapa.shared::cluster.u32 %0, %1, 0;" : "=r"(bar) : "r"(smem_addr(&arrived)));
#pragma unroll
            for (int e = 0; e < kAcc; e += 4)
                asm volatile("st.shared::cluster.v4.f32 [%0], {%1, %2, %3, %4};" ::"r"(dst + 4 * e), "f"(acc[e]),
                             "f"(acc[e + 1]), "f"(acc[e + 2]), "f"(acc[e + 3]) : "memory");
            if (a.mode & 64) __syncwarp();
            if ((a.mode & 32) || (t & 31) == 0)
                asm volatile("mbarrier.arrive.release.cluster.shared::cluster.b64 _, [%0];" ::"r"(bar) : "memory");
            return;
        }
        mbar_wait_cluster(&arrived, 0);
        for (int s = 0; s < a.S - 1; ++s) {
            const float4* part = reinterpret_cast<const float4*>(inbox + ((size_t)s * kTmaConsumers + t) * kAcc);
#pragma unroll
            for (int e = 0; e < kAcc; e += 4) {
                const float4 v = part[e / 4];
                acc[e] += v.x, acc[e + 1] += v.y, acc[e + 2] += v.z, acc[e + 3] += v.w;
            }
        }
#pragma unroll
        for (int e = 0; e < kAcc; ++e) tma_write<OutT>(a, tile, t, e, acc[e]);
        return;
    }
    if (a.cluster) {  // common.cuh: ranks 1..S-1 push"""),
]


def edited_source(src):
    for old, new in EDITS:
        assert src.count(old) == 1, (old[:80], src.count(old))
        src = src.replace(old, new)
    return MODE_FN + src


PLAN = [
    ("qkv_gate", 16, (3, 8, 1)), ("qkv_gate", 32, (3, 8, 1)), ("qkv_gate", 8, (5, 6, 1)), ("qkv_gate", 1, (5, 6, 1)),
    ("pooler", 32, (2, 8, 1)), ("pooler", 16, (2, 8, 1)), ("o", 1, (2, 4, 1)), ("unpooler", 1, (8, 8, 1)),
    ("router", 32, (12, 6, 1)), ("router", 32, (16, 4, 1)), ("router", 16, (16, 6, 1)),
]
REFERENCE = [("qkv_gate", 8), ("qkv_gate", 1), ("pooler", 16), ("router", 32), ("router", 16)]  # the table's engine


def main():
    mod = load_submission("dist/submission.py")
    if sys.argv[1] == "source":
        sys.stdout.write(edited_source(mod.CUDA_SRC))
        return
    out_path = sys.argv[2]
    t0 = time.time()
    mod._EXTENSION = load_inline(name="okc_aprobe", cpp_sources=mod.BINDING_SRC,
                                 cuda_sources=edited_source(mod.CUDA_SRC), functions=["gemv", "tma_gemv", "zgemv"],
                                 extra_cuda_cflags=mod.CUDA_FLAGS, verbose=False)
    print(f"extension loaded in {time.time() - t0:.0f} s", flush=True)
    problem = load_problem()
    weights = make_weights(problem, "normal", 0, "cuda")
    heavy = make_weights(problem, "heavy", 5, "cuda")
    state = mod.prepare({name: w.clone() for name, w in weights.items()})
    hstate = {"ws": state["ws"], "sem": state["sem"]}
    for name in weights:
        state.setdefault("tiles:" + name, tuple(mod.pack_tma_bulk(p) for p in state[name]))
        parts = mod.split_hi_lo(heavy[name]) if heavy[name].dtype == torch.float32 else (heavy[name],)
        hstate["tiles:" + name] = tuple(mod.pack_tma_bulk(p) for p in parts)
    flush = L2Flusher()
    print(f"launch floor {launch_floor_us(flush):.2f} us, read {read_bandwidth(flush) / 1e12:.2f} TB/s "
          f"(set-up {time.time() - t0:.0f} s)", flush=True)
    gen = torch.Generator(device="cuda").manual_seed(17)

    def launcher(layer, m, cfg, mode, x, st):
        n = problem.layers[layer].n_for(m)

        def call():
            os.environ["OKC_MODE"] = str(mode)
            return mod._tma_gemv(x, layer, n, cfg, st)

        return call

    rows = []
    for layer, m, cfg in PLAN:
        lay = problem.layers[layer]
        n = lay.n_for(m)
        x = make_x(m, lay.k, gen, "cuda")
        ok = {}
        for mode in (0, 32, 64):
            ok[mode] = True, ""
            for wset, st in ((weights, state), (heavy, hstate)):
                ref, scale = reference(x, wset[layer], n)
                for _ in range(10):
                    try:
                        with poisoned_allocations():
                            got = launcher(layer, m, cfg, mode, x, st)()
                        torch.cuda.synchronize()
                    except RuntimeError as refused:
                        torch.cuda.synchronize()
                        ok[mode] = False, "refused: " + str(refused).splitlines()[0]
                        break
                    cmp = compare(got, ref, scale, fp32_out=lay.dual)
                    if not cmp.ok:
                        ok[mode] = False, cmp.problem
                        break
                if not ok[mode][0]:
                    break
        modes = [mode for mode in (0, 8, 32, 64) if ok.get(mode, ok[0])[0]]
        times = {mode: [] for mode in modes}
        for _ in range(3):
            for mode in modes:
                times[mode].append(time_cold_us(launcher(layer, m, cfg, mode, x, state), flush, 100))
        med = {mode: sorted(v)[1] for mode, v in times.items()}
        line = f"{layer:9s} {m:3d} {str(cfg):12s} " + " ".join(f"{k}:{'ok' if v[0] else 'BAD ' + v[1]}" for k, v in ok.items())
        line += " | " + "  ".join(f"mode {mode} {med[mode]:6.2f}" for mode in modes)
        if 8 in med:
            line += " | cost vs none: " + " ".join(f"{mode}:{med[mode] - med[8]:+.2f}" for mode in modes if mode != 8)
        print(line, flush=True)
        rows.append(dict(layer=layer, m=m, cfg=cfg, ok={str(k): v for k, v in ok.items()},
                         times={str(k): v for k, v in times.items()}))
    os.environ.pop("OKC_MODE", None)
    for layer, m in REFERENCE:
        lay = problem.layers[layer]
        x = make_x(m, lay.k, gen, "cuda")
        engine, cfg = mod._engine(layer, m, state)
        us = [time_cold_us(lambda: mod.kernel_fn({"x": x, "config": {"m": m, "n": lay.n_for(m), "k": lay.k,
                                                                     "layer": layer}}, state), flush, 100)
              for _ in range(3)]
        print(f"table    {layer:9s} {m:3d} {engine} {cfg}: {sorted(us)[1]:6.2f}", flush=True)
        rows.append(dict(layer=layer, m=m, engine=engine, cfg=cfg, table_us=us))
    json.dump(rows, open(out_path, "w"), indent=1)


if __name__ == "__main__":
    main()
