"""Kernel sources (kernels_src/) as they enter dist/submission.py: CUDA_SRC, BINDING_SRC and the inlined Python."""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass
from pathlib import Path

from generator import REPO_ROOT
from generator.errors import BuildError, display_path
from generator.yamlio import load_located, require_keys

# The only modules the submission may import, and how (checked again on the rendered file: generator.contract).
ALLOWED_IMPORTS = {
    "typing": None,  # any name
    "torch": None,
    "triton": None,
    "triton.language": None,
    "torch.utils.cpp_extension": {"load_inline"},
    "triton.tools.tensor_descriptor": {"TensorDescriptor"},
}
PROJECT_PACKAGE = "kernels_src"
_LOCAL_INCLUDE = re.compile(r'^\s*#\s*include\s*"([^"]+)"')


@dataclass(frozen=True)
class PythonModule:
    path: str  # as shown, e.g. kernels_src/runtime.py
    defines: tuple  # (name, line) of everything its top level binds: the submission's one namespace
    summary: str  # first line of its docstring
    imports: tuple[str, ...]  # whitelisted import statements, hoisted to the header
    body: str  # everything else, verbatim; dropped lines left blank so body line i is source line first_line + i
    first_line: int  # source line of the body's first line


@dataclass(frozen=True)
class Sources:
    cuda: str  # CUDA_SRC
    cuda_files: tuple[str, ...]
    binding: str  # BINDING_SRC
    binding_files: tuple[str, ...]
    python: tuple[PythonModule, ...]
    input_files: tuple[Path, ...]  # every file read, for the provenance hash


def _read(path: Path, shown: str) -> str:
    try:
        return path.read_text()
    except FileNotFoundError:
        raise BuildError(shown, None, "source file not found (listed in kernels_src/sources.yaml)") from None


def raw_string_problem(text: str) -> tuple[int, str] | None:
    """(line, why) if `text` cannot sit inside the raw triple-double-quoted literal it is embedded in (CUDA_SRC,
    BINDING_SRC) followed by more source, else None."""
    for number, line in enumerate(text.splitlines(), 1):
        if '"""' in line:
            return number, 'contains """, which would end the r""" string the C++ is embedded in'
    stripped = text.rstrip("\n")
    if stripped.endswith("\\"):
        return (
            stripped.count("\n") + 1,
            "ends in a backslash, which would escape the raw string's end or the next #line",
        )
    return None


def assemble_c_sources(files: list[str], src_dir: Path, root: Path) -> str:
    """Concatenate C/CUDA files in order, each behind a #line marker; inline local includes of earlier files."""
    seen: set[str] = set()
    parts = []
    for name in files:
        path = src_dir / name
        shown = display_path(path, root)
        text = _read(path, shown)
        problem = raw_string_problem(text)
        if problem:
            raise BuildError(shown, problem[0], problem[1])
        lines = []
        for number, line in enumerate(text.splitlines(), 1):
            match = _LOCAL_INCLUDE.match(line)
            if match:
                target = match.group(1)
                if target in seen:
                    line = f"// {line.strip()}  (inlined above)"  # same line count: #line stays true
                elif (src_dir / target).exists():
                    raise BuildError(
                        shown, number, f'#include "{target}" comes before {target} in sources.yaml'
                    )
                else:
                    raise BuildError(shown, number, f'#include "{target}": no such file in kernels_src/')
            lines.append(line)
        parts.append(f'#line 1 "{shown}"\n' + "\n".join(lines) + "\n")
        seen.add(name)
    return "".join(parts)


def _import_is_allowed(node: ast.stmt) -> bool:
    if isinstance(node, ast.Import):
        return all(
            alias.name in ALLOWED_IMPORTS and ALLOWED_IMPORTS[alias.name] is None for alias in node.names
        )
    allowed = ALLOWED_IMPORTS.get(node.module or "", False)
    if allowed is False or node.level:
        return False
    return allowed is None or all(alias.name in allowed and alias.asname is None for alias in node.names)


def _is_project_import(node: ast.stmt) -> bool:
    if isinstance(node, ast.ImportFrom):
        return node.level == 0 and (node.module or "").split(".")[0] == PROJECT_PACKAGE
    return any(alias.name.split(".")[0] == PROJECT_PACKAGE for alias in node.names)


def _top_level_loads(tree: ast.Module) -> list[ast.Name]:
    """Names read while the module is being imported: everything at its top level except the bodies of
    functions (their decorators and defaults do run), classes' bodies included."""
    loads: list[ast.Name] = []

    def visit(node: ast.AST) -> None:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            for part in node.decorator_list + node.args.defaults + node.args.kw_defaults:
                if part is not None:
                    visit(part)
            return
        if isinstance(node, ast.Lambda):
            for part in node.args.defaults:
                visit(part)
            return
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load):
            loads.append(node)
        for child in ast.iter_child_nodes(node):
            visit(child)

    for statement in tree.body:
        visit(statement)
    return loads


def inline_python(text: str, shown: str, earlier: set[str], later: set[str] = frozenset()) -> PythonModule:
    """Split a kernels_src Python module into hoisted imports and a verbatim body (comments kept). Names it
    imports from modules inlined after it (`later`) may be used only inside functions."""
    try:
        tree = ast.parse(text, filename=shown)
    except SyntaxError as exc:
        raise BuildError(shown, exc.lineno, f"invalid Python: {exc.msg}") from None
    lines = text.splitlines()
    drop: set[int] = set()  # 0-based line numbers left out of the body
    imports: list[str] = []
    from_later: dict[str, str] = {}  # name -> the later module it comes from
    summary = ""
    for index, node in enumerate(tree.body):
        span = range(node.lineno - 1, node.end_lineno)
        if index == 0 and isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant):
            if isinstance(node.value.value, str):
                summary = node.value.value.strip().splitlines()[0] if node.value.value.strip() else ""
                drop.update(span)
                continue
        if not isinstance(node, (ast.Import, ast.ImportFrom)):
            continue
        if isinstance(node, ast.ImportFrom) and node.module == "__future__":
            raise BuildError(shown, node.lineno, "from __future__ imports cannot be inlined mid-file")
        if _is_project_import(node):
            if isinstance(node, ast.Import) or any(alias.asname for alias in node.names):
                raise BuildError(
                    shown, node.lineno, "import kernels_src names as `from kernels_src.X import name`"
                )
            module = node.module.split(".", 1)[1] if "." in node.module else ""
            if module + ".py" in later:
                from_later.update({alias.name: module for alias in node.names})
            elif module + ".py" not in earlier:
                raise BuildError(
                    shown,
                    node.lineno,
                    f"imports kernels_src.{module}, which kernels_src/sources.yaml does not list",
                )
        elif _import_is_allowed(node):
            imports.append(ast.get_source_segment(text, node))
        else:
            raise BuildError(
                shown,
                node.lineno,
                f"import not allowed in the submission (allowed: {sorted(ALLOWED_IMPORTS)})",
            )
        drop.update(span)
    for node in ast.walk(tree):
        if isinstance(node, (ast.Import, ast.ImportFrom)) and node not in tree.body:
            raise BuildError(shown, node.lineno, "imports must sit at the top level of a kernels_src module")
    for name in _top_level_loads(tree):
        if name.id in from_later:
            raise BuildError(
                shown,
                name.lineno,
                f"{name.id} (from kernels_src.{from_later[name.id]}, inlined later) is used while the file is"
                " imported: move the use into a function or list that module earlier in kernels_src/sources.yaml",
            )
    kept = ["" if number in drop else line for number, line in enumerate(lines)]
    first = next((i for i, line in enumerate(kept) if line.strip()), len(kept))
    body = "\n".join(kept[first:]).rstrip("\n") + "\n"
    return PythonModule(shown, _top_level_names(tree), summary, tuple(imports), body, first + 1)


def _top_level_names(tree: ast.Module) -> tuple:
    """(name, line) of each function, class and variable a module's top level binds (imports excluded)."""
    found = []
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            found.append((node.name, node.lineno))
        elif isinstance(node, (ast.Assign, ast.AnnAssign, ast.AugAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            for target in targets:
                found += [(n.id, node.lineno) for n in ast.walk(target) if isinstance(n, ast.Name)]
    return tuple(found)


def check_one_namespace(modules) -> None:
    """Every module is inlined into the submission's one namespace: a name two modules both define would leave
    the first module's functions reading the second one's value (they look globals up when they run)."""
    owner: dict[str, str] = {}
    for module in modules:
        for name, line in module.defines:
            if name in owner and owner[name] != module.path:
                raise BuildError(
                    module.path,
                    line,
                    f"{name} is also defined by {owner[name]}: the modules share one namespace in the submission,"
                    " so give it a name of its own (or import it from there)",
                )
            owner.setdefault(name, module.path)


def _file_list(manifest: dict, key: str) -> list[str]:
    value = manifest[key]
    if not isinstance(value.value, list) or not all(isinstance(item.value, str) for item in value.value):
        raise value.fail(f"{key} must be a list of file names in kernels_src/")
    return [item.value for item in value.value]


def load_sources(root: Path = REPO_ROOT) -> Sources:
    root = Path(root)
    src_dir = root / "kernels_src"
    manifest_path = src_dir / "sources.yaml"
    manifest = require_keys(
        load_located(manifest_path, display_path(manifest_path, root)),
        "kernels_src/sources.yaml",
        {"cuda", "binding", "python"},
    )
    cuda_files, binding_files, python_files = (
        _file_list(manifest, key) for key in ("cuda", "binding", "python")
    )
    lines = {key: [item.line for item in manifest[key].value] for key in ("cuda", "binding", "python")}
    for key, files in (("cuda", cuda_files), ("binding", binding_files), ("python", python_files)):
        for name, line in zip(files, lines[key]):
            if not (src_dir / name).is_file():
                raise BuildError(
                    display_path(manifest_path, root), line, f"{name}: no such file in kernels_src/"
                )
    from kernels_src.registry import cuda_prelude

    # the constants and mode codes generated from the engines come first in both (CUDA_SRC, BINDING_SRC)
    cuda = cuda_prelude() + assemble_c_sources(cuda_files, src_dir, root)
    binding = cuda_prelude() + assemble_c_sources(binding_files, src_dir, root)
    modules = []
    for index, name in enumerate(python_files):
        path = src_dir / name
        shown = display_path(path, root)
        earlier, later = set(python_files[:index]), set(python_files[index + 1 :])
        modules.append(inline_python(_read(path, shown), shown, earlier, later))
    check_one_namespace(modules)
    inputs = [manifest_path] + [src_dir / f for f in cuda_files + binding_files + python_files]
    return Sources(
        cuda, tuple(cuda_files), binding, tuple(binding_files), tuple(modules), tuple(dict.fromkeys(inputs))
    )
