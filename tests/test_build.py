"""The build: the output contract of dist/submission.py, and one clear error for each kind of bad input."""

import ast
import re

import black
import pytest
import yaml
from click.testing import CliRunner

from generator import REPO_ROOT
from generator.cli import main
from generator.contract import TAG_LINE, contract_violations
from generator.problem import load_problem
from generator.render import BLACK_LINE_LENGTH, render_submission
from generator.tables import load_tables

DIST = REPO_ROOT / "dist" / "submission.py"


@pytest.fixture(scope="module")
def built() -> str:
    return render_submission(REPO_ROOT)


def _literal(text: str, name: str):
    for node in ast.parse(text).body:
        if isinstance(node, (ast.Assign, ast.AnnAssign)):
            target = node.targets[0] if isinstance(node, ast.Assign) else node.target
            if isinstance(target, ast.Name) and target.id == name:
                return ast.literal_eval(node.value)
    raise AssertionError(f"{name} not found")


def test_committed_file_is_what_the_sources_make(built):
    assert DIST.read_text() == built, "run `python -m generator build` and commit dist/submission.py"


def test_tag_line_and_contract(built):
    assert built.split("\n", 1)[0] == TAG_LINE
    assert contract_violations(built) == []
    compile(built, "submission.py", "exec")


def test_imports_are_whitelisted(built):
    modules = set()
    for node in ast.walk(ast.parse(built)):
        if isinstance(node, ast.Import):
            modules |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom):
            modules.add(node.module)
    assert modules <= {
        "typing",
        "torch",
        "triton",
        "triton.language",
        "torch.utils.cpp_extension",
        "triton.tools.tensor_descriptor",
    }


def test_contract_catches_forbidden_things():
    bad = TAG_LINE + "\nimport os\nfrom torch import load\nx = open('w')\n"
    messages = [message for _, message in contract_violations(bad)]
    assert any("import os" in m for m in messages)
    assert any("from torch import" in m for m in messages)
    assert any("open()" in m for m in messages)
    assert contract_violations("# okc: problem=other\n")[0][0] == 1


def test_black_clean_and_deterministic(built):
    assert black.format_str(built, mode=black.Mode(line_length=BLACK_LINE_LENGTH)) == built
    assert render_submission(REPO_ROOT) == built


def test_tables_round_trip(built):
    problem = load_problem()
    tables = load_tables(problem)
    for name, table in tables.items():
        assert _literal(built, name) == table.entries
    assert _literal(built, "CTABLE_DEFAULTS") == tables["CTABLE"].defaults
    layers = _literal(built, "LAYERS")
    assert {name: (spec["n"], spec["k"], spec["dtype"]) for name, spec in layers.items()} == {
        name: (layer.n, layer.k, layer.dtype) for name, layer in problem.layers.items()
    }


def test_cuda_src_has_line_markers_for_every_source(built):
    cuda = _literal(built, "CUDA_SRC")
    manifest = yaml.safe_load((REPO_ROOT / "kernels_src" / "sources.yaml").read_text())
    markers = re.findall(r'^#line 1 "(kernels_src/[^"]+)"$', cuda, flags=re.M)
    assert markers == [f"kernels_src/{name}" for name in manifest["cuda"]]
    # a line of a source sits at the line its marker promises
    gemv = (REPO_ROOT / "kernels_src" / "gemv.cuh").read_text().splitlines()
    lines = cuda.splitlines()
    start = lines.index('#line 1 "kernels_src/gemv.cuh"')
    target = next(i for i, line in enumerate(gemv) if "__global__" in line)
    assert lines[start + 1 + target] == gemv[target]


def test_docstring_states_the_routing(built):
    doc = ast.get_docstring(ast.parse(built))
    assert "router:" in doc and "gemv m=" in doc and "cublas m=" in doc


def _build(root, *args):
    return CliRunner().invoke(main, ["build", "--root", str(root), *args])


def test_check_passes_then_flags_a_stale_file(repo_copy):
    assert _build(repo_copy).exit_code == 0
    assert _build(repo_copy, "--check").exit_code == 0
    out = repo_copy / "dist" / "submission.py"
    out.write_text(out.read_text().replace("WORKSPACE_FLOATS = ", "WORKSPACE_FLOATS = 2 * "))
    result = _build(repo_copy, "--check")
    assert result.exit_code == 1
    assert "stale" in result.output and "WORKSPACE_FLOATS" in result.output


# A CTABLE of known content, so the breakages below do not depend on what the last sweep wrote.
KNOWN_CTABLE = """# CTABLE for the tests
defaults:
  plain: [8, 1, 2, 0, 1, 0]
  dual: null
entries:
  qkv_gate:
    1: [16, 1, 2, 0, 1, 0]
    8: [16, 1, 1, 1, 1, 0]
  router:
    8: [16, 8, 1, 0, 1, 1]
"""


KNOWN_TTABLE = """# TTABLE for the tests
entries: {}
"""


def _edit(path, old, new):
    text = path.read_text()
    assert old in text, old
    path.write_text(text.replace(old, new, 1))


def _line_of(path, needle):
    return next(i for i, line in enumerate(path.read_text().splitlines(), 1) if needle in line)


BREAKAGES = {
    "malformed yaml": (
        "tables/ctable.yaml",
        "entries:",
        "entries: [unclosed",
        r"tables/ctable\.yaml:\d+: malformed YAML",
    ),
    "wrong arity": (
        "tables/ctable.yaml",
        "    1: [16, 1, 2, 0, 1, 0]",
        "    1: [16, 1, 2]",
        r"tables/ctable\.yaml:\d+: CTABLE\[qkv_gate, 1\]: expected 6 values",
    ),
    "wrong type": (
        "tables/ctable.yaml",
        "    1: [16, 1, 2, 0, 1, 0]",
        "    1: [16, one, 2, 0, 1, 0]",
        r"tables/ctable\.yaml:\d+: CTABLE\[qkv_gate, 1\]: S must be an integer",
    ),
    "config the kernel cannot run": (
        "tables/ctable.yaml",
        "    1: [16, 1, 2, 0, 1, 0]",
        "    1: [16, 1, 8, 1, 4, 0]",
        r"tables/ctable\.yaml:\d+: CTABLE\[qkv_gate, 1\]: .* data registers",
    ),
    "unknown layer": (
        "tables/ctable.yaml",
        "  qkv_gate:",
        "  qkv_gat:",
        r"tables/ctable\.yaml:\d+: unknown layer 'qkv_gat'",
    ),
    "m out of range": (
        "tables/ctable.yaml",
        "    1: [16, 1, 2, 0, 1, 0]",
        "    64: [16, 1, 2, 0, 1, 0]",
        r"tables/ctable\.yaml:\d+: qkv_gate: m must be an integer with 1 <= m <= 32",
    ),
    "TMA ring over shared memory": (
        "tables/ttable.yaml",
        "entries: {}",
        "entries:\n  router:\n    32: [4, 12, 0]",
        r"tables/ttable\.yaml:\d+: TTABLE\[router, 32\]: STAGES=12 at m=32 \(dual\) needs \d+ bytes of shared memory",
    ),
    "TMA split past the K tiles": (
        "tables/ttable.yaml",
        "entries: {}",
        "entries:\n  o:\n    8: [17, 4, 0]",
        r"tables/ttable\.yaml:\d+: TTABLE\[o, 8\]: S=17 must be 1\.\.16",
    ),
    "engine without a kernel": (
        "tables/table.yaml",
        "entries: {}",
        "entries:\n  o:\n    128: [64, 128, 128, 2, 4, 4, 1, 0]",
        r"tables/table\.yaml:\d+: TABLE has entries but no engine implements it yet",
    ),
    "compressed router": (
        "tables/ztable.yaml",
        "entries:\n",
        "entries:\n  router:\n    8: [4, 1, 1, 0, 1, 0]\n",
        r"tables/ztable\.yaml:\d+: ZTABLE\[router, 8\]: the router's fp32 weights are never compressed",
    ),
    "missing source file": (
        "kernels_src/sources.yaml",
        "launch.cu]",
        "launch.cu, missing.cuh]",
        r"kernels_src/missing\.cuh: source file not found",
    ),
    "undefined template variable": (
        "templates/submission.py.j2",
        "WARMUP_M = {{ warmup_m }}",
        "WARMUP_M = {{ warmup_ms }}",
        r"templates/submission\.py\.j2:\d+: template: 'warmup_ms' is undefined",
    ),
    "source breaks the raw string": (
        "kernels_src/gemv.cuh",
        "#pragma once",
        "#pragma once\n// ''' oops",
        r"kernels_src/gemv\.cuh:\d+: contains '''",
    ),
    "source ends in a backslash": (
        "kernels_src/launch.cu",
        None,
        "#define CONTINUED \\\n",
        r"kernels_src/launch\.cu:\d+: ends in a backslash",
    ),
    "include of a later file": (
        "kernels_src/common.cuh",
        "#pragma once",
        '#pragma once\n#include "launch.cu"',
        r'kernels_src/common\.cuh:5: #include "launch.cu" comes before launch.cu',
    ),
    "python name the template lacks": (
        "kernels_src/runtime.py",
        "    ztable = ZTABLE if state is None",
        "    ztable = NO_SUCH_TABLE if state is None",
        r"kernels_src/runtime\.py:\d+: undefined name 'NO_SUCH_TABLE'",
    ),
    "import outside the whitelist": (
        "kernels_src/runtime.py",
        "import torch\n",
        "import torch\nimport os\n",
        r"kernels_src/runtime\.py:4: import not allowed",
    ),
}


@pytest.mark.parametrize("kind", sorted(BREAKAGES))
def test_bad_input_is_one_clear_line_exit_2_and_dist_untouched(repo_copy, kind):
    file, old, new, pattern = BREAKAGES[kind]
    (repo_copy / "tables" / "ctable.yaml").write_text(KNOWN_CTABLE)
    (repo_copy / "tables" / "ttable.yaml").write_text(KNOWN_TTABLE)
    path = repo_copy / file
    if old is None:
        path.write_text(path.read_text() + new)
    else:
        _edit(path, old, new)
    out = repo_copy / "dist" / "submission.py"
    out.write_text("previous build\n")
    result = _build(repo_copy)
    assert result.exit_code == 2, result.output
    message = result.output.strip()
    assert len(message.splitlines()) == 1, message
    assert re.search(pattern, message), message
    assert out.read_text() == "previous build\n"
    assert not list(out.parent.glob(".*.tmp"))


def test_error_line_numbers_point_at_the_entry(repo_copy):
    path = repo_copy / "tables" / "ctable.yaml"
    path.write_text(KNOWN_CTABLE)
    _edit(path, "    8: [16, 1, 1, 1, 1, 0]", "    8: [16, 1, 1, 1]")
    result = _build(repo_copy)
    assert f"tables/ctable.yaml:{_line_of(path, '    8: [16, 1, 1, 1]')}:" in result.output


def test_dispatch_reads_the_built_file():
    result = CliRunner().invoke(main, ["dispatch", str(DIST)])
    assert result.exit_code == 0, result.output
    rows = [line.split() for line in result.output.splitlines()[1:]]
    assert len(rows) == 5 * 10
    router_m1 = next(r for r in rows if r[:2] == ["router", "1"])
    assert router_m1[3] == "gemv"
    unpooler = load_problem().layers["unpooler"]
    assert next(r for r in rows if r[:2] == ["unpooler", "8"])[2] == str(unpooler.n_for(8))
    assert next(r for r in rows if r[:2] == ["qkv_gate", "256"])[3] == "cublas"


def test_dispatch_names_each_engines_fields():
    result = CliRunner().invoke(main, ["dispatch", str(DIST)])
    assert result.exit_code == 0, result.output
    rows = {tuple(line.split()[:2]): line.split()[3:] for line in result.output.splitlines()[1:]}
    tables = load_tables(load_problem())
    ttable, ztable = tables["TTABLE"].entries, tables["ZTABLE"].entries
    for (layer, m), cfg in ttable.items():
        if ztable.get((layer, m)) is not None:
            continue  # ZTABLE takes precedence: the compressed GEMV serves this shape
        if cfg is not None and (layer, str(m)) in rows:
            assert rows[(layer, str(m))] == ["tma", f"S={cfg[0]}", f"STAGES={cfg[1]}", f"C={cfg[2]}"]
    assert rows[("router", "1")][0] == "gemv" and rows[("router", "1")][1].startswith("NW=")
