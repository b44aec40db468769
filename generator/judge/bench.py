"""bench: cold (L2 read-flushed) and warm timings of a submission against cuBLAS and the memory floor."""

from __future__ import annotations

import math
import platform
import statistics
import subprocess
from dataclasses import asdict, dataclass, field
from types import ModuleType

from generator.problem import Problem


@dataclass
class ShapeTiming:
    layer: str
    m: int
    n: int
    weight_bytes: int
    engine: str
    ours_cold_us: float
    ours_warm_us: float
    cublas_cold_us: dict[str, float]  # baseline name -> us (router: hi+lo pair and plain fp32)
    cublas_warm_us: dict[str, float]
    floor_us: float
    # One eager call after a read-flush and a synchronize, events around it: its host time counts (absent from
    # files written before bench timed eager calls).
    ours_eager_us: float | None = None
    cublas_eager_us: dict[str, float] = field(default_factory=dict)

    @property
    def baseline_cold_us(self) -> float:
        return min(self.cublas_cold_us.values())

    @property
    def speedup(self) -> float:
        return self.baseline_cold_us / self.ours_cold_us

    @property
    def of_floor(self) -> float:
        return self.ours_cold_us / self.floor_us

    @property
    def eager_speedup(self) -> float | None:
        if self.ours_eager_us is None or not self.cublas_eager_us:
            return None
        return min(self.cublas_eager_us.values()) / self.ours_eager_us


@dataclass
class BenchResult:
    environment: dict
    launch_floor_us: float  # the run's: the median of floor_samples_us where there are samples
    read_bytes_per_s: float
    shapes: list[ShapeTiming] = field(default_factory=list)
    # The launch floor, sampled before each shape and once after the last (the GPU settled first, see
    # timing.settle), and the one sample taken straight after prepare(), before settling: how older runs measured
    # it (once, there), kept so that old and new ratios can be compared.
    floor_samples_us: list[float] = field(default_factory=list)
    floor_after_prepare_us: float | None = None

    @property
    def geomean_speedup(self) -> float:
        return (
            math.exp(sum(math.log(s.speedup) for s in self.shapes) / len(self.shapes))
            if self.shapes
            else float("nan")
        )

    @property
    def geomean_eager_speedup(self) -> float | None:
        ratios = [s.eager_speedup for s in self.shapes]
        if not ratios or None in ratios:
            return None
        return math.exp(sum(math.log(r) for r in ratios) / len(ratios))

    def to_json(self) -> dict:
        out = {
            "environment": self.environment,
            "launch_floor_us": self.launch_floor_us,
            "read_bytes_per_s": self.read_bytes_per_s,
            "floor_samples_us": self.floor_samples_us,
            "floor_after_prepare_us": self.floor_after_prepare_us,
            "geomean_speedup": self.geomean_speedup,
            "geomean_eager_speedup": self.geomean_eager_speedup,
            "shapes": [],
        }
        for s in self.shapes:
            row = asdict(s)
            row.update(
                speedup=s.speedup,
                of_floor=s.of_floor,
                baseline_cold_us=s.baseline_cold_us,
                eager_speedup=s.eager_speedup,
            )
            out["shapes"].append(row)
        return out

    @classmethod
    def from_json(cls, data: dict) -> "BenchResult":
        names = set(ShapeTiming.__dataclass_fields__)
        shapes = [ShapeTiming(**{k: v for k, v in row.items() if k in names}) for row in data["shapes"]]
        return cls(
            data["environment"],
            data["launch_floor_us"],
            data["read_bytes_per_s"],
            shapes,
            data.get("floor_samples_us", []),  # absent from files written before the floor was sampled in-run
            data.get("floor_after_prepare_us"),
        )


def floor_us(launch_floor_us: float, weight_bytes: int, read_bytes_per_s: float) -> float:
    """The memory floor of one call: its fixed launch cost plus streaming its weight bytes once."""
    return launch_floor_us + weight_bytes / read_bytes_per_s * 1e6


def run_floor_us(samples: list[float]) -> float:
    """The launch floor of a run: the median of its samples, taken through the run once the GPU has settled. One
    sample of 200 calls still moves by +-0.15 us from the next (docs/method.md), ~2 % of o's floor."""
    return statistics.median(samples)


def floor_line(result: BenchResult) -> str:
    """How the run's launch floor was measured, for the table's first line."""
    samples = result.floor_samples_us
    if not samples:  # an older file: one sample, straight after prepare()
        return f"launch floor {result.launch_floor_us:.2f} us (one sample, after prepare)"
    line = (
        f"launch floor {result.launch_floor_us:.2f} us (median of {len(samples)} samples through the run,"
        f" {min(samples):.2f}-{max(samples):.2f}"
    )
    if result.floor_after_prepare_us is not None:
        line += f"; {result.floor_after_prepare_us:.2f} straight after prepare, not used"
    return line + ")"


def _variants(s: ShapeTiming) -> str:
    """Each cuBLAS variant's cold time and ours as a fraction of it: `hi+lo 19.17 [ours 0.420x], fp32 ...`. The
    router's bar is set against hi+lo, which is not always the fastest variant (the speedup column's baseline).
    """
    return ", ".join(
        f"{name} {us:.2f} [ours {s.ours_cold_us / us:.3f}x]" for name, us in s.cublas_cold_us.items()
    )


def format_table(result: BenchResult) -> str:
    lines = [
        f"{floor_line(result)}, read bandwidth {result.read_bytes_per_s / 1e12:.2f} TB/s;"
        " cold = L2 read-flushed, median; warm = 20 calls in one graph",
        f"{'layer':<9} {'m':>4} {'n':>5} {'MB':>5} {'engine':<7} {'ours':>7} {'cuBLAS':>7} {'speedup':>7}"
        f" {'floor':>6} {'x floor':>7} | {'warm':>6} {'cuBLAS':>6} | {'eager':>6} {'cuBLAS':>6} {'speedup':>7}",
    ]
    for s in result.shapes:
        base_name = min(s.cublas_cold_us, key=s.cublas_cold_us.get)
        lines.append(
            f"{s.layer:<9} {s.m:>4} {s.n:>5} {s.weight_bytes / 1e6:>5.1f} {s.engine:<7} {s.ours_cold_us:>7.2f}"
            f" {s.baseline_cold_us:>7.2f} {s.speedup:>7.2f} {s.floor_us:>6.2f} {s.of_floor:>7.3f}"
            f" | {s.ours_warm_us:>6.2f} {s.cublas_warm_us[base_name]:>6.2f}"
            + _eager_columns(s)
            + (f"  (cuBLAS {_variants(s)})" if len(s.cublas_cold_us) > 1 else "")
        )
    lines.append(
        f"geometric mean speedup over cuBLAS (cold): {result.geomean_speedup:.3f} on {len(result.shapes)} shapes"
    )
    eager = result.geomean_eager_speedup
    if eager is not None:
        lines.append(
            f"geometric mean speedup over cuBLAS (eager, host time included): {eager:.3f}"
            f" ({eager / result.geomean_speedup:.3f} x the graph-replay geomean)"
        )
    env = result.environment
    lines.append("environment: " + ", ".join(f"{k}={v}" for k, v in env.items()))
    return "\n".join(lines)


def _eager_columns(s: ShapeTiming) -> str:
    if s.eager_speedup is None:
        return f" | {'-':>6} {'-':>6} {'-':>7}"
    return f" | {s.ours_eager_us:>6.2f} {min(s.cublas_eager_us.values()):>6.2f} {s.eager_speedup:>7.2f}"


def compare_results(old: BenchResult, new: BenchResult) -> str:
    """Per-shape change of our cold time against an earlier run (negative = faster now)."""
    before = {(s.layer, s.m): s for s in old.shapes}
    lines = [
        f"{'layer':<9} {'m':>4} {'old us':>8} {'new us':>8} {'change':>8}   old/new x floor"
        "   eager old/new us (change)"
    ]
    for s in new.shapes:
        o = before.get((s.layer, s.m))
        if o is None:
            lines.append(f"{s.layer:<9} {s.m:>4} {'-':>8} {s.ours_cold_us:>8.2f}")
            continue
        change = (s.ours_cold_us / o.ours_cold_us - 1) * 100
        eager = ""
        if o.ours_eager_us is not None and s.ours_eager_us is not None:
            eager = (
                f"   {o.ours_eager_us:.2f} -> {s.ours_eager_us:.2f}"
                f" ({(s.ours_eager_us / o.ours_eager_us - 1) * 100:+.1f}%)"
            )
        lines.append(
            f"{s.layer:<9} {s.m:>4} {o.ours_cold_us:>8.2f} {s.ours_cold_us:>8.2f} {change:>+7.1f}%"
            f"   {o.of_floor:.3f} -> {s.of_floor:.3f}" + eager
        )
    lines.append(f"geomean speedup over cuBLAS: {old.geomean_speedup:.3f} -> {new.geomean_speedup:.3f}")
    if old.geomean_eager_speedup is not None and new.geomean_eager_speedup is not None:
        lines.append(
            f"eager geomean speedup over cuBLAS: {old.geomean_eager_speedup:.3f} ->"
            f" {new.geomean_eager_speedup:.3f}"
        )
    return "\n".join(lines)


def plot(result: BenchResult, path) -> None:
    """One picture: ours vs cuBLAS vs the floor, per shape (cold)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    labels = [f"{s.layer}\nm={s.m}" for s in result.shapes]
    xs = range(len(result.shapes))
    fig, ax = plt.subplots(figsize=(max(8, len(labels) * 0.55), 5))
    width = 0.4
    ax.bar([x - width / 2 for x in xs], [s.ours_cold_us for s in result.shapes], width, label="ours (cold)")
    ax.bar(
        [x + width / 2 for x in xs], [s.baseline_cold_us for s in result.shapes], width, label="cuBLAS (cold)"
    )
    ax.plot(list(xs), [s.floor_us for s in result.shapes], "k_", markersize=14, mew=2, label="memory floor")
    if result.geomean_eager_speedup is not None:
        ax.plot(list(xs), [s.ours_eager_us for s in result.shapes], "v", color="C0", label="ours (eager)")
        ax.plot(
            list(xs),
            [min(s.cublas_eager_us.values()) for s in result.shapes],
            "^",
            color="C1",
            label="cuBLAS (eager)",
        )
    ax.set_xticks(list(xs))
    ax.set_xticklabels(labels, fontsize=7)
    ax.set_ylabel("microseconds per call")
    ax.set_title(f"muse_bf16_proj: geomean speedup {result.geomean_speedup:.2f}x over cuBLAS")
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def environment() -> dict:
    import torch
    import triton

    env = {
        "gpu": torch.cuda.get_device_name(),
        "torch": torch.__version__,
        "cuda": torch.version.cuda,
        "triton": triton.__version__,
        "python": platform.python_version(),
    }
    try:
        query = "clocks.sm,clocks.max.sm,clocks.mem,driver_version"
        out = (
            subprocess.run(
                ["nvidia-smi", f"--query-gpu={query}", "--format=csv,noheader"],
                capture_output=True,
                text=True,
                timeout=10,
            )
            .stdout.strip()
            .splitlines()[0]
        )
        for key, value in zip(query.split(","), out.split(", ")):
            env[key] = value
    except Exception:  # no nvidia-smi: the rest still stands
        pass
    return env


def cublas_baselines(weight, x, n):
    """name -> callable of what cuBLAS does for this call (dense: x @ W[:n]^T; router: hi+lo pair, plain fp32)."""
    import torch

    if weight.dtype == torch.float32:
        hi = weight.to(torch.bfloat16)
        lo = (weight - hi.float()).to(torch.bfloat16)
        return {
            "hi+lo": lambda: torch.mm(x, hi.t(), out_dtype=torch.float32)
            + torch.mm(x, lo.t(), out_dtype=torch.float32),
            "fp32": lambda: x.float()
            @ weight.t(),  # the cast of x is part of what a submission would have to do
        }
    w = weight[:n]
    return {"bf16": lambda: x @ w.t()}


def run_bench(
    module: ModuleType,
    problem: Problem,
    shapes: list[tuple[str, int]],
    reps: int = 100,
    seed: int = 0,
    progress=None,
) -> BenchResult:
    import torch

    from generator.judge.timing import L2Flusher, launch_floor_us, read_bandwidth, settle
    from generator.judge.weights import make_weights, make_x

    device = "cuda"
    weights = make_weights(problem, "normal", seed, device)
    state = module.prepare({name: w.clone() for name, w in weights.items()})
    torch.cuda.synchronize()
    flush = L2Flusher()
    after_prepare = launch_floor_us(flush)  # before settling: recorded, not used
    settle(flush)
    samples: list[float] = []
    result = BenchResult(environment(), float("nan"), read_bandwidth(flush), [], samples, after_prepare)
    gen = torch.Generator(device=device)
    gen.manual_seed(seed + 2)
    for layer_name, m in shapes:
        layer = problem.layers[layer_name]
        x = make_x(m, layer.k, gen, device)
        samples.append(launch_floor_us(flush))
        floor_so_far = run_floor_us(samples)  # for progress(); replaced by the whole run's below
        timing = time_shape(module, state, layer, m, x, weights[layer_name], flush, reps)
        timing.floor_us = floor_us(floor_so_far, timing.weight_bytes, result.read_bytes_per_s)
        result.shapes.append(timing)
        if progress is not None:
            progress(timing)
    samples.append(launch_floor_us(flush))
    # Every shape against the whole run's floor, not the samples taken up to it.
    result.launch_floor_us = run_floor_us(samples)
    for s in result.shapes:
        s.floor_us = floor_us(result.launch_floor_us, s.weight_bytes, result.read_bytes_per_s)
    return result


def served_by(state, layer: str, m: int) -> str:
    """The engine that serves m tokens of `layer` in a prepared state (cuBLAS past its plans; "?" for a file that
    does not route: a reference file)."""
    routes = getattr(state, "routes", {}).get(layer)
    if routes is None:
        return "?"
    return routes[m][0].name if 0 < m < len(routes) else "cublas"


def time_shape(module: ModuleType, state, layer, m: int, x, weight, flush, reps: int) -> ShapeTiming:
    """One shape: the file's kernel_fn and each cuBLAS baseline, cold, warm and eager (interleaved); its floor is
    the caller's to fill in."""
    from generator.judge.timing import time_cold_us, time_eager_interleaved_us, time_warm_us

    n = layer.n_for(m)
    data = {"x": x, "config": {"m": m, "n": n, "k": layer.k, "layer": layer.name}}
    ours = lambda: module.kernel_fn(data, state)  # noqa: E731
    baselines = cublas_baselines(weight, x, n)
    timing = ShapeTiming(
        layer=layer.name,
        m=m,
        n=n,
        weight_bytes=layer.weight_bytes(m),
        engine=served_by(state, layer.name, m),
        ours_cold_us=time_cold_us(ours, flush, reps),
        ours_warm_us=time_warm_us(ours),
        cublas_cold_us={name: time_cold_us(fn, flush, reps) for name, fn in baselines.items()},
        cublas_warm_us={name: time_warm_us(fn) for name, fn in baselines.items()},
        floor_us=float("nan"),
    )
    timing.ours_eager_us, *cublas_eager = time_eager_interleaved_us([ours, *baselines.values()], flush, reps)
    timing.cublas_eager_us = dict(zip(baselines, cublas_eager))
    return timing
