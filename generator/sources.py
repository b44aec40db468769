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
    summary: str  # first line of its docstring
    imports: tuple[str, ...]  # whitelisted import statements, hoisted to the header
    body: str  # everything else, verbatim; dropped lines left blank so body line i is source line first_line + i
    first_line: int  # source line of the body's first line


@dataclass(frozen=True)
class Sources:
    cuda: str  # CUDA_SRC
    cuda_files: tuple[str, ...]
    binding: str  # BINDING_SRC
    python: tuple[PythonModule, ...]
    input_files: tuple[Path, ...]  # every file read, for the provenance hash


def _read(path: Path, shown: str) -> str:
    try:
        return path.read_text()
    except FileNotFoundError:
        raise BuildError(shown, None, "source file not found (listed in kernels_src/sources.yaml)") from None


def raw_string_problem(text: str) -> tuple[int, str] | None:
    """(line, why) if `text` cannot sit inside an r'''...''' literal followed by more source, else None."""
    for number, line in enumerate(text.splitlines(), 1):
        for quotes in ("'''", '"""'):
            if quotes in line:
                return number, f"contains {quotes}, which would end the raw string it is embedded in"
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


def inline_python(text: str, shown: str, earlier: set[str]) -> PythonModule:
    """Split a kernels_src Python module into hoisted imports and a verbatim body (comments kept)."""
    try:
        tree = ast.parse(text, filename=shown)
    except SyntaxError as exc:
        raise BuildError(shown, exc.lineno, f"invalid Python: {exc.msg}") from None
    lines = text.splitlines()
    drop: set[int] = set()  # 0-based line numbers left out of the body
    imports: list[str] = []
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
            if module + ".py" not in earlier:
                raise BuildError(
                    shown,
                    node.lineno,
                    f"imports kernels_src.{module}, which sources.yaml does not list before it",
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
    kept = ["" if number in drop else line for number, line in enumerate(lines)]
    first = next((i for i, line in enumerate(kept) if line.strip()), len(kept))
    body = "\n".join(kept[first:]).rstrip("\n") + "\n"
    return PythonModule(shown, summary, tuple(imports), body, first + 1)


def load_sources(root: Path = REPO_ROOT) -> Sources:
    root = Path(root)
    src_dir = root / "kernels_src"
    manifest_path = src_dir / "sources.yaml"
    manifest = require_keys(
        load_located(manifest_path, display_path(manifest_path, root)),
        "kernels_src/sources.yaml",
        {"cuda", "binding", "python"},
    )
    cuda_files, python_files = [], []
    for key, out in (("cuda", cuda_files), ("python", python_files)):
        value = manifest[key]
        if not isinstance(value.value, list) or not all(isinstance(item.value, str) for item in value.value):
            raise value.fail(f"{key} must be a list of file names in kernels_src/")
        out.extend(item.value for item in value.value)
    binding_name = manifest["binding"].value
    if not isinstance(binding_name, str):
        raise manifest["binding"].fail("binding must be a file name in kernels_src/")
    cuda = assemble_c_sources(cuda_files, src_dir, root)
    binding = assemble_c_sources([binding_name], src_dir, root)
    modules = []
    earlier: set[str] = set()
    for name in python_files:
        path = src_dir / name
        shown = display_path(path, root)
        modules.append(inline_python(_read(path, shown), shown, earlier))
        earlier.add(name)
    inputs = [manifest_path] + [src_dir / f for f in cuda_files + [binding_name] + python_files]
    return Sources(cuda, tuple(cuda_files), binding, tuple(modules), tuple(inputs))
