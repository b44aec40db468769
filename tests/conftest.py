import atexit
import os
import shutil
import tempfile
from pathlib import Path

import pytest

from generator import REPO_ROOT


def _scratch_cache(variable: str, prefix: str) -> None:
    """A cache folder of the tests' own (unless the caller names one), removed when the run ends: the extensions
    tests/test_binding.py builds and the Triton kernels tests/test_splitk_gemm.py compiles stay out of the user's
    caches, and no folder is left behind."""
    if variable not in os.environ:
        path = tempfile.mkdtemp(prefix=prefix)
        os.environ[variable] = path
        atexit.register(shutil.rmtree, path, True)


_scratch_cache("TORCH_EXTENSIONS_DIR", "okc_test_extensions_")
_scratch_cache("TRITON_CACHE_DIR", "okc_test_triton_")


@pytest.fixture
def repo_copy(tmp_path) -> Path:
    """A scratch copy of the build inputs (templates/, kernels_src/, tables/) to break on purpose."""
    for folder in ("templates", "kernels_src", "tables"):
        shutil.copytree(REPO_ROOT / folder, tmp_path / folder, ignore=shutil.ignore_patterns("__pycache__"))
    (tmp_path / "dist").mkdir()
    return tmp_path
