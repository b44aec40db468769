"""Load a submission file by path, as the judge does: a module of its own, nothing of this project inside it."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

from generator.contract import contract_violations

REQUIRED = ("prepare", "kernel_fn")


class SubmissionLoadError(Exception):
    pass


def load_submission(path: str | Path, module_name: str = "okc_submission_under_test") -> ModuleType:
    path = Path(path)
    if not path.is_file():
        raise SubmissionLoadError(f"{path}: no such file")
    # The judge's machine has none of this project: the file must stand alone (tag line, import whitelist).
    problems = contract_violations(path.read_text())
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
