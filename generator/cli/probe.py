"""Probes on the H200 (generator/probes/): `probe-intake` (one hardware limit) and `probe-slots` (one kernel, slot
by slot)."""

from __future__ import annotations

import json
from pathlib import Path

import click

from generator.cli.app import FILE_ARGUMENT, fail, main, require_gpu


@main.command("probe-intake")
@click.option(
    "--json", "json_path", type=click.Path(dir_okay=False, path_type=Path), help="Also write the rows."
)
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
@click.option(
    "--json", "json_path", type=click.Path(dir_okay=False, path_type=Path), help="Also write the figures."
)
def probe_slots(file: Path, specs, reps: int, json_path: Path | None) -> None:
    """Where a tma_gemv_kernel CTA's time goes, slot by slot: clock stamps patched into a copy of FILE (a markdown
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
