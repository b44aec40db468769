"""The bad inputs a new user met last: an exception in an engine's rule, a broken generator/candidates.py, a stale
constants header under `compile`, arguments the H200 commands only checked after asking for a GPU, a verify whose
prepare() raised, the editor's configuration, the suite run from a subfolder, a file build reads or writes replaced
by a folder, an error in an engine no table routes, and verify on a file this checkout would not build. Each is one
line naming the file (and line) at fault, exit 2, with dist/ untouched; a failed verify exits 1 and its summary
says why; verify on a file not built here warns in one line, then checks it."""

import importlib.util
import re
import shutil
import subprocess
import sys
from types import SimpleNamespace

import pytest
import torch
import yaml
from click.testing import CliRunner

from tools import needs

from generator import REPO_ROOT
from generator.cli import main
from generator.render import UNSEALED, sealed
from generator.sources import CONSTANTS_HEADER
from conftest import routed_engines

PREVIOUS = "previous build\n"


def _one_line(result, code=2) -> str:
    lines = result.output.strip().splitlines()
    assert result.exit_code == code and len(lines) == 1, result.output
    return lines[0]


@pytest.mark.parametrize(
    "path, old, new, says",
    [
        (
            "kernels_src/tma_gemv.py",
            "not 1 <= cfg.splits <= k // TILE_K",
            "not 1 <= cfg.spilts <= k // TILE_K",
            r"^error: kernels_src/tma_gemv\.py:(\d+): AttributeError: .*'spilts'$",
        ),
        (
            "generator/candidates.py",
            "def candidates(",
            "def candidates((",
            r"^error: generator/candidates\.py:(\d+): invalid Python: ",
        ),
    ],
)
def test_an_error_in_the_python_a_user_edits_is_its_line(tmp_path, path, old, new, says):
    """A typo in an engine's rule, or a syntax error in the sweep's candidates, in a checkout of its own: build
    answers with the file and line, exit 2, and leaves dist/ as it was."""
    for folder in ("templates", "kernels_src", "tables", "generator"):
        shutil.copytree(REPO_ROOT / folder, tmp_path / folder, ignore=shutil.ignore_patterns("__pycache__"))
    (tmp_path / "dist").mkdir()
    (tmp_path / "dist" / "submission.py").write_text(PREVIOUS)
    source = tmp_path / path
    text = source.read_text()
    assert old in text
    source.write_text(text.replace(old, new, 1))
    run = subprocess.run(
        [sys.executable, "-m", "generator", "build", "--no-compilers"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
    )
    lines = (run.stdout + run.stderr).strip().splitlines()
    assert run.returncode == 2 and len(lines) == 1, run.stdout + run.stderr
    match = re.match(says, lines[0])
    assert match, lines[0]
    assert (
        new in source.read_text().splitlines()[int(match.group(1)) - 1]
    )  # the line it names holds the fault
    assert (tmp_path / "dist" / "submission.py").read_text() == PREVIOUS


@pytest.mark.parametrize("how", ["edited", "deleted"])
def test_compile_names_a_stale_constants_header(repo_copy, how):
    """nvcc reads the constants from the engines; an editor reads kernels_src/generated/constants.h: compile names
    it when it no longer holds what the engines declare."""
    header = repo_copy / "kernels_src" / CONSTANTS_HEADER
    if how == "edited":
        header.write_text(header.read_text().replace("kCallOperands = ", "kCallOperands = 1"))
    else:
        header.unlink()
    line = _one_line(CliRunner().invoke(main, ["compile", "--root", str(repo_copy)]))
    assert line.startswith(f"error: kernels_src/{CONSTANTS_HEADER}:") and "stale" in line, line


@pytest.mark.parametrize(
    "args, says",
    [
        (
            ["probe-gemm", "128", "4096", "4096", "--config", "192,128,4,132"],
            "rows=192 is not one of (128, 256)",
        ),
        (["probe-gemm", "128", "4000", "4096"], "needs N divisible by 128"),
        (["probe-gemm", "128", "4096", "4096", "--file", "missing.py"], "missing.py: no such file"),
        (["sweep", "--write", "no/such/folder/table.yaml"], "--write no/such/folder/table.yaml: no folder"),
        (["bench", "--json", "no/such/folder/bench.json"], "no folder no/such/folder"),
        (["verify", "missing.py"], "missing.py: no such file"),
        (["ab", "o:64:cublas", "--file", "missing.py"], "missing.py: no such file"),
    ],
)
def test_the_h200_commands_check_their_arguments_before_asking_for_a_gpu(monkeypatch, args, says):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    line = _one_line(CliRunner().invoke(main, args))
    assert says in line and "GPU" not in line, line


def test_a_verify_whose_prepare_raised_says_so_in_its_summary():
    """verify --device cpu --shrink 8 on the built file: prepare() refuses the shrunk weights; exit 1, and the
    summary line names what failed instead of reading "0 passed, 0 failed"."""
    result = CliRunner().invoke(main, ["verify", "--device", "cpu", "--shrink", "8"])
    summary = result.output.strip().splitlines()[-1]
    assert result.exit_code == 1
    assert (
        summary.startswith("0 passed, 0 failed") and "[normal] prepare raised ValueError" in summary
    ), summary


def test_clangd_takes_binding_cpp_as_host_cpp_and_the_cuda_sources_as_cuda():
    """.clangd's fragment for binding.cpp (without its If:, every CUDA source would lose its CUDA mode; without
    the fragment binding.cpp gets 21 errors), and compile_flags.txt, which gives every other file CUDA mode for
    sm_90a (tests/test_kernel_headers.py checks its flags against the build's)."""
    fragments = [f for f in yaml.safe_load_all((REPO_ROOT / ".clangd").read_text()) if f]
    host = [f for f in fragments if "If" in f]
    assert host, ".clangd: no fragment with an If: (its CompileFlags would apply to every file)"
    assert len(host) == len(fragments), ".clangd: a fragment without an If: applies to every file"
    pattern = host[0]["If"]["PathMatch"]
    assert re.fullmatch(pattern, "kernels_src/binding.cpp")
    assert not any(
        re.fullmatch(pattern, f"kernels_src/{p.name}") for p in (REPO_ROOT / "kernels_src").glob("*.cuh")
    )
    flags = host[0]["CompileFlags"]
    assert "-xcuda" in flags["Remove"] and "-xc++" in flags["Add"]
    assert (
        REPO_ROOT / "compile_flags.txt"
    ).is_file(), "compile_flags.txt: clangd needs it for the CUDA sources"


def test_the_suite_runs_from_a_subfolder():
    """`python -m pytest -q` in tables/ (no test file there) collects tests/, as from the root: the root
    conftest.py turns pytest's default (the folder it runs in) into pyproject.toml's testpaths."""
    spec = importlib.util.spec_from_file_location("root_conftest", REPO_ROOT / "conftest.py")
    root_conftest = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(root_conftest)

    def config(here, source=pytest.Config.ArgsSource.INVOCATION_DIR):
        return SimpleNamespace(
            invocation_params=SimpleNamespace(dir=here),
            rootpath=REPO_ROOT,
            args_source=source,
            args=[str(here)],
            getini=lambda name: ["tests"],
        )

    tables = config(REPO_ROOT / "tables")
    root_conftest.pytest_configure(tables)
    assert tables.args == [str(REPO_ROOT / "tests")]
    for untouched in (
        config(REPO_ROOT / "tests"),
        config(REPO_ROOT / "tables", pytest.Config.ArgsSource.ARGS),
    ):
        before = list(untouched.args)
        root_conftest.pytest_configure(untouched)
        assert untouched.args == before


@pytest.mark.parametrize(
    "path",
    [
        f"kernels_src/{CONSTANTS_HEADER}",  # a file build derives
        "README.md",  # one it derives figures of
        "tables/tma_gemv.yaml",  # ones it reads
        "kernels_src/ring.cuh",
        "templates/launch_table.cu.j2",
    ],
)
def test_a_file_build_reads_or_writes_replaced_by_a_folder_is_one_line(repo_copy, path):
    shutil.copy(REPO_ROOT / "README.md", repo_copy / "README.md")
    (repo_copy / "dist" / "submission.py").write_text(PREVIOUS)
    (repo_copy / path).unlink()
    (repo_copy / path).mkdir()
    for args in ((), ("--check",)):
        line = _one_line(
            CliRunner().invoke(main, ["build", "--root", str(repo_copy), "--no-compilers", *args])
        )
        assert line.startswith(f"error: {path}: ") and ("folder" in line or "directory" in line), line
    assert (repo_copy / "dist" / "submission.py").read_text() == PREVIOUS


@needs("nvcc")
def test_an_error_in_an_engine_no_table_routes_fails_compile_at_its_line(repo_copy):
    """The file holds only what the tables route, so a build of it never reads persistent_gemm.cuh; `compile`
    runs every engine's source through nvcc first, and names the line."""
    assert "persistent_gemm" not in [engine.name for engine in routed_engines(repo_copy)]
    cuh = repo_copy / "kernels_src" / "persistent_gemm.cuh"
    lines = cuh.read_text().splitlines()
    at = lines.index("namespace okc {") + 1
    cuh.write_text("\n".join(lines[:at] + ["int broken = ;"] + lines[at:]) + "\n")
    line = _one_line(CliRunner().invoke(main, ["compile", "--root", str(repo_copy)]))
    assert line.startswith(f"error: kernels_src/persistent_gemm.cuh:{at + 1}: "), line


@pytest.mark.parametrize(
    "change, says",
    [
        (lambda text: text.replace("stages=16,", "stages=14,", 1), "edited since build wrote it"),
        (  # a file built from other tables: another inputs digest, sealed as build seals it
            lambda text: sealed(
                re.sub(
                    r"(sha256:)[0-9a-f]{16}(, this file sha256:)[0-9a-f]{16}",
                    rf"\g<1>{'0' * 16}\g<2>{UNSEALED}",
                    text,
                )
            ),
            "built from other sources or tables than this checkout's",
        ),
    ],
)
def test_verify_on_a_file_this_checkout_would_not_build_warns_then_checks(tmp_path, change, says):
    file = tmp_path / "submission.py"
    file.write_text(change((REPO_ROOT / "dist" / "submission.py").read_text()))
    result = CliRunner().invoke(
        main, ["verify", str(file), "--device", "cpu", "--shrink", "8", "--dist", "normal"]
    )
    lines = result.output.strip().splitlines()
    assert lines[0].startswith(f"warning: {file}: {says}") and not lines[1].startswith(
        "warning"
    ), result.output
    assert lines[-1].startswith("0 passed, 0 failed") and result.exit_code == 1  # the checks ran after it
    clean = CliRunner().invoke(main, ["verify", "--device", "cpu", "--shrink", "8", "--dist", "normal"])
    assert "warning" not in clean.output  # the checkout's own file
