"""Builds dist/submission.py from kernels_src/ and tables/, and checks it on a Hopper GPU like the judge does."""

from pathlib import Path

# The repository this package was installed from (editable install) or runs in (PYTHONPATH=.).
REPO_ROOT = Path(__file__).resolve().parent.parent
