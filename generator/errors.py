"""One error type for every bad input: it knows the file and line it is about."""

from __future__ import annotations

import errno
import os
from pathlib import Path


class BuildError(Exception):
    """Bad input to the build: printed as one line `file:line: what is wrong`, exit code 2 (1: what is checked is
    wrong, and no rewrite fixes it)."""

    def __init__(self, path: str | Path | None, line: int | None, message: str, exit_code: int = 2):
        self.path = str(path) if path is not None else None
        self.line = line
        self.message = message
        self.exit_code = exit_code
        super().__init__(str(self))

    def __str__(self) -> str:
        if self.path is None:  # the message names its place itself (a compiler's `file:line: what`)
            return self.message
        where = self.path if self.line is None else f"{self.path}:{self.line}"
        return f"{where}: {self.message}"


def display_path(path: Path, root: Path) -> str:
    """A path relative to the repository when it lies inside it (shorter, and stable across checkouts). The file
    itself is shown as named, not where a symbolic link leads (a link that loops leads nowhere)."""
    path = Path(path)
    try:
        return str((Path(os.path.realpath(path.parent)) / path.name).relative_to(os.path.realpath(root)))
    except ValueError:
        return str(path)


def unreadable(exc: OSError, path: Path) -> str:
    """Why a file cannot be read, in the words a user needs: a symbolic link that loops or leads nowhere is
    named as one; anything else in the system's words (a folder, no permission)."""
    if exc.errno == errno.ELOOP:
        return "cannot read: a symbolic link loop (following it never reaches a file)"
    if isinstance(exc, FileNotFoundError) and os.path.islink(path):
        return f"cannot read: a symbolic link to {os.readlink(path)}, which does not exist"
    return f"cannot read: {exc.strerror or exc}"


def read_text(path: Path, shown: str) -> str:
    """A UTF-8 text file's contents. A byte that is not UTF-8, or a NUL (no source here is binary: nvcc and the
    host compiler would take one silently), is a BuildError on the line it sits on; a file that exists but cannot
    be read (unreadable) a BuildError naming it; a missing one raises FileNotFoundError, for the caller to say
    what belongs there."""
    path = Path(path)
    try:
        data = path.read_bytes()
    except OSError as exc:
        if isinstance(exc, FileNotFoundError) and not os.path.islink(path):
            raise
        raise BuildError(shown, None, unreadable(exc, path)) from None
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data[: exc.start].count(b"\n") + 1
        column = exc.start - data.rfind(b"\n", 0, exc.start)
        raise BuildError(shown, line, f"not UTF-8: byte 0x{data[exc.start]:02x} at column {column}") from None
    if "\0" in text:
        at = text.index("\0")
        column = at - text.rfind("\n", 0, at)
        raise BuildError(shown, text.count("\n", 0, at) + 1, f"a NUL byte at column {column} (not text)")
    return text
