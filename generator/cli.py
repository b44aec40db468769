"""`python -m generator`: build, inspect, compile, verify, benchmark and tune the submission."""

from __future__ import annotations

import sys
from pathlib import Path

import click

from generator import REPO_ROOT
from generator.errors import BuildError

DIST = REPO_ROOT / "dist" / "submission.py"


def _fail(message: str, code: int = 2) -> None:
    click.echo(f"error: {message}", err=True)
    sys.exit(code)


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
def main() -> None:
    """Build dist/submission.py from kernels_src/ and tables/, and check it like the judge does."""


@main.command()
@click.option(
    "--check", is_flag=True, help="Exit 1 with a diff summary if the file differs from a fresh build."
)
@click.option(
    "--root",
    type=click.Path(file_okay=False, path_type=Path),
    default=REPO_ROOT,
    show_default=True,
    help="Repository root holding templates/, kernels_src/ and tables/.",
)
@click.option(
    "--out",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    help="Output file [default: ROOT/dist/submission.py].",
)
def build(check: bool, root: Path, out: Path | None) -> None:
    """Render the templates with the kernel sources and tables into one submission file."""
    from generator.build import diff_summary, write_atomic
    from generator.render import render_submission

    out = out or root / "dist" / "submission.py"
    try:
        text = render_submission(root)
    except BuildError as exc:
        _fail(str(exc))
    if check:
        old = out.read_text() if out.exists() else ""
        if old != text:
            click.echo(diff_summary(old, text, str(out)), err=True)
            click.echo("run `python -m generator build` and commit the result", err=True)
            sys.exit(1)
        click.echo(f"{out} is up to date")
        return
    write_atomic(out, text)
    click.echo(f"wrote {out} ({len(text.splitlines())} lines)")


# What each engine's configuration tuple holds (the fields of its table, generator/tables.py).
# The table each engine's sweep writes.
ENGINE_TABLES = {
    "gemv": ("CTABLE", "ctable.yaml"),
    "tma": ("TTABLE", "ttable.yaml"),
    "z": ("ZTABLE", "ztable.yaml"),
}
CONFIG_FIELDS = {
    "gemv": ("NW", "S", "U", "P", "R", "C"),
    "tma": ("S", "STAGES", "C"),
    "z": ("NW", "S", "UG", "P", "R", "C"),
}


@main.command()
@click.argument("file", type=click.Path(dir_okay=False, path_type=Path), default=DIST)
def dispatch(file: Path) -> None:
    """Which engine and configuration serves every (layer, m), read from FILE's own tables and router."""
    sub = _load(file)
    click.echo(f"{'layer':<10} {'m':>4}  {'n':>5}  engine   config")
    for layer in sub.LAYERS:
        for m in sub.WARMUP_M:
            engine, cfg = sub._engine(layer, m)
            names = CONFIG_FIELDS.get(engine, ())
            fields = "" if cfg is None else " ".join(f"{name}={value}" for name, value in zip(names, cfg))
            click.echo(f"{layer:<10} {m:>4}  {sub._width(layer, m):>5}  {engine:<8} {fields}")


@main.command("compile")
@click.option(
    "--root", type=click.Path(file_okay=False, path_type=Path), default=REPO_ROOT, show_default=True
)
@click.option("--nvcc", default="nvcc", show_default=True)
@click.option(
    "--loops",
    "loops_of",
    metavar="TEXT",
    help="Also disassemble (cuobjdump) and print the steady-state MMA loop of each kernel whose name contains "
    "TEXT (e.g. tma_gemv_kernel<2, 16): its instructions, MMAs and instructions per MMA, a GPU-free measure of "
    "a consumer loop's issue cost.",
)
@click.option(
    "--waits",
    "waits_of",
    metavar="TEXT",
    help="Also print, for each kernel whose name contains TEXT, its loads grouped by the scoreboard they release "
    "and what each tensor-core, barrier or fence instruction waits for (decoded from ptxas's scheduling bits): "
    "e.g. whether the first wgmma waits for one load or for all of them.",
)
@click.option(
    "--cuobjdump",
    "cuobjdump_path",
    help="The cuobjdump for --loops / --waits [default: PATH, nvcc's, triton's].",
)
def compile_cmd(
    root: Path, nvcc: str, loops_of: str | None, waits_of: str | None, cuobjdump_path: str | None
) -> None:
    """Compile CUDA_SRC with the local nvcc for sm_90a; report registers, spills and smem; fail on any spill or
    any kernel whose wgmma instructions ptxas had to serialise."""
    from generator.compile import compile_cuda, demangle, serialized_wgmma
    from generator.sass import find_cuobjdump
    from generator.sources import load_sources

    try:
        sources = load_sources(root)
    except BuildError as exc:
        _fail(str(exc))
    cuobjdump = None
    if loops_of is not None or waits_of is not None:
        cuobjdump = cuobjdump_path or find_cuobjdump(nvcc)
        if cuobjdump is None:
            _fail(
                "--loops / --waits need cuobjdump: none on PATH, beside nvcc or in triton; pass --cuobjdump",
                2,
            )
    code, messages, kernels, sass = compile_cuda(sources.cuda, nvcc=nvcc, cuobjdump=cuobjdump)
    if code != 0:
        errors = [line for line in messages.splitlines() if "error" in line] or messages.splitlines()[-5:]
        click.echo("\n".join(errors[:20]), err=True)
        _fail(f"nvcc failed (exit {code})", 1)
    click.echo(f"{'regs':>4} {'smem':>5} {'stack':>5} {'spill st/ld':>11}  kernel")
    for k in kernels:
        click.echo(
            f"{k.registers:>4} {k.smem_static:>5} {k.stack_frame:>5} "
            f"{f'{k.spill_stores}/{k.spill_loads}':>11}  {k.name}"
        )
    spilled = [k for k in kernels if k.spills]
    click.echo(
        f"{len(kernels)} kernels, max {max((k.registers for k in kernels), default=0)} registers, "
        f"{len(spilled)} spilling"
    )
    if not kernels:
        _fail("ptxas reported no kernels", 1)
    if loops_of is not None:
        _print_loops(sass, loops_of)
    if waits_of is not None:
        _print_waits(sass, waits_of)
    if spilled:
        _fail(f"{len(spilled)} kernel(s) spill registers: {spilled[0].name}", 1)
    serialized = serialized_wgmma(messages)
    if serialized:
        code, reason, mangled = serialized[0]
        _fail(
            f"{len(serialized)} kernel(s) have their wgmmas serialised by ptxas ({code}: {reason}):"
            f" {demangle([mangled])[0]}",
            1,
        )


def _kernels_named(functions: dict, name_part: str) -> tuple[dict[str, str], list[str]]:
    """(mangled -> demangled name, the mangled names whose demangled name contains name_part, sorted by it); ends
    the command in one line when cuobjdump printed no function or none matches."""
    from generator.compile import demangle

    if not functions:
        _fail("cuobjdump printed no functions", 1)
    names = dict(zip(functions, demangle(list(functions))))
    matching = sorted((mangled for mangled in functions if name_part in names[mangled]), key=names.get)
    if not matching:
        _fail(f"no kernel's name contains {name_part!r}", 1)
    return names, matching


def _print_loops(sass: str, name_part: str) -> None:
    """compile --loops: each matching kernel's steady-state MMA loop (generator/sass.py)."""
    from generator.sass import split_functions, steady_loop

    functions = split_functions(sass)
    names, matching = _kernels_named(functions, name_part)
    click.echo(f"{'loop instrs':>11} {'MMAs':>5} {'per MMA':>7} {'R2UR':>5}  kernel")
    for mangled in matching:
        loop = steady_loop(functions[mangled])
        if loop is None:
            click.echo(f"{'-':>11} {'-':>5} {'-':>7} {'-':>5}  {names[mangled]} (no MMA loop)")
        else:
            click.echo(
                f"{loop.instructions:>11} {loop.mma:>5} {loop.per_mma:>7.1f} {loop.r2ur:>5}  {names[mangled]}"
            )


def _print_waits(sass: str, name_part: str) -> None:
    """compile --waits: each matching kernel's loads and what its tensor-core instructions wait for."""
    from generator.sass import scoreboard_waits, split_controlled

    functions = split_controlled(sass)
    names, matching = _kernels_named(functions, name_part)
    for mangled in matching:
        click.echo(
            f"\n{names[mangled]}  (address, then loads -> the scoreboard they release, or what it waits for)"
        )
        for line in scoreboard_waits(functions[mangled]):
            click.echo(line)


def _launch_arguments(verb: str):
    """The LAUNCHES argument (layer:m:engine:config or layer:m:cublas ...) and --file option that `ab` and
    `profile` share."""

    def add(command):
        command = click.option(
            "--file",
            type=click.Path(dir_okay=False, path_type=Path),
            default=DIST,
            show_default=True,
            help=f"The submission file whose kernels are {verb}.",
        )(command)
        return click.argument("launches", nargs=-1, required=True)(command)

    return add


def _parse_launches(texts, problem):
    """Each layer:m:engine:config checked like a table entry; the first bad one ends the command in one line."""
    from generator.judge.launches import parse_launch

    try:
        return [parse_launch(text, problem) for text in texts]
    except ValueError as exc:
        _fail(str(exc))


@main.command()
@_launch_arguments("timed")
@click.option("--rounds", default=6, show_default=True, help="Rounds; each times every launch once.")
@click.option("--reps", default=100, show_default=True, help="Cold replays per launch per round (median).")
@click.option(
    "--env",
    "env_text",
    metavar="NAME=V1,V2,...",
    help="Run every launch under each value of this environment variable (an experiment branch's launcher "
    "switch, read at each launch); ratios against each launch's first value.",
)
@click.option(
    "--time-wrong",
    is_flag=True,
    help="Time launches that fail the float64 check too, their rows marked (wrong), and exit 0: for timing-only "
    "probes, variants that leave out part of the work on purpose. The wrong ones are still listed.",
)
def ab(launches, file: Path, rounds: int, reps: int, env_text: str | None, time_wrong: bool) -> None:
    """Time GEMV launches given as layer:m:engine:config (or layer:m:cublas, the file's fallback) against each
    other on the H200, interleaved in one process, the order rotating each round; each checked against float64
    first. For configs a few percent apart, whose ranking two machines may not share."""
    import torch

    from generator.judge.ab import format_ab, parse_env_switch, run_ab, summarize

    problem = _problem()
    parsed = _parse_launches(launches, problem)
    if rounds < 1 or reps < 1:
        _fail(f"--rounds and --reps must be at least 1, got {rounds} and {reps}")
    env = None
    if env_text is not None:
        try:
            env = parse_env_switch(env_text)
        except ValueError as exc:
            _fail(str(exc))
    if not torch.cuda.is_available():
        _fail("ab needs a CUDA GPU (run it on the H200; see README)")
    timed, wrong = run_ab(_load(file), problem, parsed, rounds, reps, env, time_wrong=time_wrong)
    rows = summarize(timed, per_launch=env is not None)
    if rows:
        click.echo(format_ab(rows, rounds, reps, per_launch=env is not None))
    for line in wrong:
        click.echo(line)
    if wrong and not time_wrong:
        sys.exit(1)


def _load(file: Path):
    from generator.judge.loader import SubmissionLoadError, load_submission, stale_build_lock

    try:
        module = load_submission(file)
    except SubmissionLoadError as exc:
        _fail(str(exc))
    lock = stale_build_lock()
    if lock is not None:
        click.echo(
            f"warning: {lock} exists: torch waits for it before it builds or loads the CUDA extension; if no build"
            " is running, a killed one left it behind: delete it",
            err=True,
        )
    return module


def _problem(shrink: int = 1):
    """tables/problem.yaml; shrink > 1 divides every n and k (a quick CPU smoke run of a reference file)."""
    from generator.problem import load_problem

    try:
        problem = load_problem()
    except BuildError as exc:
        _fail(str(exc))
    return problem if shrink == 1 else problem.shrunk(shrink)


def _device(requested: str | None) -> str:
    import torch

    return requested or ("cuda" if torch.cuda.is_available() else "cpu")


@main.command()
@click.argument("file", type=click.Path(dir_okay=False, path_type=Path), default=DIST)
@click.option(
    "--dist",
    "distributions",
    multiple=True,
    type=click.Choice(["normal", "heavy"]),
    help="Weight distribution(s) [default: both].",
)
@click.option("--seed", default=0, show_default=True)
@click.option("--device", default=None, help="cuda (default when present) or cpu (graph replay emulated).")
@click.option("--no-graphs", is_flag=True, help="Skip the CUDA-graph capture/replay checks.")
@click.option("--shrink", default=1, show_default=True, help="Divide every n and k by this (CPU smoke runs).")
def verify(file: Path, distributions, seed: int, device: str | None, no_graphs: bool, shrink: int) -> None:
    """Check FILE like the judge: every layer x m, float64 reference, poisoned outputs, graph replays."""
    import os

    os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")
    from generator.judge.verify import format_report, verify_distribution

    module = _load(file)
    problem = _problem(shrink)
    device = _device(device)
    distributions = list(distributions) or ["normal", "heavy"]
    results, failed = [], False
    for distribution in distributions:
        rows, prepare_s, error = verify_distribution(
            module, problem, distribution, seed, device, not no_graphs
        )
        click.echo(
            f"[{distribution}] prepare() took {prepare_s:.1f} s" + (f": FAIL {error}" if error else "")
        )
        failed |= bool(error)
        results.extend(rows)
    click.echo(format_report(results, distributions))
    if failed or not results or not all(r.ok for r in results):
        sys.exit(1)


def _shape_filter(problem, layers, ms, default_ms):
    chosen_layers = list(layers) or list(problem.layers)
    unknown = [name for name in chosen_layers if name not in problem.layers]
    if unknown:
        _fail(f"unknown layer(s) {unknown}; tables/problem.yaml has {list(problem.layers)}")
    return [(layer, m) for layer in chosen_layers for m in (list(ms) or list(default_ms))]


@main.command()
@click.argument("file", type=click.Path(dir_okay=False, path_type=Path), default=DIST)
@click.option("--layers", "layers", multiple=True, help="Only these layers (repeatable).")
@click.option("--m", "ms", multiple=True, type=int, help="Only these m (repeatable).")
@click.option("--reps", default=100, show_default=True, help="Cold replays per measurement (median).")
@click.option(
    "--json", "json_path", type=click.Path(dir_okay=False, path_type=Path), help="Write every figure here."
)
@click.option(
    "--compare",
    "compare_path",
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    help="An earlier --json output: print per-shape deltas.",
)
@click.option(
    "--plot", "plot_path", type=click.Path(dir_okay=False, path_type=Path), help="Write a PNG here."
)
def bench(file: Path, layers, ms, reps: int, json_path, compare_path, plot_path) -> None:
    """Time FILE on the benchmark shapes (cold and warm) against cuBLAS and the memory floor, on the GPU."""
    import json

    import torch
    from tqdm import tqdm

    from generator.judge.bench import BenchResult, compare_results, format_table, plot, run_bench

    if not torch.cuda.is_available():
        _fail("bench needs a CUDA GPU (run it on the H200; see README)")
    module = _load(file)
    problem = _problem()
    shapes = _shape_filter(problem, layers, ms, problem.bench_m)
    # disable=None: a progress bar on a terminal, nothing in a log file
    with tqdm(total=len(shapes), desc="bench", unit="shape", disable=None) as bar:
        result = run_bench(module, problem, shapes, reps=reps, progress=lambda _: bar.update())
    click.echo(format_table(result))
    if json_path:
        json_path.write_text(json.dumps(result.to_json(), indent=1))
        click.echo(f"wrote {json_path}")
    if compare_path:
        click.echo(compare_results(BenchResult.from_json(json.loads(compare_path.read_text())), result))
    if plot_path:
        plot(result, plot_path)
        click.echo(f"wrote {plot_path}")


@main.command()
@click.argument("file", type=click.Path(dir_okay=False, path_type=Path), default=DIST)
@click.option("--layers", "layers", multiple=True, help="Only these layers (repeatable).")
@click.option("--m", "ms", multiple=True, type=int, help="Only these m (repeatable; default 1 8 16 32).")
@click.option("--reps", default=30, show_default=True)
@click.option(
    "--json",
    "json_path",
    type=click.Path(dir_okay=False, path_type=Path),
    help="Also write every correct configuration's time per shape (fastest first), to study what wins.",
)
@click.option(
    "--engine",
    type=click.Choice(sorted(CONFIG_FIELDS)),
    default="gemv",
    show_default=True,
    help="gemv: the mma.sync GEMV's (NW, S, U, P, R, C) into CTABLE; tma: the TMA + wgmma GEMV's (S, STAGES, C) into"
    " TTABLE, kept only where it beats what CTABLE runs; z: the compressed GEMV's (NW, S, UG, P, R, C) into ZTABLE,"
    " kept only where it beats what TTABLE and CTABLE run.",
)
@click.option(
    "--write",
    "write_path",
    type=click.Path(dir_okay=False, path_type=Path),
    help="Where to write the tuned table (then rebuild).  [default: the engine's tables/*.yaml]",
)
@click.option(
    "--styles",
    "styles",
    type=int,
    multiple=True,
    help="gemv / z: time only configs of these pipelining styles P (repeatable), plus each shape's current entry,"
    " which stays unless one of them is >= 2% faster: a new style against the table in a fraction of a full sweep.",
)
@click.option(
    "--best-by",
    "best_by",
    help="Also print, per shape, the fastest config of each value of this config field (e.g. C for tma: each"
    " reduction mode's best; P for gemv: each style's best), from the coarse pass.",
)
def sweep(
    file: Path,
    layers,
    ms,
    reps: int,
    engine: str,
    write_path: Path | None,
    json_path: Path | None,
    styles: tuple[int, ...],
    best_by: str | None,
) -> None:
    """Tune a GEMV's table on the GPU: time every admissible configuration per shape, keep the fastest correct one."""
    import json

    import torch
    from tqdm import tqdm

    from generator.build import write_atomic
    from generator.judge.sweep import SWEEP_M, format_best_by_field, run_sweep, updated_table
    from generator.tables import load_tables

    # wrong calls say so on any machine, before the GPU is asked for
    if styles and engine == "tma":
        _fail("--styles picks pipelining styles (P) of the gemv and z engines; the tma engine has none")
    if best_by is not None and best_by not in CONFIG_FIELDS[engine]:
        _fail(
            f"--best-by {best_by}: the {engine} engine's config fields are {', '.join(CONFIG_FIELDS[engine])}"
        )
    if not torch.cuda.is_available():
        _fail("sweep needs a CUDA GPU (run it on the H200; see README)")
    module = _load(file)
    problem = _problem()
    shapes = _shape_filter(problem, layers, ms, SWEEP_M)
    table_name, table_file = ENGINE_TABLES[engine]
    table_path = REPO_ROOT / "tables" / table_file
    write_path = write_path or table_path
    try:
        current = load_tables(problem)[table_name]
    except BuildError as exc:
        _fail(str(exc))

    def row(p):
        return (
            f"{p.layer:<9} {p.m:>3} {p.tried:>5} {p.wrong:>5} {p.failed:>6} {str(p.best):>22} {p.best_us:>7.2f}"
            f" {p.baseline_us:>8.2f}  {p.choice}"
        )

    # disable=None: a progress bar on a terminal, nothing in a log file; each shape's line as soon as it is done,
    # so a run cut short still leaves its figures
    with tqdm(total=len(shapes), desc="sweep", unit="shape", disable=None) as bar:

        def done(point):
            bar.write(row(point))
            bar.update()

        points = run_sweep(
            module, problem, shapes, reps=reps, progress=done, engine=engine, styles=set(styles) or None
        )
    click.echo(
        f"{'layer':<9} {'m':>3} {'tried':>5} {'wrong':>5} {'failed':>6} {'best ' + engine:>22} {'us':>7}"
        f" {'baseline':>8}  entry"
    )
    for p in points:
        click.echo(row(p))
    if best_by is not None:
        click.echo(f"fastest config of each {best_by} (coarse pass, us):")
        for line in format_best_by_field(points, best_by, CONFIG_FIELDS[engine].index(best_by)):
            click.echo(line)
    if json_path:
        json_path.write_text(json.dumps([p.to_json() for p in points], indent=1))
    write_atomic(write_path, updated_table(table_path.read_text(), current, points, shapes, problem))
    click.echo(f"wrote {write_path}; rebuild with `python -m generator build`")
    if any(p.wrong for p in points):
        wrong = "; ".join(f"{p.layer} m={p.m} {list(c)}" for p in points for c in p.wrong_configs)
        _fail(f"configurations that computed wrong results (fix the kernel): {wrong}", 1)


@main.command()
@_launch_arguments("profiled")
@click.option(
    "--out",
    type=click.Path(file_okay=False, path_type=Path),
    default=Path("profile"),
    show_default=True,
    help="Folder for the report (profile.ncu-rep) and its exports (details.txt, source.csv, sass.txt).",
)
@click.option("--set", "section_set", default="full", show_default=True, help="ncu's section set.")
@click.option("--ncu", default="ncu", show_default=True, help="The Nsight Compute command line.")
def profile(launches, file: Path, out: Path, section_set: str, ncu: str) -> None:
    """Nsight Compute on GEMV launches given as layer:m:engine:config (e.g. qkv_gate:32:tma:3,8,2), on the H200:
    per kernel its time, DRAM throughput and issue rate, and each SASS instruction's count and stalls."""
    import shutil
    import subprocess

    from generator.judge.profile import (
        format_instruction,
        format_sass,
        format_summary,
        hot_instructions,
        kernel_summaries,
        ncu_commands,
        sass_tables,
    )

    problem = _problem()
    parsed = _parse_launches(launches, problem)
    if shutil.which(ncu) is None:
        _fail(
            f"{ncu} (Nsight Compute) is not on PATH: profile runs where the GPU is (see README, On the H200)"
        )
    out.mkdir(parents=True, exist_ok=True)
    run_profile, export_details, export_source = ncu_commands(
        ncu, out / "profile", sys.executable, file, parsed, section_set
    )
    exports = {}
    for name, command in (
        ("run", run_profile),
        ("details.txt", export_details),
        ("source.csv", export_source),
    ):
        result = subprocess.run(command, capture_output=True, text=True)
        if result.returncode != 0:
            tail = (result.stdout + result.stderr).strip().splitlines()[-1:] or ["(no output)"]
            _fail(f"ncu ({name}) exited {result.returncode}: {tail[0]}")
        exports[name] = result.stdout
    (out / "details.txt").write_text(exports["details.txt"])
    (out / "source.csv").write_text(exports["source.csv"])
    tables = sass_tables(exports["source.csv"])
    (out / "sass.txt").write_text(format_sass(tables))
    for summary in kernel_summaries(exports["details.txt"]):
        click.echo(format_summary(summary))
    for name, rows in tables:
        click.echo(f"\nmost sampled instructions of {name}:")
        for r in hot_instructions(rows):
            click.echo("  " + format_instruction(r))
    click.echo(f"\nwrote {out}/profile.ncu-rep, details.txt, source.csv and sass.txt")
