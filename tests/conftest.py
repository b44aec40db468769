import shutil
from pathlib import Path

import pytest

from generator import REPO_ROOT


@pytest.fixture
def repo_copy(tmp_path) -> Path:
    """A scratch copy of the build inputs (templates/, kernels_src/, tables/) to break on purpose."""
    for folder in ("templates", "kernels_src", "tables"):
        shutil.copytree(REPO_ROOT / folder, tmp_path / folder, ignore=shutil.ignore_patterns("__pycache__"))
    (tmp_path / "dist").mkdir()
    return tmp_path
