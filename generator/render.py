"""sources + tables + template -> the text of dist/submission.py (pure: reads inputs, writes nothing)."""

from __future__ import annotations

import hashlib
import textwrap
import traceback
from pathlib import Path

import jinja2

from generator import REPO_ROOT
from generator.contract import check_contract, undefined_names
from generator.errors import BuildError, display_path
from generator.problem import Problem, load_problem
from generator.sources import Sources, load_sources
from generator.tables import load_tables
from kernels_src import registry

TEMPLATE = "submission.py.j2"
BLACK_LINE_LENGTH = 110


def tables_literal(tables: dict, layer_order: list[str]) -> str:
    """The TABLES dict literal: per engine (precedence order) its entries, keys in problem order then m, and its
    defaults; deterministic, and black formats it."""
    parts = []
    for name, table in tables.items():
        literal = table.literal()
        entries = literal["entries"]
        keys = sorted(entries, key=lambda key: (layer_order.index(key[0]), key[1]))
        body = ["'entries': {" + ", ".join(f"{key!r}: {entries[key]!r}" for key in keys) + "}"]
        if "defaults" in literal:
            body.append(f"'defaults': {literal['defaults']!r}")
        parts.append(f"{name!r}: {{" + ", ".join(body) + "}")
    return "{" + ", ".join(parts) + "}"


def layers_literal(problem: Problem) -> str:
    items = []
    for layer in problem.layers.values():
        spec = {"n": layer.n, "k": layer.k, "dtype": layer.dtype}
        if layer.narrow_n is not None:
            spec.update(narrow_n=layer.narrow_n, narrow_max_m=layer.narrow_max_m)
        items.append(f"{layer.name!r}: {spec!r}")
    return "{" + ", ".join(items) + "}"


def engine_summaries(width: int = BLACK_LINE_LENGTH) -> list[str]:
    """Each engine's summary paragraph (kernels_src/registry.py order, cuBLAS last), wrapped for the docstring."""
    engines = registry.ENGINES + (registry.BY_NAME["cublas"],)
    return [textwrap.fill(engine.summary, width) for engine in engines]


def kernel_lines(kernels) -> list[str]:
    """One line per compiled kernel: its engine and its launcher's template and run-time arguments, by name."""
    lines = []
    for number, variant in enumerate(kernels):
        engine = registry.BY_NAME[variant.engine]
        names = ", ".join(f"{f}={v}" for f, v in zip(engine.template_fields, variant.template))
        lines.append(f"{number:>2} {variant.engine:<15} <{names}> {variant.runtime}")
    return lines


def width_rule(problem: Problem) -> str:
    rules = [
        f"{layer.name} {layer.narrow_n} at m <= {layer.narrow_max_m}, else {layer.n}"
        for layer in problem.layers.values()
        if layer.narrow_n is not None
    ]
    return "the layer's n" + (f" ({'; '.join(rules)})" if rules else "")


def input_digest(root: Path, sources: Sources) -> str:
    """sha256 over every input file (path and bytes), in a fixed order."""
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


def _source_of_rendered_line(raw: str, line: int, sources: Sources, root: Path) -> tuple[str, int]:
    """Map a line of the rendered (pre-black) text back to a kernels_src module line, if it came from one."""
    lines = raw.splitlines()
    for module in reversed(sources.python):
        marker = f"# ---- {module.path}:"
        starts = [i for i, text in enumerate(lines[:line], 1) if text.startswith(marker)]
        if starts:
            return module.path, module.first_line + (line - starts[-1] - 1)
    return display_path(root / "templates" / TEMPLATE, root) + " (rendered)", line


def render_submission(root: Path = REPO_ROOT) -> str:
    """The complete, black-formatted dist/submission.py for the inputs under `root`."""
    import black  # build-time only: not on the H200

    root = Path(root)
    if not (root / "templates" / TEMPLATE).is_file():
        raise BuildError(display_path(root / "templates" / TEMPLATE, root), None, "template not found")
    problem = load_problem(root)
    tables = load_tables(problem, root)
    sources = load_sources(root)
    order = list(problem.layers)
    imports: list[str] = []
    for module in sources.python:
        imports.extend(statement for statement in module.imports if statement not in imports)
    as_registry = {name: table.as_registry() for name, table in tables.items()}
    layers = list(problem.layers.values())
    warmup = tuple(sorted(set(problem.verify_m) | set(problem.bench_m)))
    context = {
        "problem": problem,
        "engine_summaries": engine_summaries(),
        "shape_lines": registry.shape_lines(layers, as_registry, warmup),
        "kernels": kernel_lines(registry.variants(layers, as_registry)),
        "cuda_files": sources.cuda_files,
        "binding_files": sources.binding_files,
        "digest": input_digest(root, sources),
        "imports": imports,
        "width_rule": width_rule(problem),
        "cuda_src": sources.cuda,
        "binding_src": sources.binding,
        "layers_literal": layers_literal(problem),
        "warmup_m": repr(warmup),
        "tables_literal": tables_literal(tables, order),
        "modules": sources.python,
    }
    try:
        raw = _environment(root).get_template(TEMPLATE).render(**context)
    except jinja2.TemplateNotFound:
        raise BuildError(
            display_path(root / "templates" / TEMPLATE, root), None, "template not found"
        ) from None
    except jinja2.TemplateError as exc:
        raise _template_error(exc, root) from None
    for line, message in undefined_names(raw):
        path, source_line = _source_of_rendered_line(raw, line, sources, root)
        raise BuildError(path, source_line, f"{message} in the rendered submission")
    try:
        text = black.format_str(raw, mode=black.Mode(line_length=BLACK_LINE_LENGTH))
    except black.parsing.InvalidInput as exc:
        raise BuildError(
            display_path(root / "templates" / TEMPLATE, root), None, f"renders invalid Python: {exc}"
        )
    check_contract(text, "dist/submission.py (rendered)")
    return text
