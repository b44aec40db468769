"""What one SM takes in through the bulk copy engine (tma_intake.cu), by ring depth, slot size, CTAs a SM, where
the bytes come from (HBM, L2) and whether every CTA reads the same lines (the GEMM's x) or its own (its weights).

Each case launches the probe kernel `reps` times, L2 flushed by reading 1 GiB before each cold launch (the
bench's flush); warm cases read regions small enough to stay in L2 and are launched once untimed first. From the
CTAs' clock stamps: the steady intake per SM (slots 1 .. n - 1 over the time from the first landing to the
last, the SM's CTAs added), the first slot's latency from the CTA's start, and Little's law's round trip (bytes
in flight / intake). The event time of the whole launch is beside them."""

from __future__ import annotations

import statistics
from pathlib import Path
from typing import NamedTuple

from generator import probes

import torch

SOURCE = Path(__file__).with_name("tma_intake.cu")
KB = 1024
PER_CTA_BYTES = 3 * KB * KB // 2  # what each CTA streams: about a GEMM CTA's share at m = 128 (1-1.5 MB)
WARM_REGION = 128 * KB  # a warm SM's own bytes, shared by its CTAs and rings (132 x 128 KB stays in L2)
SHARED_REGION = 2 * KB * KB  # x at m = 128, K = 8192


class Case(NamedTuple):
    group: str  # what the row isolates
    distinct: int  # bytes a slot takes from the CTA's own region
    shared: int  # bytes a slot takes from the region every CTA reads
    slots: int  # ring slots in flight
    ctas_per_sm: int  # 1 or 2 (grid 132 or 264)
    cold: bool  # L2 flushed before the launch (own regions far larger than L2), else warm and L2-resident
    copy: int = 32 * KB  # the largest single bulk copy
    rings: int = 1  # independent rings a CTA, each its own producer and consumer warp
    test_wait: bool = False  # poll mbarrier.test_wait instead of the suspending try_wait
    lanes: int = 1  # lanes of the producer warp that issue copies (lane j: slots j, j + lanes, ...)
    shared_box: bool = False  # the shared bytes as the GEMM's x box (tensor map, 128-B swizzle), not bulk
    hold_ns: int = 0  # the consumer holds each landed slot this long before handing it back (as wgmmas do)


class Row(NamedTuple):
    case: Case
    sm_gbs: float  # steady intake per SM, GB/s (median over SMs)
    total_tbs: (
        float  # every ring's steady bytes over the span from the grid's first landing to its last, TB/s
    )
    first_us: float  # first slot's latency from the CTA's start, us (median)
    round_trip_us: float  # Little's law: bytes in flight a SM / its intake
    event_us: float  # the whole launch, events around it (median)
    sms: int  # distinct SMs the CTAs ran on


def cases() -> list[Case]:
    """Every case the probe measures, in table order: each group isolates one thing."""
    return _ring_cases() + _gemm_slot_cases() + _ring_and_lane_cases() + _box_cases()


def _ring_cases() -> list[Case]:
    """Ring depth by slot size (own lines, HBM or L2), shared lines, two CTAs a SM, the largest copy."""
    out = []
    ring = {8 * KB: (1, 2, 4, 8, 16, 24), 16 * KB: (1, 2, 4, 8, 12), 32 * KB: (1, 2, 4, 6)}
    for cold, group in ((True, "own lines, HBM"), (False, "own lines, L2")):
        for size, depths in ring.items():
            out += [Case(group, size, 0, slots, 1, cold) for slots in depths]
    out += [Case("shared lines, L2 (every CTA the same)", 0, 16 * KB, s, 1, False) for s in (1, 2, 4, 8, 12)]
    out += [Case("shared lines, cold", 0, 16 * KB, s, 1, True) for s in (2, 4, 8, 12)]
    out += [Case("two CTAs a SM, own lines, HBM", 16 * KB, 0, s, 2, True) for s in (1, 2, 4, 6)]
    out += [Case("two CTAs a SM, own lines, L2", 16 * KB, 0, s, 2, False) for s in (1, 2, 4, 6)]
    out += [Case("copy size (32 KB slots, HBM)", 32 * KB, 0, 6, 1, True, copy) for copy in (2 * KB, 8 * KB)]
    return out


def _gemm_slot_cases() -> list[Case]:
    """A GEMM slot: weights of 64-256 rows (own, HBM) + x's box of the slot's tokens (shared)."""
    out = []
    gemm = {
        "GEMM slot, 64 rows + x of 128 tokens": (8 * KB, 16 * KB, (2, 4, 6, 8)),
        "GEMM slot, 128 rows + x of 128 tokens": (16 * KB, 16 * KB, (2, 4, 6)),
        "GEMM slot, 128 rows + x of 256 tokens": (16 * KB, 32 * KB, (2, 4)),
        "GEMM slot, 256 rows + x of 128 tokens": (32 * KB, 16 * KB, (2, 4)),
    }
    for group, (w, x, depths) in gemm.items():
        out += [Case(group, w, x, s, 1, True, 8 * KB) for s in depths]
    out += [
        Case("GEMM slot, 64 rows + x of 128 tokens, two CTAs a SM", 8 * KB, 16 * KB, s, 2, True, 8 * KB)
        for s in (2, 4)
    ]
    return out


def _ring_and_lane_cases() -> list[Case]:
    """Several rings a CTA side by side, and one producer warp with several issuing lanes."""
    out = []
    for cold, where in ((False, "L2"), (True, "HBM")):
        out += [Case(f"rings a CTA, own lines, {where}", 16 * KB, 0, 2, 1, cold, rings=r) for r in (1, 2, 4)]
        out += [Case(f"rings a CTA, own lines, {where}", 8 * KB, 0, 4, 1, cold, rings=r) for r in (2, 4)]
    rings = "GEMM slot, 64 rows + x of 128 tokens, rings a CTA"
    out += [Case(rings, 8 * KB, 16 * KB, 4, 1, True, 8 * KB, 2)]
    out += [Case(rings, 8 * KB, 16 * KB, 2, 1, True, 8 * KB, r) for r in (2, 4)]
    for cold, where in ((False, "L2"), (True, "HBM")):
        out += [Case(f"issuing lanes, own lines, {where}", 16 * KB, 0, 4, 1, cold, lanes=n) for n in (2, 4)]
        out += [Case(f"issuing lanes, own lines, {where}", 8 * KB, 0, 8, 1, cold, lanes=n) for n in (2, 4, 8)]
    lanes = "GEMM slot, 64 rows + x of 128 tokens, issuing lanes"
    out += [Case(lanes, 8 * KB, 16 * KB, 8, 1, True, 8 * KB, lanes=n) for n in (2, 4, 8)]
    lanes = "GEMM slot, 128 rows + x of 128 tokens, issuing lanes"
    out += [Case(lanes, 16 * KB, 16 * KB, 6, 1, True, 8 * KB, lanes=n) for n in (2, 3, 6)]
    return out


def _box_cases() -> list[Case]:
    """x by its tensor-map box (as the GEMM reads it), a consumer holding each slot, and polling test_wait."""
    box = "GEMM slot, 64 rows + x of 128 tokens, x by its tensor-map box"
    out = [Case(box, 8 * KB, 16 * KB, 8, 1, True, 8 * KB, lanes=n, shared_box=True) for n in (1, 2, 4)]
    box = "GEMM slot, 128 rows + x of 128 tokens, x by its tensor-map box"
    out += [Case(box, 16 * KB, 16 * KB, 6, 1, True, 8 * KB, lanes=n, shared_box=True) for n in (1, 2, 3)]
    held = "GEMM slot, 64 rows + x of 128 tokens (box), each slot held"
    out += [
        Case(held, 8 * KB, 16 * KB, 8, 1, True, 8 * KB, lanes=n, shared_box=True, hold_ns=h)
        for h in (100, 200, 400)
        for n in (1, 4)
    ]
    polling = "polling test_wait, own lines, L2"
    out += [Case(polling, size, 0, 4, 1, False, test_wait=True) for size in (8 * KB, 16 * KB)]
    return out


def build():
    """The probe's extension: tma_intake.cu and its launcher's shim."""
    return probes.build_probe(
        "okc_tma_intake_probe",
        SOURCE,
        "tma_intake_launch",
        "int grid, long long d, long long s, long long dr, long long sr, int db, int sb, int cb, int slots, int n,"
        " int rings, int poll, int lanes, int box, long long hold, long long stamps, long long stream",
    )


class ProbeLaunch:
    """One case's launch of the probe kernel: its grid, its regions and stamps on the GPU, and the hold (SM clock
    cycles, recalibrated from the first launch's stamps)."""

    def __init__(self, case: Case, ext, sms: int):
        self.case, self.ext = case, ext
        self.slot = case.distinct + case.shared
        self.n = max(32, PER_CTA_BYTES // self.slot)
        self.grid = sms * case.ctas_per_sm
        self.streams = self.grid * case.rings  # rings in the grid, each with its own region and stamps
        if not case.distinct:
            self.region = 16
        elif case.cold:
            self.region = self.n * case.distinct
        else:  # warm: the rings' regions together stay in L2, whatever the rings a CTA
            self.region = WARM_REGION // (case.rings * case.ctas_per_sm)
        self.distinct = torch.empty(max(self.streams * self.region, 16), dtype=torch.uint8, device="cuda")
        self.distinct.random_(0, 255)
        self.shared = torch.ones(SHARED_REGION, dtype=torch.uint8, device="cuda")
        self.stamps = torch.zeros(self.streams, 6, dtype=torch.int64, device="cuda")
        self.stream = torch.cuda.current_stream().cuda_stream
        self.hold = round(case.hold_ns * 1.98)

    def __call__(self) -> None:
        c = self.case
        why = self.ext.launch(
            self.grid,
            self.distinct.data_ptr(),
            self.shared.data_ptr(),
            self.region,
            SHARED_REGION,
            c.distinct,
            c.shared,
            c.copy,
            c.slots,
            self.n,
            c.rings,
            int(c.test_wait),
            c.lanes,
            int(c.shared_box),
            self.hold,
            self.stamps.data_ptr(),
            self.stream,
        )
        if why:
            raise RuntimeError(f"{c}: {why}")

    def figures(self) -> tuple[float, float, list, int]:
        """From the last launch's stamps: the median SM's steady intake (B/s), every ring's steady bytes over the
        span from the grid's first landing to its last (B/s), each ring's first-slot latency (us), the SMs used.
        """
        stamped = self.stamps.cpu().tolist()
        hz = clock_hz(stamped)
        steady = (self.n - 1) * self.slot
        per_sm: dict[int, float] = {}
        firsts = []
        for t0, t1, t2, sm, _, _ in stamped:
            if t2 > t1:
                per_sm[sm] = per_sm.get(sm, 0.0) + steady / ((t2 - t1) / hz)
            firsts.append((t1 - t0) / hz * 1e6)
        span_ns = max(g2 for *_, g2 in stamped) - min(g1 for *_, g1, _ in stamped)
        return (
            statistics.median(per_sm.values()),
            self.streams * steady / (span_ns * 1e-9),
            firsts,
            len(per_sm),
        )


def clock_hz(stamped) -> float:
    """SM clock ticks per globaltimer second, over the CTAs' steady windows."""
    return statistics.median(
        (t2 - t1) / (g2 - g1) * 1e9 for _, t1, t2, _, g1, g2 in stamped if g2 - g1 > 1000
    )


def measure(case: Case, ext, flush, sms: int, reps: int = 9) -> Row:
    launch = ProbeLaunch(case, ext, sms)
    launch()
    torch.cuda.synchronize()
    launch.hold = round(case.hold_ns * clock_hz(launch.stamps.cpu().tolist()) / 1e9)
    rates, totals, firsts, events, used = [], [], [], [], 0
    for _ in range(reps):
        if case.cold:
            flush()
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        launch()
        end.record()
        torch.cuda.synchronize()
        events.append(start.elapsed_time(end) * 1000.0)
        rate, total, first, used = launch.figures()
        rates.append(rate)
        totals.append(total)
        firsts += first
    rate = statistics.median(rates)
    in_flight = case.slots * launch.slot * case.ctas_per_sm * case.rings
    return Row(
        case,
        rate / 1e9,
        statistics.median(totals) / 1e12,
        statistics.median(firsts),
        in_flight / rate * 1e6,
        statistics.median(events),
        used,
    )


def run(quick: bool = False) -> tuple[list[Row], dict]:
    from generator.judge.timing import L2Flusher

    props = torch.cuda.get_device_properties(0)
    ext = build()
    flush = L2Flusher()
    sms = props.multi_processor_count
    chosen = cases()
    if quick:
        chosen = chosen[::6]
    rows = [measure(case, ext, flush, sms) for case in chosen]
    env = {"device": props.name, "sms": sms, "torch": torch.__version__}
    return rows, env


def table(rows: list[Row]) -> str:
    lines = [
        "| what | slot (own + shared KB) | slots | CTAs a SM | rings a CTA | issuing lanes | in flight a SM (KB) | intake a SM (GB/s) |"
        " all SMs (TB/s) | first slot (us) | round trip (us) | launch (us) |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        c = r.case
        slot = f"{c.distinct // KB} + {c.shared // KB}" + (
            f" ({c.copy // KB} KB copies)" if c.copy < 32 * KB else ""
        )
        slot += " (test_wait)" if c.test_wait else ""
        slot += " (x box)" if c.shared_box else ""
        slot += f" (held {c.hold_ns} ns)" if c.hold_ns else ""
        lines.append(
            f"| {c.group} | {slot} | {c.slots} | {c.ctas_per_sm} | {c.rings} | {c.lanes}"
            f" | {c.slots * (c.distinct + c.shared) * c.ctas_per_sm * c.rings // KB}"
            f" | {r.sm_gbs:.1f} | {r.total_tbs:.2f} | {r.first_us:.2f} | {r.round_trip_us:.2f} | {r.event_us:.2f} |"
        )
    return "\n".join(lines)
