"""sources + tables + template -> the text of dist/submission.py (pure: reads inputs, writes nothing)."""

from __future__ import annotations

import hashlib
import traceback
from pathlib import Path

import jinja2

from generator import REPO_ROOT
from generator.contract import check_contract, undefined_names
from generator.errors import BuildError, display_path
from generator.problem import Problem, load_problem
from generator.sources import Sources, load_sources
from generator.tables import TABLES, Table, load_tables
from kernels_src import dispatch

TEMPLATE = "submission.py.j2"
BLACK_LINE_LENGTH = 110


def table_literal(entries: dict, layer_order: list[str]) -> str:
    """A dict literal with keys in problem order, then m: deterministic, and black formats it."""
    keys = sorted(entries, key=lambda key: (layer_order.index(key[0]), key[1]))
    return "{" + ", ".join(f"{key!r}: {entries[key]!r}" for key in keys) + "}"


def layers_literal(problem: Problem) -> str:
    items = []
    for layer in problem.layers.values():
        narrow = (layer.narrow_n, layer.narrow_max_m) if layer.narrow_n is not None else None
        spec = {"n": layer.n, "k": layer.k, "dtype": layer.dtype, "narrow": narrow}
        items.append(f"{layer.name!r}: {spec!r}")
    return "{" + ", ".join(items) + "}"


def served_lines(problem: Problem, ctable: Table, ttable: Table, ztable: Table) -> list[str]:
    """One line per layer: which m's each engine serves, as kernel_fn will route them."""
    ms = sorted(set(problem.verify_m) | set(problem.bench_m))
    lines = []
    for layer in problem.layers.values():
        by_engine: dict[str, list[int]] = {}
        for m in ms:
            engine, _ = dispatch.route(
                layer.name, m, layer.dual, ctable.entries, ctable.defaults, ttable.entries, ztable.entries
            )
            by_engine.setdefault(engine, []).append(m)
        parts = [f"{engine} m={','.join(map(str, ms_))}" for engine, ms_ in by_engine.items()]
        lines.append(f"{layer.name + ':':<10} " + "; ".join(parts))
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
    problem = load_problem(root)
    tables = load_tables(problem, root)
    sources = load_sources(root)
    order = list(problem.layers)
    imports: list[str] = []
    for module in sources.python:
        imports.extend(statement for statement in module.imports if statement not in imports)
    context = {
        "problem": problem,
        "gemv_max_m": dispatch.GEMV_MAX_M,
        "served": served_lines(problem, tables["CTABLE"], tables["TTABLE"], tables["ZTABLE"]),
        "cuda_files": sources.cuda_files,
        "digest": input_digest(root, sources),
        "imports": imports,
        "width_rule": width_rule(problem),
        "cuda_src": sources.cuda,
        "binding_src": sources.binding,
        "layers_literal": layers_literal(problem),
        "warmup_m": repr(tuple(sorted(set(problem.verify_m) | set(problem.bench_m)))),
        "tables": [
            {"name": spec.name, "doc": spec.doc, "literal": table_literal(tables[spec.name].entries, order)}
            for spec in TABLES
        ],
        "ctable_defaults": repr(tables["CTABLE"].defaults),
        "modules": sources.python,
    }
    try:
        raw = _environment(root).get_template(TEMPLATE).render(**context)
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
