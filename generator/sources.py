"""Kernel sources (kernels_src/) as they enter dist/submission.py: CUDA_SRC, BINDING_SRC and the inlined Python."""

from __future__ import annotations

import ast
import dataclasses
import os
import re
from dataclasses import dataclass
from pathlib import Path

from generator import REPO_ROOT
from generator.brackets import bracket_problem, empty_source
from generator.contract import ALLOWED_IMPORTS, forbidden_uses
from generator.errors import BuildError, display_path, read_text
from generator.yamlio import load_located, require_keys

PROJECT_PACKAGE = "kernels_src"
# The generated constants (cuda_prelude) on disk, for the sources to include: each then compiles on its own
# and an editor sees the names. The build inlines the prelude itself first and drops the includes of this file.
CONSTANTS_HEADER = "generated/constants.h"  # in kernels_src/
_LOCAL_INCLUDE = re.compile(r'^\s*#\s*include\s*"([^"]+)"')
# an include assemble_c_sources inlined
_LOCAL_INCLUDE_INLINED = re.compile(r'^// #\s*include\s*"([^"]+)"', re.M)


@dataclass(frozen=True)
class PythonModule:
    path: str  # as shown, e.g. kernels_src/runtime.py
    defines: tuple  # (name, line) of everything its top level binds: the submission's one namespace
    summary: str  # first line of its docstring
    imports: tuple[str, ...]  # whitelisted import statements, hoisted to the header
    body: str  # everything else, verbatim; dropped lines left blank so body line i is source line first_line + i
    first_line: int  # source line of the body's first line
    uses: tuple[str, ...] = ()  # the kernels_src modules it imports names from, as file names (x.py)
    # (body, first_line) without what build_only marks: what dist/submission.py holds
    shipped: tuple = ("", 1)

    def as_shipped(self) -> "PythonModule":
        return dataclasses.replace(self, body=self.shipped[0], first_line=self.shipped[1])


@dataclass(frozen=True)
class Sources:
    cuda_parts: tuple  # (file, its text behind its #line marker) in CUDA_SRC's order
    binding_parts: tuple  # the same for BINDING_SRC
    python: tuple[PythonModule, ...]
    input_files: tuple[Path, ...]  # every file inlined, the manifest first: for the provenance hash
    cuda_line: int | None = None  # the line of kernels_src/sources.yaml that lists the CUDA files

    @property
    def cuda(self) -> str:
        """CUDA_SRC: the generated constants, then the kernels' sources (the launch table, after them, has a #line
        directive of its own)."""
        return cuda_prelude() + "".join(text for _, text in self.cuda_parts)

    @property
    def binding(self) -> str:
        """BINDING_SRC: the generated constants, then the shim's sources."""
        return cuda_prelude() + "".join(text for _, text in self.binding_parts)

    @property
    def cuda_files(self) -> tuple[str, ...]:
        return tuple(name for name, _ in self.cuda_parts)

    @property
    def binding_files(self) -> tuple[str, ...]:
        return tuple(name for name, _ in self.binding_parts)

    def shared_head(self) -> tuple[str, tuple]:
        """(the text CUDA_SRC and BINDING_SRC both open with: the constants, then the files both lists start with;
        those files): the file holds it once."""
        shared = 0
        while shared < min(len(self.cuda_parts), len(self.binding_parts)):
            if self.cuda_parts[shared] != self.binding_parts[shared]:
                break
            shared += 1
        parts = self.cuda_parts[:shared]
        return cuda_prelude() + "".join(text for _, text in parts), tuple(name for name, _ in parts)

    def shipped(self, routed) -> "Sources":
        """What dist/submission.py holds when the tables route to the engines `routed`: every module and CUDA file
        but those only the other engines need, and of each module all but what build_only marks
        (kernels_src/engine.py)."""
        from generator.engines import BY_NAME

        others = [engine for engine in BY_NAME.values() if engine not in routed]
        modules = {module.path.rsplit("/", 1)[-1]: module for module in self.python}
        theirs = {_module_file(engine) for engine in others} - {_module_file(engine) for engine in routed}
        python = _kept(list(modules), theirs, lambda name: modules[name].uses)
        texts = dict(self.cuda_parts)
        ours = [_launcher_name(engine) for engine in routed if engine.launcher]
        others_only = [
            name
            for name, text in texts.items()
            if _defines_any(text, [_launcher_name(e) for e in others if e.launcher])
            and not _defines_any(text, ours)
        ]
        cuda = _kept(list(texts), set(others_only), lambda name: _LOCAL_INCLUDE_INLINED.findall(texts[name]))
        kept = set(python) | set(cuda)
        return dataclasses.replace(
            self,
            cuda_parts=tuple((name, texts[name]) for name in cuda),
            python=tuple(modules[name].as_shipped() for name in python),
            input_files=tuple(
                path
                for path in self.input_files
                if path.suffix == ".yaml" or path.name in kept or path.name in self.binding_files
            ),
        )


def _module_file(engine) -> str:
    return type(engine).__module__.rsplit(".", 1)[-1] + ".py"


def _launcher_name(engine) -> str:
    return engine.launcher.rsplit("::", 1)[-1]


def _defines_any(cuda: str, names) -> bool:
    code = _without_comments(cuda)
    return any(re.search(rf"\b{re.escape(name)}\s*\(", code) for name in names)


def _kept(names: list, dropped: set, reads) -> list:
    """`names` in order but the `dropped` ones, each of those kept after all where a kept name reads it
    (reads(name): the names it reads, transitively)."""
    kept = [name for name in names if name not in dropped]
    todo = list(kept)
    while todo:
        for other in reads(todo.pop()):
            if other in names and other not in kept:
                kept.append(other)
                todo.append(other)
    return [name for name in names if name in kept]


def _read(path: Path, shown: str) -> str:
    try:
        return read_text(path, shown)
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


def cuda_prelude() -> str:
    """The C++ ahead of the kernels in every build: each constant and mode code the CUDA side shares with Python,
    rendered from the engines' declarations (engine.SHARED_CUDA_CONSTANTS, Engine.cuda_constants), so that the
    CUDA sources never type one of their own."""
    lines = [
        "// Generated from the engines (generator/sources.py, cuda_prelude): the constants and mode codes the",
        "// CUDA side shares with Python, each written once, in Python.",
        "#include <cstddef>",
        "namespace okc {",
    ]
    lines += [item.cpp() for item in declared_constants()]
    lines += ["}  // namespace okc", ""]
    return "\n".join(lines)


def declared_constants() -> list:
    """Every constant and mode the CUDA side shares with Python, as the engines declare them (engine.CudaConstant,
    engine.CudaEnum): engine.SHARED_CUDA_CONSTANTS, then each engine's cuda_constants."""
    from generator.engines import ENGINES
    from kernels_src.engine import SHARED_CUDA_CONSTANTS

    declared = dict.fromkeys(SHARED_CUDA_CONSTANTS)
    for engine in ENGINES:
        declared.update(dict.fromkeys(engine.cuda_constants))
    return list(declared)


def constants_header() -> str:
    """kernels_src/generated/constants.h as `build` writes it: the prelude every build opens CUDA_SRC and
    BINDING_SRC with, as a header."""
    return (
        "// Written by `python -m generator build` for the sources to include: do not edit.\n"
        "#pragma once\n" + cuda_prelude()
    )


def assemble_c_sources(files: list[str], src_dir: Path, root: Path) -> list[tuple[str, str]]:
    """C/CUDA files in order as (file, text), each text behind a #line marker, local includes of earlier files (and
    of the generated constants, which open every build) inlined away. Each file is checked on its own first
    (generator/brackets.py): an emptied file or an unclosed `{` is its own line, not an error nvcc finds in a later
    file."""
    seen: set[str] = set()
    parts = []
    for name in files:
        path = src_dir / name
        shown = display_path(path, root)
        text = _read(path, shown)
        if empty_source(text):
            raise BuildError(shown, 1, "no code in it: restore it, or drop it from kernels_src/sources.yaml")
        problem = raw_string_problem(text) or bracket_problem(text)
        if problem:
            raise BuildError(shown, problem[0], problem[1])
        lines = []
        for number, line in enumerate(text.splitlines(), 1):
            match = _LOCAL_INCLUDE.match(line)
            if match:
                target = match.group(1)
                if target in seen or target == CONSTANTS_HEADER:
                    line = f"// {line.strip()}  (inlined above)"  # same line count: #line stays true
                elif (src_dir / target).exists():
                    raise BuildError(
                        shown, number, f'#include "{target}" comes before {target} in sources.yaml'
                    )
                else:
                    raise BuildError(shown, number, f'#include "{target}": no such file in kernels_src/')
            lines.append(line)
        parts.append((name, f'#line 1 "{shown}"\n' + "\n".join(lines) + "\n"))
        seen.add(name)
    return parts


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
    except (SyntaxError, ValueError) as exc:  # ValueError: a NUL byte, on some Pythons
        nul = text[: text.find("\0")].count("\n") + 1 if "\0" in text else None
        message = exc.msg if isinstance(exc, SyntaxError) else str(exc)
        raise BuildError(shown, getattr(exc, "lineno", None) or nul, f"invalid Python: {message}") from None
    for line, message in forbidden_uses(tree)[:1]:
        raise BuildError(shown, line, f"{message} (the submission contract: generator/contract.py)")
    summary, drop = "", set()  # drop: 0-based line numbers left out of the body
    first_node = tree.body[0] if tree.body else None
    if isinstance(first_node, ast.Expr) and isinstance(first_node.value, ast.Constant):
        if isinstance(first_node.value.value, str):  # the docstring: its first line is the module's summary
            summary = first_node.value.value.strip().splitlines()[0] if first_node.value.value.strip() else ""
            drop.update(range(first_node.lineno - 1, first_node.end_lineno))
    imports, from_later = _hoisted_imports(tree, text, shown, earlier, later, drop)
    for name in _top_level_loads(tree):
        if name.id in from_later:
            raise BuildError(
                shown,
                name.lineno,
                f"{name.id} (from kernels_src.{from_later[name.id]}, inlined later) is used while the file is"
                " imported: move the use into a function or list that module earlier in kernels_src/sources.yaml",
            )
    lines = text.splitlines()
    read = {node.id for node in ast.walk(tree) if isinstance(node, ast.Name)}
    uses = tuple(  # the modules whose names it reads (an import it never reads keeps nothing)
        node.module.split(".", 1)[1] + ".py"
        for node in tree.body
        if isinstance(node, ast.ImportFrom) and _is_project_import(node) and "." in (node.module or "")
        if any(alias.name in read for alias in node.names)
    )
    body = _body(lines, drop)
    shipped = _body(_without_build_only(tree, lines), drop)
    return PythonModule(shown, _top_level_names(tree), summary, tuple(imports), *body, uses, shipped)


def _body(lines: list[str], drop: set) -> tuple[str, int]:
    """(the module's lines but the dropped ones, left blank, from its first non-blank one; that line's number)."""
    kept = ["" if number in drop else line for number, line in enumerate(lines)]
    first = next((i for i, line in enumerate(kept) if line.strip()), len(kept))
    return "\n".join(kept[first:]).rstrip("\n") + "\n", first + 1


BUILD_ONLY = "build_only"  # kernels_src/engine.py's mark on what only the build and the tools read


def _marked(node: ast.AST) -> bool:
    return isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == BUILD_ONLY


def _without_build_only(tree: ast.Module, lines: list[str]) -> list[str]:
    """The module's lines without what build_only marks, line for line: a def or class it decorates, an assignment
    of its value and the marker's own def are blank lines; any other build_only(x) is None."""
    blank: set[int] = set()
    calls: list[ast.Call] = []

    def visit(node: ast.AST) -> None:
        decorators = getattr(node, "decorator_list", [])
        value = getattr(node, "value", None) if isinstance(node, (ast.Assign, ast.AnnAssign)) else None
        named = isinstance(node, ast.FunctionDef) and node.name == BUILD_ONLY
        if any(isinstance(d, ast.Name) and d.id == BUILD_ONLY for d in decorators) or _marked(value) or named:
            start = min([node.lineno] + [d.lineno for d in decorators])
            blank.update(range(start - 1, node.end_lineno))
            return
        if _marked(node):
            calls.append(node)
            return
        for child in ast.iter_child_nodes(node):
            visit(child)

    visit(tree)
    out = list(lines)
    for call in sorted(calls, key=lambda c: (c.lineno, c.col_offset), reverse=True):
        first, last = out[call.lineno - 1].encode(), out[call.end_lineno - 1].encode()
        joined = first[: call.col_offset] + b"None" + last[call.end_col_offset :]
        span = call.end_lineno - call.lineno
        out[call.lineno - 1 : call.end_lineno] = [joined.decode()] + [""] * span
    return ["" if number in blank else line for number, line in enumerate(out)]


def _hoisted_imports(tree: ast.Module, text: str, shown: str, earlier, later, drop: set) -> tuple[list, dict]:
    """(the whitelisted import statements, hoisted to the file's header; name -> the later kernels_src module it
    is imported from), each import's lines added to `drop`; an import the submission cannot hold fails at its
    line."""
    imports: list[str] = []
    from_later: dict[str, str] = {}
    for node in tree.body:
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
        drop.update(range(node.lineno - 1, node.end_lineno))
    for node in ast.walk(tree):
        if isinstance(node, (ast.Import, ast.ImportFrom)) and node not in tree.body:
            raise BuildError(shown, node.lineno, "imports must sit at the top level of a kernels_src module")
    return imports, from_later


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
        for index, (name, line) in enumerate(zip(files, lines[key])):
            if name in files[:index]:
                raise BuildError(display_path(manifest_path, root), line, f"{name} is listed twice in {key}:")
            if key == "python" and not name.endswith(".py"):
                raise BuildError(
                    display_path(manifest_path, root), line, f"{name}: python: lists .py modules"
                )
            path = src_dir / name
            if not path.is_file():
                if os.path.lexists(path):  # there, but not a file (a link loop, a folder): its own fault
                    read_text(path, display_path(path, root))
                raise BuildError(
                    display_path(manifest_path, root), line, f"{name}: no such file in kernels_src/"
                )
    cuda = assemble_c_sources(cuda_files, src_dir, root)
    # The constants and mode codes generated from the engines come first in both (CUDA_SRC, BINDING_SRC).
    binding = assemble_c_sources(binding_files, src_dir, root)
    modules = []
    for index, name in enumerate(python_files):
        path = src_dir / name
        shown = display_path(path, root)
        earlier, later = set(python_files[:index]), set(python_files[index + 1 :])
        modules.append(inline_python(_read(path, shown), shown, earlier, later))
    check_one_namespace(modules)
    inputs = [manifest_path] + [src_dir / f for f in cuda_files + binding_files + python_files]
    return Sources(
        tuple(cuda),
        tuple(binding),
        tuple(modules),
        tuple(dict.fromkeys(inputs)),
        manifest["cuda"].line,
    )


def _without_comments(cuda: str) -> str:
    return re.sub(r"//[^\n]*|/\*.*?\*/", " ", cuda, flags=re.S)


def check_launchers(sources: Sources, engines, root: Path) -> None:
    """Every CUDA engine needs its host launcher in CUDA_SRC, routed or not: a kernel source dropped from
    kernels_src/sources.yaml would otherwise build a file whose extension fails to compile on the GPU only (or, for
    an engine no table routes yet, tools that cannot build its kernels)."""
    manifest = display_path(root / "kernels_src" / "sources.yaml", root)
    code = _without_comments(sources.cuda)
    for engine in engines:
        name = engine.launcher.rsplit("::", 1)[-1]
        if not name or re.search(rf"\b{re.escape(name)}\s*\(", code):
            continue
        defining = sorted(
            path.name
            for path in (root / "kernels_src").glob("*.cuh")
            if path.is_file()
            and re.search(rf"\b{re.escape(name)}\s*\(", _without_comments(path.read_text(errors="replace")))
        )
        hint = f" ({', '.join(defining)} does: list it)" if defining else ""
        raise BuildError(
            manifest,
            sources.cuda_line,
            f"the {engine.name} engine's launcher {engine.launcher}: no file of cuda: defines it{hint}",
        )
