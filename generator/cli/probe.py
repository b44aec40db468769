"""Probes of one hardware limit each, on the H200 (generator/probes/): `probe-intake`."""

from __future__ import annotations

import json
from pathlib import Path

import click

from generator.cli.app import main, require_gpu


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
