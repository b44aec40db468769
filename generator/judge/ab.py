"""ab: time a few GEMV launches against each other, interleaved in one process, on the H200.

Why a command: configs within a few percent of each other swap places from one H200 to the next (notes/README.md,
session 17: the router's m = 32 entry and a challenger, 4 % apart in opposite directions on two machines). The only
fair comparison is in one process: each round times every launch once (cold, read-flushed, a graph replay, median
of `reps`), and the order rotates from round to round, so no launch always runs first or right after another. Each
launch's output is checked against float64 first; a wrong one is reported and not timed.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass
from types import ModuleType

from generator.judge.launches import Launch, launch_calls
from generator.problem import Problem


def round_orders(count: int, rounds: int) -> list[list[int]]:
    """The order the launches run in, per round: round r starts at launch r mod count, so over `count` rounds
    every launch takes every position once."""
    return [[(r + i) % count for i in range(count)] for r in range(rounds)]


@dataclass(frozen=True)
class AbRow:
    spec: str
    median_us: float  # over the rounds' medians
    low_us: float
    high_us: float
    ratio: float  # median / the first launch's median


def summarize(timed: list[tuple[str, list[float]]]) -> list[AbRow]:
    """One row per launch that was timed, (spec, its rounds' times) in the order given (a spec may repeat: the
    same launch twice shows the noise); ratios against the first."""
    timed = [(spec, times) for spec, times in timed if times]
    if not timed:
        return []
    base = statistics.median(timed[0][1])
    return [
        AbRow(spec, statistics.median(times), min(times), max(times), statistics.median(times) / base)
        for spec, times in timed
    ]


def format_ab(rows: list[AbRow], rounds: int, reps: int) -> str:
    width = max([len("launch")] + [len(r.spec) for r in rows])
    lines = [
        f"{'launch':<{width}} {'us':>8} {'low':>8} {'high':>8} {'x first':>8}",
        *(
            f"{r.spec:<{width}} {r.median_us:8.2f} {r.low_us:8.2f} {r.high_us:8.2f} {r.ratio:8.3f}"
            for r in rows
        ),
        f"us: median of {rounds} rounds, each the median of {reps} cold replays (L2 read-flushed); low / high:"
        " the rounds' extremes",
    ]
    return "\n".join(lines)


def checked_calls(module: ModuleType, problem: Problem, launches: list[Launch], device: str = "cuda"):
    """Each launch run once into NaN-poisoned memory and compared with float64: ([(spec, call)] of the right ones,
    one line per wrong one)."""
    import torch

    from generator.judge.reference import compare, reference
    from generator.judge.verify import poisoned_allocations

    calls, weights = launch_calls(module, problem, launches, device=device)
    ok, wrong = [], []
    for launch, (call, x, n) in zip(launches, calls):
        with poisoned_allocations():  # an element no CTA wrote stays NaN and cannot pass as right
            out = call()
        if device == "cuda":
            torch.cuda.synchronize()
        ref, scale = reference(x, weights[launch.layer], n)
        result = compare(out, ref, scale, fp32_out=problem.layers[launch.layer].dual)
        if result.ok:
            ok.append((launch.spec, call))
        else:
            wrong.append(f"{launch.spec}: wrong ({result.problem or f'worst {result.worst:.3g} x allowed'})")
    return ok, wrong


def run_ab(module: ModuleType, problem: Problem, launches: list[Launch], rounds: int, reps: int):
    """On the H200: ([(spec, its rounds' times)] of the launches that computed right results, in order; one line
    per launch that did not)."""
    from generator.judge.timing import L2Flusher, time_cold_us

    ok, wrong = checked_calls(module, problem, launches)
    flush = L2Flusher()
    times: list[list[float]] = [[] for _ in ok]
    for order in round_orders(len(ok), rounds):
        for i in order:
            times[i].append(time_cold_us(ok[i][1], flush, reps))
    return [(spec, t) for (spec, _), t in zip(ok, times)], wrong
