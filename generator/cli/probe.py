"""Probes on the H200 (generator/probes/): `probe-intake` (one hardware limit), `probe-slots` (one kernel, slot
by slot), `probe-gemm` (persistent_gemm on a plain large GEMM against cuBLAS) and `probe-tail` (its split-K tail
alone)."""

from __future__ import annotations

import json
from pathlib import Path

import click

from generator.cli.app import (
    EVERY_ENGINE_HELP,
    FILE_ARGUMENT,
    every_engine_file,
    existing,
    fail,
    main,
    output_option,
    require_gpu,
)
from generator.judge.loader import SubmissionLoadError, load_submission
from generator.probes.tail import DESIGNS as TAIL_DESIGNS


@main.command("probe-intake")
@output_option("--json", "json_path", help="Also write the rows.")
@click.option("--quick", is_flag=True, help="Every sixth case only (a smoke run).")
def probe_intake(json_path: Path | None, quick: bool) -> None:
    """TMA intake per SM by ring depth, slot size, CTAs a SM, HBM or L2, own or shared lines (a markdown table)."""
    require_gpu("probe-intake")
    from generator.probes import intake

    rows, env = intake.run(quick=quick)
    click.echo(f"{env['device']}, {env['sms']} SMs, torch {env['torch']}")
    click.echo(intake.table(rows))
    if json_path is not None:
        payload = {"env": env, "rows": [{**r._asdict(), "case": r.case._asdict()} for r in rows]}
        json_path.write_text(json.dumps(payload, indent=1) + "\n")


@main.command("probe-slots")
@FILE_ARGUMENT
@click.option(
    "--launch",
    "specs",
    multiple=True,
    help="layer:m:engine:values of tma_gemv or tma_gemm, no semaphore (repeatable) [default: eight of m = 32 .. 128].",
)
@click.option(
    "--reps", type=click.IntRange(min=1), default=5, show_default=True, help="Cold runs of each launch."
)
@output_option("--json", "json_path", help="Also write the figures.")
def probe_slots(file: Path, specs, reps: int, json_path: Path | None) -> None:
    """Where a tma_kernel CTA's time goes, slot by slot: clock stamps patched into a copy of FILE (a markdown
    table; generator/probes/slot_stamps.py says what each column is)."""
    from generator.probes import slot_stamps

    try:  # the patch and the launches first: a kernel that moved under the probe, or a bad launch, is one line
        slot_stamps.patch(file.read_text(errors="replace"), str(file))
        launches = slot_stamps.parse_launches(specs or slot_stamps.DEFAULT_LAUNCHES)
    except OSError as exc:
        fail(f"{file}: cannot read: {exc.strerror or exc}")
    except slot_stamps.ProbeError as exc:
        fail(str(exc))
    require_gpu("probe-slots")
    try:
        rows = slot_stamps.run(file, launches, reps)
    except slot_stamps.ProbeError as exc:
        fail(str(exc))
    click.echo(slot_stamps.table(rows))
    if json_path is not None:
        json_path.write_text(json.dumps([row._asdict() for row in rows], indent=1) + "\n")


@main.command("probe-gemm")
@click.argument("sizes", nargs=3, type=click.IntRange(min=1))
@click.option(
    "--file",
    "file",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    callback=existing,
    help=f"The submission file whose build is timed {EVERY_ENGINE_HELP}.",
)
@click.option(
    "--config",
    "configs",
    multiple=True,
    help="rows,tokens,stages,ctas of persistent_gemm (repeatable) [default: four for large GEMMs].",
)
@click.option(
    "--reps", type=click.IntRange(min=1), default=30, show_default=True, help="Timed replays of each."
)
@click.option(
    "--phases",
    type=click.IntRange(min=0),
    default=0,
    show_default=True,
    help="Build the kernel with its phase stamps and add each config's timeline over this many cold launches.",
)
@click.option(
    "--define",
    "defines",
    multiple=True,
    help="NAME=VALUE: a macro of persistent_gemm.cuh set for this build (repeatable), e.g. OKC_GEMM_FIRST_GAP=600.",
)
@output_option("--json", "json_path", help="Also write the rows.")
def probe_gemm(sizes, file: Path, configs, reps: int, phases: int, defines, json_path: Path | None) -> None:
    """persistent_gemm on a plain GEMM of SIZES = M N K (bf16 in and out) against cuBLAS in the same run, cold
    and warm, each config checked against an fp32 reference first (a markdown table); with --phases, where each
    CTA's time goes (generator/probes/gemm.py)."""
    from generator.probes import gemm
    from kernels_src.engine import Layer
    from kernels_src.persistent_gemm import PERSISTENT_GEMM

    try:
        parsed = [gemm.parse_config(text) for text in configs] or list(gemm.DEFAULT_CONFIGS)
        define_lines = [gemm.parse_define(text) for text in defines]
    except gemm.ProbeError as exc:
        fail(str(exc))
    layer = Layer("probe", sizes[1], sizes[2], "bfloat16")
    for config in parsed:  # the engine's own rule at this shape (any M: the probe times large GEMMs too)
        cfg = PERSISTENT_GEMM.Config(*config)
        error = PERSISTENT_GEMM.field_error(cfg) or PERSISTENT_GEMM.rule(cfg, layer, sizes[0])
        if error:
            fail(f"--config {','.join(map(str, config))} at M N K = {' '.join(map(str, sizes))}: {error}")
    require_gpu("probe-gemm")
    file = every_engine_file(file)
    try:
        module = load_submission(file)
        rows, phase_rows = gemm.run(module, *sizes, parsed, reps, phases, define_lines)
    except (SubmissionLoadError, gemm.ProbeError) as exc:
        fail(str(exc))
    click.echo(gemm.table(rows))
    if phase_rows:
        click.echo("\n" + gemm.phase_table(phase_rows))
    if json_path is not None:
        found = [row._asdict() for row in rows] + [row._asdict() for row in phase_rows]
        json_path.write_text(json.dumps(found, indent=1) + "\n")


@main.command("probe-tail")
@click.option(
    "--case",
    "cases",
    multiple=True,
    help="rows,tokens,m,n,splits: an [m, n] output in rows x tokens tiles, each split over `splits` CTAs"
    " (repeatable) [default: the problem's candidate tails].",
)
@click.option(
    "--design",
    "designs",
    multiple=True,
    type=click.Choice(TAIL_DESIGNS),
    help="Designs to time (repeatable) [default: all].",
)
@click.option(
    "--reps", type=click.IntRange(min=1), default=30, show_default=True, help="Cold replays of each."
)
@output_option("--json", "json_path", help="Also write the rows.")
def probe_tail(cases, designs, reps: int, json_path: Path | None) -> None:
    """persistent_gemm's split-K tail apart from the GEMM, in five designs on synthetic partials (a markdown table;
    generator/probes/tail.py)."""
    from generator.probes import tail

    try:
        parsed = [tail.parse_case(text) for text in cases] or list(tail.DEFAULT_CASES)
    except tail.ProbeError as exc:
        fail(str(exc))
    require_gpu("probe-tail")
    chosen = [tail.DESIGNS.index(d) for d in designs] or list(range(len(tail.DESIGNS)))
    try:
        rows = tail.run(parsed, chosen, reps)
    except tail.ProbeError as exc:
        fail(str(exc), code=1)
    click.echo(tail.table(rows))
    if json_path is not None:
        found = [{**r._asdict(), "case": r.case._asdict()} for r in rows]
        json_path.write_text(json.dumps(found, indent=1) + "\n")
