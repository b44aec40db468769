"""Tune on the H200: `sweep` times an engine's candidates per shape and writes its table."""

from __future__ import annotations

import sys
from pathlib import Path

import click

from generator import REPO_ROOT
from generator.cli.app import (
    EVERY_ENGINE_FILE_ARGUMENT,
    every_engine_file,
    fail,
    load_file,
    load_problem_or_fail,
    main,
    output_option,
    require_gpu,
    require_tools,
    shape_filter,
)
from generator.errors import BuildError


class EngineOption(click.Option):
    """--engine, whose help names the engines when it is shown (generator/engines.py, ENGINES): a kernels_src
    module that does not import leaves the help with the words alone."""

    help_template = (
        "Whose table to tune: {engines} (tables/<engine>.yaml); an entry is kept only where the engine beats what"
        " would serve the shape without it (the engines after it, cuBLAS last) by >= 2 %."
    )

    def get_help_record(self, ctx):
        try:
            from generator.engines import ENGINES

            names = ", ".join(engine.name for engine in ENGINES)
        except Exception:  # a broken module: every command's help still works
            names = "an engine of kernels_src/"
        self.help = self.help_template.format(engines=names)
        return super().get_help_record(ctx)


def parse_where(texts, engine) -> dict:
    """--where field=v1,v2 (repeatable) -> {field: {values}}; a field the engine lacks fails in one line."""
    where: dict = {}
    for text in texts:
        name, eq, values = text.partition("=")
        if not eq or name not in engine.fields or not values:
            fail(f"--where {text!r}: expected FIELD=V1,V2 with FIELD one of {', '.join(engine.fields)}")
        where.setdefault(name, set()).update(values.split(","))
    return where


@main.command()
@EVERY_ENGINE_FILE_ARGUMENT
@click.option(
    "--engine",
    default="mma_gemv",
    show_default=True,
    cls=EngineOption,
    help="Whose table to tune (tables/<engine>.yaml).",
)
@click.option("--layers", "layers", multiple=True, help="Only these layers (repeatable).")
@click.option(
    "--m", "ms", multiple=True, type=int, help="Only these m (repeatable; default: the engine's table rows)."
)
@click.option(
    "--reps",
    default=30,
    show_default=True,
    type=click.IntRange(min=1),
    help="Cold replays per candidate in the coarse pass (median).",
)
@click.option(
    "--where",
    "where_texts",
    multiple=True,
    metavar="FIELD=V1,V2",
    help="Time only candidates with these field values (repeatable, e.g. pipeline=double_w), plus each shape's"
    " current entry, which stays unless one of them is >= 2 % faster.",
)
@click.option(
    "--best-by",
    "best_by",
    metavar="FIELD",
    help="Also print, per shape, the fastest config of each value of this field (e.g. reduce): from the coarse pass.",
)
@output_option(
    "--json",
    "json_path",
    help="Also write every correct configuration's time per shape (fastest first), to study what wins.",
)
@output_option(
    "--write",
    "write_path",
    help="Where to write the tuned table (then rebuild)  [default: tables/<engine>.yaml].",
)
def sweep(
    file: Path, engine: str, layers, ms, reps: int, where_texts, best_by, json_path, write_path
) -> None:
    """Tune an engine's table on the GPU: time every admissible configuration per shape, keep the fastest correct
    one where it wins."""
    import json

    from generator.build import write_atomic
    from generator.judge.sweep import format_best_by_field, sweep_m, updated_table
    from generator.tables import load_table

    from generator.engines import BY_NAME, ENGINES

    chosen = BY_NAME.get(engine)
    if chosen is None or chosen not in ENGINES:
        fail(f"--engine {engine}: one of {', '.join(e.name for e in ENGINES)}")
    where = parse_where(where_texts, chosen)  # wrong calls say so on any machine, before the GPU is asked for
    if best_by is not None and best_by not in chosen.fields:
        fail(f"--best-by {best_by}: the {engine} engine's fields are {', '.join(chosen.fields)}")
    problem = load_problem_or_fail()
    shapes = shape_filter(problem, layers, ms, sweep_m(chosen, problem))
    outside = [(layer, m) for layer, m in shapes if not chosen.serves(m)]
    if outside:
        fail(f"the {engine} engine does not serve m={outside[0][1]}")
    table_path = REPO_ROOT / "tables" / chosen.table_file
    try:
        current, lines = load_table(chosen, problem)
    except BuildError as exc:
        fail(str(exc))
    require_gpu("sweep")
    file = every_engine_file(file)
    module = load_file(file)
    require_tools(module, file)
    points = _timed_points(module, problem, shapes, chosen, reps, where, file)
    click.echo(_point_line(None, chosen))
    for p in points:
        click.echo(_point_line(p, chosen) + f"   ({p.note})")
    if best_by is not None:
        click.echo(f"fastest config of each {best_by} (coarse pass, us):")
        for line in format_best_by_field(points, best_by, chosen.describe):
            click.echo(line)
    if json_path:
        json_path.write_text(json.dumps([p.to_json() for p in points], indent=1))
    out = write_path or table_path
    write_atomic(out, updated_table(table_path.read_text(), current, lines, points, shapes, problem))
    click.echo(f"wrote {out}; rebuild with `python -m generator build`")
    if any(p.wrong for p in points):
        wrong = "; ".join(f"{p.layer} m={p.m} {chosen.describe(c)}" for p in points for c in p.wrong_configs)
        fail(f"configurations that computed wrong results (fix the kernel): {wrong}", 1)
    sys.exit(0)


def _point_line(p, engine) -> str:
    """One shape's line of the sweep's report, or (p None) the header."""
    if p is None:
        return f"{'layer':<9} {'m':>3} {'tried':>5} {'wrong':>5} {'failed':>6} {'us':>7} {'baseline':>8}  best {engine.name}"
    best = "-" if p.best is None else engine.describe(p.best)
    return f"{p.layer:<9} {p.m:>3} {p.tried:>5} {p.wrong:>5} {p.failed:>6} {p.best_us:>7.2f} {p.baseline_us:>8.2f}  {best}"


def _timed_points(module, problem, shapes, engine, reps: int, where: dict, file: Path) -> list:
    """run_sweep with a progress bar on a terminal (nothing in a log file), each shape's line as soon as it is
    done."""
    from tqdm import tqdm

    from generator.judge.sweep import run_sweep

    with tqdm(total=len(shapes), desc="sweep", unit="shape", disable=None) as bar:

        def done(point):
            bar.write(_point_line(point, engine))
            bar.update()

        return run_sweep(
            module,
            problem,
            shapes,
            engine.name,
            reps=reps,
            where=where,
            progress=done,
            log=bar.write,
            file=file,
        )
