"""The repository speaks of the product: no diary, no references to work periods, a README true to the tree."""

import re
import shutil
import subprocess

import pytest

from generator import REPO_ROOT
from generator.engines import ENGINES

WORK_PERIOD = re.compile(r"session ?[0-9]|/session[0-9]|call ?[0-9]+\)|call[0-9]+\.sh", re.IGNORECASE)


def tracked_files():
    if shutil.which("git") is None or not (REPO_ROOT / ".git").exists():
        pytest.skip("needs a git checkout")
    out = subprocess.run(
        ["git", "ls-files"], cwd=REPO_ROOT, capture_output=True, text=True, check=True
    ).stdout
    return out.splitlines()


def test_no_diary_folder():
    assert [path for path in tracked_files() if path.startswith("notes/")] == []


def test_no_file_names_a_work_period():
    hits = []
    for path in tracked_files():
        if path.endswith(".json") or path.endswith(".png"):
            continue  # measurements, not prose
        for number, line in enumerate((REPO_ROOT / path).read_text(errors="replace").splitlines(), 1):
            if WORK_PERIOD.search(line):
                hits.append(f"{path}:{number}: {line.strip()[:80]}")
    assert hits == [], "state the fact and its figure, and cite docs/ by topic:\n" + "\n".join(hits[:20])


def test_the_readme_gives_the_commands_ci_runs():
    """The set-up and test commands of .ci/run (pip's -q aside) are the README's."""
    readme = (REPO_ROOT / "README.md").read_text()
    ci = [line.split("  #")[0].strip() for line in (REPO_ROOT / ".ci" / "run").read_text().splitlines()]
    steps = [line for line in ci if re.match(r"(python3 -m venv|\.venv/bin/(pip|python -m pytest))", line)]
    assert len(steps) == 4, steps
    for step in steps:
        assert step in readme or step.replace(" -q", "", 1) in readme, step


def test_the_readme_links_what_exists():
    readme = (REPO_ROOT / "README.md").read_text()
    for target in re.findall(r"\]\(([^)]+)\)", readme):
        assert (REPO_ROOT / target).exists(), target
    for engine in ENGINES:
        assert (REPO_ROOT / "docs" / f"{engine.name.replace('_', '-')}.md").is_file(), engine.name


def test_the_readmes_derived_figures_are_the_sources():
    """The engine table (engines, m's served, kernel sources), the launch table's size, the judge's m lists, the tag
    line and a row for every command, as `headers --check` reads them (generator/readme.py)."""
    from click.testing import CliRunner

    from generator.cli import main

    result = CliRunner().invoke(main, ["headers", "--check"])
    assert result.exit_code == 0, result.output


def test_ci_and_the_edit_loop_compile_the_kernels():
    ci = (REPO_ROOT / ".ci" / "run").read_text()
    assert ci.index("pytest -q") < ci.index("-m generator compile") < ci.index("build --check")
    readme = (REPO_ROOT / "README.md").read_text()
    loop = readme[readme.index("## The edit loop") :]
    steps = ["-m generator build", "-m generator compile", "-m pytest -q", "git add -A && git commit"]
    assert [loop.index(step) for step in steps] == sorted(loop.index(step) for step in steps)


def test_headers_names_a_stale_readme_figure_and_rewrites_it(repo_copy):
    """A figure the source decides, stale in README.md: `headers --check` names its line (exit 1), `headers`
    rewrites it and the engine table's derived cells; an engine without its row is an error either way."""
    from click.testing import CliRunner

    from generator.cli import main

    fresh = (REPO_ROOT / "README.md").read_text()
    stale = re.sub(r"\d+ cases, ", "7 cases, ", fresh, count=1).replace(
        "| `tma_gemm` | m > 32, up to 256 |", "| `tma_gemm` | m > 8 |"
    )
    (repo_copy / "README.md").write_text(stale)
    line = stale[: stale.index("| `tma_gemm` | m > 8 |")].count("\n") + 1  # the first of the two
    run = lambda *args: CliRunner().invoke(main, ["headers", "--root", str(repo_copy), *args])  # noqa: E731
    result = run("--check")
    assert result.exit_code == 1 and f"README.md:{line}: stale (it would read" in result.output, result.output
    assert run().exit_code == 0 and (repo_copy / "README.md").read_text() == fresh
    assert run("--check").exit_code == 0
    (repo_copy / "README.md").write_text(re.sub(r"\| `splitk_gemm` \|.*\n", "", fresh))
    result = run("--check")
    assert (
        result.exit_code == 1 and "the engine table has no row for splitk_gemm" in result.output
    ), result.output


def test_the_checklist_for_a_new_engine_names_its_places_in_order():
    from generator.candidates import CANDIDATES

    readme = (REPO_ROOT / "README.md").read_text()
    checklist = readme[readme.index("## Adding an engine") : readme.index("## Everyday commands")]
    places = [
        "kernels_src/<engine>.py",
        "generator/candidates.py",
        "kernels_src/sources.yaml",
        "tables/<engine>.yaml",
    ]
    assert [checklist.index(place) for place in places] == sorted(checklist.index(place) for place in places)
    assert "`CANDIDATES`" in checklist and CANDIDATES  # where an engine's sweep candidates go, by name


def test_the_readme_quotes_the_latest_geomean():
    results = (REPO_ROOT / "docs" / "results.md").read_text()
    readme = (REPO_ROOT / "README.md").read_text()
    quoted = re.search(r"geomean (\d\.\d+) x cuBLAS", readme).group(1)
    latest = re.search(
        r"Geometric mean speedup over cuBLAS \(cold\) on the 30 shapes: \*\*(\d\.\d+)\*\*", results
    )
    assert quoted == latest.group(1)


def test_a_test_needing_a_missing_tool_runs_on_ci(monkeypatch):
    """Off CI a test whose tool is missing skips; on CI (CI=true) it runs, so that a missing nvcc fails CI."""
    from tools import needs

    monkeypatch.delenv("CI", raising=False)
    assert needs("no-such-tool-okc").args[0] is True
    monkeypatch.setenv("CI", "true")
    assert needs("no-such-tool-okc").args[0] is False
    assert needs("sh").args[0] is False


def test_the_cuda_sources_are_clang_formatted():
    """The CUDA / C++ sources as the pinned clang-format (pyproject.toml's test extras, .clang-format) leaves them,
    none over 120 columns: .ci/run checks the format too."""
    import shutil
    import subprocess
    import sys
    from pathlib import Path

    from tools import on_ci

    tool = shutil.which("clang-format", path=str(Path(sys.executable).parent)) or shutil.which("clang-format")
    sources = sorted(
        str(p) for ext in ("*.cuh", "*.h", "*.cpp") for p in (REPO_ROOT / "kernels_src").glob(ext)
    ) + sorted(str(p) for p in (REPO_ROOT / "generator" / "probes").glob("*.cu"))
    for path in sources:
        assert all(len(line) <= 120 for line in Path(path).read_text().splitlines()), path
    if tool is None:
        if on_ci():
            pytest.fail("no clang-format: the test extras pin it")
        pytest.skip("needs clang-format (pip install '.[test]')")
    version = subprocess.run([tool, "--version"], capture_output=True, text=True).stdout
    assert "23.1.3" in version, version  # the pinned one: another version formats differently
    run = subprocess.run([tool, "--dry-run", "--Werror", *sources], capture_output=True, text=True)
    assert run.returncode == 0, run.stderr[-2000:]


def _python_function_sizes(path):
    """(lines, where) of every function and method of a Python module, decorators aside."""
    import ast

    tree = ast.parse(path.read_text())
    shown = path.relative_to(REPO_ROOT)
    return [
        (node.end_lineno - node.lineno + 1, f"{shown}:{node.lineno} {node.name}")
        for node in ast.walk(tree)
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))
    ]


def _cuda_function_sizes(path):
    """(lines, where) of every function body in a C++ / CUDA source, from the line of its opening brace to the line
    of its closing one (comments and string literals aside): a brace opens a function when the code before it
    ends in a parameter list, outside any other function."""
    text = re.sub(r"/\*.*?\*/", lambda m: "\n" * m.group(0).count("\n"), path.read_text(), flags=re.S)
    text = re.sub(r'//[^\n]*|"(\\.|[^"\\\n])*"', '""', text)
    shown, found, stack, head, line = path.relative_to(REPO_ROOT), [], [], "", 1
    for char in text:
        line += char == "\n"
        if char == "{":
            in_function = any(kind == "function" for kind, _, _ in stack)
            signature = re.search(
                r"(\w+)\s*\(([^;{}()]|\([^;{}()]*\))*\)\s*(const|noexcept)?\s*(->[^;{}]*)?$", head.strip()
            )
            opens = (
                not in_function
                and signature
                and not re.search(r"\b(struct|class|union|enum|namespace)\b|=\s*$|\]\s*\(", head)
            )
            stack.append(("function" if opens else "block", line, signature.group(1) if opens else ""))
            head = ""
        elif char == "}":
            kind, start, name = stack.pop() if stack else ("block", line, "")
            if kind == "function":
                found.append((line - start + 1, f"{shown}:{start} {name}"))
            head = ""
        elif char == ";":
            head = ""
        else:
            head += char
    return found


def test_no_function_is_over_60_lines():
    """Every Python function in generator/ and kernels_src/, and every function of the CUDA sources, reads as named
    phases of at most 60 lines; the scans find the functions they should."""
    sizes = []
    for path in sorted((REPO_ROOT / "generator").rglob("*.py")) + sorted(
        (REPO_ROOT / "kernels_src").glob("*.py")
    ):
        sizes += _python_function_sizes(path)
    cuda = [p for ext in ("*.cuh", "*.h", "*.cpp") for p in sorted((REPO_ROOT / "kernels_src").glob(ext))]
    for path in cuda + sorted((REPO_ROOT / "generator" / "probes").glob("*.cu")):
        sizes += _cuda_function_sizes(path)
    names = {where.split(" ")[-1] for _, where in sizes}
    expected = {
        "render_submission",
        "_splitk_gemm_kernel",
        "finish_tile",
        "launch_mma_gemv",
        "compressed_ring_kernel",
    }
    assert expected <= names
    assert [f"{lines} {where}" for lines, where in sorted(sizes, reverse=True) if lines > 60] == []


def _generator_imports() -> dict:
    """generator module -> the generator modules it imports (at its top level or inside a function)."""
    import ast

    modules = {}
    for path in sorted((REPO_ROOT / "generator").rglob("*.py")):
        parts = path.relative_to(REPO_ROOT).with_suffix("").parts
        modules[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    graph = {}
    for name, path in modules.items():
        found = set()
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.module and not node.level:
                found |= {node.module} | {f"{node.module}.{alias.name}" for alias in node.names}
            elif isinstance(node, ast.Import):
                found |= {alias.name for alias in node.names}
        graph[name] = sorted(found & set(modules) - {name})
    return graph


def test_no_generator_module_imports_one_that_imports_it_back():
    """No import circle (generator/contract.py and generator/sources.py once imported each other, one of them
    inside a function to dodge it): each module's imports reach back to it by no path."""
    graph = _generator_imports()
    assert "generator.contract" in graph["generator.sources"]  # the graph holds the edges it should
    for start in graph:
        reached, todo = set(), list(graph[start])
        while todo:
            module = todo.pop()
            if module not in reached:
                reached.add(module)
                todo += graph[module]
        assert start not in reached, f"{start} imports a module that imports it back"


def test_the_engines_python_is_mostly_code():
    """kernels_src/*.py ships in the file: docstrings and comments stay at most a quarter of its characters (each
    line stripped), the design and its figures living in docs/."""
    import ast
    import io
    import tokenize

    total = prose = 0
    for path in sorted((REPO_ROOT / "kernels_src").glob("*.py")):
        text = path.read_text()
        total += sum(len(line.strip()) for line in text.splitlines())
        for node in ast.walk(ast.parse(text)):
            if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef)) and ast.get_docstring(node):
                docstring = ast.get_source_segment(text, node.body[0])
                prose += sum(len(line.strip()) for line in docstring.splitlines())
        tokens = tokenize.generate_tokens(io.StringIO(text).readline)
        prose += sum(len(token.string) for token in tokens if token.type == tokenize.COMMENT)
    assert prose / total <= 0.25, f"kernels_src/*.py is {prose / total:.0%} prose: move the essays to docs/"
