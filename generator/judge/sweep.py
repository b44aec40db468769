"""sweep: time every admissible configuration of one engine per (layer, m) on the H200 and write its table
(tables/<engine>.yaml). Every candidate is checked against float64 first; the time to beat is what serves the
shape without this engine's entry (the engines after it in precedence order, cuBLAS last)."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from types import ModuleType

from generator.candidates import candidates
from generator.problem import Problem

MIN_GAIN = (
    0.02  # a table entry changes only on a >= 2 % win either way: two H200s rank close configs differently
)
FINALISTS = 4  # the fastest few of the coarse pass are timed again with more replays before one is chosen


def sweep_m(engine, problem: Problem) -> tuple:
    """The m's a sweep of `engine` tunes by default: its table's rows (engine.sweep_m), or the judge's bench m's
    it serves."""
    return tuple(getattr(engine, "sweep_m", ())) or tuple(m for m in problem.bench_m if engine.serves(m))


def matches(cfg, where: dict) -> bool:
    """cfg's fields equal every `where` (field -> set of allowed values as strings)."""
    return all(str(getattr(cfg, name)) in values for name, values in where.items())


def configs_to_time(candidates: list, where: dict | None, current) -> list:
    """What a sweep times for one shape: the candidates matching `where` (None: all), with the shape's `current`
    table entry (None: none) first when it is not among them, so that an entry is never replaced by a config it
    was not timed against."""
    kept = candidates if not where else [cfg for cfg in candidates if matches(cfg, where)]
    return ([current] if current is not None and current not in kept else []) + kept


def pick_best(final: dict, current):
    """The fastest of the finalists' long timings (config -> us), unless the shape's current entry is among them
    and the fastest beats it by less than MIN_GAIN: a table should not follow noise (docs/method.md)."""
    if not final:
        return None
    best = min(final, key=final.get)
    if current in final and final[best] > final[current] * (1 - MIN_GAIN):
        return current
    return best


def best_by_field(timings: dict, name: str) -> dict:
    """For each value of config field `name` among the timed configs (config -> us): its fastest config and time."""
    best: dict = {}
    for cfg, us in timings.items():
        value = getattr(cfg, name)
        if value not in best or us < best[value][1]:
            best[value] = (cfg, us)
    return dict(sorted(best.items(), key=lambda item: str(item[0])))


def format_best_by_field(points, name: str, describe) -> list[str]:
    """One line per shape: the fastest config of each value of the field."""
    lines = []
    for p in points:
        cells = "  ".join(
            f"{name}={value}: {describe(cfg)} {us:.2f}"
            for value, (cfg, us) in best_by_field(p.timings, name).items()
        )
        lines.append(f"{p.layer:<9} {p.m:>3}  {cells or 'nothing timed'}")
    return lines


@dataclass(kw_only=True)
class SweepPoint:
    layer: str
    m: int
    best: tuple | None
    best_us: float
    cublas_us: float
    tried: int
    wrong_configs: list  # configurations whose output failed the reference check (never chosen)
    failed: int = 0  # configurations whose launch raised (never chosen)
    timings: dict = field(default_factory=dict)  # every correct config -> its coarse-pass time, us
    engine: str = ""
    incumbent: str = "cublas"  # what serves the shape without this engine's entry
    incumbent_us: float = float("inf")
    current: tuple | None = None  # the shape's entry before the sweep, if it was among the finalists

    @property
    def wrong(self) -> int:
        return len(self.wrong_configs)

    @property
    def baseline_us(self) -> float:
        """The time to beat: cuBLAS, or the incumbent engine when that is faster."""
        return min(self.cublas_us, self.incumbent_us)

    @property
    def note(self) -> str:
        """The comment after the table entry: what was measured against what."""
        if self.best is None:
            return f"no {self.engine} config ran"
        against = "cuBLAS" if self.cublas_us <= self.incumbent_us else self.incumbent
        return f"{self.engine} {self.best_us:.2f} us vs {against} {self.baseline_us:.2f} us"

    @property
    def choice(self):
        """The table entry: the best config, or None when the baseline is as fast. Either way a change must win by
        MIN_GAIN: a new config must beat the baseline by it, and the baseline must beat the current entry by it.
        """
        if self.best is None:
            return None
        if self.current is not None and self.best == self.current:
            return None if self.baseline_us < self.best_us * (1 - MIN_GAIN) else self.current
        return self.best if self.best_us <= self.baseline_us * (1 - MIN_GAIN) else None

    def to_json(self) -> dict:
        ranked = sorted(self.timings.items(), key=lambda kv: kv[1])
        as_list = lambda cfg: None if cfg is None else list(cfg)  # noqa: E731
        return {
            "layer": self.layer,
            "m": self.m,
            "engine": self.engine,
            "best": as_list(self.best),
            "best_us": self.best_us,
            "cublas_us": self.cublas_us,
            "incumbent": self.incumbent,
            "incumbent_us": None if self.incumbent_us == float("inf") else self.incumbent_us,
            "timings": [[list(cfg), round(us, 3)] for cfg, us in ranked],
            "wrong": [list(cfg) for cfg in self.wrong_configs],
        }


def pick_defaults(engine, choices: dict, problem: Problem) -> dict:
    """Defaults for m's without a table row (engines with defaults): per weight kind, the configuration chosen most
    often among `choices` ((layer, m) -> config or None) that runs at every class maximum on every layer of that
    kind."""
    defaults = {}
    for kind in ("plain", "dual"):
        layers = [layer for layer in problem.layers.values() if layer.dual == (kind == "dual")]
        chosen = [
            cfg
            for (name, _), cfg in sorted(choices.items())
            if cfg is not None and problem.layers[name] in layers
        ]
        safe = [
            cfg
            for cfg, _ in Counter(chosen).most_common()
            if all(
                engine.config_error(cfg, layer, m) is None for layer in layers for m in engine.class_maxima()
            )
        ]
        defaults[kind] = safe[0] if safe else None
    return defaults


def flow(cfg) -> str:
    """A config as a YAML flow mapping: {field: value, ...} (a field at its default left out), or null."""
    if cfg is None:
        return "null"
    defaults = cfg._field_defaults
    named = [(k, v) for k, v in cfg._asdict().items() if k not in defaults or v != defaults[k]]
    return "{" + ", ".join(f"{k}: {v}" for k, v in named) + "}"


def table_yaml(
    header: str, defaults: dict | None, points: list, problem: Problem, kept: dict | None = None
) -> str:
    """A table's YAML text: the existing header comments, defaults (None: no defaults block), then one line per
    (layer, m): the sweep's points, and `kept` ((layer, m) -> the existing line) for shapes this sweep did not time.
    """
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


def updated_table(text: str, current, lines: dict, points: list, shapes, problem: Problem) -> str:
    """The table's new YAML: swept shapes get their new entries, the others keep their current lines, and a table
    with defaults has them re-picked from the whole table. `current` is the parsed `text` (a registry Table),
    `lines` where each entry sits (generator.tables.parse_table)."""
    text_lines = text.splitlines()
    kept = {key: text_lines[line - 1] for key, line in lines.items() if key not in set(shapes)}
    defaults = None
    if current.engine.has_defaults:
        choices = {key: current.entries[key] for key in kept} | {(p.layer, p.m): p.choice for p in points}
        defaults = pick_defaults(current.engine, choices, problem)
    from generator.tables import with_field_header

    return table_yaml(with_field_header(current.engine, header_of(text)), defaults, points, problem, kept)


def header_of(text: str) -> str:
    """The leading comment block of a YAML file."""
    head = []
    for line in text.splitlines():
        if line.startswith("#") or not line.strip():
            head.append(line)
        else:
            break
    return "\n".join(head)


@dataclass
class SweepRun:
    """What every phase of one sweep reads: the prepared file, its engine and the shared timing state."""

    module: ModuleType
    problem: Problem
    engine: object
    weights: dict
    state: object
    reps: int
    log: object
    device: str
    layers: dict = field(default_factory=dict)  # name -> the file's Layer
    tables: tuple = ()  # the file's tables
    plans: dict = field(default_factory=dict)  # (layer, m, engine, config) -> launch
    failed: list = field(default_factory=list)  # (layer, m, config, message) of launches that raised
    flush: object = None  # the L2 flusher the cold timings share


def run_sweep(
    module: ModuleType,
    problem: Problem,
    shapes,
    engine_name: str,
    reps: int = 30,
    seed: int = 0,
    where: dict | None = None,
    progress=None,
    log=print,
    file=None,
    device="cuda",
):
    """Time every candidate of `engine_name` per shape (cold, read-flushed), checking each one's output against
    float64, against cuBLAS and against what serves the shape without this engine's entry (the incumbent). Every
    shape's current entry is timed too and stays unless beaten by MIN_GAIN (pick_best, SweepPoint.choice). (device:
    the CPU for the stand-in tests.)"""
    import torch

    from generator.judge.loader import engines_of
    from generator.judge.precompile import PRECOMPILERS
    from generator.judge.timing import L2Flusher, settle
    from generator.judge.weights import make_weights

    weights = make_weights(problem, "normal", seed, device)
    state = module.prepare({name: w.clone() for name, w in weights.items()})
    run = SweepRun(module, problem, engines_of(module)[engine_name], weights, state, reps, log, device)
    layers, run.tables = module.problem()
    run.layers = {layer.name: layer for layer in layers}
    todo = shapes_to_time(run, shapes, where)
    if file is not None and engine_name in PRECOMPILERS:  # fill its kernel cache in parallel
        precompile_candidates(run, file, todo)
    run.plans = launches_to_time(run, todo)
    run.flush = L2Flusher()
    # else the first configs timed (the current entry first) run in the fast state after prepare()
    settle(run.flush)
    gen = torch.Generator(device=device)
    gen.manual_seed(seed + 3)
    points = []
    for (layer_name, m), (cfgs, current, incumbent) in todo.items():
        point = time_shape(run, layer_name, m, cfgs, current, incumbent, gen)
        points.append(point)
        if progress is not None:
            progress(point)
    for layer_name, m, cfg, message in run.failed[:10]:
        log(f"launch failed: {layer_name} m={m} {run.engine.describe(cfg)}: {message}")
    return points


def shapes_to_time(run: SweepRun, shapes, where) -> dict:
    """(layer, m) -> (configs to time, current entry, incumbent (engine, cfg)), the operands built; a layer whose
    weights the engine refuses (compress()) is skipped with one line."""
    engine, module = run.engine, run.module
    table = next(table for table in run.tables if table.engine.name == engine.name)
    todo = {}
    for layer_name, m in shapes:
        layer = run.layers[layer_name]
        current = table.entries.get((layer_name, m))
        cfgs = configs_to_time(candidates(engine, layer, m), where, current)
        try:  # every config of an engine reads the same operands (the compressed one: compress() may refuse)
            if cfgs:
                module.add_operands(run.state, engine, cfgs[0], layer)
        except module.CompressionError as refused:
            run.log(f"{refused} (the {engine.name} sweep skips {layer_name})")
            continue
        todo[(layer_name, m)] = (cfgs, current, module.route(layer, m, run.tables, (engine.name,)))
    return todo


def precompile_candidates(run: SweepRun, file, todo: dict) -> None:
    """A JIT-compiled engine's kernels, compiled in parallel processes into its cache before the timing."""
    from generator.judge.precompile import precompile

    first_of_kind = {}  # one layer per weight kind: the kernels do not depend on the layer otherwise
    for (name, _), (cfgs, _, _) in todo.items():
        for cfg in cfgs:
            first_of_kind.setdefault((tuple(cfg), run.layers[name].dual), name)
    count = precompile(file, run.engine.name, [(cfg, name) for (cfg, _), name in first_of_kind.items()])
    run.log(f"compiled {count} {run.engine.name} kernels")


def launches_to_time(run: SweepRun, todo: dict) -> dict:
    """Every launch the sweep times (the candidates and each shape's incumbent), its CUDA kernels compiled into one
    extension."""
    from generator.judge.launches import make_plans

    name = run.engine.name
    wanted = [(layer, m, name, tuple(cfg)) for (layer, m), (cfgs, _, _) in todo.items() for cfg in cfgs]
    wanted += [(layer, m, inc.name, tuple(cfg)) for (layer, m), (_, _, (inc, cfg)) in todo.items()]
    return dict(zip(wanted, make_plans(run.module, run.state, wanted)))


def coarse_pass(run: SweepRun, layer_name: str, m: int, cfgs, x, ref, scale) -> tuple[dict, list]:
    """({config: its cold time, us} of the configs whose output passes the float64 check, [the wrong ones]); a
    launch that raises goes to run.failed."""
    import torch

    from generator.judge.reference import compare
    from generator.judge.timing import time_cold_us
    from generator.judge.verify import poisoned_allocations

    dual = run.layers[layer_name].dual
    timed, wrong = {}, []
    for cfg in cfgs:
        plan = run.plans[(layer_name, m, run.engine.name, tuple(cfg))]
        try:  # eagerly first: a launch the hardware refuses is skipped here, never inside a graph capture
            with poisoned_allocations():  # NaN-filled output: an element no program wrote cannot pass
                out = plan(x)
            torch.cuda.synchronize()
        except RuntimeError as exc:
            run.failed.append((layer_name, m, cfg, str(exc).splitlines()[0]))
            continue
        if not compare(out, ref, scale, fp32_out=dual).ok:
            wrong.append(cfg)
            continue
        timed[cfg] = time_cold_us(lambda plan=plan: plan(x), run.flush, run.reps)
    return timed, wrong


def time_shape(run: SweepRun, layer_name: str, m: int, cfgs, current, incumbent, gen) -> SweepPoint:
    """One shape: the coarse pass, then the finalists (and the current entry), cuBLAS and the incumbent timed
    longer: a 30-replay median moves by a few tenths of a microsecond."""
    from generator.judge.bench import cublas_baselines
    from generator.judge.reference import reference
    from generator.judge.timing import time_cold_us
    from generator.judge.weights import make_x

    layer, name, long_reps = run.problem.layers[layer_name], run.engine.name, 4 * run.reps
    n = layer.n_for(m)
    x = make_x(m, layer.k, gen, run.device)
    ref, scale = reference(x, run.weights[layer_name], n)
    timed, wrong = coarse_pass(run, layer_name, m, cfgs, x, ref, scale)
    finalists = sorted(timed, key=timed.get)[:FINALISTS]
    if current in timed and current not in finalists:
        finalists.append(current)  # a challenger must beat the current entry in the long timing too
    final = {
        cfg: time_cold_us(
            lambda cfg=cfg: run.plans[(layer_name, m, name, tuple(cfg))](x), run.flush, long_reps
        )
        for cfg in finalists
    }
    best = pick_best(final, current)
    baselines = cublas_baselines(run.weights[layer_name], x, n).values()
    cublas_us = min(time_cold_us(fn, run.flush, long_reps) for fn in baselines)
    inc_engine, inc_cfg = incumbent
    incumbent_us = float("inf")
    if inc_engine.name != "cublas":
        inc_plan = run.plans[(layer_name, m, inc_engine.name, tuple(inc_cfg))]
        incumbent_us = time_cold_us(lambda: inc_plan(x), run.flush, long_reps)
    return SweepPoint(
        layer=layer_name,
        m=m,
        best=best,
        best_us=final[best] if final else float("inf"),
        cublas_us=cublas_us,
        tried=len(cfgs),
        wrong_configs=wrong,
        failed=sum(1 for f in run.failed if f[:2] == (layer_name, m)),
        timings=timed,
        engine=name,
        incumbent=inc_engine.name,
        incumbent_us=incumbent_us,
        current=current if current in final else None,
    )
