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


def read_text(path: Path, shown: str) -> str:
    """A UTF-8 text file's contents; bytes that are not UTF-8 become a BuildError on the line they sit on."""
    data = Path(path).read_bytes()
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data[: exc.start].count(b"\n") + 1
        column = exc.start - data.rfind(b"\n", 0, exc.start)
        raise BuildError(shown, line, f"not UTF-8: byte 0x{data[exc.start]:02x} at column {column}") from None
