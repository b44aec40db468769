"""What `build` writes, and how: the files it derives from the sources (each table's field lines, the constants
header, README.md's figures) and dist/submission.py, each atomically once all of them are made; and how a file
differs from what the sources make now."""

from __future__ import annotations

import difflib
import os
import tempfile
from dataclasses import dataclass
from pathlib import Path

from generator.errors import BuildError, display_path, read_text


@dataclass(frozen=True)
class Derived:
    """A file build keeps current, stale: where it is, what it holds, what the sources make of it, and the line
    `file:line: stale ...` that says so."""

    path: Path
    held: str
    fresh: str
    stale: str


def derived_files(root: Path, commands=()) -> list[Derived]:
    """The files build derives besides dist/submission.py that are stale: each table's field lines
    (tables/<engine>.yaml, from its engine's Fields), the constants the CUDA sources include
    (kernels_src/generated/constants.h) and README.md's figures the source decides (generator/readme.py; commands:
    the CLI's, each of which needs its row). Bad input is a BuildError."""
    from generator.engines import ENGINES
    from generator.sources import CONSTANTS_HEADER, constants_header
    from generator.tables import stale_field_header, with_field_header

    stale = []
    for engine in ENGINES:
        path = root / "tables" / engine.table_file
        shown = display_path(path, root)
        try:
            text = read_text(path, shown)
        except FileNotFoundError:
            raise BuildError(shown, None, f"file not found (the {engine.name} engine's table)") from None
        problem = stale_field_header(engine, text, shown)
        if problem:
            stale.append(Derived(path, text, with_field_header(engine, text), problem))
    header = root / "kernels_src" / CONSTANTS_HEADER
    held = header.read_text(errors="replace") if header.is_file() else ""  # missing, or a folder: rewritten
    fresh = constants_header()
    if held != fresh:
        stale.append(Derived(header, held, fresh, stale_line(held, fresh, display_path(header, root))))
    if os.path.lexists(root / "README.md"):  # a scratch copy of the build's inputs may have none
        stale += _stale_readme(root, commands)
    return stale


def _stale_readme(root: Path, commands) -> list[Derived]:
    """README.md where its derived figures are stale; a line no rewrite can fix (an engine without its row) is a
    BuildError (exit 1)."""
    from generator.problem import load_problem
    from generator.readme import fresh_readme
    from generator.tables import load_tables

    problem = load_problem(root)
    path = root / "README.md"
    text = read_text(path, "README.md")
    fresh, problems = fresh_readme(text, problem, load_tables(problem, root), root, commands)
    for line, what in problems[:1]:
        raise BuildError("README.md", line, what, exit_code=1)
    if fresh == text:
        return []
    old, new = text.split("\n"), fresh.split("\n")
    line = next(i for i, (a, b) in enumerate(zip(old, new), 1) if a != b)
    said = f"README.md:{line}: stale (it would read {new[line - 1].strip()[:60]!r}, from the source): `python -m generator build` rewrites it"
    return [Derived(path, text, fresh, said)]


def check_writable(paths, root: Path) -> None:
    """Each file build would write is a file or not there yet: a folder (or anything else) in its place is one
    line, before anything is written."""
    for path in paths:
        if os.path.lexists(path) and not path.is_file():
            kind = "a folder" if path.is_dir() else "not a file"
            raise BuildError(
                display_path(path, root),
                None,
                f"{kind} where build writes a file: remove it, then build again",
            )


def write_all(writes: list[tuple[Path, str]], root: Path) -> None:
    """Each (path, text) written atomically, in order (dist/submission.py last), once every path is checked."""
    check_writable([path for path, _ in writes], root)
    for path, text in writes:
        try:
            write_atomic(path, text)
        except OSError as exc:
            raise BuildError(display_path(path, root), None, f"cannot write: {exc.strerror or exc}") from None


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
