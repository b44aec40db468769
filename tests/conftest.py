import os
import shutil
import tempfile
from pathlib import Path

import pytest

from generator import REPO_ROOT

# Extensions the tests build (tests/test_binding.py) go to a folder of their own, not the user's torch cache.
os.environ.setdefault("TORCH_EXTENSIONS_DIR", tempfile.mkdtemp(prefix="okc_test_extensions_"))


@pytest.fixture
def repo_copy(tmp_path) -> Path:
    """A scratch copy of the build inputs (templates/, kernels_src/, tables/) to break on purpose."""
    for folder in ("templates", "kernels_src", "tables"):
        shutil.copytree(REPO_ROOT / folder, tmp_path / folder, ignore=shutil.ignore_patterns("__pycache__"))
    (tmp_path / "dist").mkdir()
    return tmp_path
# ... and the Triton kernels they compile (tests/test_splitk_gemm.py) to a cache of their own.
os.environ.setdefault("TRITON_CACHE_DIR", tempfile.mkdtemp(prefix="okc_test_triton_"))
