"""verify: correctness of a submission on every shape the judge may send, eagerly and under CUDA-graph replay."""

from __future__ import annotations

import contextlib
import math
import textwrap
import time
import warnings
from dataclasses import dataclass, field
from types import ModuleType

import torch

from generator.judge.reference import (
    DENSE_FROB,
    DENSE_RTOL,
    DENSE_STOL,
    ROUTER_FROB,
    ROUTER_STOL,
    Comparison,
    compare,
    reference,
)
from generator.judge.weights import TORCH_DTYPES, make_weights, make_x
from generator.problem import Problem

PREPARE_LIMIT_S = 300.0
GRAPH_REPLAYS = 2


@dataclass
class ShapeResult:
    distribution: str
    layer: str
    m: int
    n: int
    eager: Comparison | None = None
    graph: list[Comparison] = field(default_factory=list)
    error: str = ""  # a failure that is not a numerical comparison (wrong dtype, exception, ...)

    @property
    def ok(self) -> bool:
        checks = ([self.eager] if self.eager else []) + self.graph
        return not self.error and bool(checks) and all(c.ok for c in checks)

    @property
    def problem(self) -> str:
        if self.error:
            return self.error
        for label, c in [("eager", self.eager)] + [
            (f"graph replay {i + 1}", c) for i, c in enumerate(self.graph)
        ]:
            if c is not None and not c.ok:
                return f"{label}: {c.problem}"
        return ""


@contextlib.contextmanager
def poisoned_allocations():
    """Fresh torch allocations come filled with NaN, so an output element nobody wrote shows up as NaN."""
    import torch.utils.deterministic as det

    previous = (
        torch.are_deterministic_algorithms_enabled(),
        torch.is_deterministic_algorithms_warn_only_enabled(),
    )
    previous_fill = det.fill_uninitialized_memory
    torch.use_deterministic_algorithms(True, warn_only=True)
    det.fill_uninitialized_memory = True
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            yield
    finally:
        torch.use_deterministic_algorithms(previous[0], warn_only=previous[1])
        det.fill_uninitialized_memory = previous_fill


def _shape_problem(out, m: int, n: int, dtype: torch.dtype, device) -> str:
    if not isinstance(out, torch.Tensor):
        return f"returned {type(out).__name__}, not a tensor"
    if tuple(out.shape) != (m, n):
        return f"shape {tuple(out.shape)}, expected {(m, n)}"
    if out.dtype != dtype:
        return f"dtype {out.dtype}, expected {dtype}"
    if out.device != torch.device(device) and not (out.device.type == torch.device(device).type == "cuda"):
        return f"device {out.device}, expected {device}"
    return ""


def _check(out, x, w, m, n, dtype, device) -> tuple[Comparison | None, str]:
    problem = _shape_problem(out, m, n, dtype, device)
    if problem:
        return None, problem
    ref, scale = reference(x, w, n)
    return compare(out, ref, scale, fp32_out=dtype == torch.float32), ""


def _graph_check(module, state, layer, m, n, k, w, dtype, gen, device) -> tuple[list[Comparison], str]:
    """Capture kernel_fn once, then replay with fresh x copied into the captured input, checking each replay.
    Catches counters that are not reset, host-side state and syncs inside kernel_fn. Without CUDA the capture
    is emulated by calling kernel_fn again on the same input tensor (device-side state bugs still show)."""
    static_x = make_x(m, k, gen, device)
    data = {"x": static_x, "config": {"m": m, "n": n, "k": k, "layer": layer}}
    cuda = torch.device(device).type == "cuda"
    results = []
    try:
        if cuda:
            side = torch.cuda.Stream()
            side.wait_stream(torch.cuda.current_stream())
            with torch.cuda.stream(side):
                module.kernel_fn(data, state)
            torch.cuda.current_stream().wait_stream(side)
            graph = torch.cuda.CUDAGraph()
            with torch.cuda.graph(graph):
                out = module.kernel_fn(data, state)
        else:
            out = module.kernel_fn(data, state)
        for _ in range(GRAPH_REPLAYS):
            fresh = make_x(m, k, gen, device)
            static_x.copy_(fresh)
            if cuda:
                graph.replay()
                torch.cuda.synchronize()
            else:
                out = module.kernel_fn(data, state)
            comparison, problem = _check(out, fresh, w, m, n, dtype, device)
            if problem:
                return results, f"graph replay: {problem}"
            results.append(comparison)
    except Exception as exc:  # capture refused (a sync inside kernel_fn, ...) or replay failed
        return results, f"graph capture/replay raised {type(exc).__name__}: {str(exc).splitlines()[0][:200]}"
    return results, ""


def verify_distribution(
    module: ModuleType,
    problem: Problem,
    distribution: str,
    seed: int,
    device,
    graphs: bool = True,
    progress=None,
) -> tuple[list[ShapeResult], float, str]:
    """(per-shape results, prepare() seconds, prepare failure or '') for one weight distribution."""
    weights = make_weights(problem, distribution, seed, device)
    start = time.perf_counter()
    try:
        state = module.prepare({name: w.clone() for name, w in weights.items()})
    except Exception as exc:
        return [], time.perf_counter() - start, f"prepare raised {type(exc).__name__}: {exc}"
    if torch.device(device).type == "cuda":
        torch.cuda.synchronize()
    prepare_s = time.perf_counter() - start
    if prepare_s > PREPARE_LIMIT_S:
        return [], prepare_s, f"prepare took {prepare_s:.0f} s, over the judge's {PREPARE_LIMIT_S:.0f} s"
    gen = torch.Generator(device=device)
    gen.manual_seed(seed + 1)
    results = []
    for layer_name, layer in problem.layers.items():
        w = weights[layer_name]
        dtype = TORCH_DTYPES[layer.out_dtype]
        for m in problem.verify_m:
            n, k = layer.n_for(m), layer.k
            result = ShapeResult(distribution, layer_name, m, n)
            x = make_x(m, k, gen, device)
            try:
                with poisoned_allocations():
                    out = module.kernel_fn(
                        {"x": x, "config": {"m": m, "n": n, "k": k, "layer": layer_name}}, state
                    )
                    result.eager, result.error = _check(out, x, w, m, n, dtype, device)
                    if graphs and not result.error:
                        result.graph, result.error = _graph_check(
                            module, state, layer_name, m, n, k, w, dtype, gen, device
                        )
            except Exception as exc:
                result.error = f"kernel_fn raised {type(exc).__name__}: {str(exc).splitlines()[0][:200]}"
            results.append(result)
            if progress is not None:
                progress(result)
    return results, prepare_s, ""


def _power_of_two(value: float) -> str:
    return f"2^{round(math.log2(value))}"


# What a cell of the report is (the bounds: generator/judge/reference.py, which says why they are what they are).
LEGEND = (
    "Each cell: the shape's worst |out - ref| / bound over its outputs, eagerly / over its graph replays (nan:"
    f" none ran, --no-graphs); <= 1 passes; bound = {_power_of_two(DENSE_RTOL)} |ref| +"
    f" {_power_of_two(DENSE_STOL)} S on the bf16 layers, {_power_of_two(ROUTER_STOL)} S on the router, with"
    " ref = x . W^T and S = |x| . |W|^T in float64. A shape also fails (FAIL) on ||out - ref|| / ||ref|| over"
    f" {_power_of_two(DENSE_FROB)} (the router {_power_of_two(ROUTER_FROB)}), on a NaN (an output left"
    " unwritten), on a wrong shape, dtype or device, or on an exception."
)


def format_report(
    results: list[ShapeResult], distributions: list[str], errors: dict | None = None, note: str = ""
) -> str:
    """Worst error per shape (as a fraction of the allowed bound; <= 1 passes), eager / worst graph replay, the
    legend, then the summary line, which names a distribution's failure before any shape ran (`errors`:
    distribution -> what failed, prepare() raising say)."""
    by_shape: dict[tuple[str, int], dict[str, ShapeResult]] = {}
    for r in results:
        by_shape.setdefault((r.layer, r.m), {})[r.distribution] = r
    head = f"{'layer':<10} {'m':>4} {'n':>5}" + "".join(f" | {d + ' eager/graph':>22}" for d in distributions)
    lines = [head, "-" * len(head)]
    for (layer, m), per in by_shape.items():
        n = next(iter(per.values())).n
        cells = []
        for d in distributions:
            r = per.get(d)
            if r is None:
                cells.append(f"{'-':>22}")
            elif not r.ok:
                cells.append(f"{'FAIL':>22}")
            else:
                graph = max((c.worst for c in r.graph), default=float("nan"))
                cells.append(f"{f'{r.eager.worst:.3f} / {graph:.3f}':>22}")
        lines.append(f"{layer:<10} {m:>4} {n:>5}" + "".join(f" | {c}" for c in cells))
    lines += textwrap.wrap(LEGEND, len(head) if len(head) > 80 else 110)
    failures = [r for r in results if not r.ok]
    for r in failures:
        lines.append(f"FAIL {r.distribution} {r.layer} m={r.m} n={r.n}: {r.problem}")
    summary = f"{len(results) - len(failures)} passed, {len(failures)} failed{note}"
    summary += "".join(f"; [{name}] {error}" for name, error in (errors or {}).items() if error)
    lines.append(summary)
    return "\n".join(lines)
