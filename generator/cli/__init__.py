"""`python -m generator` (or the `muse-proj` script): build and inspect the submission (cli/build.py), measure
it like the judge on the H200 (cli/measure.py), and tune its tables there (cli/tune.py)."""

from generator.cli import build, measure, probe, tune  # noqa: F401  (each registers its commands on main)
from generator.cli.app import main

__all__ = ["main"]
