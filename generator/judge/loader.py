"""Load a submission file by path, as the judge does: a module of its own, nothing of this project inside it."""

from __future__ import annotations

import importlib.util
import os
import sys
from pathlib import Path
from types import ModuleType

from generator.contract import contract_violations
from generator.errors import BuildError, read_text

REQUIRED = ("prepare", "kernel_fn")


class SubmissionLoadError(Exception):
    pass


def stale_build_lock() -> Path | None:
    """torch's JIT build lock of one of the submission's extensions (generator/launch_table.py names them
    EXTENSION_NAME + a digest of their C++), if one exists now. Every load_inline takes it, even to load a
    cached build, and a process killed by SIGTERM or SIGKILL while holding it (Python runs no `finally` then)
    leaves the file behind: every later load waits on it forever, silently (docs/method.md: bound device commands
    with `timeout -s INT`)."""
    try:
        from torch.utils.cpp_extension import _get_build_directory
    except ImportError:  # a torch without it: nothing to check
        return None
    from generator.launch_table import EXTENSION_NAME

    probe = Path(_get_build_directory(EXTENSION_NAME, verbose=False))  # torch creates the folder if missing
    locks = sorted(probe.parent.glob(f"{EXTENSION_NAME}*/lock"))
    return locks[0] if locks else None


def load_submission(path: str | Path, module_name: str = "okc_submission_under_test") -> ModuleType:
    path = Path(path)
    if not os.path.lexists(path):
        raise SubmissionLoadError(f"{path}: no such file")
    try:
        text = read_text(path, str(path))
    except BuildError as exc:  # a byte that is not UTF-8, a NUL, a file that cannot be read
        raise SubmissionLoadError(str(exc)) from None
    # The judge's machine has none of this project: the file must stand alone (tag line, import whitelist).
    problems = contract_violations(text)
    if problems:
        line, message = problems[0]
        raise SubmissionLoadError(f"{path}:{line}: {message}")
    spec = importlib.util.spec_from_file_location(module_name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules.pop(module_name, None)
    try:
        spec.loader.exec_module(module)
    except Exception as exc:  # the file itself is broken: say so in one line
        raise SubmissionLoadError(f"{path}: import failed: {type(exc).__name__}: {exc}") from exc
    missing = [name for name in REQUIRED if not callable(getattr(module, name, None))]
    if missing:
        raise SubmissionLoadError(f"{path}: lacks {missing}")
    return module


def engines_of(module: ModuleType) -> dict:
    """A loaded file's own engines by name (its classes, not this checkout's): those its tables name, and cuBLAS."""
    return {table.engine.name: table.engine for table in module.TABLES} | {module.CUBLAS.name: module.CUBLAS}
