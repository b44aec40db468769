"""Builds dist/submission.py from kernels_src/ and tables/, and checks it on a Hopper GPU like the judge does."""

import sys
from pathlib import Path

__version__ = "0.2.0"

_PACKAGE_ROOT = Path(__file__).resolve().parent.parent


def _is_checkout(path: Path) -> bool:
    return (path / "templates" / "submission.py.j2").is_file() and (
        path / "kernels_src" / "sources.yaml"
    ).is_file()


def find_root(start: Path | None = None) -> Path:
    """The checkout a command works on: the nearest folder at or above `start` (the current directory) that holds
    templates/ and kernels_src/, else the one this package was installed from. So the installed `muse-proj`
    script builds the tree it runs in, not the tree it was installed from."""
    start = Path.cwd() if start is None else Path(start)
    for path in (start.resolve(), *start.resolve().parents):
        if _is_checkout(path):
            return path
    return _PACKAGE_ROOT


REPO_ROOT = find_root()
# kernels_src is imported from the checkout too (its engines check the tables), ahead of an installed copy.
if str(REPO_ROOT) not in sys.path:
    sys.path.insert(0, str(REPO_ROOT))
