"""sources + tables + template -> the text of dist/submission.py (pure: reads inputs, writes nothing)."""

from __future__ import annotations

import ast
import hashlib
import re
import textwrap
import traceback
from pathlib import Path

import jinja2

from generator import REPO_ROOT
from generator.contract import check_contract, contract_violations, undefined_names
from generator.errors import BuildError, display_path, read_text
from generator.problem import Problem, load_problem
from generator.sources import Sources, check_launchers, load_sources
from generator.tables import load_tables
from kernels_src import registry

TEMPLATE = "submission.py.j2"
BLACK_LINE_LENGTH = 110
BLACK_VERSION = "26.10.1"  # pyproject.toml pins the same (tests/test_build.py checks): CI formats with it


def tables_literal(tables: dict, layer_order: list[str]) -> str:
    """The TABLES dict literal: per engine (precedence order) its fields (a comment) and entries, keys in problem
    order then m, and its defaults; deterministic, and black formats it."""
    parts = []
    for name, table in tables.items():
        literal = table.literal()
        entries = literal["entries"]
        keys = sorted(entries, key=lambda key: (layer_order.index(key[0]), key[1]))
        body = ["'entries': {" + ", ".join(f"{key!r}: {entries[key]!r}" for key in keys) + "}"]
        if "defaults" in literal:
            body.append(f"'defaults': {literal['defaults']!r}")
        fields = ", ".join(table.engine.fields)
        parts.append(f"{name!r}: {{  # ({fields})\n" + ", ".join(body) + "}")
    return "{\n" + ",\n".join(parts) + "}"


def layers_literal(problem: Problem) -> str:
    items = []
    for layer in problem.layers.values():
        spec = {"n": layer.n, "k": layer.k, "dtype": layer.dtype}
        if layer.narrow_n is not None:
            spec.update(narrow_n=layer.narrow_n, narrow_max_m=layer.narrow_max_m)
        items.append(f"{layer.name!r}: {spec!r}")
    return "{" + ", ".join(items) + "}"


def engine_summaries(routed, width: int = BLACK_LINE_LENGTH) -> list[str]:
    """The summary paragraph of each engine the tables route to (kernels_src/registry.py order, cuBLAS last),
    wrapped for the docstring."""
    engines = [engine for engine in registry.ENGINES if engine in routed] + [registry.BY_NAME["cublas"]]
    return [textwrap.fill(engine.summary, width) for engine in engines]


def shape_lines(layers, tables: dict, ms, route=registry.route) -> list:
    """One line per (layer, m in ms): the output width and the engine and config that serve it (`route`: the
    routing of a built file, for `dispatch`; the configs described by this checkout's engines of those names).
    """
    lines = []
    for layer in layers:
        for m in ms:
            engine, cfg = route(layer, m, tables)
            described = registry.BY_NAME[engine.name].describe(cfg)
            lines.append(
                f"{layer.name:<9} {m:>4} {layer.n_for(m):>5}  {engine.name:<15} {described}".rstrip()
            )
    return lines


def kernel_lines(kernels) -> list[str]:
    """One line per case of the launch table: its engine and its launcher's arguments, by name."""
    return [
        f"{number:>2} {variant.engine:<15} {variant.describe()}" for number, variant in enumerate(kernels)
    ]


def width_rule(problem: Problem) -> str:
    rules = [
        f"{layer.name} {layer.narrow_n} at m <= {layer.narrow_max_m}, else {layer.n}"
        for layer in problem.layers.values()
        if layer.narrow_n is not None
    ]
    return "the layer's n" + (f" ({'; '.join(rules)})" if rules else "")


def input_digest(root: Path, sources: Sources) -> str:
    """sha256 over every input file of the file (path and bytes), in a fixed order: the tables, the template and
    the sources it inlines."""
    files = sorted(
        set(sources.input_files) | set((root / "tables").glob("*.yaml")) | {root / "templates" / TEMPLATE}
    )
    digest = hashlib.sha256()
    for path in files:
        digest.update(display_path(path, root).encode() + b"\0" + path.read_bytes() + b"\0")
    return digest.hexdigest()[:16]


def _environment(root: Path) -> jinja2.Environment:
    return jinja2.Environment(
        loader=jinja2.FileSystemLoader(str(root / "templates")),
        undefined=jinja2.StrictUndefined,
        keep_trailing_newline=True,
        trim_blocks=True,
        lstrip_blocks=True,
        autoescape=False,
    )


def _template_error(exc: Exception, root: Path) -> BuildError:
    """Name the template line of a Jinja error (syntax errors carry it; runtime errors sit in the traceback)."""
    shown = display_path(root / "templates" / TEMPLATE, root)
    if isinstance(exc, jinja2.TemplateSyntaxError):
        return BuildError(shown, exc.lineno, f"template syntax: {exc.message}")
    line = None
    for frame in traceback.extract_tb(exc.__traceback__):
        if frame.filename.endswith(TEMPLATE):
            line = frame.lineno
    return BuildError(shown, line, f"template: {exc}")


def _source_of_rendered_line(raw: str, line: int, sources: Sources, root: Path) -> tuple[str, int | None]:
    """Map a line of the rendered (pre-black) text back to the kernels_src module line it came from, else to the
    template line that makes it (the one line whose literal text it holds; None when that is not one line)."""
    lines = raw.splitlines()
    for module in reversed(sources.python):
        marker = f"# ---- {module.path}:"
        starts = [i for i, text in enumerate(lines[:line], 1) if text.startswith(marker)]
        if starts:
            return module.path, module.first_line + (line - starts[-1] - 1)
    bad = lines[line - 1].strip() if 0 < line <= len(lines) else ""
    template = (root / "templates" / TEMPLATE).read_text().splitlines()
    matches = []
    for number, text in enumerate(template, 1):
        pieces = [p.strip() for p in re.split(r"{{.*?}}|{%.*?%}|{#.*?#}", text) if p.strip()]
        if pieces and bad and all(piece in bad for piece in pieces):
            matches.append(number)
    return display_path(root / "templates" / TEMPLATE, root), matches[0] if len(matches) == 1 else None


def _rendered_error(raw: str, line: int, message: str, sources: Sources, root: Path) -> BuildError:
    path, source_line = _source_of_rendered_line(raw, line, sources, root)
    if path.endswith(TEMPLATE):
        lines = raw.splitlines()
        bad = lines[line - 1].strip() if 0 < line <= len(lines) else ""
        message += f" (rendered line {line}: {bad[:80]!r})"
    return BuildError(path, source_line, message)


def pin_line(package: str) -> tuple[str, int | None]:
    """(pyproject.toml as shown, the line that pins `package`), for errors about a build tool."""
    path = REPO_ROOT / "pyproject.toml"
    if path.is_file():
        for number, line in enumerate(path.read_text().splitlines(), 1):
            if line.strip().startswith(f'"{package}'):
                return "pyproject.toml", number
    return "pyproject.toml", None


def build_tool(name: str):
    """black or pyflakes (build time only: the H200 has neither), or one line saying how to install it."""
    import importlib

    try:
        return importlib.import_module(name)
    except ImportError:
        pin = BLACK_VERSION if name == "black" else ""
        wanted = f"{name}=={pin}" if pin else name
        raise BuildError(
            *pin_line(name), f"{name} is not installed: the build needs it (pip install '{wanted}')"
        )


def check_black_version(black) -> None:
    """Another black formats the file differently: what it would write CI rejects (build --check)."""
    if black.__version__ != BLACK_VERSION:
        raise BuildError(
            *pin_line("black"),
            f"black {black.__version__} is installed, the file is formatted with black {BLACK_VERSION} (pinned"
            f" here; another version formats it differently): pip install 'black=={BLACK_VERSION}'",
        )


def formatted_by(text: str) -> str | None:
    """The black version a built file names in its header (None for a file without one)."""
    match = re.search(r"^# Generated by `python -m generator build` \(black ([^)]+)\)", text, flags=re.M)
    return match.group(1) if match else None


def imported_kernels_dir() -> Path:
    return Path(registry.__file__).resolve().parent


def foreign_engines(root: Path) -> BuildError | None:
    """The engines that check the tables and route are the imported kernels_src's; `root`'s own modules are the
    ones inlined. Where they differ (another checkout's root), the build would mix the two: say where."""
    imported = imported_kernels_dir()
    own = (root / "kernels_src").resolve()
    if own == imported:
        return None
    pairs = [(own, imported)]
    if (root / "generator").is_dir():  # a checkout of its own: its generator builds it, not this one
        pairs.append(((root / "generator").resolve(), Path(__file__).resolve().parent))
    for own, imported in pairs:
        error = _first_difference(own, imported, root)
        if error:
            return error
    return None


def _first_difference(own: Path, imported: Path, root: Path) -> BuildError | None:
    names = {p.relative_to(own) for p in own.rglob("*.py")} | {
        p.relative_to(imported) for p in imported.rglob("*.py")
    }
    for name in sorted(names):
        mine, theirs = own / name, imported / name
        a = mine.read_bytes().splitlines() if mine.is_file() else []
        b = theirs.read_bytes().splitlines() if theirs.is_file() else []
        if a != b:
            line = next((i for i, (x, y) in enumerate(zip(a, b), 1) if x != y), min(len(a), len(b)) + 1)
            return BuildError(
                display_path(mine, root),
                line,
                f"differs from {theirs}, which this command imported (its engines would check these tables, its"
                f" generator build them): run the command inside {root} (cd {root} && python -m generator ...)",
            )
    return None


def render_submission(root: Path = REPO_ROOT) -> str:
    """The complete, black-formatted dist/submission.py for the inputs under `root`."""
    black = build_tool("black")  # build-time only: not on the H200
    check_black_version(black)
    build_tool("pyflakes")
    root = Path(root)
    raw, sources, template = render_raw(root, black.__version__, shipped=True)
    try:
        text = black.format_str(
            raw, mode=black.Mode(line_length=BLACK_LINE_LENGTH, magic_trailing_comma=False)
        )
    except black.parsing.InvalidInput as exc:
        raise BuildError(display_path(template, root), None, f"renders invalid Python: {exc}") from None
    check_contract(text, "dist/submission.py (rendered)")
    return text


def render_every_engine(root: Path = REPO_ROOT) -> str:
    """The file with every engine and everything build_only marks (unformatted): what `sweep`, `ab`, `profile` and
    `probe-gemm` load, to time an engine or a config no table routes yet. Needs neither black nor pyflakes."""
    return render_raw(Path(root), "none", shipped=False)[0]


def render_raw(root: Path, black_version: str, shipped: bool) -> tuple[str, Sources, Path]:
    """(the rendered text before black, the sources it holds, the template): the shipped file (the engines the
    tables route, without what build_only marks; checked for undefined names) or every engine."""
    template = root / "templates" / TEMPLATE
    try:  # its bytes first: a link loop, a byte that is not UTF-8 or a NUL is the template's own line
        read_text(template, display_path(template, root))
    except FileNotFoundError:
        raise BuildError(display_path(template, root), None, "template not found") from None
    sources = load_sources(root)
    foreign = foreign_engines(root)
    try:
        problem = load_problem(root)
        tables = load_tables(problem, root)
    except BuildError:
        # this generator's engines read the other checkout's tables: their verdict is not the point
        if foreign:
            raise foreign from None
        raise
    context = template_context(problem, tables, sources, root, black_version, shipped)
    raw = _render_template(root, context)
    check_rendered(raw, context["sources"], root, shipped)
    if foreign:
        raise foreign
    return raw, context["sources"], template


def template_context(
    problem: Problem, tables: dict, sources: Sources, root: Path, black_version: str, shipped: bool = True
) -> dict:
    """What templates/submission.py.j2 reads, every routed engine's launcher checked in CUDA_SRC first: the
    shipped file holds the engines the tables route (Sources.shipped), the other one every engine."""
    as_registry = {name: table.as_registry() for name, table in tables.items()}
    routed = dict.fromkeys(engine for *_, engine, _ in registry.routes(problem.layers.values(), as_registry))
    if shipped:
        sources = sources.shipped(routed)
        tables = {name: table for name, table in tables.items() if table.engine in routed}
    check_launchers(sources, routed, root)
    imports: list[str] = []
    for module in sources.python:
        imports.extend(statement for statement in module.imports if statement not in imports)
    layers = list(problem.layers.values())
    warmup = tuple(sorted(set(problem.verify_m) | set(problem.bench_m)))
    head, head_files = sources.shared_head()
    return {
        "problem": problem,
        "black_version": black_version,
        "engine_summaries": engine_summaries(routed if shipped else registry.BY_NAME.values()),
        "shape_lines": shape_lines(layers, as_registry, warmup),
        "kernels": kernel_lines(registry.variants(layers, as_registry)),
        "cuda_files": sources.cuda_files,
        "binding_files": sources.binding_files,
        "head_files": head_files,
        "cuda_head": head,
        "digest": input_digest(root, sources),
        "imports": imports,
        "width_rule": width_rule(problem),
        "cuda_rest": sources.cuda[len(head) :],
        "binding_rest": sources.binding[len(head) :],
        "layers_literal": layers_literal(problem),
        "warmup_m": repr(warmup),
        "tables_literal": tables_literal(tables, list(problem.layers)),
        "modules": sources.python,
        "sources": sources,
    }


def _render_template(root: Path, context: dict) -> str:
    try:
        return _environment(root).get_template(TEMPLATE).render(**context)
    except jinja2.TemplateNotFound:
        raise BuildError(
            display_path(root / "templates" / TEMPLATE, root), None, "template not found"
        ) from None
    except jinja2.TemplateError as exc:
        raise _template_error(exc, root) from None


def check_rendered(raw: str, sources: Sources, root: Path, names: bool = True) -> None:
    """The rendered text before black: valid Python, no undefined name (`names`), the template's part within the
    contract (the modules were checked on their own, load_sources); an error names the source or template line.
    """
    try:
        ast.parse(raw)
    except SyntaxError as exc:
        raise _rendered_error(
            raw, exc.lineno or 1, f"renders invalid Python: {exc.msg}", sources, root
        ) from None
    for line, message in undefined_names(raw) if names else ():
        raise _rendered_error(raw, line, f"{message} in the rendered submission", sources, root)
    for line, message in contract_violations(raw)[:1]:
        raise _rendered_error(raw, line, message, sources, root)
