"""Where a CTA of tma_kernel spends its time, ring slot by ring slot (`python -m generator probe-slots`).

The probe patches clock stamps into the kernel's source inside a copy of the submission (its CUDA_SRC holds
kernels_src/tma_gemv.cuh verbatim), loads the copy, and runs each launch cold (L2 read-flushed) `reps` times:
the shipped kernel carries none of this. The stamps go into the split-K workspace, which a launch leaves unused
unless it reduces by semaphore (refused here), 8 int64 a (CTA, warpgroup, slot):

- the consumer warpgroup's warp 0: [0] before its wait on the slot's `full` barrier, [1] after it, [2] after its
  wgmma commit, [3] after its wgmma_wait, [4] after its arrive on `empty`;
- the producer lane (in warpgroup 0's rows, slots past the first round): [5] before its wait on `empty`, [6]
  after it, [7] after the slot's copies are issued;
- row EXIT_ROW of each warpgroup: [0] the CTA's entry and [1] its exit after the epilogue by the SM clock, [2] and
  [3] the same by the global timer (ns), which also gives the SM clock's rate.

From them (slots 2 .. n - 2 of every CTA; means in ns, per-CTA medians in us): the period a slot, how much of it
the consumer waits for the slot to land, issues its wgmmas and waits for them, how long the producer waits for a
free slot and takes to issue its copies, how far ahead of its use a slot's copies go out and how long they take to
land; per CTA, the time from entry to its first wait, the slot loop, and the time after its last slot's stamp
(the last wgmma_wait<0>, about a slot's MMAs, then the epilogue); per launch, the grid's span from the first entry to the last exit. docs/tma-gemm.md has a run.
"""

from __future__ import annotations

import statistics
import tempfile
from pathlib import Path
from typing import NamedTuple

from kernels_src.engine import WORKSPACE_FLOATS

WARPGROUPS = 4  # stamp rows per CTA: the most consumer warpgroups a CTA runs
SLOT_ROWS = 128  # rows per warpgroup; slots past STAMPED_SLOTS are not stamped
STAMPED_SLOTS = 126
EXIT_ROW = 127
FIELDS = 8
# CTAs whose stamps fit the split-K workspace (engine.WORKSPACE_FLOATS, 4 bytes each; 8-byte stamps)
MAX_CTAS = WORKSPACE_FLOATS * 4 // (WARPGROUPS * SLOT_ROWS * FIELDS * 8)
DEFAULT_LAUNCHES = (
    "qkv_gate:32:tma_gemv:1,14,half,none",
    "qkv_gate:64:tma_gemm:1,3,8,atomic",
    "qkv_gate:128:tma_gemm:1,3,8,atomic",
    "qkv_gate:128:tma_gemm:2,2,6,atomic",
    "o:128:tma_gemm:1,1,6,none",
    "o:128:tma_gemm:1,1,6,none,staged",
    "unpooler:128:tma_gemm:1,1,8,none",
    "unpooler:128:tma_gemm:1,1,8,none,staged",
)

_ROW = "reinterpret_cast<long long*>(a.ws) + (((size_t)(blockIdx.y * gridDim.x + blockIdx.x) * 4 + {g}) * 128 + {i}) * 8"

# (anchor, replacement): each anchor is found exactly once in the kernel's source (tests/test_probes.py checks it
# against kernels_src/tma_gemv.cuh and the built file).
PATCHES = (
    (
        """                bars.wait_full(s, phase);
                fence_regs(acc);
                wgmma_fence();""",
        """                const long long c0 = clock64();
                bars.wait_full(s, phase);
                const long long c1 = clock64();
                fence_regs(acc);
                wgmma_fence();""",
    ),
    (
        """                wgmma_commit();
                fence_regs(acc);
                wgmma_wait<kInFlight>();  // slot i - kInFlight is read: back to the producer
                fence_regs(acc);
                if (i >= kInFlight && lane == 0) bars.release((s + Stages - kInFlight) % Stages);""",
        """                wgmma_commit();
                fence_regs(acc);
                const long long c2 = clock64();
                wgmma_wait<kInFlight>();  // slot i - kInFlight is read: back to the producer
                fence_regs(acc);
                const long long c3 = clock64();
                if (i >= kInFlight && lane == 0) bars.release((s + Stages - kInFlight) %% Stages);
                if (lane == 0 && (threadIdx.x >> 5) == 4 * Warpgroup && i < %(slots)d) {
                    long long* st = %(row_g)s;
                    st[0] = c0, st[1] = c1, st[2] = c2, st[3] = c3, st[4] = clock64();
                }""" % {"slots": STAMPED_SLOTS, "row_g": _ROW.format(g="Warpgroup", i="i")},
    ),
    (
        """                issue(i, s, bars.acquire(s, round & 1, kStage));""",
        """                const long long p0 = clock64();
                uint64_t* full = bars.acquire(s, round & 1, kStage);
                const long long p1 = clock64();
                issue(i, s, full);
                if (i < %(slots)d) {
                    long long* st = %(row_0)s;
                    st[5] = p0, st[6] = p1, st[7] = clock64();
                }""" % {"slots": STAMPED_SLOTS, "row_0": _ROW.format(g="0", i="i")},
    ),
    (
        """    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    const Stream stream{slots, bars, &x_map, a, tile, kt0, n_k};""",
        """    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    const long long t_entry = clock64();
    unsigned long long ns_entry;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(ns_entry));
    const Stream stream{slots, bars, &x_map, a, tile, kt0, n_k};""",
    ),
    (
        """        finish_full<NB, Warpgroups, Out, Staged>(a, slots, inbox, &inbox_full, is_last, acc, tile, tile64, split, t, g,
                                                 cluster);
}""",
        """        finish_full<NB, Warpgroups, Out, Staged>(a, slots, inbox, &inbox_full, is_last, acc, tile, tile64, split, t, g,
                                                 cluster);
    if (lane == 0 && warp %% 4 == 0) {
        unsigned long long ns_exit;
        asm volatile("mov.u64 %%0, %%%%globaltimer;" : "=l"(ns_exit));
        long long* st = %(row_exit)s;
        st[0] = t_entry, st[1] = clock64(), st[2] = (long long)ns_entry, st[3] = (long long)ns_exit;
    }
}"""
        % {"row_exit": _ROW.format(g="warp / 4", i=EXIT_ROW)},
    ),
)


class ProbeError(Exception):
    """One line: why the probe cannot run as asked."""


def patch(text: str, where: str = "the kernel's source") -> str:
    """text (tma_gemv.cuh, or a submission whose CUDA_SRC holds it) with the stamps in; ProbeError if an anchor
    is not there exactly once (the kernel changed under the probe: update PATCHES)."""
    for number, (anchor, replacement) in enumerate(PATCHES, 1):
        found = text.count(anchor)
        if found != 1:
            first = anchor.strip().splitlines()[0].strip()
            raise ProbeError(
                f"{where}: the probe's anchor {number} ({first!r}) is there {found} times, not once:"
                " generator/probes/slot_stamps.py's PATCHES no longer match tma_kernel"
            )
        text = text.replace(anchor, replacement)
    return text


def parse_launches(specs) -> list:
    """Each `layer:m:engine:values` as generator.judge.launches parses it, checked for the probe; ProbeError
    (one line) at the first that cannot be stamped."""
    from generator.judge.launches import parse_launch
    from generator.problem import load_problem
    from generator.engines import BY_NAME

    problem = load_problem()
    launches = []
    for spec in specs:
        try:
            launch = parse_launch(spec, problem)
        except ValueError as exc:
            raise ProbeError(str(exc)) from None
        if launch.engine not in ("tma_gemv", "tma_gemm"):
            raise ProbeError(
                f"{spec!r}: the probe stamps tma_kernel (tma_gemv, tma_gemm), not {launch.engine}"
            )
        fields = dict(zip(BY_NAME[launch.engine].fields, launch.config))
        if fields["reduce"] == "semaphore":
            raise ProbeError(f"{spec!r}: reduce=semaphore keeps its partials in the workspace the stamps use")
        layer = problem.layers[launch.layer]
        half = fields.get("tile") == "half"
        rows = 32 if half else 64 * fields.get("warpgroups", 1)  # weight rows a CTA
        ctas = layer.n_for(launch.m) // rows * fields["splits"]
        if ctas > MAX_CTAS:
            raise ProbeError(f"{spec!r}: {ctas} CTAs, over the {MAX_CTAS} whose stamps the workspace holds")
        slots = -(-(layer.k // (128 if half else 64)) // fields["splits"])  # the widest split's
        if slots > STAMPED_SLOTS:
            raise ProbeError(
                f"{spec!r}: {slots} slots a CTA, over the {STAMPED_SLOTS} stamped (more splits shorten the ring walk)"
            )
        launches.append(launch)
    return launches


class Row(NamedTuple):
    launch: str
    figures: dict  # name -> value (ns for per-slot means, us for per-CTA medians and the grid)


SLOT_FIGURES = (  # (name, what): per-slot means, ns
    ("period", "period a slot"),
    ("wait", "consumer waits"),
    ("issue", "wgmma issue"),
    ("wgmma_wait", "wgmma_wait"),
    ("empty_wait", "producer waits on `empty`"),
    ("produce", "producer issues the copies"),
    ("lead", "copies issued ahead of use"),
    ("land", "issue to landing"),
)
CTA_FIGURES = (  # per-CTA medians (and the slowest CTA), us
    ("to_first_wait", "entry to first wait"),
    ("loop", "slot loop"),
    ("after_last", "after the last slot"),
)
# figures: the per-slot means in ns, the per-CTA medians (and *_max, the slowest CTA) and the grid in us, sm_ghz
# (the SM clock, from the stamps), ctas (CTAs that wrote stamps, a run), waited_share (slots the consumer waited on)


def analyse(launches, waited_cycles: int = 200) -> dict:
    """The figures of one launch from its stamps: per run of it, an int64 tensor or nested lists [ctas]
    [WARPGROUPS][SLOT_ROWS][FIELDS] (rows never written are 0). A slot counts as waited on when its wait took over
    waited_cycles. The grid's span is the median over the runs."""
    per = {name: [] for name, _ in SLOT_FIGURES}
    cta = {name: [] for name, _ in CTA_FIGURES}
    rate, grids = [], []
    for stamps in launches:
        entries, exits = [], []
        for block in stamps.tolist() if hasattr(stamps, "tolist") else stamps:
            for g, slots in enumerate(block):
                n = sum(1 for row in slots[:STAMPED_SLOTS] if row[0])
                if n < 4:
                    continue
                for i in range(2, n - 1):
                    c0, c1, c2, c3, c4, p0, p1, p2 = slots[i]
                    per["period"].append(slots[i + 1][0] - c0)
                    per["wait"].append(c1 - c0)
                    per["issue"].append(c2 - c1)
                    per["wgmma_wait"].append(c3 - c2)
                    if g == 0 and p1:
                        per["empty_wait"].append(p1 - p0)
                        per["produce"].append(p2 - p1)
                        per["lead"].append(c0 - p2)
                        if c1 - c0 > waited_cycles:
                            per["land"].append(c1 - p2)
                cta["loop"].append(slots[n - 1][4] - slots[0][0])
                entry, exit_, ns_entry, ns_exit = slots[EXIT_ROW][:4]
                if ns_exit > ns_entry:
                    rate.append((exit_ - entry) / (ns_exit - ns_entry))  # SM cycles a ns
                    entries.append(ns_entry)
                    exits.append(ns_exit)
                    cta["to_first_wait"].append(slots[0][0] - entry)
                    cta["after_last"].append(exit_ - slots[n - 1][4])
        if entries:
            grids.append(max(exits) - min(entries))
    if not cta["loop"]:
        raise ProbeError("no CTA wrote its stamps: the launch did not run the patched kernel")
    ghz = statistics.median(rate) if rate else 1.98
    figures = {"sm_ghz": round(ghz, 3), "ctas": round(statistics.mean(len(run) for run in launches))}
    for name, values in per.items():
        figures[name] = round(statistics.mean(values) / ghz, 1) if values else None
    for name, values in cta.items():
        figures[name] = round(statistics.median(values) / ghz / 1000, 2) if values else None
        figures[name + "_max"] = round(max(values) / ghz / 1000, 2) if values else None
    figures["grid"] = round(statistics.median(grids) / 1000, 2) if grids else None
    waits = per["wait"]
    figures["waited_share"] = (
        round(sum(1 for w in waits if w > waited_cycles) / len(waits), 2) if waits else None
    )
    return figures


def table(rows: list[Row]) -> str:
    """A markdown table, one row a launch (docs/tma-gemm.md's layout)."""
    head = ["launch", "grid (us)", "CTAs"]
    head += [f"{what} (us: median / slowest)" for _, what in CTA_FIGURES]
    head += [f"{what} (ns)" for _, what in SLOT_FIGURES] + ["slots waited on"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for row in rows:
        f = row.figures
        cells = [row.launch, f"{f['grid']}", f"{f['ctas']}"]
        cells += [f"{f[name]} / {f[name + '_max']}" for name, _ in CTA_FIGURES]
        cells += [f"{f[name]}" for name, _ in SLOT_FIGURES] + [f"{f['waited_share']}"]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def run(submission: Path, launches, reps: int = 5, seed: int = 3) -> list[Row]:
    """Patch `submission`, prepare it on normal weights and stamp each launch (parse_launches) `reps` times, cold."""
    import torch

    from generator.judge.launches import make_plans
    from generator.judge.loader import load_submission
    from generator.judge.timing import L2Flusher
    from generator.judge.weights import make_weights, make_x
    from generator.problem import load_problem

    problem = load_problem()
    patched = patch(Path(submission).read_text(), str(submission))
    with tempfile.TemporaryDirectory(prefix="okc_slot_stamps_") as tmp:
        path = Path(tmp) / "stamped_submission.py"
        path.write_text(patched)
        module = load_submission(path, module_name="okc_slot_stamps")
        weights = make_weights(problem, "normal", seed, "cuda")
        state = module.prepare({name: w.clone() for name, w in weights.items()})
        wanted = [(launch.layer, launch.m, launch.engine, launch.config) for launch in launches]
        plans = make_plans(module, state, wanted)
        workspace = state.buffers["workspace"]
        flush = L2Flusher()
        gen = torch.Generator(device="cuda").manual_seed(seed)
        rows = []
        for launch, plan in zip(launches, plans):
            layer = problem.layers[launch.layer]
            x = make_x(launch.m, layer.k, gen, "cuda")
            plan(x)  # warm: compiled, bound
            stamps = []
            for _ in range(reps):
                workspace.zero_()
                flush()
                torch.cuda.synchronize()
                plan(x)
                torch.cuda.synchronize()
                words = workspace.view(torch.int64)
                ctas = words.numel() // (WARPGROUPS * SLOT_ROWS * FIELDS)
                grid = words[: ctas * WARPGROUPS * SLOT_ROWS * FIELDS].view(
                    ctas, WARPGROUPS, SLOT_ROWS, FIELDS
                )
                live = grid[:, :, :, 0].ne(0).any(dim=2).any(dim=1)  # the CTAs that wrote
                stamps.append(grid[live].cpu())
            rows.append(Row(launch.spec, analyse(stamps)))
    return rows
