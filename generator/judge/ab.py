"""ab: time a few GEMV launches against each other, interleaved in one process, on the H200.

Why a command: configs within a few percent of each other swap places from one H200 to the next (docs/method.md:
the router's m = 32 entry and a challenger, 4 % apart in opposite directions on two machines). The only
fair comparison is in one process: each round times every launch once (cold, read-flushed, a graph replay, median
of `reps`), and the order rotates from round to round, so no launch always runs first or right after another. Each
launch's output is checked against float64 first; a wrong one is reported and not timed, unless `--time-wrong`
asks for it: then it is timed too, its row marked `(wrong)`. That is for timing-only probes, an experiment
branch's variant that leaves out part of the work on purpose (x's loads, say) to see what that part costs.

`--env NAME=V1,V2,...` runs every launch under each value of an environment variable: how an experiment branch
puts two kernel variants in one build, its launcher picking one by a variable it reads at each launch (so also
while a graph is captured). Each launch's first value is then its rows' baseline.
"""

from __future__ import annotations

import os
import re
import statistics
from dataclasses import dataclass
from types import ModuleType
from typing import Callable
from unittest import mock

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


def summarize(timed: list[tuple[str, list[float]]], per_launch: bool = False) -> list[AbRow]:
    """One row per launch that was timed, (spec, its rounds' times) in the order given (a spec may repeat: the
    same launch twice shows the noise); ratios against the first, or (per_launch, for --env's rows `spec
    NAME=value`) against the first row of the same launch."""
    timed = [(spec, times) for spec, times in timed if times]
    base: dict[str, float] = {}
    rows = []
    for spec, times in timed:
        key = spec.split(" ")[0] if per_launch else ""
        median = statistics.median(times)
        base.setdefault(key, median)
        rows.append(AbRow(spec, median, min(times), max(times), median / base[key]))
    return rows


def format_ab(rows: list[AbRow], rounds: int, reps: int, per_launch: bool = False) -> str:
    width = max([len("launch")] + [len(r.spec) for r in rows])
    lines = [
        f"{'launch':<{width}} {'us':>8} {'low':>8} {'high':>8} {'x first':>8}",
        *(
            f"{r.spec:<{width}} {r.median_us:8.2f} {r.low_us:8.2f} {r.high_us:8.2f} {r.ratio:8.3f}"
            for r in rows
        ),
        f"us: median of {rounds} rounds, each the median of {reps} cold replays (L2 read-flushed); low / high:"
        " the rounds' extremes" + ("; x first: against the same launch's first value" if per_launch else ""),
    ]
    return "\n".join(lines)


EnvSwitch = tuple[str, tuple[str, ...]]  # (NAME, its values), from --env NAME=V1,V2,...
_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def parse_env_switch(text: str) -> EnvSwitch:
    """`NAME=V1,V2,...` -> (NAME, (V1, V2, ...)), or ValueError with one line saying what is wrong."""
    name, eq, values = text.partition("=")
    if not eq or not _ENV_NAME.fullmatch(name):
        raise ValueError(
            f"--env {text!r}: expected NAME=V1,V2,... with NAME a variable name, e.g. OKC_TMA_ROLLED=0,1"
        )
    parts = tuple(values.split(","))
    if any(not part for part in parts):
        raise ValueError(f"--env {text!r}: an empty value (values are separated by single commas)")
    return name, parts


def under_env(call: Callable[[], object], name: str, value: str) -> Callable[[], object]:
    """call, run with os.environ[name] = value (left set: whatever reads it at launch, capture included, sees it)."""

    def run():
        os.environ[name] = value
        return call()

    return run


def checked_calls(
    module: ModuleType,
    problem: Problem,
    launches: list[Launch],
    device: str = "cuda",
    env: EnvSwitch | None = None,
    time_wrong: bool = False,
):
    """Each launch (under each value of `env`, if given) run once into NaN-poisoned memory and compared with
    float64: ([(label, call)] of the ones to time, one line per wrong one). The label is the launch's spec, plus
    ` NAME=value` under a switch. The ones to time are the right ones, and with time_wrong the wrong ones too,
    labelled ` (wrong)`."""
    import torch

    from generator.judge.reference import compare, reference
    from generator.judge.verify import poisoned_allocations

    calls, weights = launch_calls(module, problem, launches, device=device)
    ok, wrong = [], []
    for launch, (call, x, n) in zip(launches, calls):
        ref, scale = reference(x, weights[launch.layer], n)
        variants = [(launch.spec, call)]
        if env is not None:
            name, values = env
            variants = [(f"{launch.spec} {name}={value}", under_env(call, name, value)) for value in values]
        for label, variant in variants:
            with poisoned_allocations():  # an element no CTA wrote stays NaN and cannot pass as right
                out = variant()
            if device == "cuda":
                torch.cuda.synchronize()
            result = compare(out, ref, scale, fp32_out=problem.layers[launch.layer].dual)
            if result.ok:
                ok.append((label, variant))
            else:
                wrong.append(f"{label}: wrong ({result.problem or f'worst {result.worst:.3g} x allowed'})")
                if time_wrong:
                    ok.append((f"{label} (wrong)", variant))
    return ok, wrong


def run_ab(
    module: ModuleType,
    problem: Problem,
    launches: list[Launch],
    rounds: int,
    reps: int,
    env: EnvSwitch | None = None,
    device: str = "cuda",
    time_wrong: bool = False,
):
    """On the H200: ([(label, its rounds' times)] of the launches (under each value of `env`) that computed
    right results, in order, and with time_wrong the wrong ones too (labelled so); one line per wrong one). Each
    timing captures its graph afresh, with its value set; the environment is as it was afterwards. device: cpu for
    a stand-in module in the tests."""
    from generator.judge.timing import L2Flusher, settle, time_cold_us

    with mock.patch.dict(os.environ):  # undoes the variable --env's variants set
        ok, wrong = checked_calls(module, problem, launches, device, env, time_wrong)
        flush = L2Flusher()
        settle(flush)  # the first launches would otherwise run in the fast state right after prepare()
        times: list[list[float]] = [[] for _ in ok]
        for order in round_orders(len(ok), rounds):
            for i in order:
                times[i].append(time_cold_us(ok[i][1], flush, reps))
    return [(label, t) for (label, _), t in zip(ok, times)], wrong
