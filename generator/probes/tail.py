"""probe-tail: persistent_gemm's split-K tail apart from the GEMM (splitk_tail.cu). Each case is a layer's output
[m, n] in rows x tokens tiles, each tile split over `splits` CTAs holding synthetic fp32 partials; each design
brings the tiles to the output. Every design is checked first (exact sums, counters and sums left clean, twice),
then timed: cold graph replays (L2 read-flushed) against the stamps-only launch of the same grid, and each CTA's
store, wait and reduction from the global timer."""

from __future__ import annotations

import statistics
from pathlib import Path
from typing import NamedTuple

from generator import probes

SOURCE = Path(__file__).with_name("splitk_tail.cu")
# splitk_tail.cu's TailDesign, in order: st.global partials less each CTA's own share, gathered back by bulk
# copies (the kernel's); bulk-copied partials gathered alike; bulk adds into one fp32 sum a tile in L2, read back
# in shares or by the last CTA to add; a cluster a tile, shares read from every rank's shared memory; stamps only
DESIGNS = ("store", "bulk-store", "add-shares", "add-last", "cluster", "none")
FLOOR = DESIGNS.index("none")
CLUSTER = DESIGNS.index("cluster")
SHAPES = ((128, 64), (128, 128), (128, 256), (256, 128))  # rows x tokens the probe is built for
SMS = 132
STAMP_GROUPS, STAMP_SLOTS = 2, 8  # persistent_gemm.cuh's gemm_stamp: per consumer warpgroup
ENTRY, UNITS, ARRIVED, EXIT = 0, 3, 4, 5  # its GemmPhase slots the probe stamps


class ProbeError(Exception):
    pass


class Case(NamedTuple):
    name: str  # the layer and m whose routed config this tail is
    rows: int
    tokens: int
    m: int
    n: int
    splits: int

    @property
    def tiles(self) -> int:
        return self.n // self.rows * -(-self.m // self.tokens)

    @property
    def ctas(self) -> int:
        return self.tiles * self.splits

    @property
    def partial_bytes(self) -> int:
        """A CTA's fp32 partial: rows x tokens."""
        return self.rows * self.tokens * 4


# The tails of the configs the step after this probe chooses from: tiles x splits near 132, equal splits.
DEFAULT_CASES = (
    Case("qkv_gate m=128", 128, 128, 128, 2304, 6),
    Case("qkv_gate m=128", 128, 128, 128, 2304, 7),
    Case("qkv_gate m=256", 128, 256, 256, 2304, 7),
    Case("qkv_gate m=256", 128, 128, 256, 2304, 3),
    Case("pooler m=128", 128, 128, 128, 4096, 4),
    Case("pooler m=256", 128, 256, 256, 4096, 4),
    Case("o, unpooler m=128", 128, 128, 128, 8192, 2),
    Case("o, unpooler m=256", 128, 256, 256, 8192, 2),
    Case("router m=128", 128, 128, 128, 256, 32),
    Case("router m=128", 128, 64, 128, 256, 33),
    Case("router m=256", 128, 256, 256, 256, 32),
)


def parse_case(text: str) -> Case:
    """`rows,tokens,m,n,splits` -> a Case (ProbeError naming what is wrong)."""
    try:
        rows, tokens, m, n, splits = (int(v) for v in text.split(","))
    except ValueError:
        raise ProbeError(
            f"--case {text!r}: expected rows,tokens,m,n,splits, e.g. 128,128,128,2304,6"
        ) from None
    case = Case(f"{m} x {n}", rows, tokens, m, n, splits)
    if (rows, tokens) not in SHAPES:
        raise ProbeError(
            f"--case {text!r}: rows x tokens must be one of {', '.join(f'{r}x{t}' for r, t in SHAPES)}"
        )
    if m < 1 or n % rows or splits < 2 or case.ctas > SMS:
        raise ProbeError(
            f"--case {text!r}: needs m >= 1, n a multiple of rows, splits >= 2, tiles x splits <= {SMS}"
        )
    return case


def expected_sums(case: Case):
    """out[token, row] = the sum over the tile's participants p of splitk_tail.cu's tail_value(row, token, p)."""
    import torch

    rows = torch.arange(case.n, dtype=torch.int64)
    tokens = torch.arange(case.m, dtype=torch.int64)[:, None]
    total = torch.zeros(case.m, case.n, dtype=torch.int64)
    for p in range(case.splits):
        total += (rows * 3 + tokens * 5 + p * 7) % 9 - 4
    return total.float()


class Row(NamedTuple):
    case: Case
    design: str
    clusters: int  # clusters of `splits` that fit at once (cluster design), else 0
    event_us: float  # a cold graph replay, median
    over_floor_us: float  # event_us minus the stamps-only launch's
    store_us: float  # median CTA: tail start to counted in
    wait_us: float  # counted in to all arrived
    reduce_us: float  # all arrived to exit
    span_us: float  # the grid's first start to its last exit

    def store_gbs(self) -> float:
        """A CTA's partial over its store time: GB/s a SM."""
        return self.case.partial_bytes / self.store_us / 1e3 if self.store_us > 0 else float("nan")

    def total_tbs(self) -> float:
        """All partials over the grid's span: TB/s."""
        return self.case.ctas * self.case.partial_bytes / self.span_us / 1e6


def build():
    """The probe's extension: splitk_tail.cu and its launcher's shim."""
    return probes.build_probe(
        "okc_splitk_tail_probe",
        SOURCE,
        "splitk_tail_launch",
        "int d, int r, int t, int m, int n, int s, long long out, long long ws, long long sums, long long stamps,"
        " long long sem, long long stream, long long clusters",
    )


class TailLaunch:
    """One case's buffers on the GPU and its launches, design by design."""

    def __init__(self, case: Case, ext):
        import torch

        self.case, self.ext = case, ext
        self.ws = torch.zeros(case.ctas * case.rows * case.tokens, device="cuda")  # a partial per CTA
        self.sums = torch.zeros(case.tiles * case.rows * case.tokens, device="cuda")  # a sum per tile
        self.stamps = torch.zeros(case.ctas, STAMP_GROUPS, STAMP_SLOTS, dtype=torch.int64, device="cuda")
        self.sem = torch.zeros(case.tiles * 4, dtype=torch.int32, device="cuda")
        self.out = torch.empty(case.m, case.n, dtype=torch.bfloat16, device="cuda")

    def __call__(self, design: int, clusters=None) -> None:
        import torch

        c = self.case
        why = self.ext.launch(
            design, c.rows, c.tokens, c.m, c.n, c.splits, self.out.data_ptr(), self.ws.data_ptr(),
            self.sums.data_ptr(), self.stamps.data_ptr(), self.sem.data_ptr(),
            torch.cuda.current_stream().cuda_stream,
            0 if clusters is None else clusters.data_ptr(),
        )  # fmt: skip
        if why:
            raise ProbeError(f"{c}, design {DESIGNS[design]}: {why}")

    def clusters_fit(self, design: int) -> int:
        import torch

        count = torch.zeros(1, dtype=torch.int32).pin_memory()
        self(design, count)
        torch.cuda.synchronize()
        return int(count.item())

    def check(self, design: int, expected) -> None:
        """Two launches, each with every output element right and the counters and sums left at zero."""
        import torch

        for launch in (1, 2):
            self.out.fill_(float("nan"))
            self(design)
            torch.cuda.synchronize()
            wrong = (self.out.float().cpu() != expected).sum().item()
            if wrong or self.sem.any().item() or self.sums.any().item():
                raise ProbeError(
                    f"{self.case}, design {DESIGNS[design]}, launch {launch}: {wrong} outputs wrong, counters"
                    f" {'not ' if self.sem.any().item() else ''}clean, sums {'not ' if self.sums.any().item() else ''}clean"
                )

    def spans(self, design: int, flush, launches: int) -> tuple:
        """Medians over cold launches of the median CTA's store, wait and reduction, and of the grid's span (us)."""
        import torch

        per_launch = []
        for _ in range(launches):
            self.stamps.zero_()
            flush()
            self(design)
            torch.cuda.synchronize()
            groups = [g for cta in self.stamps.tolist() for g in cta]
            mid = lambda a, b: statistics.median(g[b] - g[a] for g in groups)  # noqa: E731
            start, end = min(g[ENTRY] for g in groups), max(g[EXIT] for g in groups)
            per_launch.append((mid(ENTRY, UNITS), mid(UNITS, ARRIVED), mid(ARRIVED, EXIT), end - start))
        return tuple(statistics.median(p[i] for p in per_launch) / 1000.0 for i in range(4))


def measure(case: Case, ext, flush, designs, reps: int) -> list[Row]:
    """The case's rows, design by design, after each one's check; the stamps-only launch times the floor."""
    from generator.judge.timing import time_cold_us

    launch, expected = TailLaunch(case, ext), expected_sums(case)
    floor_us = time_cold_us(lambda: launch(FLOOR), flush, reps)
    rows = []
    for design in designs:
        clusters = 0
        if design == CLUSTER:
            if case.splits > 16:
                continue  # no cluster holds the tile's CTAs
            clusters = launch.clusters_fit(design)
            if clusters == 0:
                continue
        if design != FLOOR:
            launch.check(design, expected)
        event = time_cold_us(lambda: launch(design), flush, reps)
        store, wait, reduce, span = launch.spans(design, flush, max(5, reps // 3))
        rows.append(Row(case, DESIGNS[design], clusters, event, event - floor_us, store, wait, reduce, span))
    return rows


def run(cases, designs, reps: int) -> list[Row]:
    from generator.judge.timing import L2Flusher, settle

    ext = build()
    flush = L2Flusher()
    settle(flush)
    return [row for case in cases for row in measure(case, ext, flush, designs, reps)]


def table(rows: list[Row]) -> str:
    """A markdown table: per case and design, the launch over the floor, the median CTA's phases, the rates."""
    lines = [
        "| case | tile, splits, CTAs | partial KB | design | clusters fit | cold us | over floor us | store us"
        " | wait us | reduce us | span us | store GB/s a SM | all partials TB/s |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        c = r.case
        lines.append(
            f"| {c.name} | {c.rows}x{c.tokens}, {c.splits}, {c.ctas} | {c.partial_bytes // 1024} | {r.design}"
            f" | {r.clusters or '-'} | {r.event_us:.2f} | {r.over_floor_us:.2f} | {r.store_us:.2f} | {r.wait_us:.2f}"
            f" | {r.reduce_us:.2f} | {r.span_us:.2f} | {r.store_gbs():.0f} | {r.total_tbs():.2f} |"
        )
    return "\n".join(lines)
