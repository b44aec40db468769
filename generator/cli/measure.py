"""Measure like the judge, on the H200: `verify`, `bench`, `ab`, `profile`."""

from __future__ import annotations

import sys
from pathlib import Path

import click

from generator import REPO_ROOT
from generator.cli.app import (
    DISTRIBUTIONS_OPTION,
    EVERY_ENGINE_HELP,
    FILE_ARGUMENT,
    every_engine_file,
    fail,
    load_file,
    load_problem_or_fail,
    existing,
    main,
    output_option,
    parse_launches,
    require_gpu,
    require_tools,
    shape_filter,
)
from generator.errors import BuildError


def launch_arguments(verb: str):
    """The LAUNCHES argument (layer:m:engine:values or layer:m:cublas ...) and --file option of `ab` and `profile`."""

    def add(command):
        command = click.option(
            "--file",
            type=click.Path(dir_okay=False, path_type=Path),
            default=None,
            callback=existing,
            help=f"The submission file whose kernels are {verb} {EVERY_ENGINE_HELP}.",
        )(command)
        return click.argument("launches", nargs=-1, required=True)(command)

    return add


@main.command()
@FILE_ARGUMENT
@DISTRIBUTIONS_OPTION
@click.option("--seed", default=0, show_default=True, help="Seed of the weights and inputs.")
@click.option(
    "--device",
    default=None,
    help="cuda (the default) or cpu: a smoke run of the harness and the file's Python (prepare()'s routing, the"
    " fallback path, graph replay emulated); off the GPU no CUDA kernel of the file runs, and the summary line"
    " says so.",
)
@click.option("--no-graphs", is_flag=True, help="Skip the CUDA-graph capture/replay checks.")
@click.option(
    "--shrink",
    default=1,
    show_default=True,
    type=click.IntRange(min=1),
    help="Divide every n and k by this (CPU smoke runs of a reference file).",
)
def verify(file: Path, distributions, seed: int, device: str | None, no_graphs: bool, shrink: int) -> None:
    """Check FILE like the judge: every layer x m, float64 reference, poisoned outputs, graph replays."""
    import os

    import torch

    os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")
    from tqdm import tqdm

    from generator.judge.verify import format_report, verify_distribution

    if device is None:
        require_gpu("verify")  # the CUDA extension cannot be built or run without one
        device = "cuda"
    elif device not in ("cuda", "cpu"):
        fail(f"--device {device}: expected cuda or cpu")
    elif device == "cuda" and not torch.cuda.is_available():
        fail("--device cuda: no CUDA GPU here")
    module = load_file(file)
    problem = load_problem_or_fail(shrink)
    _warn_if_not_built_here(file)
    distributions = list(distributions) or ["normal", "heavy"]
    results, errors = [], {}
    for distribution in distributions:
        total = len(problem.layers) * len(problem.verify_m)
        with tqdm(total=total, desc=f"verify {distribution}", unit="shape", disable=None) as bar:
            rows, prepare_s, error = verify_distribution(
                module, problem, distribution, seed, device, not no_graphs, progress=lambda _: bar.update()
            )
        click.echo(
            f"[{distribution}] prepare() took {prepare_s:.1f} s" + (f": FAIL {error}" if error else "")
        )
        errors[distribution] = error
        results.extend(rows)
    note = (  # off the GPU prepare() sends every shape to torch: a pass here says nothing of the kernels
        " on cpu: no CUDA kernel of the file ran (prepare() routes every shape to torch off the GPU): the harness"
        " and the Python are checked, the kernels are not"
        if device == "cpu"
        else ""
    )
    click.echo(format_report(results, distributions, errors, note))
    if any(errors.values()) or not results or not all(r.ok for r in results):
        sys.exit(1)


def _warn_if_not_built_here(file: Path) -> None:
    """One line when FILE is not what `build` makes from this checkout now (its checks still run)."""
    from generator.render import not_built_from

    try:
        why = not_built_from(file.read_text(errors="replace"), REPO_ROOT)
    except BuildError as exc:
        why = f"this checkout does not build ({exc})"
    if why:
        click.echo(
            f"warning: {file}: {why}: `python -m generator build` makes the file this checkout has", err=True
        )


@main.command()
@FILE_ARGUMENT
@click.option("--layers", "layers", multiple=True, help="Only these layers (repeatable).")
@click.option("--m", "ms", multiple=True, type=int, help="Only these m (repeatable).")
@click.option(
    "--reps",
    default=100,
    show_default=True,
    type=click.IntRange(min=1),
    help="Cold replays per measurement (median).",
)
@output_option("--json", "json_path", help="Write every figure here.")
@click.option(
    "--compare",
    "compare_path",
    type=click.Path(dir_okay=False, path_type=Path),
    help="An earlier --json output: print per-shape deltas (default: docs/bench.json, the landed file's last bench,"
    " when it exists).",
)
@output_option("--plot", "plot_path", help="Write a PNG here.")
def bench(file: Path, layers, ms, reps: int, json_path, compare_path, plot_path) -> None:
    """Time FILE on the benchmark shapes (cold and warm) against cuBLAS and the memory floor, on the GPU."""
    import json

    from tqdm import tqdm

    from generator import REPO_ROOT
    from generator.judge.bench import BenchResult, compare_results, format_table, plot, run_bench

    if compare_path is not None and not compare_path.is_file():
        fail(f"--compare {compare_path}: no such file")
    require_gpu("bench")
    module = load_file(file)
    problem = load_problem_or_fail()
    shapes = shape_filter(problem, layers, ms, problem.bench_m)
    with tqdm(total=len(shapes), desc="bench", unit="shape", disable=None) as bar:
        result = run_bench(module, problem, shapes, reps=reps, progress=lambda _: bar.update())
    click.echo(format_table(result))
    if json_path:
        json_path.write_text(json.dumps(result.to_json(), indent=1))
        click.echo(f"wrote {json_path}")
    baseline = compare_path or REPO_ROOT / "docs" / "bench.json"
    if baseline.is_file():
        click.echo(f"against {baseline}:")
        click.echo(compare_results(BenchResult.from_json(json.loads(baseline.read_text())), result))
    if plot_path:
        plot(result, plot_path)
        click.echo(f"wrote {plot_path}")


@main.command()
@launch_arguments("timed")
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
    """Time launches given as layer:m:engine:values (or layer:m:cublas) against each other on the H200,
    interleaved in one process, the order rotating each round; each checked against float64 first. For configs a
    few percent apart, whose ranking two machines may not share."""
    from generator.judge.ab import format_ab, parse_env_switch, run_ab, summarize

    problem = load_problem_or_fail()
    parsed = parse_launches(launches, problem)
    if rounds < 1 or reps < 1:
        fail(f"--rounds and --reps must be at least 1, got {rounds} and {reps}")
    env = None
    if env_text is not None:
        try:
            env = parse_env_switch(env_text)
        except ValueError as exc:
            fail(str(exc))
    require_gpu("ab")
    file = every_engine_file(file)
    module = load_file(file)
    require_tools(module, file)
    timed, wrong = run_ab(module, problem, parsed, rounds, reps, env, time_wrong=time_wrong)
    rows = summarize(timed, per_launch=env is not None)
    if rows:
        click.echo(format_ab(rows, rounds, reps, per_launch=env is not None))
    for line in wrong:
        click.echo(line)
    if wrong and not time_wrong:
        sys.exit(1)


@main.command()
@launch_arguments("profiled")
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
    """Nsight Compute on launches given as layer:m:engine:values (e.g. qkv_gate:32:tma_gemv:1,14,half,none), on the
    H200: per kernel its time, DRAM throughput and issue rate, and each SASS instruction's count and stalls.
    """
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

    problem = load_problem_or_fail()
    parsed = parse_launches(launches, problem)
    if shutil.which(ncu) is None:
        fail(
            f"{ncu} (Nsight Compute) is not on PATH: profile runs where the GPU is (see README, On the H200)"
        )
    out.mkdir(parents=True, exist_ok=True)
    file = every_engine_file(file)
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
            fail(f"ncu ({name}) exited {result.returncode}: {tail[0]}")
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
