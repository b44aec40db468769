import atexit
import os
import shutil
import tempfile
from pathlib import Path

import pytest

from generator import REPO_ROOT

# One intra-op thread: the tests' tensors are small, so a second one buys nothing, and on a busy 2-core machine its
# spin-waits cost several times the work (tests/test_compress.py: 31 s against 5.5 s). Set before torch loads.
os.environ.setdefault("OMP_NUM_THREADS", "1")


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


BUILD_INPUTS = ("templates", "kernels_src", "tables")


def _inputs(root: Path) -> dict:
    """Every file the build reads under root (templates/, kernels_src/, tables/), by path: its bytes. (The constants
    header in kernels_src/generated/ is one the build writes, never reads.)"""
    return {
        path.relative_to(root).as_posix(): path.read_bytes()
        for folder in BUILD_INPUTS
        for path in sorted((root / folder).rglob("*"))
        if path.is_file() and "__pycache__" not in path.parts and "generated" not in path.parts
    }


def made_once(tmp_path_factory, name: str, make) -> Path:
    """The file `name` holding make()'s text, made once a run: the run's xdist workers share it in the run's own
    folder (the first one to ask makes it, under a lock)."""
    from filelock import FileLock

    folder = tmp_path_factory.getbasetemp()
    if os.environ.get("PYTEST_XDIST_WORKER"):
        folder = folder.parent  # above each worker's own: the run's
    path = folder / name
    with FileLock(f"{path}.lock"):
        if not path.is_file():
            path.write_text(make())
    return path


@pytest.fixture(scope="session")
def built(tmp_path_factory) -> str:
    """dist/submission.py as the checkout's sources make it now: rendered once for the whole run."""
    from generator.render import render_submission

    return made_once(
        tmp_path_factory, "built_submission.py", lambda: render_submission(REPO_ROOT)
    ).read_text()


@pytest.fixture(scope="session")
def host_program(tmp_path_factory) -> str:
    """The output of tests/host_program.py's program (the CUDA side's arithmetic), built and run once a run (its
    tests are marked as needing nvcc)."""
    import host_program

    folder = tmp_path_factory.mktemp("host_program")
    return made_once(tmp_path_factory, "host_program.txt", lambda: host_program.run(folder)).read_text()


@pytest.fixture(scope="session")
def every_engine_file(tmp_path_factory) -> Path:
    """The checkout's file with every engine and what only the tools read (render_every_engine), as `sweep`, `ab`
    and `probe-gemm` load it."""
    from generator.render import render_every_engine

    return made_once(tmp_path_factory, "every_engine.py", lambda: render_every_engine(REPO_ROOT))


def routed_engines(root: Path = REPO_ROOT) -> list:
    """The engines the tables under root route to, in precedence order: those dist/submission.py holds."""
    from generator.problem import load_problem
    from generator.tables import load_tables
    from kernels_src.registry import routes

    problem = load_problem(root)
    tables = load_tables(problem, root)
    routed = {engine for *_, engine, _ in routes(problem.layers.values(), tables)}
    return [table.engine for table in tables if table.engine in routed]


@pytest.fixture
def one_render(built, monkeypatch):
    """The build's render_submission, answering with the run's one build for inputs byte for byte the checkout's
    (a repo_copy not yet broken), after the same black and pyflakes checks: the tests of what the command does
    around a render (--check, --out, another black) pay for no render of their own. Other inputs render."""
    from generator import render

    real, checkout = render.render_submission, _inputs(REPO_ROOT)

    def render_submission(root: Path = REPO_ROOT) -> str:
        if _inputs(Path(root)) != checkout:
            return real(root)
        render.check_black_version(render.build_tool("black"))
        render.build_tool("pyflakes")
        return built

    monkeypatch.setattr(render, "render_submission", render_submission)


@pytest.fixture
def repo_copy(tmp_path) -> Path:
    """A scratch copy of the build inputs (templates/, kernels_src/, tables/) to break on purpose."""
    for folder in BUILD_INPUTS:
        shutil.copytree(REPO_ROOT / folder, tmp_path / folder, ignore=shutil.ignore_patterns("__pycache__"))
    (tmp_path / "dist").mkdir()
    return tmp_path
