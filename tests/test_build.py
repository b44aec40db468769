"""The build: the output contract of dist/submission.py, and one clear error for each kind of bad input."""

import ast
import re

import click
import pytest
import yaml
from click.testing import CliRunner

from generator import REPO_ROOT
from generator.cli import main
from generator.contract import TAG_LINE, contract_violations
from generator.engines import ENGINES
from generator.judge.loader import load_submission
from generator.problem import load_problem
from generator.render import cpp_sources
from generator.tables import load_tables
from kernels_src.registry import variants
from conftest import routed_engines

DIST = REPO_ROOT / "dist" / "submission.py"


def _module(text: str, tmp_path, name: str):
    (tmp_path / f"{name}.py").write_text(text)
    return load_submission(tmp_path / f"{name}.py", module_name=name)


def _tables(tables) -> list:
    """Tables as engine names and their configs (a file's and the checkout's: the same values, other classes)."""
    return [(table.engine.name, table.entries, table.defaults) for table in tables]


def test_committed_file_is_what_the_sources_make(built):
    """Also the build's determinism: the committed file was rendered by another process (another hash seed)."""
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


def test_tables_round_trip(built, tmp_path):
    """The file's tables are the routed engines' tables/<engine>.yaml, in routing order, each config by its
    fields' names (stages=16, not a position)."""
    problem = load_problem()
    module = _module(built, tmp_path, "round_trip")
    routed = routed_engines()
    assert _tables(module.TABLES) == _tables(
        table for table in load_tables(problem) if table.engine in routed
    )
    assert re.search(r'TmaGemvConfig\(splits=\d+, stages=\d+, tile="\w+", reduce="\w+"\)', built)
    assert {name: (spec["n"], spec["k"], spec["dtype"]) for name, spec in module.LAYERS.items()} == {
        name: (layer.n, layer.k, layer.dtype) for name, layer in problem.layers.items()
    }


def test_every_line_of_cuda_src_sits_where_its_line_directives_say(built):
    """Each routed engine's source is there behind its #line 1, and every line of CUDA_SRC is the line of its
    source that the #line directives before it name, also past what the build left out (generator/cxx.py)."""
    cuda = cpp_sources(built)["CUDA_SRC"]
    manifest = yaml.safe_load((REPO_ROOT / "kernels_src" / "sources.yaml").read_text())
    markers = re.findall(r'^#line 1 "(kernels_src/[^"]+)"$', cuda, flags=re.M)
    unrouted = [e.launcher.split("::")[1] for e in ENGINES if e not in routed_engines() and e.launcher]
    kept = [
        name
        for name in manifest["cuda"]
        if not any(f"{launcher}(" in (REPO_ROOT / "kernels_src" / name).read_text() for launcher in unrouted)
    ]
    assert markers == [f"kernels_src/{name}" for name in kept]
    place, checked, gaps = None, 0, 0
    for line in cuda.splitlines():
        directive = re.match(r'^#line (\d+) "(kernels_src/[^"]+)"$', line)
        if directive:
            gaps += directive.group(1) != "1"
            place = (int(directive.group(1)), (REPO_ROOT / directive.group(2)).read_text().splitlines())
        elif place is not None:
            number, source = place
            assert line == source[number - 1] or line.endswith("(inlined above)"), (number, line)
            place, checked = (number + 1, source), checked + 1
    assert checked > 1500 and gaps > 0


TOP_DOWN = ("LAYERS", "prepare", "kernel_fn", "route", "TABLES", "KERNELS", "CUDA_SRC", "LAUNCH_TABLE")


def test_the_file_reads_top_down(built):
    """The docstring, the problem, prepare() and kernel_fn(), the engines and the routing, their tables and
    kernels, the C++ last (the launch table after the sources it instantiates)."""
    tree = ast.parse(built)
    order = {}
    for index, node in enumerate(tree.body):
        targets = getattr(node, "targets", [getattr(node, "target", None)])
        names = {getattr(node, "name", None)} | {t.id for t in targets if isinstance(t, ast.Name)}
        order.update({name: index for name in TOP_DOWN if name in names})
    assert sorted(order, key=order.get) == list(TOP_DOWN)
    assert ast.get_docstring(tree).startswith("Dense projections of Muse Spark Open")


def test_the_file_names_the_kernels_it_compiles_once_each(built, tmp_path):
    """KERNELS names the launch table's cases in order, the build's kernel list (computed once, at build time):
    LAUNCH_TABLE has a case for each, and the docstring says how many."""
    problem = load_problem()
    kernels = variants(problem.layers.values(), load_tables(problem))
    module = _module(built, tmp_path, "kernels_named")
    assert list(module.KERNELS) == [variant.case for variant in kernels]
    assert len(kernels) < 60  # the tables' routes, not every combination of template arguments
    cases = re.findall(r"^struct Case(\d+) \{", module.LAUNCH_TABLE, flags=re.M)
    assert cases == [str(number) for number in range(len(kernels))]
    distinct = len({(v.engine, v.kernel) for v in kernels})
    assert (
        f"KERNELS, the {len(kernels)} cases of LAUNCH_TABLE ({distinct} distinct kernels)" in module.__doc__
    )
    assert "def launch_table" not in built and "def _member" not in built  # no C++ written at run time


def test_the_built_file_imports_on_a_machine_without_a_gpu():
    module = load_submission(DIST)
    layers, tables = module.problem()
    assert [layer.name for layer in layers] == list(load_problem().layers)
    assert module.route(layers[0], 1, tables)[0].name in {table.engine.name for table in tables} | {"cublas"}


def _build(root, *args):
    return CliRunner().invoke(main, ["build", "--root", str(root), *args])


def test_check_passes_then_flags_a_stale_file(repo_copy, one_render):
    assert _build(repo_copy, "--no-compilers").exit_code == 0
    assert _build(repo_copy, "--check", "--no-compilers").exit_code == 0
    out = repo_copy / "dist" / "submission.py"
    out.write_text(out.read_text().replace("WORKSPACE_FLOATS = ", "WORKSPACE_FLOATS = 2 * ", 1))
    result = _build(repo_copy, "--check", "--no-compilers")
    assert result.exit_code == 1
    assert "stale" in result.output and "WORKSPACE_FLOATS" in result.output


# Tables of known content, so the breakages below do not depend on what the last sweep wrote.
KNOWN_MMA_GEMV = """# mma_gemv for the tests
defaults:
  plain: {warps: 8, splits: 1, unroll: 2, pipeline: batch, row_blocks: 1, reduce: none}
  dual: null
entries:
  qkv_gate:
    1: {warps: 16, splits: 1, unroll: 2, pipeline: batch, row_blocks: 1, reduce: none}
    8: {warps: 16, splits: 1, unroll: 1, pipeline: double, row_blocks: 1, reduce: none}
  router:
    8: {warps: 16, splits: 8, unroll: 1, pipeline: batch, row_blocks: 1, reduce: cluster}
"""
EMPTY = """# empty for the tests
entries: {}
"""
QKV_1 = "    1: {warps: 16, splits: 1, unroll: 2, pipeline: batch, row_blocks: 1, reduce: none}"


def _edit(path, old, new):
    text = path.read_text()
    assert old in text, old
    path.write_text(text.replace(old, new, 1))


def _line_of(path, needle):
    return next(i for i, line in enumerate(path.read_text().splitlines(), 1) if needle in line)


BREAKAGES = {
    "malformed yaml": (
        "tables/mma_gemv.yaml",
        "entries:",
        "entries: [unclosed",
        r"tables/mma_gemv\.yaml:5: malformed YAML: the flow sequence that starts here is not closed properly",
    ),
    "unknown field": (
        "tables/mma_gemv.yaml",
        QKV_1,
        "    1: {warps: 16, splits: 1, unroll: 2, pipeline: batch, row_blocks: 1, reduce: none, nw: 4}",
        r"tables/mma_gemv\.yaml:7: mma_gemv\[qkv_gate, 1\]: unknown field 'nw' \(the mma_gemv fields: warps,",
    ),
    "missing field": (
        "tables/mma_gemv.yaml",
        QKV_1,
        "    1: {warps: 16, splits: 1, unroll: 2, pipeline: batch, row_blocks: 1}",
        r"tables/mma_gemv\.yaml:7: mma_gemv\[qkv_gate, 1\]: missing field 'reduce'",
    ),
    "positional entry": (
        "tables/mma_gemv.yaml",
        QKV_1,
        "    1: [16, 1, 2, 0, 1, 0]",
        r"tables/mma_gemv\.yaml:7: mma_gemv\[qkv_gate, 1\]: expected a mapping \{warps, splits",
    ),
    "wrong type": (
        "tables/mma_gemv.yaml",
        QKV_1,
        QKV_1.replace("splits: 1", "splits: one"),
        r"tables/mma_gemv\.yaml:7: mma_gemv\[qkv_gate, 1\]: splits must be an integer",
    ),
    "unknown mode": (
        "tables/mma_gemv.yaml",
        QKV_1,
        QKV_1.replace("pipeline: batch", "pipeline: triple"),
        r"tables/mma_gemv\.yaml:7: mma_gemv\[qkv_gate, 1\]: pipeline=triple is not one of batch, double",
    ),
    "config the kernel cannot run": (
        "tables/mma_gemv.yaml",
        QKV_1,
        "    1: {warps: 16, splits: 1, unroll: 8, pipeline: double, row_blocks: 4, reduce: none}",
        r"tables/mma_gemv\.yaml:7: mma_gemv\[qkv_gate, 1\]: .* data registers",
    ),
    "unknown layer": (
        "tables/mma_gemv.yaml",
        "  qkv_gate:",
        "  qkv_gat:",
        r"tables/mma_gemv\.yaml:6: unknown layer 'qkv_gat'",
    ),
    "m out of range": (
        "tables/mma_gemv.yaml",
        QKV_1,
        QKV_1.replace("1:", "64:", 1),
        r"tables/mma_gemv\.yaml:7: qkv_gate: m must be an integer 1 <= m <= 32, got 64",
    ),
    "a default that cannot serve a class": (
        "tables/mma_gemv.yaml",
        "  plain: {warps: 8, splits: 1, unroll: 2, pipeline: batch, row_blocks: 1, reduce: none}",
        "  plain: {warps: 16, splits: 1, unroll: 8, pipeline: double, row_blocks: 2, reduce: none}",
        r"tables/mma_gemv\.yaml:3: defaults\.plain on qkv_gate m=8: .* data registers",
    ),
    "TMA ring over shared memory": (
        "tables/tma_gemv.yaml",
        "entries: {}",
        "entries:\n  router:\n    32: {splits: 4, stages: 12, tile: full, reduce: semaphore}",
        r"tables/tma_gemv\.yaml:4: tma_gemv\[router, 32\]: stages=12, reduce=semaphore at m=32 need \d+ bytes",
    ),
    "TMA split past the K tiles": (
        "tables/tma_gemv.yaml",
        "entries: {}",
        "entries:\n  o:\n    8: {splits: 17, stages: 4, tile: full, reduce: semaphore}",
        r"tables/tma_gemv\.yaml:4: tma_gemv\[o, 8\]: splits=17 must be 1\.\.16",
    ),
    "compressed router": (
        "tables/compressed_gemv.yaml",
        "entries: {}",
        "entries:\n  router:\n    8: {warps: 4, splits: 1, groups: 1, pipeline: batch, row_blocks: 1, reduce: none}",
        r"tables/compressed_gemv\.yaml:4: compressed_gemv\[router, 8\]: the router's fp32 weights are never",
    ),
    "a layer shape no engine config fits": (
        "tables/problem.yaml",
        "o:        {n: 8192, k: 1024, dtype: bfloat16}",
        "o:        {n: 8192, k: 1000, dtype: bfloat16}",
        r"tables/problem\.yaml:\d+: o \(n=8192, k=1000\): no mma_gemv config can serve it at m=8",
    ),
    "missing source file": (
        "kernels_src/sources.yaml",
        "persistent_gemm.cuh]",
        "persistent_gemm.cuh, missing.cuh]",
        r"kernels_src/sources\.yaml:\d+: missing\.cuh: no such file in kernels_src/",
    ),
    "undefined template variable": (
        "templates/submission.py.j2",
        "WARMUP_M = {{ warmup_m }}",
        "WARMUP_M = {{ warmup_ms }}",
        r"templates/submission\.py\.j2:\d+: template: 'warmup_ms' is undefined",
    ),
    "source breaks the raw string": (
        "kernels_src/mma_gemv.cuh",
        "#pragma once",
        '#pragma once\n// """ oops',
        r'kernels_src/mma_gemv\.cuh:\d+: contains """, which would end the r""" string',
    ),
    "source ends in a backslash": (
        "kernels_src/tma_gemv.cuh",
        None,
        "#define CONTINUED \\\n",
        r"kernels_src/tma_gemv\.cuh:\d+: ends in a backslash",
    ),
    "include of a later file": (
        "kernels_src/common.cuh",
        "#pragma once",
        '#pragma once\n#include "tma_gemv.cuh"',
        r'kernels_src/common\.cuh:5: #include "tma_gemv.cuh" comes before tma_gemv.cuh',
    ),
    "python name the template lacks": (
        "kernels_src/runtime.py",
        "    return [Layer(name, **spec) for name, spec in LAYERS.items()], TABLES",
        "    return [Layer(name, **spec) for name, spec in NO_SUCH_LAYERS.items()], TABLES",
        r"kernels_src/runtime\.py:\d+: undefined name 'NO_SUCH_LAYERS'",
    ),
    "undefined name in what only the build runs": (
        "kernels_src/tma_gemv.py",
        "        if n % TILE_ROWS or k % TILE_K:",
        "        if n % TILE_ROWS or k % NO_SUCH_TILE_K:",
        r"kernels_src/tma_gemv\.py:\d+: undefined name 'NO_SUCH_TILE_K'",
    ),
    "import outside the whitelist": (
        "kernels_src/runtime.py",
        "import torch\n",
        "import torch\nimport os\n",
        r"kernels_src/runtime\.py:\d+: import not allowed",
    ),
    "python syntax error": (
        "kernels_src/registry.py",
        "def route(",
        "def route((",
        r"kernels_src/registry\.py:\d+: invalid Python",
    ),
    "a name two modules define": (
        "kernels_src/cublas.py",
        "\nclass CublasConfig(NamedTuple):",
        "\nSMEM_LIMIT = 1\n\nclass CublasConfig(NamedTuple):",
        r"kernels_src/cublas\.py:\d+: SMEM_LIMIT is also defined by kernels_src/engine\.py: the modules share one",
    ),
    "a later module used at import time": (
        "kernels_src/engine.py",
        "\nclass Layer(NamedTuple):",
        "\nfrom kernels_src.registry import ENGINES\nFIRST = ENGINES[0]\n\nclass Layer(NamedTuple):",
        r"kernels_src/engine\.py:\d+: ENGINES \(from kernels_src\.registry, inlined later\) is used while the file",
    ),
}


@pytest.mark.parametrize("kind", sorted(BREAKAGES))
def test_bad_input_is_one_clear_line_exit_2_and_dist_untouched(repo_copy, kind):
    file, old, new, pattern = BREAKAGES[kind]
    (repo_copy / "tables" / "mma_gemv.yaml").write_text(KNOWN_MMA_GEMV)
    for name in ("tma_gemv", "compressed_gemv", "splitk_gemm"):
        (repo_copy / "tables" / f"{name}.yaml").write_text(EMPTY)
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
    path = repo_copy / "tables" / "mma_gemv.yaml"
    path.write_text(KNOWN_MMA_GEMV)
    _edit(path, "unroll: 1, pipeline: double", "unroll: 3, pipeline: double")
    result = _build(repo_copy)
    assert (
        f"tables/mma_gemv.yaml:{_line_of(path, 'unroll: 3')}: mma_gemv[qkv_gate, 8]: unroll=3"
        in result.output
    )


def test_a_missing_template_is_one_line(repo_copy):
    (repo_copy / "templates" / "submission.py.j2").unlink()
    result = _build(repo_copy)
    assert (
        result.exit_code == 2
        and result.output.strip() == "error: templates/submission.py.j2: template not found"
    )


def test_an_unwritable_out_is_one_line(repo_copy, tmp_path, one_render):
    blocked = tmp_path / "a_file"
    blocked.write_text("")
    result = _build(repo_copy, "--no-compilers", "--out", str(blocked / "sub" / "submission.py"))
    assert result.exit_code == 2 and len(result.output.strip().splitlines()) == 1
    assert "cannot write" in result.output


def test_the_command_works_on_the_checkout_it_runs_in(repo_copy):
    """Run from inside a copy, the installed generator builds that copy (its tables, into its dist/), not the tree it
    was installed from (the checkout a command works on is the one its folder is in: find_root), and keeps the files
    it derives current there: after a table edit, build alone leaves `headers --check` (README.md's figures among
    them) green. (In a fresh interpreter in a copy: test_last_bad_inputs.py; a kernels_src module there that does
    not parse is one line: test_bad_input.py, test_a_broken_module_leaves_every_commands_help.)"""
    from generator import find_root

    assert find_root(repo_copy / "tables") == repo_copy and find_root(REPO_ROOT / "docs") == REPO_ROOT
    _edit(
        repo_copy / "tables" / "mma_gemv.yaml", "unroll: 2, pipeline: double", "unroll: 1, pipeline: double"
    )
    # README.md as a table edit leaves it: its launch table's size no longer the tables'
    readme = re.sub(
        r"\d+ cases, \d+ distinct", "999 cases, 999 distinct", (REPO_ROOT / "README.md").read_text()
    )
    (repo_copy / "README.md").write_text(readme)
    out = repo_copy / "dist" / "submission.py"
    run = CliRunner().invoke(main, ["build", "--no-compilers", "--root", str(repo_copy)])  # its REPO_ROOT
    assert run.exit_code == 0 and out.exists(), run.output
    routed = routed_engines(repo_copy)
    tables = [table for table in load_tables(load_problem(repo_copy), repo_copy) if table.engine in routed]
    built_tables = load_submission(out, module_name="built_in_its_copy").TABLES
    assert _tables(built_tables) == _tables(tables)
    assert _tables(built_tables) != _tables(load_submission(DIST, module_name="the_checkouts").TABLES)
    # ... and every file it derives is current: README.md's launch-table figure is the tables' again
    assert "999 cases" not in (repo_copy / "README.md").read_text() and "README.md" in run.output
    result = CliRunner().invoke(main, ["headers", "--check", "--root", str(repo_copy)])
    assert result.exit_code == 0, result.output


def test_every_option_of_every_command_says_what_it_does():
    for name, command in main.commands.items():
        for param in command.params:
            if isinstance(param, click.Option):
                assert param.help, f"{name} {param.opts[0]} has no help text"


def test_version():
    result = CliRunner().invoke(main, ["--version"])
    assert result.exit_code == 0 and result.output.startswith("muse-proj, version ")


def test_dispatch_on_a_file_without_the_tables_is_one_line(tmp_path):
    file = tmp_path / "sub.py"
    file.write_text(
        "# okc: problem=muse_bf16_proj\ndef prepare(w):\n    return w\n\n\ndef kernel_fn(d, s):\n    return d\n"
    )
    result = CliRunner().invoke(main, ["dispatch", str(file)])
    assert result.exit_code == 2 and len(result.output.strip().splitlines()) == 1
    assert "not a file `python -m generator build` made?" in result.output


def test_the_file_holds_the_routed_engines_and_the_tools_file_every_one(built, every_engine_file, tmp_path):
    """dist/submission.py's engines (those its TABLES name) are engines `dispatch` routes to, without what only the
    tools read (an engine's rule); build/every_engine.py, which sweep, ab, profile and probe-gemm load, has every
    engine and its rule."""
    (tmp_path / "submission.py").write_text(built)
    shipped = [table.engine for table in _module(built, tmp_path, "engines_shipped").TABLES]
    result = CliRunner().invoke(main, ["dispatch", str(tmp_path / "submission.py")])
    routed = {line.split()[3] for line in result.output.splitlines()[1:]}
    assert result.exit_code == 0 and {engine.name for engine in shipped} <= routed
    assert not any(hasattr(engine, "rule") for engine in shipped)
    tools = [table.engine for table in load_submission(every_engine_file, module_name="engines_every").TABLES]
    assert [engine.name for engine in tools] == [engine.name for engine in ENGINES]
    assert all(engine.rule is not None for engine in tools)
