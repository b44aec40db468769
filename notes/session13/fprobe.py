"""Prepared in session 13 for the next device call (main's file): what is the bf16 TMA GEMV's fixed cost made of?

The bf16 streams left under the bar are the TMA GEMV's: qkv_gate m = 32 (3, 8, 2) at 1.15-1.18 x floor and m = 16
(3, 8, 1) at 1.10-1.13. Session 11 (bprobe) put its per-K slope at 1.06 us per 1K of K (4.45 TB/s at the margin)
and its intercept at 6.9-7.6 us against a 4.5-4.8 us launch floor: the excess is a fixed part, paid once per
launch. Leave-one-out of its pieces, each behind a bit of OKC_MODE (read by the launcher at every launch, so a
CUDA graph captures it):
    1   timing only: an empty ring (n_k = 0 for the producer and the consumers): launch, set-up, reduction, write
    2   timing only: no split-K reduction, every split writes its partial straight to the output
    8   the producer's first min(STAGES, n_k) copies issued before the CTA barrier (right sums: checked)
    16  timing only: no x boxes (the ring's slots carry the weights only)
Modes 0 and 8 are checked against float64 on NaN-poisoned outputs before anything is timed; the register GEMV's
table entry for the same shape is timed beside them.

usage (repository root, PYTHONPATH=.):
    python3 notes/session13/fprobe.py source > edited.cu     the edited CUDA_SRC, to compile with nvcc alone
    python3 notes/session13/fprobe.py time OUT.json"""

import json
import sys

import torch

from generator.judge.timing import time_cold_us
from generator.judge.weights import make_x
from notes.probekit import Probe, edited_source

COPY_SLOT = (
    "                mbar_arrive_expect_tx(&full[s], kStage);  // out-of-bounds x rows count too (as zeros)\n"
    "                const size_t block = (size_t)(tile * k_tiles + kt0 + i) * kTmaWBytes;  // packed: one 8 KB block\n"
    "                bulk_load_1d(slot, a.w + block, kTmaWBytes, &full[s]);\n"
    "                if constexpr (DUAL) bulk_load_1d(slot + kTmaWBytes, a.w2 + block, kTmaWBytes, &full[s]);\n"
    "                tma_load_2d(slot + kXOffset, &x_map, k0, 0, &full[s]);\n"
)
COPY_SLOT_PROBED = (
    "                mbar_arrive_expect_tx(&full[s], kStage - ((a.mode & 16) ? tma_x_bytes(NB) : 0));\n"
    "                const size_t block = (size_t)(tile * k_tiles + kt0 + i) * kTmaWBytes;  // packed: one 8 KB block\n"
    "                bulk_load_1d(slot, a.w + block, kTmaWBytes, &full[s]);\n"
    "                if constexpr (DUAL) bulk_load_1d(slot + kTmaWBytes, a.w2 + block, kTmaWBytes, &full[s]);\n"
    "                if (!(a.mode & 16)) tma_load_2d(slot + kXOffset, &x_map, k0, 0, &full[s]);\n"
)

EDITS = [
    # the mode reaches the kernel in its arguments
    ("    int cluster;  // C: 1 / 2, the S split CTAs of a tile are one cluster and reduce gathered / scattered\n};",
     "    int cluster;  // C: 1 / 2, the S split CTAs of a tile are one cluster and reduce gathered / scattered\n"
     "    int mode;\n};"),
    ("                             sem, M, N, K, S, cluster};",
     "                             sem, M, N, K, S, cluster, okc_probe_mode()};"),
    # 1: an empty ring
    ("    const int n_k = (int)((long long)(split + 1) * k_tiles / a.S) - kt0;\n    const int warp = threadIdx.x >> 5",
     "    const int n_k = (a.mode & 1) ? 0 : (int)((long long)(split + 1) * k_tiles / a.S) - kt0;\n"
     "    const int warp = threadIdx.x >> 5"),
    # 8: the first copies before the CTA barrier (the producer's lane initialised the barriers itself)
    ("        asm volatile(\"fence.mbarrier_init.release.cluster;\" ::: \"memory\");  // visible to the async proxy\n"
     "    }\n    if (a.cluster) {  // this rank's inbox",
     "        asm volatile(\"fence.mbarrier_init.release.cluster;\" ::: \"memory\");  // visible to the async proxy\n"
     "        if (a.mode & 8) {\n"
     "            for (int i = 0; i < (n_k < STAGES ? n_k : STAGES); ++i) {\n"
     "                const int s = i;\n"
     "                uint8_t* slot = ring + s * kStage;\n"
     "                const int k0 = (kt0 + i) * kTmaTileK;\n"
     + COPY_SLOT_PROBED +
     "            }\n"
     "        }\n"
     "    }\n    if (a.cluster) {  // this rank's inbox"),
    ("            for (int i = 0; i < n_k; ++i) {\n                const int s = i % STAGES;\n"
     "                if (i >= STAGES) mbar_wait(&empty[s]",
     "            for (int i = (a.mode & 8) ? (n_k < STAGES ? n_k : STAGES) : 0; i < n_k; ++i) {\n"
     "                const int s = i % STAGES;\n"
     "                if (i >= STAGES) mbar_wait(&empty[s]"),
    # 16: no x boxes
    (COPY_SLOT, COPY_SLOT_PROBED),
    # 2: no reduction
    ("    const int t = threadIdx.x;\n    constexpr int kTile = kAcc * kTmaConsumers;  // floats in one partial tile, thread-major\n"
     "    if (a.cluster) {",
     "    const int t = threadIdx.x;\n    constexpr int kTile = kAcc * kTmaConsumers;  // floats in one partial tile, thread-major\n"
     "    if (a.mode & 2) {\n"
     "#pragma unroll\n"
     "        for (int e = 0; e < kAcc; ++e) tma_write<OutT>(a, tile, t, e, acc[e]);\n"
     "        return;\n"
     "    }\n"
     "    if (a.cluster) {"),
]

MODES = (0, 1, 2, 8, 16)
# (layer, m, TMA (S, STAGES, C), the register GEMV's config for the same shape)
PLAN = [
    ("qkv_gate", 16, (3, 8, 1), (16, 1, 2, 4, 2, 0)),
    ("qkv_gate", 32, (3, 8, 2), (4, 4, 1, 1, 1, 1)),
    ("qkv_gate", 1, (3, 8, 1), (16, 1, 2, 1, 2, 0)),
    ("pooler", 32, (2, 8, 2), None),
    ("unpooler", 32, (1, 8, 0), None),
    ("router", 32, (16, 4, 1), (16, 4, 1, 0, 1, 1)),
]


def main():
    if sys.argv[1] == "source":
        from generator.judge.loader import load_submission

        sys.stdout.write(edited_source(load_submission("dist/submission.py").CUDA_SRC, EDITS))
        return
    probe = Probe("okc_fprobe", EDITS, ["gemv", "tma_gemv", "zgemv"])
    mod, state = probe.mod, probe.state
    for name in probe.problem.layers:
        state.setdefault("packed:" + name, tuple(mod.pack_mma_a(p) for p in state[name]))
        state.setdefault("tiles:" + name, tuple(mod.pack_tma_bulk(p) for p in state[name]))
    gen = torch.Generator(device="cuda").manual_seed(15)
    rows = []
    for layer, m, tma_cfg, gemv_cfg in PLAN:
        n = probe.problem.layers[layer].n_for(m)
        x = make_x(m, probe.problem.layers[layer].k, gen, "cuda")
        fns = {
            f"tma:{mode}": probe.with_mode(mode, lambda: mod._tma_gemv(x, layer, n, tma_cfg, state)) for mode in MODES
        }
        if gemv_cfg is not None:
            fns["gemv"] = lambda: mod._gemv(x, layer, n, gemv_cfg, state)  # noqa: E731
        row = {"layer": layer, "m": m, "tma": list(tma_cfg), "gemv": gemv_cfg and list(gemv_cfg),
               "ok": {key: probe.check(layer, m, x, fns[key])[0] for key in ("tma:0", "tma:8", "gemv") if key in fns},
               "us": {key: [] for key in fns}}
        for _ in range(2):  # two interleaved rounds
            for key, fn in fns.items():
                row["us"][key].append(time_cold_us(fn, probe.flush, 100))
        rows.append(row)
        line = " ".join(f"{key} {min(v):.2f}" for key, v in row["us"].items())
        print(f"{layer} m={m} tma {tma_cfg} ok={row['ok']} | {line}", flush=True)
    with open(sys.argv[2], "w") as f:
        json.dump({"floor_us": probe.floor_us, "read_tbps": probe.read_tbps, "rows": rows}, f, indent=1)


if __name__ == "__main__":
    main()
