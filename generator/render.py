"""sources + tables + template -> the text of dist/submission.py (pure: reads inputs, writes nothing)."""

from __future__ import annotations

import ast
import hashlib
import re
import sys
import textwrap
from pathlib import Path

from generator import REPO_ROOT
from generator.contract import check_contract, contract_violations, undefined_names
from generator.cxx import identifiers, without_unreached
from generator.engines import BY_NAME, ENGINES
from generator.errors import BuildError, display_path, read_text
from generator.launch_table import extension_name, launch_table
from generator.problem import Problem, load_problem
from generator.sources import Sources, check_launchers, load_sources
from generator.tables import load_tables, with_field_header
from generator.templating import render_template
from kernels_src.cublas import CUBLAS
from kernels_src.registry import route, routes, variants

TEMPLATE = "submission.py.j2"
TEMPLATES = (TEMPLATE, "launch_table.cu.j2")
BLACK_LINE_LENGTH = 110
BLACK_VERSION = "26.10.1"  # pyproject.toml pins the same (tests/test_build.py checks): CI formats with it


def config_source(cfg) -> str:
    """A config as the file writes it: its class called with each field by name (those at their default left
    out), or None."""
    if cfg is None:
        return "None"
    defaults = getattr(cfg, "_field_defaults", {})
    named = [
        f'{k}="{v}"' if isinstance(v, str) else f"{k}={v}"
        for k, v in cfg._asdict().items()
        if k not in defaults or v != defaults[k]
    ]
    return f"{type(cfg).__name__}({', '.join(named)})"


def engine_constant(engine) -> str:
    """The module-level name its module binds the engine object to (TMA_GEMV): the file's name for it."""
    module = sys.modules[type(engine).__module__]
    return next(name for name, value in vars(module).items() if value is engine and name.isupper())


def tables_source(tables, layer_order: list[str]) -> str:
    """The TABLES tuple as black would lay it out but one entry a line (the template keeps black off it): each
    engine's Table in routing order, its entries' keys in problem order then m, each config by its fields' names.
    """
    lines = ["("]
    for table in tables:
        keys = sorted(table.entries, key=lambda key: (layer_order.index(key[0]), key[1]))
        lines.append(f"    Table({engine_constant(table.engine)}, {{")
        lines += [f"        {_quoted(key)}: {config_source(table.entries[key])}," for key in keys]
        if table.engine.has_defaults:
            defaults = ", ".join(f'"{kind}": {config_source(cfg)}' for kind, cfg in table.defaults.items())
            lines.append(f"    }}, {{{defaults}}}),")
        else:
            lines.append("    }),")
    return "\n".join(lines + [")"])


def _quoted(key: tuple) -> str:
    """A (layer, m) key as black writes it (double quotes)."""
    return f'("{key[0]}", {key[1]})'


def layers_literal(problem: Problem) -> str:
    items = []
    for layer in problem.layers.values():
        spec = {"n": layer.n, "k": layer.k, "dtype": layer.dtype}
        if layer.narrow_n is not None:
            spec.update(narrow_n=layer.narrow_n, narrow_max_m=layer.narrow_max_m)
        items.append(f"{layer.name!r}: {spec!r}")
    return "{" + ", ".join(items) + "}"


def engine_summaries(tables, width: int = BLACK_LINE_LENGTH) -> list[str]:
    """The summary paragraph of each engine of the tables (their order, cuBLAS last), wrapped for the docstring."""
    return [textwrap.fill(engine.summary, width) for engine in [table.engine for table in tables] + [CUBLAS]]


def shape_lines(layers, tables, ms, route=route) -> list:
    """One line per (layer, m in ms): the output width and the engine and config that serve it (`route`: the
    routing of a built file, for `dispatch`; the configs described by this checkout's engines of those names).
    """
    lines = []
    for layer in layers:
        for m in ms:
            engine, cfg = route(layer, m, tables)
            described = BY_NAME[engine.name].describe(cfg)
            lines.append(
                f"{layer.name:<9} {m:>4} {layer.n_for(m):>5}  {engine.name:<15} {described}".rstrip()
            )
    return lines


def width_rule(problem: Problem) -> str:
    rules = [
        f"{layer.name} {layer.narrow_n} at m <= {layer.narrow_max_m}, else {layer.n}"
        for layer in problem.layers.values()
        if layer.narrow_n is not None
    ]
    return "the layer's n" + (f" ({'; '.join(rules)})" if rules else "")


def input_digest(root: Path, sources: Sources) -> str:
    """sha256 over every input of the file (path and bytes), in a fixed order: the tables (each with its field
    lines as its engine declares them: build writes them so), the templates and the sources it inlines."""
    tables = {path: path.read_bytes() for path in (root / "tables").glob("*.yaml")}
    for engine in ENGINES:
        path = root / "tables" / engine.table_file
        tables[path] = with_field_header(engine, tables[path].decode()).encode()
    files = {
        path: path.read_bytes()
        for path in set(sources.input_files) | {root / "templates" / t for t in TEMPLATES}
    }
    files.update(tables)
    digest = hashlib.sha256()
    for path in sorted(files):
        digest.update(display_path(path, root).encode() + b"\0" + files[path] + b"\0")
    return digest.hexdigest()[:16]


# The header's digest of the file itself (render_submission seals it; unsealed() reads it back)
UNSEALED = "-" * 16
_OWN_DIGEST = re.compile(r"this file sha256:([0-9a-f]{16})")


def sealed(text: str) -> str:
    """The file with its own digest in its header (where the template left UNSEALED)."""
    return text.replace(f"this file sha256:{UNSEALED}", f"this file sha256:{_sha(text)}", 1)


def edited_since_built(text: str) -> bool:
    """Whether a built file differs from the text its build sealed (a hand edit); a file without the seal is."""
    match = _OWN_DIGEST.search(text)
    return match is None or _sha(text[: match.start(1)] + UNSEALED + text[match.end(1) :]) != match.group(1)


def _sha(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()[:16]


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
    return Path(sys.modules["kernels_src.registry"].__file__).resolve().parent


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
    """The complete, black-formatted dist/submission.py for the inputs under `root`, sealed with its own digest."""
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
    return sealed(text)


def render_every_engine(root: Path = REPO_ROOT) -> str:
    """The file with every engine and everything build_only marks (unformatted): what `sweep`, `ab`, `profile` and
    `probe-gemm` load, to time an engine or a config no table routes yet. Needs neither black nor pyflakes."""
    return render_raw(Path(root), "none", shipped=False)[0]


def render_raw(root: Path, black_version: str, shipped: bool) -> tuple[str, Sources, Path]:
    """(the rendered text before black, the sources it holds, the template): the shipped file (the engines the
    tables route, without what build_only marks, its C++ what the launch table reaches; checked for undefined
    names, also in what it leaves out) or every engine."""
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
    raw = render_template(root, TEMPLATE, context)
    check_rendered(raw, context["sources"], root, shipped)
    if shipped:
        check_undefined_names(sources, root, raw)
    if foreign:
        raise foreign
    return raw, context["sources"], template


def check_undefined_names(sources: Sources, root: Path, raw: str) -> None:
    """pyflakes on each module as written, beside the names the template itself defines (raw: the rendered file):
    a name undefined in what the file leaves out (a rule, build_only) fails the build too."""
    template_names = set()
    for node in ast.parse(raw).body:
        if isinstance(node, ast.ClassDef):
            template_names.add(node.name)
        elif isinstance(node, (ast.Assign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            template_names |= {target.id for target in targets if isinstance(target, ast.Name)}
    template_names -= {name for module in sources.python for name, _ in module.defines}
    for module in sources.python:
        for line, message in undefined_names((root / module.path).read_text(), template_names)[:1]:
            raise BuildError(module.path, line, message)


def template_context(
    problem: Problem, tables: tuple, sources: Sources, root: Path, black_version: str, shipped: bool = True
) -> dict:
    """What templates/submission.py.j2 reads, every engine's launcher checked in CUDA_SRC first: the shipped file
    holds the engines the tables route (Sources.shipped) and of their C++ what the launch table reaches, the
    other one every engine."""
    check_launchers(sources, ENGINES, root)
    if shipped:
        sources, tables = shipped_inputs(problem, tables, sources)
    layers = list(problem.layers.values())
    kernels = variants(layers, tables)
    head, cuda_rest, table_cpp = cuda_for(sources, kernels, root, prune=shipped)
    head_files = sources.shared_head()[1]
    imports: list[str] = []
    for module in sources.python:
        imports.extend(statement for statement in module.imports if statement not in imports)
    warmup = tuple(sorted(set(problem.verify_m) | set(problem.bench_m)))
    return {
        "problem": problem,
        "black_version": black_version,
        "engine_summaries": engine_summaries(tables),
        "shape_lines": shape_lines(layers, tables, warmup),
        "kernels": kernels,
        "kernels_literal": "(" + "".join(f"{variant.case!r}, " for variant in kernels) + ")",
        "distinct_kernels": len({(variant.engine, variant.kernel) for variant in kernels}),
        "extension": extension_name("\n" + head + cuda_rest, table_cpp),  # CUDA_SRC opens with a newline
        "cuda_files": sources.cuda_files,
        "binding_files": sources.binding_files,
        "head_files": head_files,
        "cuda_head": head,
        "digest": input_digest(root, sources),
        "own_digest": UNSEALED,
        "imports": imports,
        "width_rule": width_rule(problem),
        "cuda_rest": cuda_rest,
        "binding_rest": sources.binding[len(sources.shared_head()[0]) :],
        "launch_table": table_cpp,
        "layers_literal": layers_literal(problem),
        "warmup_m": repr(warmup),
        "tables_source": tables_source(tables, list(problem.layers)),
        "modules": sources.python,
        "sources": sources,
    }


def shipped_inputs(problem: Problem, tables: tuple, sources: Sources) -> tuple[Sources, tuple]:
    """(the sources, the tables) of the engines the tables route: what the shipped file holds."""
    routed = dict.fromkeys(engine for *_, engine, _ in routes(problem.layers.values(), tables))
    return sources.shipped(routed), tuple(table for table in tables if table.engine in routed)


def not_built_from(text: str, root: Path) -> str | None:
    """Why a submission file is not what `build` makes from the checkout at root now, in words, or None: edited
    since it was built, or built from other inputs (its header's digests; read without black, as on the H200).
    """
    recorded = re.search(r"inputs\s+(?:#\s+)?sha256:([0-9a-f]{16})", text)
    if recorded is None:
        return "no file `python -m generator build` wrote (its header names no inputs)"
    if edited_since_built(text):
        return "edited since build wrote it (its own digest in its header no longer matches)"
    problem = load_problem(root)
    sources, _ = shipped_inputs(problem, load_tables(problem, root), load_sources(root))
    if recorded.group(1) != input_digest(root, sources):
        return "built from other sources or tables than this checkout's (its header's inputs digest differs)"
    return None


def cuda_for(sources: Sources, kernels, root: Path, prune: bool = True) -> tuple[str, str, str]:
    """(CUDA_HEAD, CUDA_SRC past it, LAUNCH_TABLE) that build these kernels from `sources` (those of their
    engines: Sources.shipped): with `prune`, of the C++ only what the launch table and the binding reach
    (generator/cxx.py), as the file ships it and `compile` compiles it."""
    table = launch_table(kernels, root)
    head = sources.shared_head()[0]
    rest = sources.cuda[len(head) :]
    if not prune:
        return head, rest, table
    roots = identifiers(table) | identifiers(sources.binding[len(head) :])
    marker = rest.split("\n", 1)[0] if rest else None  # the rest's first #line directive
    pruned = without_unreached(head + rest, roots)
    at = pruned.index(marker + "\n") if marker else len(pruned)
    return pruned[:at], pruned[at:], table


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


CPP_NAMES = ("CUDA_HEAD", "CUDA_SRC", "BINDING_SRC", "LAUNCH_TABLE")


def cpp_sources(text: str) -> dict[str, str]:
    """A built file's C++ strings as it defines them (CPP_NAMES: literals and sums of them and of those before):
    what prepare() compiles, read without running the file."""
    values: dict[str, str] = {}

    def value(node):
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
            return value(node.left) + value(node.right)
        return values[node.id] if isinstance(node, ast.Name) else ast.literal_eval(node)

    for node in ast.parse(text).body:
        target = node.targets[0] if isinstance(node, ast.Assign) else None
        if isinstance(target, ast.Name) and target.id in CPP_NAMES:
            values[target.id] = value(node.value)
    return values
