"""(Superseded by `python -m generator ab --env NAME=V1,V2,...`; kept as the record of what calls 4-6 ran.)
Session 19 probe: a kernel variant picked by an environment variable that the launcher reads at each launch
(branch l2-ahead: OKC_TMA_L2_AHEAD; branch rolled: OKC_TMA_ROLLED). Every (launch, value) is checked against
float64 into NaN-poisoned memory, then timed interleaved like `ab` (rounds rotate the order; each entry the
median of 100 cold, read-flushed graph replays). Usage: PYTHONPATH=. python3 envprobe.py OUT.txt VAR V1,V2,... SPEC...
The first value is the baseline of the ratio column."""

import os
import statistics
import sys

import torch

from generator.judge.ab import round_orders
from generator.judge.launches import launch_calls, parse_launch
from generator.judge.loader import load_submission
from generator.judge.reference import compare, reference
from generator.judge.timing import L2Flusher, time_cold_us
from generator.judge.verify import poisoned_allocations
from generator.problem import load_problem

ROUNDS = 4


def main(out_path, var, values, specs):
    problem = load_problem()
    module = load_submission("dist/submission.py")
    launches = [parse_launch(s, problem) for s in specs]
    calls, weights = launch_calls(module, problem, launches)
    entries, bad = [], []
    for launch, (call, x, n) in zip(launches, calls):
        ref, scale = reference(x, weights[launch.layer], n)
        for d in values:
            os.environ[var] = str(d)
            torch.cuda.synchronize()
            with poisoned_allocations():  # an element no CTA wrote stays NaN
                out = call()
            torch.cuda.synchronize()
            result = compare(out, ref, scale, fp32_out=problem.layers[launch.layer].dual)
            if result.ok:
                entries.append((launch.spec, d, call))
            else:
                bad.append(f"{launch.spec} d={d}: wrong ({result.problem or result.worst})")
    flush = L2Flusher()
    times = [[] for _ in entries]
    for order in round_orders(len(entries), ROUNDS):
        for i in order:
            spec, d, call = entries[i]
            os.environ[var] = str(d)
            times[i].append(time_cold_us(call, flush, 100))
    lines = [f"{'launch':<28} {var[-6:]:>6} {'us':>7} {'low':>7} {'high':>7} {'x first':>7}"]
    base = {}
    for (spec, d, _), t in zip(entries, times):
        med = statistics.median(t)
        base.setdefault(spec, med if d == values[0] else None)
        ref_us = base.get(spec)
        lines.append(
            f"{spec:<28} {d:>6} {med:7.2f} {min(t):7.2f} {max(t):7.2f} {med / ref_us if ref_us else float('nan'):6.3f}"
        )
    lines += bad or ["all (launch, value) pairs matched float64"]
    text = "\n".join(lines)
    print(text)
    with open(out_path, "w") as f:
        f.write(text + "\n")


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], sys.argv[3].split(","), sys.argv[4:])
