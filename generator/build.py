"""Writing dist/submission.py atomically, and comparing it with what the sources make now."""

from __future__ import annotations

import difflib
import os
import tempfile
from pathlib import Path


def write_atomic(path: Path, text: str) -> None:
    """Write via a temporary file in the same folder and rename: readers see the old file or the new one."""
    path.parent.mkdir(parents=True, exist_ok=True)  # build/ for the file with every engine
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w") as handle:
            handle.write(text)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def diff_summary(old: str, new: str, shown: str, max_lines: int = 20) -> str:
    """A short account of how `old` (on disk) differs from `new` (what the sources make now)."""
    diff = list(difflib.unified_diff(old.splitlines(), new.splitlines(), shown, "rebuilt", lineterm="", n=0))
    added = sum(1 for line in diff if line.startswith("+") and not line.startswith("+++"))
    removed = sum(1 for line in diff if line.startswith("-") and not line.startswith("---"))
    head = diff[:max_lines]
    more = f"\n... {len(diff) - max_lines} more diff lines" if len(diff) > max_lines else ""
    return (
        f"{shown} is stale: {_lines(added)} added, {_lines(removed)} removed by a rebuild\n"
        + "\n".join(head)
        + more
    )


def stale_line(old: str, new: str, shown: str) -> str:
    """`file:line: stale ...` in one line: the first line a rebuild changes, what it would read, how much changes."""
    old_lines, new_lines = old.splitlines(), new.splitlines()
    matcher = difflib.SequenceMatcher(None, old_lines, new_lines, autojunk=False)
    changes = [op for op in matcher.get_opcodes() if op[0] != "equal"]
    added = sum(j2 - j1 for _, _, _, j1, j2 in changes)
    removed = sum(i2 - i1 for _, i1, i2, _, _ in changes)
    _, i1, _, j1, j2 = changes[0] if changes else ("equal", 0, 0, 0, 0)
    reads = f"it would read {new_lines[j1].strip()[:60]!r}" if j2 > j1 else "a rebuild drops it"
    return (
        f"{shown}:{i1 + 1}: stale ({reads}; a rebuild adds {_lines(added)}, removes {_lines(removed)}): run"
        " `python -m generator build` and commit the result"
    )


def _lines(count: int) -> str:
    return f"{count} line" + ("" if count == 1 else "s")
