"""Tuning tables (tables/<engine>.yaml, one per engine: generator/engines.py): load, check every entry against its
engine's fields and rule, and return them as the registry's Tables (and the line each entry sits on).

A table file holds `entries: {layer: {m: {field: value, ...} or null}}` and, for an engine with defaults (the
mma.sync GEMV), `defaults: {plain: {...}, dual: {...}}`: the config for an m that no entry of its class covers.
null means "not this engine here": the next engine in precedence order decides."""

from __future__ import annotations

import difflib
from pathlib import Path

from generator import REPO_ROOT
from generator.candidates import candidates
from generator.engines import ENGINES
from generator.errors import BuildError, display_path
from generator.problem import PLAN_MAX_M_IS, Problem
from generator.yamlio import Located, load_located, plain, require_keys
from kernels_src.engine import PLAN_MAX_M, REQUIRED
from kernels_src.registry import Table, routes

KINDS = ("plain", "dual")  # the weight kinds a default is given for: bf16 weights, fp32 (hi + lo) weights


def field_header_lines(engine, width: int = 118) -> list:
    """The field lines of an engine's table header (tables/<engine>.yaml): the `#   layer -> m -> {...}` line, then
    one entry per Field, its meaning, allowed values (or bounds, in words) and default, wrapped at `width`."""
    lines = [f"#   layer -> m -> {{{', '.join(engine.fields)}}}"]
    for f in engine.FIELDS:
        values = f.bounds if f.allowed is None else ", ".join(map(str, f.allowed))
        named = f.type is str and all(name in f.meaning for name in f.allowed)  # the meaning lists them
        text = f"{f.meaning} ({values})" if values and not named else f.meaning
        if f.default is not REQUIRED:
            text += f"; default {f.default}"
        lead = f"#     {f.name:<11} "
        line = lead
        for word in text.split():
            if len(line) + 1 + len(word) > width and line.strip() != lead.strip():
                lines.append(line.rstrip())
                line = "#" + " " * (len(lead) - 1)
            line += word + " "
        lines.append(line.rstrip())
    return lines


def with_field_header(engine, text: str) -> str:
    """A table's text with its header's field block (the `#   layer -> m -> {...}` line and the field lines under
    it) rendered from the engine's Field declarations (field_header_lines): the block is derived, never edited.
    A table whose block is gone gets it back where it stands in every table: in the leading comment block, after
    the engine's description (the lines `# ...`), before the notes indented under it (`#   ...`)."""
    lines = text.split("\n")
    start = next((i for i, line in enumerate(lines) if line.startswith("#   layer -> m -> {")), None)
    if start is None:
        comments = next((i for i, line in enumerate(lines) if not line.startswith("#")), len(lines))
        start = next((i for i in range(comments) if lines[i].startswith("#   ")), comments)
        return "\n".join(lines[:start] + field_header_lines(engine) + lines[start:])
    end = start + 1
    while end < len(lines) and lines[end].startswith("#    "):
        end += 1
    return "\n".join(lines[:start] + field_header_lines(engine) + lines[end:])


def stale_field_header(engine, text: str, shown: str) -> str | None:
    """`file:line: ...` at the first line of the table's field block that its engine's Field declarations do not
    render (a block edited by hand, out of date, or deleted), else None."""
    fresh = with_field_header(engine, text)
    if fresh == text:
        return None
    old, new = text.split("\n"), fresh.split("\n")
    line = next((i for i, (a, b) in enumerate(zip(old, new)) if a != b), min(len(old), len(new))) + 1
    what = "stale field lines" if "#   layer -> m -> {" in text else "no field lines"
    return (
        f"{shown}:{line}: {what} (they are rendered from {engine.name}'s Field declarations,"
        f" kernels_src/{engine.name}.py): `python -m generator build` rewrites them"
    )


def shape_error(engine, layer, m: int, problem: Problem, error: str) -> BuildError | None:
    """When no config of `engine` at all can serve m tokens of `layer` but some would with n and k rounded up (its
    n or k is the trouble, not the table), the error belongs to tables/problem.yaml's line for the layer."""
    if candidates(engine, layer, m):
        return None
    rounded = layer._replace(n=-(-layer.n_for(m) // 256) * 256, k=-(-layer.k // 1024) * 1024, narrow_n=None)
    if not candidates(engine, rounded, m):
        return None  # not a question of this layer's n or k: the engine does not serve its kind at all
    return BuildError(
        problem.file,
        problem.lines.get(layer.name),
        f"{layer.name} (n={layer.n_for(m)}, k={layer.k}): no {engine.name} config can serve it at m={m}, and"
        f" tables/{engine.table_file} has one for it: {error}",
    )


def _config(engine, value: Located, what: str):
    """A Config from an entry (a YAML mapping field -> value), or None for null; a bad one fails on its line."""
    if value.value is None:
        return None
    if not isinstance(value.value, dict):
        raise value.fail(
            f"{what}: expected a mapping {{{', '.join(engine.fields)}}} or null, got {plain(value)!r}"
        )
    for name, (name_loc, _) in value.value.items():
        if name not in engine.fields:
            raise name_loc.fail(
                f"{what}: unknown field {name!r} (the {engine.name} fields: {', '.join(engine.fields)})"
            )
    try:
        return engine.make_config(plain(value))
    except ValueError as exc:
        raise value.fail(f"{what}: {exc}") from None


def parse_table(engine, doc: Located, problem: Problem) -> tuple[Table, dict]:
    """(engine's Table, (layer, m) -> the line its entry sits on), every entry checked."""
    shown = "tables/" + engine.table_file
    top = require_keys(doc, shown, {"entries"}, {"defaults"} if engine.has_defaults else set())
    table, lines = Table(engine, {}, {}), {}
    if engine.has_defaults:
        if "defaults" not in top:
            raise doc.fail(f"{shown} lacks defaults: {{plain: {{...}}, dual: {{...}}}}")
        for kind, value in require_keys(top["defaults"], "defaults", set(KINDS)).items():
            cfg = _config(engine, value, f"defaults.{kind}")
            table.defaults[kind] = cfg
            if cfg is None:
                continue
            # a default serves every m its entries leave uncovered, on every layer of its kind: check the largest
            # m of each class, where it is hardest
            for layer in problem.layers.values():
                if layer.dual != (kind == "dual"):
                    continue
                for m in engine.class_maxima():
                    error = engine.config_error(cfg, layer, m)
                    if error:
                        raise shape_error(engine, layer, m, problem, error) or value.fail(
                            f"defaults.{kind} on {layer.name} m={m}: {error}"
                        )
    entries = top["entries"]
    if entries.value is None:
        entries = Located({}, entries.line, entries.file)
    if not isinstance(entries.value, dict):
        raise entries.fail("entries must be a mapping layer -> m -> entry")
    for layer_name, (layer_loc, per_m) in entries.value.items():
        layer = problem.layers.get(layer_name)
        if layer is None:
            raise layer_loc.fail(
                f"unknown layer {layer_name!r} (tables/problem.yaml has {sorted(problem.layers)})"
            )
        if not isinstance(per_m.value, dict):
            raise per_m.fail(f"{layer_name}: expected a mapping m -> entry")
        for m, (m_loc, value) in per_m.value.items():
            if type(m) is not int or not engine.serves(m) or m > PLAN_MAX_M:
                top_m = min(PLAN_MAX_M, engine.m_max or PLAN_MAX_M)
                why = f"; {PLAN_MAX_M} is {PLAN_MAX_M_IS}" if top_m == PLAN_MAX_M else ""
                raise m_loc.fail(
                    f"{layer_name}: m must be an integer {engine.m_min} <= m <= {top_m}, got {m!r}{why}"
                )
            what = f"{engine.name}[{layer_name}, {m}]"
            cfg = _config(engine, value, what)
            if cfg is not None:
                error = engine.config_error(cfg, layer, m)
                if error:
                    raise shape_error(engine, layer, m, problem, error) or value.fail(f"{what}: {error}")
            table.entries[(layer_name, m)] = cfg
            lines[(layer_name, m)] = value.line
    return table, lines


def load_table(engine, problem: Problem, root: Path = REPO_ROOT) -> tuple[Table, dict]:
    path = Path(root) / "tables" / engine.table_file
    return parse_table(engine, load_located(path, display_path(path, Path(root))), problem)


def load_tables(problem: Problem, root: Path = REPO_ROOT) -> tuple[Table, ...]:
    """Every engine's table, checked, in routing order; then every route the tables make for m = 1 ..
    plan_max_m on every layer (also past a compressed engine prepare() may find the weights unfit for) checked at
    the m it serves: a config borrowed from another m or a default must fit there too."""
    root = Path(root)
    check_table_files(root)
    docs = {}
    for engine in ENGINES:
        path = root / "tables" / engine.table_file
        docs[engine] = load_located(path, display_path(path, root))
    check_layer_names(problem, docs.values())
    parsed = [parse_table(engine, doc, problem) for engine, doc in docs.items()]
    tables = tuple(table for table, _ in parsed)
    check_routes(problem, tables, {table.engine.name: lines for table, lines in parsed})
    return tables


def check_table_files(root: Path) -> None:
    """tables/ holds problem.yaml and one table per engine: any other YAML file there would be read by nothing
    (yet it would enter the inputs digest), most likely a table whose engine no listed module defines.
    """
    known = {"problem.yaml"} | {engine.table_file for engine in ENGINES}
    for path in sorted((root / "tables").glob("*.yaml")):
        if path.name not in known:
            raise BuildError(
                display_path(path, root),
                None,
                f"no engine reads this table (the engines kernels_src/sources.yaml's modules define: "
                f"{', '.join(engine.name for engine in ENGINES)}): list its engine's module there or remove the file",
            )


def check_layer_names(problem: Problem, docs) -> None:
    """A layer that two or more tables name but tables/problem.yaml lacks is problem.yaml's mistake (a misspelt or
    renamed layer there), not each table's: blame its line."""
    named: dict[str, list[tuple[str, int]]] = {}
    for doc in docs:
        entries = doc.value.get("entries") if isinstance(doc.value, dict) else None
        if entries is None or not isinstance(entries[1].value, dict):
            continue
        for name, (loc, _) in entries[1].value.items():
            named.setdefault(name, []).append((loc.file, loc.line))
    for name, places in named.items():
        if name in problem.layers or len(places) < 2:
            continue
        close = difflib.get_close_matches(str(name), list(problem.layers), n=1)
        line = problem.lines.get(close[0]) if close else problem.layers_line
        instead = f"; is {close[0]!r} misspelt?" if close else ""
        raise BuildError(
            problem.file,
            line,
            f"no layer {name!r}, which {len(places)} tables name ({places[0][0]}:{places[0][1]}, ...){instead}",
        )


def check_routes(problem: Problem, tables: tuple, lines: dict) -> None:
    """Every route of the tables passes its engine's rule at its m (lines: engine -> (layer, m) -> line)."""
    for layer, m, _, engine, cfg in routes(problem.layers.values(), tables):
        if engine.name == "cublas":
            continue
        error = engine.config_error(cfg, layer, m)
        if error:
            table = next(table for table in tables if table.engine is engine)
            listed = table.listed(layer.name)
            row = m if m in listed else engine.borrowed_m(m, listed)
            line = lines[engine.name].get((layer.name, row)) if row is not None else None
            origin = "the default" if row is None else "its entry" if row == m else f"the entry of m={row}"
            blamed = shape_error(engine, layer, m, problem, error)
            if blamed:
                raise blamed
            raise BuildError(
                "tables/" + engine.table_file,
                line,
                f"{layer.name} m={m} routes to {engine.name} ({origin}: {engine.describe(cfg)}), which cannot"
                f" serve it: {error}",
            )
