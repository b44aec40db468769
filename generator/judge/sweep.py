"""sweep: time every admissible configuration of one GEMV engine per (layer, m) on the H200 and write its table:
tables/ctable.yaml for the mma.sync GEMV (engine "gemv"), tables/ttable.yaml for the TMA + wgmma GEMV ("tma"),
tables/ztable.yaml for the compressed GEMV ("z").
"""

from __future__ import annotations

import itertools
from collections import Counter
from dataclasses import dataclass, field
from types import ModuleType

from generator.problem import Layer, Problem
from kernels_src import dispatch

SWEEP_M = (1, 8, 16, 32)
SWEEP_NW = (4, 8, 16)  # 2 warps never won the first sweep
MAX_CTAS = 2048  # beyond ~15 CTAs per SM, more split-K only adds partial-tile traffic
MIN_GAIN = 0.02  # keep cuBLAS unless the GEMV is at least 2% faster: noise should not flip a shape
FINALISTS = 4  # the fastest few of the coarse pass are timed again with more replays before one is chosen
# The TMA GEMV's split counts and ring depths worth timing: S past 32 was slower on every shape of the probe
# runs on the H200 (notes/session3): more CTAs each pay a fixed start-up and reduction cost that fewer of them per
# SM overlap. Every compiled ring depth but 2 (one slot in flight while the other is read; left out of every sweep
# so far), taken from dispatch.TMA_STAGES so that a depth added to the kernel's list is swept without another edit.
TMA_SWEEP_S = (1, 2, 3, 4, 5, 6, 7, 8, 11, 12, 16, 22, 24, 32)
TMA_SWEEP_STAGES = tuple(depth for depth in dispatch.TMA_STAGES if depth > 2)
TMA_SWEEP_C = dispatch.TMA_C


def _split_k_candidates(layer: Layer, m: int, fields, k_unit: int, config_error) -> list[tuple[int, ...]]:
    """Every (NW, S, U|UG, P, R, C) an mma.sync GEMV can run for this shape, with S bounded by the grid it makes
    and every warp given at least one trip (U units of k_unit K each)."""
    row_blocks = layer.n_for(m) // 16
    values = [SWEEP_NW] + [allowed for _, allowed in fields[1:]]
    out = []
    for cfg in itertools.product(*values):
        nw, s, u, _, r, _ = cfg
        if s > 1 and row_blocks // r * s > MAX_CTAS:
            continue
        if (layer.k // k_unit) // s < nw * u:
            continue  # fewer K units per CTA than one trip of all warps: some warps would idle
        if config_error(cfg, m, layer.dual, layer.n_for(m), layer.k) is None:
            out.append(cfg)
    return out


def configs_to_time(candidates: list[tuple[int, ...]], styles, current) -> list[tuple[int, ...]]:
    """What a sweep times for one shape: `candidates`, cut to those whose pipelining style P (field 3 of a GEMV
    config) is in `styles` (None: every candidate), with the shape's `current` table entry (None: none) first when
    it is not among them, so that an entry is never replaced by a config it was not timed against."""
    kept = candidates if styles is None else [cfg for cfg in candidates if cfg[3] in styles]
    return ([current] if current is not None and current not in kept else []) + kept


def pick_best(final: dict, current) -> tuple[int, ...] | None:
    """The fastest of the finalists' long timings (config -> us), unless the shape's current entry is among them
    and the fastest beats it by less than MIN_GAIN: two H200s rank configs within a few percent differently
    (notes/README.md, session 17: the router's m = 32 entry and a challenger swapped places between two calls),
    and a table should not follow that noise."""
    if not final:
        return None
    best = min(final, key=final.get)
    if current in final and final[best] > final[current] * (1 - MIN_GAIN):
        return current
    return best


def best_by_field(timings: dict, index: int) -> dict[int, tuple[tuple[int, ...], float]]:
    """For each value of config field `index` among the timed configs (config -> us): its fastest config and
    time, e.g. the best of each reduction mode C of a TMA sweep, by value."""
    best: dict[int, tuple[tuple[int, ...], float]] = {}
    for cfg, us in timings.items():
        value = cfg[index]
        if value not in best or us < best[value][1]:
            best[value] = (cfg, us)
    return dict(sorted(best.items()))


def format_best_by_field(points, name: str, index: int) -> list[str]:
    """One line per shape: the fastest config of each value of the field, `C=3 (1, 14, 3) 15.01`."""
    lines = []
    for p in points:
        cells = "  ".join(
            f"{name}={value} {cfg} {us:.2f}" for value, (cfg, us) in best_by_field(p.timings, index).items()
        )
        lines.append(f"{p.layer:<9} {p.m:>3}  {cells or 'nothing timed'}")
    return lines


def candidate_configs(layer: Layer, m: int) -> list[tuple[int, ...]]:
    """Every (NW, S, U, P, R, C) of the plain GEMV worth timing for this shape."""
    return _split_k_candidates(layer, m, dispatch.GEMV_FIELDS, 32, dispatch.gemv_config_error)


def candidate_z_configs(layer: Layer, m: int) -> list[tuple[int, ...]]:
    """Every (NW, S, UG, P, R, C) of the compressed GEMV worth timing for this shape."""
    return _split_k_candidates(layer, m, dispatch.ZGEMV_FIELDS, 64, dispatch.zgemv_config_error)


def candidate_tma_configs(layer: Layer, m: int) -> list[tuple[int, int, int]]:
    """Every (S, STAGES, C) of the TMA GEMV worth timing for this shape."""
    return [
        cfg
        for cfg in itertools.product(TMA_SWEEP_S, TMA_SWEEP_STAGES, TMA_SWEEP_C)
        if dispatch.tma_config_error(cfg, m, layer.dual, layer.n_for(m), layer.k) is None
    ]


@dataclass
class SweepPoint:
    layer: str
    m: int
    best: tuple[int, ...] | None
    best_us: float
    cublas_us: float
    tried: int
    wrong_configs: list  # configurations whose output failed the reference check (never chosen)
    failed: int = 0  # configurations whose launch raised (never chosen)
    timings: dict = field(default_factory=dict)  # every correct config -> its coarse-pass time, us
    engine: str = "gemv"
    # what serves the shape without this engine's table, when that is not cuBLAS (tma: CTABLE's GEMV), us
    incumbent_us: float = float("inf")
    # the shape's table entry before the sweep, if it was among the finalists: it stays unless beaten by MIN_GAIN
    current: tuple[int, ...] | None = None

    @property
    def wrong(self) -> int:
        return len(self.wrong_configs)

    @property
    def baseline_us(self) -> float:
        """The time to beat: cuBLAS, or the incumbent GEMV when that is faster."""
        return min(self.cublas_us, self.incumbent_us)

    @property
    def note(self) -> str:
        """The comment after the table entry: what was measured against what."""
        if self.best is None:
            return f"no {self.engine} config ran"
        against = (
            "cuBLAS"
            if self.cublas_us <= self.incumbent_us
            else "gemv" if self.engine == "tma" else "incumbent"
        )
        return f"{self.engine} {self.best_us:.2f} us vs {against} {self.baseline_us:.2f} us"

    def to_json(self) -> dict:
        ranked = sorted(self.timings.items(), key=lambda kv: kv[1])
        return {
            "layer": self.layer,
            "m": self.m,
            "best": self.best,
            "best_us": self.best_us,
            "cublas_us": self.cublas_us,
            "engine": self.engine,
            "incumbent_us": None if self.incumbent_us == float("inf") else self.incumbent_us,
            "timings": [[list(cfg), round(us, 3)] for cfg, us in ranked],
            "wrong": [list(cfg) for cfg in self.wrong_configs],
        }

    @property
    def choice(self):
        """The table entry: the best config, or None when the baseline is as fast (CTABLE: cuBLAS serves the
        shape; TTABLE: CTABLE decides). Either way a change must win by MIN_GAIN: a new config must beat the
        baseline by it, and the baseline must beat the current entry by it to displace it."""
        if self.best is None:
            return None
        if self.current is not None and self.best == self.current:
            return None if self.baseline_us < self.best_us * (1 - MIN_GAIN) else self.current
        return self.best if self.best_us <= self.baseline_us * (1 - MIN_GAIN) else None


def pick_defaults(choices: dict, problem: Problem) -> dict:
    """Defaults for m's without a table row: per weight kind, the configuration chosen most often among
    `choices` ((layer, m) -> config or None) that runs at every m of that kind."""
    defaults = {}
    for kind in ("plain", "dual"):
        chosen = [
            cfg
            for (layer, _), cfg in sorted(choices.items())
            if cfg is not None and problem.layers[layer].dual == (kind == "dual")
        ]
        safe = [
            c
            for c, _ in Counter(chosen).most_common()
            if all(
                dispatch.gemv_config_error(c, m, kind == "dual", layer.n_for(m), layer.k) is None
                for layer in problem.layers.values()
                for m in SWEEP_M
                if layer.dual == (kind == "dual")
            )
        ]
        defaults[kind] = safe[0] if safe else None
    return defaults


def table_yaml(
    header: str, defaults: dict | None, points: list[SweepPoint], problem: Problem, kept: dict | None = None
) -> str:
    """A table's YAML text: the existing header comments, defaults (CTABLE only; None: no defaults block), then
    one line per (layer, m): the sweep's points, and `kept` ((layer, m) -> the existing line) for shapes this
    sweep did not time."""

    def flow(cfg):
        return "null" if cfg is None else "[" + ", ".join(map(str, cfg)) + "]"

    rows = {key: line.strip() for key, line in (kept or {}).items()}
    for p in points:
        rows[(p.layer, p.m)] = f"{p.m}: {flow(p.choice)}  # {p.note}"
    lines = [header.rstrip("\n")]
    if defaults is not None:
        lines.append("defaults:")
        lines += [f"  {kind}: {flow(defaults.get(kind))}" for kind in ("plain", "dual")]
    lines.append("entries:" if rows else "entries: {}")
    for layer in problem.layers:
        ms = sorted(m for (name, m) in rows if name == layer)
        if ms:
            lines.append(f"  {layer}:")
            lines += [f"    {rows[(layer, m)]}" for m in ms]
    return "\n".join(lines) + "\n"


def updated_table(text: str, current, points: list[SweepPoint], shapes, problem: Problem) -> str:
    """The table's new YAML: swept shapes get their new entries, the others keep their current lines, and a
    table with defaults (CTABLE) has them re-picked from the whole table. `current` is the parsed `text`."""
    lines = text.splitlines()
    kept = {key: lines[line - 1] for key, line in current.lines.items() if key not in set(shapes)}
    defaults = None
    if current.spec.has_defaults:
        choices = {key: current.entries[key] for key in kept} | {(p.layer, p.m): p.choice for p in points}
        defaults = pick_defaults(choices, problem)
    return table_yaml(header_of(text), defaults, points, problem, kept)


def header_of(text: str) -> str:
    """The leading comment block of a YAML file."""
    head = []
    for line in text.splitlines():
        if line.startswith("#") or not line.strip():
            head.append(line)
        else:
            break
    return "\n".join(head)


def add_engine_state(module: ModuleType, state: dict, problem: Problem, engine: str, layers) -> None:
    """What `engine` needs in a prepared state for `layers`, whatever the file's tables route there: the mma.sync
    packing (always: the register GEMV is also the other engines' incumbent), the TMA tiles (tma) or the
    compressed stream (z; a layer compress() refuses gets none, and its shapes no candidates, with one line).
    tma packs both of its operands: 64-row tiles and (plain weights) the half tiles of C = 3."""
    for name in layers:
        if "packed:" + name not in state:
            state["packed:" + name] = tuple(module.pack_mma_a(part) for part in state[name])
        if engine == "tma" and "tiles:" + name not in state:
            state["tiles:" + name] = tuple(module.pack_tma_bulk(part) for part in state[name])
        if engine == "tma" and not problem.layers[name].dual and "halftiles:" + name not in state:
            state["halftiles:" + name] = tuple(module.pack_tma_half_bulk(part) for part in state[name])
        if engine == "z" and not problem.layers[name].dual and "z:" + name not in state:
            try:
                state["z:" + name] = module.compress(state[name][0], name)
            except module.CompressionError as refused:
                print(f"{refused} (the {engine} engine skips this layer)")


def run_sweep(
    module: ModuleType,
    problem: Problem,
    shapes,
    reps: int = 30,
    seed: int = 0,
    progress=None,
    engine: str = "gemv",
    styles=None,
):
    """Time every candidate of `engine` per shape (cold, read-flushed), checking each one's output against
    float64. The TMA engine is also timed against what CTABLE alone would run (its incumbent), the compressed
    one against what TTABLE and CTABLE would run. Every shape's current entry in the engine's table is timed
    too, and stays unless beaten by MIN_GAIN (pick_best, SweepPoint.choice). styles (gemv, z): time only configs
    of these P values, plus that entry."""
    import torch

    from generator.judge.bench import cublas_baselines
    from generator.judge.reference import compare, reference
    from generator.judge.timing import L2Flusher, settle, time_cold_us
    from generator.judge.verify import poisoned_allocations
    from generator.judge.weights import make_weights, make_x

    device = "cuda"
    weights = make_weights(problem, "normal", seed, device)
    state = module.prepare({name: w.clone() for name, w in weights.items()})
    add_engine_state(module, state, problem, engine, weights)  # every layer, whatever the tables route
    module._extension()
    launch = {"gemv": module._gemv, "tma": module._tma_gemv, "z": module._zgemv}[engine]
    candidates_for = {"gemv": candidate_configs, "tma": candidate_tma_configs, "z": candidate_z_configs}[
        engine
    ]
    flush = L2Flusher()
    settle(flush)  # else the first configs timed (the current entry first) run in the fast state after prepare()
    gen = torch.Generator(device=device)
    gen.manual_seed(seed + 3)
    points, failed = [], []
    for layer_name, m in shapes:
        layer = problem.layers[layer_name]
        n, k = layer.n_for(m), layer.k
        x = make_x(m, k, gen, device)
        ref, scale = reference(x, weights[layer_name], n)
        timed, wrong = {}, []
        candidates = candidates_for(layer, m) if engine != "z" or "z:" + layer_name in state else []
        table = {"gemv": module.CTABLE, "tma": module.TTABLE, "z": module.ZTABLE}[engine]
        current = table.get((layer_name, m)) if candidates else None  # z: none for a layer compress() refused
        candidates = configs_to_time(candidates, styles, current)
        for cfg in candidates:
            try:  # eagerly first: a launch the hardware refuses is skipped here, never inside a graph capture
                with (
                    poisoned_allocations()
                ):  # NaN-filled output: an element no CTA wrote cannot pass as right
                    out = launch(x, layer_name, n, cfg, state)
                torch.cuda.synchronize()
            except RuntimeError as exc:
                failed.append((layer_name, m, cfg, str(exc).splitlines()[0]))
                continue
            if not compare(out, ref, scale, fp32_out=layer.dual).ok:
                wrong.append(cfg)
                continue
            timed[cfg] = time_cold_us(lambda: launch(x, layer_name, n, cfg, state), flush, reps)
        # a 30-replay median moves by a few tenths of a microsecond: re-time the finalists (and cuBLAS) longer
        finalists = sorted(timed, key=timed.get)[:FINALISTS]
        if current in timed and current not in finalists:
            finalists.append(current)  # a challenger must beat the current entry in the long timing too
        final = {
            cfg: time_cold_us(lambda: launch(x, layer_name, n, cfg, state), flush, 4 * reps)
            for cfg in finalists
        }
        best = pick_best(final, current)
        best_us = final[best] if final else float("inf")
        cublas_us = min(
            time_cold_us(fn, flush, 4 * reps) for fn in cublas_baselines(weights[layer_name], x, n).values()
        )
        incumbent_us = float("inf")
        if engine in ("tma", "z"):  # what serves the shape without this engine's table (cuBLAS: timed above)
            ttable = module.TTABLE if engine == "z" else None
            kind, cfg = dispatch.route(
                layer_name, m, layer.dual, module.CTABLE, module.CTABLE_DEFAULTS, ttable
            )
            incumbent = {"gemv": module._gemv, "tma": module._tma_gemv}.get(kind)
            if incumbent is not None:
                incumbent_us = time_cold_us(lambda: incumbent(x, layer_name, n, cfg, state), flush, 4 * reps)
        point = SweepPoint(
            layer_name,
            m,
            best,
            best_us,
            cublas_us,
            len(candidates),
            wrong,
            sum(1 for f in failed if f[:2] == (layer_name, m)),
            timed,
            engine,
            incumbent_us,
            current if current in final else None,
        )
        points.append(point)
        if progress is not None:
            progress(point)
    for layer_name, m, cfg, message in failed[:10]:
        print(f"launch failed: {layer_name} m={m} {cfg}: {message}")
    return points
