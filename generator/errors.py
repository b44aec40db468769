"""One error type for every bad input: it knows the file and line it is about."""

from __future__ import annotations

from pathlib import Path


class BuildError(Exception):
    """Bad input to the build: printed as one line `file:line: what is wrong`, exit code 2."""

    def __init__(self, path: str | Path | None, line: int | None, message: str):
        self.path = str(path) if path is not None else None
        self.line = line
        self.message = message
        super().__init__(str(self))

    def __str__(self) -> str:
        where = self.path or "<input>"
        if self.line is not None:
            where += f":{self.line}"
        return f"{where}: {self.message}"


def display_path(path: Path, root: Path) -> str:
    """A path relative to the repository when it lies inside it (shorter, and stable across checkouts)."""
    try:
        return str(Path(path).resolve().relative_to(root.resolve()))
    except ValueError:
        return str(path)
