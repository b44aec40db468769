"""What a user is told is true: no pass without kernels, no build that silently lacks a kernel, and each bad input
(the tools, the template, the bytes of a file, the names of problem.yaml and tables/, --root, a wrong call) is one
line `file:line: what`, exit 2 (1 for a stale --check), with dist/ untouched."""

import ast
import re
import shutil
import subprocess
import sys

import black
import pytest
import yaml
from click.testing import CliRunner

from generator import REPO_ROOT
from generator.candidates import candidates
from generator.cli import main
from generator.compile import python_headers
from generator.render import BLACK_VERSION, formatted_by
from generator.engines import BY_NAME, ENGINES
from generator.launch_table import launch_table
from generator.sources import load_sources
from generator.tables import field_header_lines

NVCC = shutil.which("nvcc")
CXX = shutil.which("c++")
needs_nvcc = pytest.mark.skipif(NVCC is None, reason="needs the local nvcc")
needs_cxx = pytest.mark.skipif(CXX is None, reason="needs a host C++ compiler")
PREVIOUS = "previous build\n"


def _edit(path, old, new):
    text = path.read_text()
    assert old in text, old
    path.write_text(text.replace(old, new, 1))


def _insert_bytes(path, after: str, data: bytes):
    raw = path.read_bytes()
    at = raw.index(after.encode()) + len(after)
    path.write_bytes(raw[:at] + data + raw[at:])


def _build(root, *args, code=2):
    """`build --root root ...` on a dist/ holding a previous build; its one line (stderr and stdout together)."""
    out = root / "dist" / "submission.py"
    out.write_text(PREVIOUS)
    result = CliRunner().invoke(main, ["build", "--root", str(root), *args])
    assert result.exit_code == code, result.output
    lines = result.output.strip().splitlines()
    assert len(lines) == 1, result.output
    assert out.read_text() == PREVIOUS and not list(out.parent.glob(".*.tmp"))
    return lines[0]


# ---- no false pass


def test_verify_on_the_cpu_says_no_kernel_ran():
    """Off the GPU prepare() routes every shape to torch: a verify there must not read as the kernels verified."""
    reference = REPO_ROOT / "tests" / "fixtures" / "reference_submission.py"
    args = ["verify", str(reference), "--device", "cpu", "--shrink", "32", "--dist", "normal", "--no-graphs"]
    result = CliRunner().invoke(main, args)
    assert result.exit_code == 0, result.output
    summary = result.output.strip().splitlines()[-1]
    assert summary.startswith("50 passed, 0 failed on cpu: no CUDA kernel of the file ran"), summary


# ---- no silent broken build


@pytest.mark.parametrize(
    "dropped, engine",
    [
        ("compressed_ring.cuh", "compressed_ring"),
        ("mma_gemv.cuh", "mma_gemv"),
        ("persistent_gemm.cuh", "persistent_gemm"),  # no table routes it: the tools build its kernels
    ],
)
def test_a_kernel_source_an_engine_needs_cannot_be_dropped(repo_copy, dropped, engine):
    manifest = repo_copy / "kernels_src" / "sources.yaml"
    listed = yaml.safe_load(manifest.read_text())["cuda"]
    _edit(manifest, f"cuda: [{', '.join(listed)}]", f"cuda: [{', '.join(f for f in listed if f != dropped)}]")
    line = next(i for i, text in enumerate(manifest.read_text().splitlines(), 1) if text.startswith("cuda:"))
    for args in ((), ("--check",)):
        message = _build(repo_copy, *args)
        assert message.startswith(
            f"error: kernels_src/sources.yaml:{line}: the {engine} engine's launcher"
        ), message
        assert f"({dropped} does: list it)" in message


@pytest.mark.parametrize("dropped", ["compressed_gemv.cuh", "tma_gemv.cuh"])
def test_a_kernel_source_another_includes_cannot_be_dropped(repo_copy, dropped):
    includer = (repo_copy / "kernels_src" / "compressed_ring.cuh").read_text().splitlines()
    line = includer.index(f'#include "{dropped}"') + 1
    manifest = repo_copy / "kernels_src" / "sources.yaml"
    listed = yaml.safe_load(manifest.read_text())["cuda"]
    _edit(manifest, f"cuda: [{', '.join(listed)}]", f"cuda: [{', '.join(f for f in listed if f != dropped)}]")
    message = _build(repo_copy)
    assert message == (
        f'error: kernels_src/compressed_ring.cuh:{line}: #include "{dropped}" comes before {dropped} in sources.yaml'
    ), message


@pytest.fixture
def render_skipped(built, monkeypatch):
    """build's render answering with the checkout's build: the tests of what the summary line says pay for no
    render."""
    from generator import render

    monkeypatch.setattr(render, "render_submission", lambda root: built)


BROKEN = 'static_assert(broken, "an error only the compiler finds");'  # a namespace's assertion always ships


@needs_nvcc
def test_a_cuda_error_fails_the_build_at_its_line(repo_copy, monkeypatch):
    """The render takes the source; the compile of what it renders (CUDA_SRC with LAUNCH_TABLE) refuses it."""
    which = shutil.which  # nvcc alone: the host compiler has nothing to say here
    monkeypatch.setattr(shutil, "which", lambda name, *args, **kw: None if name == "c++" else which(name))
    cuh = repo_copy / "kernels_src" / "mma_gemv.cuh"
    _edit(cuh, "namespace okc {", f"namespace okc {{\n{BROKEN}")
    line = cuh.read_text().splitlines().index(BROKEN) + 1
    message = _build(repo_copy)
    assert message.startswith(f"error: kernels_src/mma_gemv.cuh:{line}: ") and message.endswith(
        "(the check of CUDA_SRC and BINDING_SRC; --no-compilers skips it)"
    )


@pytest.mark.parametrize(
    "hidden, says",
    [
        (("nvcc",), "syntax checked: BINDING_SRC by c++; skipped for CUDA_SRC: no nvcc on PATH"),
        (("nvcc", "c++"), "syntax check skipped: no nvcc on PATH, no c++ on PATH"),
    ],
)
def test_a_build_without_nvcc_says_its_summary_skipped_the_check(
    repo_copy, render_skipped, monkeypatch, hidden, says
):
    """Without nvcc a CUDA error cannot be found before the GPU: the build passes, and says so (the compilers it
    has are handed the file's C++: test_a_cuda_error_fails_the_build_at_its_line runs them)."""
    from generator import compile as compilers

    which, given = shutil.which, []
    monkeypatch.setattr(shutil, "which", lambda name, *args, **kw: None if name in hidden else which(name))
    monkeypatch.setattr(compilers, "syntax_check", lambda cuda, binding, *found: given.append(found))
    if "c++" not in hidden and (CXX is None or python_headers() is None):
        pytest.skip("needs a host C++ compiler and Python's headers")
    out = repo_copy / "dist" / "submission.py"
    runs = [([], f"wrote {out} (", says)]
    if "c++" in hidden:  # (the rest without a compiler: quick)
        runs += [
            (["--check"], f"{out} and the files it derives are up to date; ", says),
            (["--no-compilers"], f"wrote {out} (", "syntax check skipped (--no-compilers)"),
        ]
    for args, summary, ends in runs:
        result = CliRunner().invoke(main, ["build", "--root", str(repo_copy), *args])
        assert result.exit_code == 0, result.output
        assert result.output.startswith(summary) and result.output.strip().endswith(ends), result.output
    assert given == ([] if "c++" in hidden else [(None, which("c++"))])


@needs_cxx
def test_a_binding_syntax_error_fails_the_build_at_its_line(repo_copy, monkeypatch, built):
    """The host compiler on the file's BINDING_SRC, whose #line names binding.cpp: an error at the shim's end is
    its last line plus one. (The render inlines the source line for line: test_a_cuda_error_fails_... renders.)
    """
    from generator import render

    which = shutil.which  # the host compiler alone: nvcc has nothing to say here
    monkeypatch.setattr(shutil, "which", lambda name, *args, **kw: None if name == "nvcc" else which(name))
    line = len((REPO_ROOT / "kernels_src" / "binding.cpp").read_text().splitlines()) + 1
    binding_end = built.rindex('"""', 0, built.index("\nLAUNCH_TABLE = "))
    broken = built[:binding_end] + "int broken = ;\n" + built[binding_end:]
    monkeypatch.setattr(render, "render_submission", lambda root: broken)
    assert _build(repo_copy).startswith(f"error: kernels_src/binding.cpp:{line}: ")


@needs_nvcc
def test_an_error_in_the_launch_table_points_at_it_not_past_the_last_cuh():
    """The launch table opens with a #line directive of its own: nvcc names its lines, not the last .cuh's."""
    from generator.compile import syntax_check

    table = launch_table([])
    marker = table.split("\n", 1)[0]
    assert marker.startswith("#line 1 ") and "launch table" in marker
    line = len(table.splitlines())
    error = syntax_check(load_sources().cuda + table + "int broken(;\n", "", NVCC, None)
    shown = marker.split('"')[1]
    assert error is not None and error.startswith(f"{shown}:{line}: "), error


@needs_nvcc
def test_compile_names_the_first_cuda_error_in_one_line(repo_copy):
    cuh = repo_copy / "kernels_src" / "tma_gemv.cuh"
    _edit(cuh, "namespace okc {", "namespace okc {\nint broken = ;")
    line = cuh.read_text().splitlines().index("int broken = ;") + 1
    result = CliRunner().invoke(main, ["compile", "--root", str(repo_copy)])
    assert result.exit_code == 2, result.output
    lines = [line for line in result.output.strip().splitlines() if not line.startswith("compiling ")]
    assert len(lines) == 1 and lines[0].startswith(f"error: kernels_src/tma_gemv.cuh:{line}: "), result.output


# ---- black


def test_pyproject_pins_the_black_the_build_checks_for():
    assert f'"black=={BLACK_VERSION}"' in (REPO_ROOT / "pyproject.toml").read_text()
    assert black.__version__ == BLACK_VERSION
    assert formatted_by((REPO_ROOT / "dist" / "submission.py").read_text()) == BLACK_VERSION


def test_another_black_is_named_not_called_a_stale_file(repo_copy, monkeypatch, one_render):
    assert CliRunner().invoke(main, ["build", "--root", str(repo_copy), "--no-compilers"]).exit_code == 0
    monkeypatch.setattr(black, "__version__", "24.10.0")
    result = CliRunner().invoke(main, ["build", "--check", "--root", str(repo_copy)])
    assert result.exit_code == 2 and len(result.output.strip().splitlines()) == 1, result.output
    assert f"formatted by black {BLACK_VERSION}, this machine has black 24.10.0" in result.output
    assert "pip install 'black==26.10.1'" in result.output and "commit" not in result.output
    pin = next(
        i
        for i, line in enumerate((REPO_ROOT / "pyproject.toml").read_text().splitlines(), 1)
        if '"black' in line
    )
    message = _build(repo_copy)
    assert message.startswith(f"error: pyproject.toml:{pin}: black 24.10.0 is installed"), message


@pytest.mark.parametrize("tool", ["black", "pyflakes"])
def test_a_missing_build_tool_is_one_line(repo_copy, monkeypatch, tool):
    monkeypatch.setitem(sys.modules, tool, None)  # import raises ImportError
    message = _build(repo_copy)
    assert re.match(
        rf"error: pyproject\.toml:\d+: {tool} is not installed: the build needs it", message
    ), message


# ---- one line, at the right place


def test_a_template_that_renders_invalid_python_names_its_line(repo_copy):
    template = repo_copy / "templates" / "submission.py.j2"
    _edit(template, "class Inputs(TypedDict):", "class Inputs(TypedDict)")
    line = template.read_text().splitlines().index("class Inputs(TypedDict)") + 1
    message = _build(repo_copy)
    assert message.startswith(f"error: templates/submission.py.j2:{line}: renders invalid Python"), message


@pytest.mark.parametrize(
    "file, after",
    [
        ("tables/mma_gemv.yaml", "entries:"),
        ("tables/problem.yaml", "problem: muse_bf16_proj"),
        ("kernels_src/sources.yaml", "cuda:"),
        ("kernels_src/hopper_ptx.cuh", "#pragma once"),
        ("kernels_src/packing.py", '"""'),
        ("templates/submission.py.j2", "# okc: problem={{ problem.name }}"),
    ],
)
def test_a_byte_that_is_not_utf8_is_one_line_at_its_line(repo_copy, file, after):
    path = repo_copy / file
    line = path.read_text()[: path.read_text().index(after)].count("\n") + 1
    _insert_bytes(path, after, b" \xe9")
    message = _build(repo_copy)
    assert re.match(
        rf"error: {re.escape(file)}:{line}: not UTF-8: byte 0xe9 at column \d+$", message
    ), message


def test_open_in_a_module_is_reported_at_the_module_line(repo_copy):
    module = repo_copy / "kernels_src" / "packing.py"
    _edit(module, "\ndef ", '\ndef read_config():\n    return open("config").read()\n\n\ndef ')
    line = module.read_text().splitlines().index('    return open("config").read()') + 1
    message = _build(repo_copy)
    assert message.startswith(f"error: kernels_src/packing.py:{line}: call to open() is not allowed"), message


@pytest.mark.parametrize(
    "module, after, debug, name",
    [
        (
            "kernels_src/tma_gemv.py",
            "    def rule(self, cfg, layer, m):",
            '        print("rule", cfg, m)',
            "print",
        ),
        (
            "kernels_src/packing.py",
            "\ndef ",
            "def trace(x):\n    torch.sys.stdout.write(str(x))\n\n",
            "stdout",
        ),
        (
            "kernels_src/registry.py",
            "\ndef ",
            "def trace(x):\n    torch._logging.trace_structured(x)\n\n",
            "_logging",
        ),
        ("kernels_src/cublas.py", "\ndef ", "show = print\n\n", "print"),
        (
            "kernels_src/splitk_gemm.py",
            "UPCAST: tl.constexpr):",
            '    tl.device_print("acc", acc)',
            "device_print",
        ),
    ],
)
def test_output_in_a_submission_module_is_refused_at_its_line(repo_copy, module, after, debug, name):
    """A debug print would run at every build (the generator calls the engines' rules) and in the judge's timed
    loop: the contract refuses any output but the one line runtime.py's say_refusal() prints."""
    path = repo_copy / module
    text = path.read_text()
    if after.startswith("\n"):  # before the module's first function
        text = text.replace(after, "\n" + debug + after[1:], 1)
    else:  # the first line of the body after `after`
        text = text.replace(after, after + "\n" + debug, 1)
    path.write_text(text)
    line = text[: text.index(debug.strip().splitlines()[-1])].count("\n") + 1
    message = _build(repo_copy)
    assert message == (
        f"error: {module}:{line}: {name}: no output at run time but the one line say_refusal() prints"
        " (kernels_src/runtime.py) (the submission contract: generator/contract.py)"
    ), message


def test_the_one_line_prepare_may_print_is_say_refusals_alone():
    from generator.contract import SAYS_ONE_LINE, contract_violations

    built = (REPO_ROOT / "dist" / "submission.py").read_text()
    names = [node.id for node in ast.walk(ast.parse(built)) if isinstance(node, ast.Name)]
    assert f"\ndef {SAYS_ONE_LINE}(" in built and names.count("print") == 1
    elsewhere = built.replace(f"def {SAYS_ONE_LINE}(", "def say_more(", 1)
    assert [message.split(":")[0] for _, message in contract_violations(elsewhere)] == ["print"]


def test_a_layer_misspelt_in_problem_yaml_is_blamed_on_problem_yaml(repo_copy):
    problem = repo_copy / "tables" / "problem.yaml"
    _edit(problem, "  qkv_gate: {", "  qkv_gat: {")
    line = next(i for i, text in enumerate(problem.read_text().splitlines(), 1) if "qkv_gat:" in text)
    message = _build(repo_copy)
    assert message.startswith(f"error: tables/problem.yaml:{line}: no layer 'qkv_gate', which"), message
    assert "is 'qkv_gat' misspelt?" in message


def test_a_changed_problem_name_is_blamed_on_problem_yaml(repo_copy):
    problem = repo_copy / "tables" / "problem.yaml"
    _edit(problem, "problem: muse_bf16_proj", "problem: muse_fp8_proj")
    line = next(
        i for i, text in enumerate(problem.read_text().splitlines(), 1) if text.startswith("problem:")
    )
    message = _build(repo_copy)
    assert message.startswith(f"error: tables/problem.yaml:{line}: problem must be muse_bf16_proj"), message


def test_a_table_no_engine_reads_is_refused(repo_copy):
    (repo_copy / "tables" / "bogus_gemv.yaml").write_text("entries: {}\n")
    assert _build(repo_copy).startswith("error: tables/bogus_gemv.yaml: no engine reads this table")


def test_a_yaml_tag_is_refused(repo_copy):
    (repo_copy / "tables" / "tma_gemv.yaml").write_text("entries: !!python/object:os.system {}\n")
    assert _build(repo_copy).startswith("error: tables/tma_gemv.yaml:1: a !!python/object:os.system value")


# ---- --root


def test_root_of_a_checkout_whose_engines_differ_is_refused(repo_copy):
    """The imported kernels_src checks the tables; another one's modules would be inlined: no mixed build."""
    module = repo_copy / "kernels_src" / "tma_gemm.py"
    lines = module.read_text().splitlines()
    module.write_text("\n".join(lines[:3] + ["# an edit"] + lines[3:]) + "\n")
    message = _build(repo_copy)
    assert message.startswith("error: kernels_src/tma_gemm.py:4: differs from "), message
    assert f"run the command inside {repo_copy}" in message


def test_root_of_another_checkout_with_its_own_generator_is_refused(repo_copy):
    shutil.copytree(
        REPO_ROOT / "generator", repo_copy / "generator", ignore=shutil.ignore_patterns("__pycache__")
    )
    (repo_copy / "generator" / "build.py").write_text("# another generator\n")
    assert _build(repo_copy).startswith("error: generator/build.py:1: differs from ")


@pytest.mark.parametrize("kind", ["missing", "a file", "empty"])
def test_a_root_that_is_not_a_checkout_is_one_line(tmp_path, kind):
    root = tmp_path / "root"
    if kind == "a file":
        root.write_text("")
    elif kind == "empty":
        root.mkdir()
    for command in ("build", "compile"):
        result = CliRunner().invoke(main, [command, "--root", str(root)])
        assert result.exit_code == 2 and len(result.output.strip().splitlines()) == 1, result.output
        assert result.output.startswith(f"error: --root {root}: ")


# ---- the command line itself


def test_a_broken_module_leaves_every_commands_help(repo_copy):
    """Inside a checkout whose kernels_src does not import, --help still helps; the command itself says where."""
    _edit(repo_copy / "kernels_src" / "registry.py", "def route(", "def route((")
    script = (
        "import sys\n"
        "from click.testing import CliRunner\n"
        "from generator.cli import main\n"
        "for name in sorted(main.commands):\n"
        "    result = CliRunner().invoke(main, [name, '--help'])\n"
        "    print(name, result.exit_code, result.output.startswith('Usage:'))\n"
        "result = CliRunner().invoke(main, ['dispatch'])\n"
        "print('dispatch-run', result.exit_code, result.output.strip())\n"
    )
    run = subprocess.run([sys.executable, "-c", script], cwd=repo_copy, capture_output=True, text=True)
    assert run.returncode == 0, run.stderr
    rows = [line.split(" ", 2) for line in run.stdout.strip().splitlines()]
    assert [row[0] for row in rows[:-1]] == sorted(main.commands)
    assert all(row[1:] == ["0", "True"] for row in rows[:-1]), run.stdout
    assert rows[-1][1] == "2" and re.match(
        r"error: kernels_src/registry\.py:\d+: invalid Python", rows[-1][2]
    )


@pytest.mark.parametrize(
    "args, says",
    [
        (["build", "--bogus"], "No such option '--bogus'"),
        (["biuld"], "No such command 'biuld'"),
        (["verify", "--seed", "x"], "'x' is not a valid integer"),
        (["ab"], "Missing argument 'LAUNCHES...'"),
        (["dispatch", "/"], "is a directory"),
        (["verify", "--shrink", "0"], "0 is not in the range x>=1"),
        (["sweep", "--reps", "0"], "0 is not in the range x>=1"),
    ],
)
def test_a_wrong_call_is_one_line_exit_2(args, says):
    result = CliRunner().invoke(main, args)
    assert result.exit_code == 2 and len(result.output.strip().splitlines()) == 1, result.output
    assert result.output.startswith("error: ") and says in result.output and "--help`)" in result.output


def test_a_stale_check_is_one_line_exit_1_at_the_first_changed_line(repo_copy, built, one_render):
    out = repo_copy / "dist" / "submission.py"
    out.write_text(built)
    text = out.read_text()
    line = text[: text.index("WORKSPACE_FLOATS = ")].count("\n") + 1
    out.write_text(text.replace("WORKSPACE_FLOATS = ", "WORKSPACE_FLOATS = 2 * ", 1))
    result = CliRunner().invoke(main, ["build", "--check", "--root", str(repo_copy), "--no-compilers"])
    assert result.exit_code == 1 and len(result.output.strip().splitlines()) == 1, result.output
    assert result.output.startswith(f"error: {out}:{line}: stale (it would read 'WORKSPACE_FLOATS = ")
    assert "adds 1 line, removes 1 line" in result.output and "commit the result" in result.output
    with_diff = CliRunner().invoke(
        main, ["build", "--check", "--diff", "--root", str(repo_copy), "--no-compilers"]
    )
    assert with_diff.exit_code == 1 and "+WORKSPACE_FLOATS = 9" in with_diff.output


def test_the_tests_leave_no_cache_folder_behind(tmp_path):
    """conftest.py's scratch caches go when the run ends (they were 4 MB a run)."""
    env = {
        k: v
        for k, v in __import__("os").environ.items()
        if k not in ("TORCH_EXTENSIONS_DIR", "TRITON_CACHE_DIR")
    }
    env["TMPDIR"] = str(tmp_path)
    run = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-q",
            "-p",
            "no:cacheprovider",
            "-n",
            "0",
            "tests/test_repository.py::test_no_diary_folder",
        ],
        cwd=REPO_ROOT,
        env=env,
        capture_output=True,
        text=True,
    )
    assert run.returncode == 0, run.stdout + run.stderr
    assert sorted(p.name for p in tmp_path.iterdir() if p.name.startswith("okc_test_")) == []


@pytest.mark.parametrize(
    "old, new, says",
    [
        (
            "  - packing.py ",
            "  - call.h ",
            r"kernels_src/sources\.yaml:\d+: call\.h: python: lists \.py modules",
        ),
        (
            "  - packing.py ",
            "  - compress.py\n  - packing.py ",
            r"kernels_src/sources\.yaml:\d+: compress\.py is listed twice in python:",
        ),
    ],
)
def test_a_source_list_that_would_inline_the_wrong_thing_is_refused(repo_copy, old, new, says):
    _edit(repo_copy / "kernels_src" / "sources.yaml", old, new)
    message = _build(repo_copy)
    assert re.match("error: " + says, message), message


@pytest.mark.parametrize(
    "entry, says",
    [
        ("2024-01-01: null", "a !!timestamp value is not allowed here"),
        ("8: !!binary aGVsbG8=", "a !!binary value is not allowed here"),
        ("8: !!set {a}", "a !!set value is not allowed here"),
    ],
)
def test_yaml_values_no_table_field_can_take_are_refused_at_their_line(repo_copy, entry, says):
    (repo_copy / "tables" / "tma_gemv.yaml").write_text(f"entries:\n  o:\n    {entry}\n")
    assert _build(repo_copy).startswith(f"error: tables/tma_gemv.yaml:3: {says}")


@pytest.mark.parametrize(
    "file, needle",
    [
        ("tables/tma_gemv.yaml", "entries:"),
        ("kernels_src/packing.py", '"""'),
        ("kernels_src/sources.yaml", "cuda:"),
    ],
)
def test_a_nul_byte_is_one_line_at_its_line(repo_copy, file, needle):
    path = repo_copy / file
    line = path.read_text()[: path.read_text().index(needle)].count("\n") + 1
    _insert_bytes(path, needle, b"\0")
    assert re.match(rf"error: {re.escape(file)}:{line}: ", _build(repo_copy))


@pytest.mark.parametrize(
    "file",
    ["tables/mma_gemv.yaml", "templates/submission.py.j2", "kernels_src/mma_gemv.cuh", "kernels_src/call.h"],
)
def test_a_symbolic_link_loop_is_named_as_one(repo_copy, file):
    path = repo_copy / file
    path.unlink()
    path.symlink_to(path.name)  # itself
    for args in ((), ("--check",)):
        assert _build(repo_copy, *args) == (
            f"error: {file}: cannot read: a symbolic link loop (following it never reaches a file)"
        )


def test_a_symbolic_link_to_nothing_is_named_as_one(repo_copy):
    path = repo_copy / "kernels_src" / "mma_gemv.cuh"
    path.unlink()
    path.symlink_to("gone.cuh")
    assert _build(repo_copy) == (
        "error: kernels_src/mma_gemv.cuh: cannot read: a symbolic link to gone.cuh, which does not exist"
    )


@pytest.mark.parametrize("file", ["kernels_src/mma_gemv.cuh", "kernels_src/binding.cpp"])
def test_a_nul_byte_in_a_cpp_source_is_refused_by_build_and_compile(repo_copy, file):
    """nvcc and the host compiler take a NUL with a warning at most: the file must not reach them."""
    path = repo_copy / file
    line = path.read_text()[: path.read_text().index("namespace")].count("\n") + 1
    _insert_bytes(path, "namespace", b"\0")
    expected = f"error: {file}:{line}: a NUL byte at column 10 (not text)"
    assert _build(repo_copy) == expected
    result = CliRunner().invoke(main, ["compile", "--root", str(repo_copy)])
    assert result.exit_code == 2 and result.output.strip() == expected, result.output


def test_an_emptied_cuda_source_is_named_not_its_first_user(repo_copy):
    (repo_copy / "kernels_src" / "common.cuh").write_text("#pragma once\n// emptied\n")
    for args in ((), ("--check",)):
        assert _build(repo_copy, *args) == (
            "error: kernels_src/common.cuh:1: no code in it: restore it, or drop it from kernels_src/sources.yaml"
        )


@pytest.mark.parametrize(
    "old, new, line, says",
    [
        ("\n};\n", "\n;\n", "struct Call {", "is not closed before line {end} closes the namespace"),
        ("\n}  // namespace okc", "\n", "namespace okc {", "is never closed in this file"),
    ],
)
def test_a_closing_brace_deleted_in_call_h_is_call_hs_line(repo_copy, old, new, line, says):
    """Not an error in the first file that uses Call: call.h's own line, also for compile, also without nvcc."""
    header = repo_copy / "kernels_src" / "call.h"
    _edit(header, old, new)
    lines = header.read_text().splitlines()
    end = next((i for i, text in enumerate(lines, 1) if text.startswith("}  // namespace okc")), None)
    at = lines.index(line) + 1
    expected = f"error: kernels_src/call.h:{at}: the `{{` opened here {says.format(end=end)}"
    assert _build(repo_copy, "--no-compilers") == expected
    result = CliRunner().invoke(main, ["compile", "--root", str(repo_copy)])
    assert result.exit_code == 2 and result.output.strip() == expected, result.output


def test_every_cpp_source_closes_what_it_opens_and_a_deleted_brace_is_found_in_its_file():
    """The check passes every source as it is, and finds each `}` that starts a line deleted, in that file: at
    the `{` it closed (the layout says which) in all but a few `} else {` cases, where it is a few lines off.
    """
    from generator.brackets import bracket_problem

    sources = [p for p in sorted((REPO_ROOT / "kernels_src").iterdir()) if p.suffix in (".cuh", ".h", ".cpp")]
    deleted = exact = 0
    for path in sources:
        lines = path.read_text().splitlines()
        assert bracket_problem("\n".join(lines)) is None, path
        stack, opened = [], {}
        for number, text in enumerate(
            lines, 1
        ):  # the `{` each line-leading `}` closes (the file is formatted)
            code = re.sub(r"//.*|\"(?:\\.|[^\"\\])*\"|'(?:\\.|[^'\\])*'", "", text)
            for char in code:
                if char == "{":
                    stack.append(number)
                elif char == "}":
                    closed = stack.pop()
                    if code.lstrip().startswith("}") and number not in opened:
                        opened[number] = closed
        for number, closed in opened.items():
            broken = lines.copy()
            broken[number - 1] = broken[number - 1].replace("}", "", 1)
            found = bracket_problem("\n".join(broken))
            assert found is not None, (path.name, number)
            deleted += 1
            exact += found[0] == closed
    assert deleted > 200 and exact >= 0.9 * deleted, (deleted, exact)


@pytest.mark.parametrize("engine", [engine.name for engine in ENGINES])
def test_a_deleted_field_block_is_named_by_headers_check_and_restored_by_headers(repo_copy, engine):
    path = repo_copy / "tables" / f"{engine}.yaml"
    original = path.read_text()
    block = "\n".join(field_header_lines(BY_NAME[engine])) + "\n"
    assert block in original
    path.write_text(original.replace(block, "", 1))
    line = original[: original.index(block)].count("\n") + 1
    result = CliRunner().invoke(main, ["headers", "--check", "--root", str(repo_copy)])
    assert result.exit_code == 1 and len(result.output.strip().splitlines()) == 1, result.output
    assert result.output.startswith(
        f"error: tables/{engine}.yaml:{line}: no field lines (they are rendered from"
    )
    assert (
        CliRunner().invoke(main, ["headers", "--root", str(repo_copy)]).output
        == f"rewrote: tables/{engine}.yaml\n"
    )
    assert path.read_text() == original


def test_headers_on_a_table_it_cannot_read_is_one_line(repo_copy):
    path = repo_copy / "tables" / "tma_gemv.yaml"
    path.unlink()
    path.symlink_to(path.name)
    for args in ([], ["--check"]):
        result = CliRunner().invoke(main, ["headers", "--root", str(repo_copy), *args])
        assert result.exit_code == 2 and result.output == (
            "error: tables/tma_gemv.yaml: cannot read: a symbolic link loop (following it never reaches a file)\n"
        ), result.output


@pytest.mark.parametrize(
    "file, old, new, says",
    [
        (
            "tables/splitk_gemm.yaml",
            "    256: {block_n: 64, block_m: 64, block_k: 128, splits: 8,",
            "    300: {block_n: 64, block_m: 64, block_k: 128, splits: 8,",
            "router: m must be an integer 33 <= m <= 256, got 300; 256 is the largest m the judge sends",
        ),
        (
            "tables/problem.yaml",
            "32, 128, 256]\n",
            "32, 128, 256, 300]\n",
            "bench_m: 300 is over 256, the largest m the",
        ),
        (
            "tables/problem.yaml",
            "64, 128, 256]\n",
            "64, 128, 256,\n  300]\n",
            "verify_m: 300 is over 256, the largest m",
        ),
    ],
)
def test_an_m_past_the_largest_the_judge_sends_is_refused_at_its_line(repo_copy, file, old, new, says):
    path = repo_copy / file
    _edit(path, old, new)
    line = next(i for i, text in enumerate(path.read_text().splitlines(), 1) if "300" in text)
    message = _build(repo_copy)
    assert message.startswith(f"error: {file}:{line}: {says}"), message
    assert message.endswith("(kernels_src/engine.py PLAN_MAX_M)"), message


def test_compression_of_the_router_alone_says_why_it_has_nothing_to_show():
    line = next(
        i
        for i, text in enumerate((REPO_ROOT / "tables" / "problem.yaml").read_text().splitlines(), 1)
        if text.startswith("  router:")
    )
    result = CliRunner().invoke(main, ["compression", "--layers", "router", "--layers", "o"])
    assert result.exit_code == 2 and result.output == (
        f"error: --layers router: tables/problem.yaml:{line} gives it float32 weights, which the 12-bit format"
        " never takes (their bf16 hi + lo split is already 32 bits); it serves the bf16 layers: qkv_gate, o,"
        " pooler, unpooler\n"
    ), result.output


def test_compression_prints_a_legend_of_exactly_its_columns():
    from generator.cli.build import compression_legend
    from generator.compression import format_report

    legend = compression_legend().splitlines()
    keys = [line[:10].strip() for line in legend if not line.startswith(" ")]
    assert " ".join(format_report([]).split()) == "matrix shape " + " ".join(keys)
    from generator.cli import app

    shrunk = app.load_problem_or_fail(8)  # the legend is the point, not the layer's size
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(app, "load_problem_or_fail", lambda: shrunk)
        result = CliRunner().invoke(main, ["compression", "--layers", "o", "--dist", "normal"])
    assert result.exit_code == 0 and result.output.endswith("\n".join(legend) + "\n"), result.output


@pytest.mark.parametrize("reduce", ["none", "semaphore"])
@pytest.mark.parametrize("splits", [-1, 0])
def test_splits_out_of_range_is_named_as_such_whatever_the_reduce(splits, reduce):
    """The range first: with reduce none, splits=-1 was called a pairing error (none exactly when splits = 1)."""
    from generator.problem import load_problem

    problem = load_problem()
    engines = [engine for engine in ENGINES if {"splits", "reduce"} <= set(engine.fields)]
    assert len(engines) >= 5
    for engine in engines:
        layer = next(layer for layer in problem.layers.values() if candidates(engine, layer, engine.m_min))
        cfg = candidates(engine, layer, engine.m_min)[0]._replace(splits=splits, reduce=reduce)
        error = engine.config_error(cfg, layer, engine.m_min)
        assert error.startswith(f"splits={splits} "), (engine.name, error)
        assert "must be 1.." in error or "is not one of" in error, (engine.name, error)


def test_splits_minus_one_with_reduce_none_is_refused_at_its_table_line(repo_copy):
    table = repo_copy / "tables" / "tma_gemv.yaml"
    entry = "{splits: 1, stages: 16, tile: half, reduce: none}"
    _edit(table, entry, "{splits: -1, stages: 16, tile: full, reduce: none}")
    line = (
        table.read_text()
        .splitlines()
        .index(next(text for text in table.read_text().splitlines() if "splits: -1" in text))
    )
    message = _build(repo_copy)
    assert re.match(
        rf"error: tables/tma_gemv\.yaml:{line + 1}: tma_gemv\[\w+, \d+\]: splits=-1 must be 1\.\.", message
    )


@pytest.fixture(scope="module")
def prepared_on_the_cpu():
    """dist/submission.py prepared off the GPU (every shape on its fallback GEMM), on the local judge's weights."""
    import torch

    from generator.judge.loader import load_submission
    from generator.judge.weights import make_weights
    from generator.problem import load_problem

    module = load_submission(REPO_ROOT / "dist" / "submission.py", module_name="x_checks_submission")
    with torch.no_grad():
        return module, module.prepare(make_weights(load_problem(), "normal", 0, "cpu"))


@pytest.mark.parametrize("layer, k", [("o", 1024), ("router", 8192)])
@pytest.mark.parametrize(
    "make, got",
    [
        (lambda t, k: t.randn(8, k).half(), "a [8, {k}] torch.float16 tensor on cpu"),
        (lambda t, k: t.randn(8, k), "a [8, {k}] torch.float32 tensor on cpu"),
        (lambda t, k: t.randn(300, k).half(), "a [300, {k}] torch.float16 tensor on cpu"),  # past the plans
        (lambda t, k: t.randn(2, 8, k).bfloat16(), "a [2, 8, {k}] torch.bfloat16 tensor on cpu"),
        (lambda t, k: t.randn(8, k + 64).bfloat16(), "a [8, {k_64}] torch.bfloat16 tensor on cpu"),
        (lambda t, k: t.randn(k).bfloat16(), "a [{k}] torch.bfloat16 tensor on cpu"),
        (lambda t, k: [[0.0] * k] * 8, "a list"),
    ],
)
def test_kernel_fn_given_an_x_it_cannot_serve_says_what_it_takes(prepared_on_the_cpu, layer, k, make, got):
    """One ValueError naming the x it takes, not torch's words from the fallback GEMM (`expected m1 and m2 to have
    the same dtype`); the router's CPU GEMM, which upcasts, refuses what the GPU's refuses."""
    import torch

    module, state = prepared_on_the_cpu
    x = make(torch, k)
    data = {"x": x, "config": {"m": 8, "n": 256 if layer == "router" else 8192, "k": k, "layer": layer}}
    with pytest.raises(ValueError) as refused:
        module.kernel_fn(data, state)
    expected = f"kernel_fn: {layer} takes x as a [m, {k}] torch.bfloat16 tensor on cpu, got "
    assert str(refused.value) == expected + got.format(k=k, k_64=k + 64)
    right = torch.randn(8, k).bfloat16()
    assert module.kernel_fn({"x": right, "config": data["config"]}, state).shape == (8, data["config"]["n"])


def test_an_x_on_another_device_is_named_so(prepared_on_the_cpu):
    """(Off the GPU no GEMM fails on a device mismatch: the message for one, on a meta tensor.)"""
    import torch

    module, state = prepared_on_the_cpu
    x = torch.empty(8, 1024, dtype=torch.bfloat16, device="meta")
    assert str(module.x_error(x, "o", state)) == (
        "kernel_fn: o takes x as a [m, 1024] torch.bfloat16 tensor on cpu, got a [8, 1024] torch.bfloat16 tensor on meta"
    )
    assert module.x_error(torch.zeros(8, 1024, dtype=torch.bfloat16), "o", state) is None
    assert str(module.x_error(x, "gate", state)).startswith(
        "kernel_fn: no layer 'gate' in this file (it has qkv_gate,"
    )


def test_a_submission_file_that_is_not_utf8_is_one_line(tmp_path):
    file = tmp_path / "sub.py"
    file.write_bytes(b"# okc: problem=muse_bf16_proj\nx = '\xff'\n")
    for command in (["dispatch", str(file)], ["verify", str(file), "--device", "cpu"]):
        result = CliRunner().invoke(main, command)
        assert result.exit_code == 2 and len(result.output.strip().splitlines()) == 1, result.output
        assert result.output.startswith(f"error: {file}:2: not UTF-8: byte 0xff")


def test_no_command_prints_the_help():
    result = CliRunner().invoke(main, [])
    assert result.exit_code == 0 and result.output.startswith("Usage: "), result.output
    assert "error" not in result.output.lower()
