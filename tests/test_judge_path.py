"""The judge's run of the shipped file, traced on the CPU: prepare() on its GPU branch, with the CUDA extension's
compile (load_inline) and the Triton kernel's launch stubbed out, then kernel_fn() on every layer at every m the
judge sends. Every function of the file must run there, or be an error path: what only the tools read stays
out of the file (kernels_src/engine.py, build_only), and so does every engine no table routes.

The layers are a quarter of their size (prepare() builds every operand on the CPU in about half a second); the
routing reads the tables alone, so every (layer, m) takes the route it takes on the H200."""

import ast
import sys

import pytest
import torch

from generator.judge.loader import load_submission
from generator.judge.weights import make_weights
from generator.cxx import identifiers, unreached
from generator.engines import BY_NAME
from generator.problem import load_problem
from generator.render import cpp_sources
from generator.tables import load_tables
from kernels_src.registry import variants

SHRINK = 4
# What the stubs keep from running, each for its reason (the test checks each is still in the file):
BEYOND_THE_STUBS = {
    "BoundSplitKLaunch": "binds the launcher of a kernel Triton compiled on a GPU (the stub compiles none)",
    "cpu_dual_plan.call": "the router's cuBLAS fallback off the GPU (verify --device cpu runs it)",
}


class StubExtension:
    """What load_inline returns: plan() takes every launch, run() refuses none (and computes nothing)."""

    def __init__(self, **options):
        self.options, self.plans = options, []

    def plan(self, kernel, n, k, pointers, scalars, workspace, semaphores):
        self.plans.append((kernel, n, k))
        return len(self.plans) - 1

    def run(self, plan, x, out, m, stream):
        return ""


class StubTritonKernel:
    """_splitk_gemm_kernel[grid](...): launches nothing and returns no compiled kernel."""

    def __init__(self):
        self.launches = []

    def __getitem__(self, grid):
        return lambda *args, **kwargs: self.launches.append(grid)


def _functions(tree: ast.Module) -> dict:
    """'Class.method' (nested: 'outer.inner') -> its def, for every def of the file."""
    found = {}

    def visit(node, prefix):
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                name = prefix + child.name
                if not isinstance(child, ast.ClassDef):
                    found[name] = child
                visit(child, name + ".")

    visit(tree, "")
    return found


def _error_paths(tree: ast.Module, functions: dict) -> set:
    """The functions that only raise, and those called only inside an `except` or a `raise`: their names."""
    guarded, called = set(), {}
    for node in ast.walk(tree):
        for call in ast.walk(node) if isinstance(node, (ast.ExceptHandler, ast.Raise)) else ():
            if isinstance(call, ast.Call):
                guarded.add(id(call))
        if isinstance(node, ast.Call):
            name = getattr(node.func, "attr", getattr(node.func, "id", None))
            called.setdefault(name, []).append(id(node))
    errors = set()
    for name, node in functions.items():
        body = [s for s in node.body if not (isinstance(s, ast.Expr) and isinstance(s.value, ast.Constant))]
        only_raises = len(body) == 1 and isinstance(body[0], ast.Raise)
        sites = called.get(node.name, [])
        if only_raises or (sites and all(site in guarded for site in sites)):
            errors.add(name)
    return errors


def _run_the_judges_path(module) -> tuple:
    """prepare() on the GPU branch with the stubs, then kernel_fn() on every layer x m the judge sends."""
    module.KERNEL_DEVICE = "cpu"
    module.load_inline = StubExtension
    module._raw_stream = lambda index: 0
    module._splitk_gemm_kernel = triton = StubTritonKernel()
    problem = load_problem().shrunk(SHRINK)
    for name, layer in problem.layers.items():
        module.LAYERS[name].update(n=layer.n, k=layer.k, narrow_n=layer.narrow_n)
        module.LAYERS[name] = {key: value for key, value in module.LAYERS[name].items() if value is not None}
    # the launch table's cases of the shrunk layers (an overflow buffer's size is the layer's): what build lists
    module.KERNELS = tuple(v.case for v in variants(problem.layers.values(), load_tables(load_problem())))
    state = module.prepare(make_weights(problem, "normal", 0, "cpu"))
    gen = torch.Generator().manual_seed(1)
    for layer in problem.layers.values():
        for m in module.WARMUP_M:
            x = torch.randn(m, layer.k, generator=gen).to(torch.bfloat16)
            config = {"m": m, "n": layer.n_for(m), "k": layer.k, "layer": layer.name}
            out = module.kernel_fn({"x": x, "config": config}, state)
            assert tuple(out.shape) == (m, layer.n_for(m)) and out.dtype == getattr(torch, layer.dtype)
    return state, triton


def _traced(path):
    """The module at path, imported and run along the judge's path under a trace: (module, state, the first lines
    of the code objects of the file that ran, the stubbed Triton kernel)."""
    entered = set()

    def trace(frame, event, arg):
        if frame.f_code.co_filename == str(path):
            entered.add(frame.f_code.co_firstlineno)

    sys.settrace(trace)
    try:
        module = load_submission(path, module_name="judge_path_submission")
        state, triton = _run_the_judges_path(module)
    finally:
        sys.settrace(None)
    return module, state, entered, triton


@pytest.fixture(scope="module")
def judges_run(built, tmp_path_factory):
    """The file as the sources make it now, imported and run along the judge's path, traced (one run serves the
    tests below)."""
    path = tmp_path_factory.mktemp("judge_path") / "submission.py"
    path.write_text(built)
    return _traced(path)


def test_every_function_of_the_file_runs_on_the_judges_path(built, judges_run):
    module, state, entered, triton = judges_run
    tree = ast.parse(built)
    functions = _functions(tree)
    beyond = {name for name in functions for b in BEYOND_THE_STUBS if name == b or name.startswith(b + ".")}
    for b in BEYOND_THE_STUBS:
        assert any(name == b or name.startswith(b + ".") for name in beyond), f"{b} left the file: unlist it"
    device_code = {
        name
        for name, node in functions.items()
        if any(ast.unparse(d).startswith("triton.jit") for d in node.decorator_list)
    }
    ran = {
        name
        for name, node in functions.items()
        if {node.lineno, min([node.lineno] + [d.lineno for d in node.decorator_list])} & entered
    }
    idle = set(functions) - ran - _error_paths(tree, functions) - beyond - device_code
    shown = [f"dist/submission.py:{functions[name].lineno} {name}" for name in sorted(idle)]
    assert not idle, f"never runs on the judge's path (mark it build_only, or drop it): {shown}"
    assert triton.launches and module.load_inline is StubExtension  # the stubs were reached


def test_the_docstring_names_the_routes_prepare_took(built, judges_run):
    """The file's docstring (and `dispatch`, which prints the same lines) against the engine and config each
    (layer, m) got in prepare(): what the file says it runs is what it runs."""
    module, state, _, _ = judges_run
    documented = [line.split(None, 4) for line in ast.get_docstring(ast.parse(built)).splitlines()]
    documented = {(w[0], int(w[1])): w[3:] for w in documented if len(w) >= 4 and w[0] in module.LAYERS}
    assert len(documented) == len(module.LAYERS) * len(module.WARMUP_M)
    for (layer, m), words in documented.items():
        engine, cfg = state.routes[layer][m]
        assert words == [engine.name] + ([BY_NAME[engine.name].describe(cfg)] if tuple(cfg) else [])


# ---- what the file defines and never reads: its classes and constants, Triton kernels, the C++ of CUDA_SRC

ENTRY_POINTS = ("prepare", "kernel_fn")  # the judge calls them


def _read(tree: ast.Module) -> tuple[set, set]:
    """(the names the file reads, the attributes it reads), the names of its string annotations too."""
    names, attributes, annotations = set(), set(), []
    for node in ast.walk(tree):
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load):
            names.add(node.id)
        elif isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Load):
            attributes.add(node.attr)
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            annotations += [node.returns] + [arg.annotation for arg in node.args.args + node.args.kwonlyargs]
    for annotation in annotations:
        if isinstance(annotation, ast.Constant) and isinstance(annotation.value, str):
            names |= {
                n.id for n in ast.walk(ast.parse(annotation.value, mode="eval")) if isinstance(n, ast.Name)
            }
    return names, attributes


def _bound(tree: ast.Module) -> dict:
    """'NAME' or 'Class.NAME' -> its line: the classes and constants of the file's top level, and what its class
    bodies assign (but a record's fields, NamedTuple or TypedDict, which its calls fill by position or its reader
    by key, and dunders)."""
    found = {}
    for node in tree.body:
        if isinstance(node, ast.ClassDef):
            found[node.name] = node.lineno
            record = any(ast.unparse(base) in ("NamedTuple", "TypedDict") for base in node.bases)
            for item in node.body:
                if isinstance(item, ast.Assign) or isinstance(item, ast.AnnAssign) and not record:
                    targets = item.targets if isinstance(item, ast.Assign) else [item.target]
                    for target in (n for t in targets for n in ast.walk(t) if isinstance(n, ast.Name)):
                        if not target.id.startswith("__"):
                            found[f"{node.name}.{target.id}"] = item.lineno
        elif isinstance(node, (ast.Assign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            found |= {n.id: node.lineno for t in targets for n in ast.walk(t) if isinstance(n, ast.Name)}
    return found


def unread_python(text: str) -> list[str]:
    """`line NAME` for each class, constant or class attribute of the file that nothing in it reads."""
    tree = ast.parse(text)
    names, attributes = _read(tree)
    return [
        f"line {line} {name}"
        for name, line in _bound(tree).items()
        if (name.split(".")[1] not in attributes if "." in name else name not in names | set(ENTRY_POINTS))
    ]


def unreached_cpp(cpp: dict) -> list[str]:
    """`file:line kind name` for each definition of CUDA_SRC (the head shared with BINDING_SRC included) that no
    kernel of the launch table and nothing of the binding reaches (generator/cxx.py)."""
    binding = cpp["BINDING_SRC"][len(cpp["CUDA_HEAD"]) :]
    roots = identifiers(cpp["LAUNCH_TABLE"]) | identifiers(binding)
    lines = cpp["CUDA_SRC"].split("\n")
    shown = []
    for definition in unreached(cpp["CUDA_SRC"], roots):
        directives = [
            (i, line) for i, line in enumerate(lines[: definition.first]) if line.startswith("#line ")
        ]
        at, directive = directives[-1] if directives else (-1, '#line 1 "the constants"')
        number, file = directive.split(" ", 2)[1:]
        place = f"{file.strip(chr(34))}:{int(number) + definition.first - at - 1}"
        shown.append(f"{place} {definition.kind} {definition.name}")
    return shown


def test_every_class_and_constant_of_the_file_is_read(built):
    """What the file binds at its top level and in its class bodies is read somewhere in it (functions: the test
    above): what only the tools read is marked build_only, and stays out."""
    unread = unread_python(built)
    assert not unread, f"defined in dist/submission.py, never read (mark it build_only, or drop it): {unread}"


def test_every_triton_kernel_is_launched_or_called_by_one(built, judges_run):
    """Each @triton.jit function is a kernel prepare()'s plans launched (the stub counts its launches) or one such
    a kernel calls, directly or not."""
    module, _, _, triton = judges_run
    jit = {
        node.name: node
        for node in ast.parse(built).body
        if isinstance(node, ast.FunctionDef)
        and any(ast.unparse(d).startswith("triton.jit") for d in node.decorator_list)
    }
    reached = [name for name in jit if getattr(module, name) is triton and triton.launches]
    for name in reached:
        calls = {
            n.func.id for n in ast.walk(jit[name]) if isinstance(n, ast.Call) and isinstance(n.func, ast.Name)
        }
        reached += [callee for callee in sorted(calls & set(jit)) if callee not in reached]
    assert jit and set(reached) == set(jit), f"never launched nor called: {sorted(set(jit) - set(reached))}"


def test_every_struct_function_and_constant_of_the_cpp_is_reached_from_the_launch_table(built):
    """Every struct, member function, function, constant and enumerator of CUDA_SRC is read by a kernel of
    LAUNCH_TABLE, directly or not, or by the binding (the head both share): what only an unrouted engine reads
    stays out of the file with that engine's kernel (render.py, cuda_for)."""
    unread = unreached_cpp(cpp_sources(built))
    assert not unread, f"in CUDA_SRC, reached by no kernel of the launch table: {unread}"


def test_a_planted_unused_name_is_found(built):
    """The three checks above are not vacuous: a constant, a class attribute and a C++ function planted in the
    file, each read by nothing, are named."""
    planted = built.replace("\nclass Prepared:\n", "\nclass Prepared:\n    planted_attribute = 1\n", 1)
    assert unread_python(planted + "\nPLANTED_CONSTANT = 1\n") == [
        f"line {planted.split(chr(10)).index('    planted_attribute = 1') + 1} Prepared.planted_attribute",
        f"line {len(planted.splitlines()) + 2} PLANTED_CONSTANT",
    ]
    cpp = cpp_sources(built)
    cpp["CUDA_SRC"] += '#line 7 "kernels_src/planted.cuh"\n__device__ int planted_unused() { return 1; }\n'
    assert unreached_cpp(cpp) == ["kernels_src/planted.cuh:7 function planted_unused"]
