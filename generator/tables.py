"""Tuning tables (tables/*.yaml): load, validate against the problem and the kernels, and return plain dicts.

Each table maps (layer, m) to a tuple of integers, or to None ("not this engine: fall back")."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from generator import REPO_ROOT
from generator.errors import display_path
from generator.problem import Problem
from generator.yamlio import Located, load_located, require_keys
from kernels_src import dispatch


@dataclass(frozen=True)
class TableSpec:
    """What one tables/*.yaml file holds and how each entry is checked."""

    name: str  # the dict's name in dist/submission.py
    file: str  # under tables/
    fields: tuple[str, ...]
    doc: str  # the comment above the dict in dist/submission.py
    m_ok: Callable[[int], bool]
    m_rule: str
    # check(layer, m, entry) -> error text or None, beyond arity and integer-ness
    check: Callable[[object, int, tuple], str | None] | None = None
    has_defaults: bool = False
    implemented: bool = True  # False: no engine serves it yet, so entries are refused


def _check_gemv(layer, m, cfg):
    return dispatch.gemv_config_error(cfg, m, layer.dual, layer.n_for(m), layer.k)


def _check_tma(layer, m, cfg):
    return dispatch.tma_config_error(cfg, m, layer.dual, layer.n_for(m), layer.k)


def _check_z(layer, m, cfg):
    return dispatch.zgemv_config_error(cfg, m, layer.dual, layer.n_for(m), layer.k)


# The m range every GEMV table serves (decode batches); the Triton table serves the rest.
DECODE_M = dict(m_ok=lambda m: 1 <= m <= dispatch.GEMV_MAX_M, m_rule=f"1 <= m <= {dispatch.GEMV_MAX_M}")

TABLES = (
    TableSpec(
        name="CTABLE",
        file="ctable.yaml",
        fields=("NW", "S", "U", "P", "R", "C"),
        doc="(layer, m) -> (NW, S, U, P, R, C) for the plain tensor-core GEMV; None sends the shape to cuBLAS",
        **DECODE_M,
        check=_check_gemv,
        has_defaults=True,
    ),
    TableSpec(
        name="TTABLE",
        file="ttable.yaml",
        fields=("S", "STAGES", "C"),
        doc="(layer, m) -> (S, STAGES, C) for the bulk-copy + wgmma GEMV; it takes precedence over CTABLE, and None"
        " (or no entry) leaves the shape to CTABLE",
        **DECODE_M,
        check=_check_tma,
    ),
    TableSpec(
        name="ZTABLE",
        file="ztable.yaml",
        fields=("NW", "S", "UG", "P", "R", "C"),
        doc="(layer, m) -> (NW, S, UG, P, R, C) for the compressed (12-bit lossless) GEMV; it takes precedence"
        " over TTABLE and CTABLE, and None (or no entry) leaves the shape to them",
        **DECODE_M,
        check=_check_z,
    ),
    TableSpec(
        name="TABLE",
        file="table.yaml",
        fields=("BN", "BM", "BK", "SPLIT", "num_warps", "num_stages", "tma", "atom"),
        doc="(layer, m) -> (BN, BM, BK, SPLIT, num_warps, num_stages, tma, atom) for the Triton split-K GEMM"
        " (no engine yet: empty)",
        m_ok=lambda m: m > dispatch.GEMV_MAX_M,
        m_rule=f"m > {dispatch.GEMV_MAX_M}",
        implemented=False,
    ),
)


@dataclass
class Table:
    spec: TableSpec
    entries: dict[tuple[str, int], tuple[int, ...] | None]
    defaults: dict[str, tuple[int, ...] | None] = field(default_factory=dict)
    lines: dict[tuple[str, int], int] = field(default_factory=dict)  # where each entry was written


def _entry(spec: TableSpec, value: Located, what: str) -> tuple[int, ...] | None:
    if value.value is None:
        return None
    if not isinstance(value.value, list):
        raise value.fail(f"{what}: expected a list {list(spec.fields)} or null, got {value.value!r}")
    items = [item.value for item in value.value]
    if len(items) != len(spec.fields):
        raise value.fail(f"{what}: expected {len(spec.fields)} values {list(spec.fields)}, got {len(items)}")
    for fname, item in zip(spec.fields, value.value):
        if type(item.value) is not int:
            raise item.fail(f"{what}: {fname} must be an integer, got {item.value!r}")
    return tuple(items)


def parse_table(spec: TableSpec, doc: Located, problem: Problem) -> Table:
    top = require_keys(doc, spec.file, {"entries"}, {"defaults"} if spec.has_defaults else set())
    table = Table(spec, {})
    if spec.has_defaults:
        if "defaults" not in top:
            raise doc.fail(f"{spec.file} lacks defaults: {{plain: [...], dual: [...]}}")
        kinds = require_keys(top["defaults"], "defaults", {"plain", "dual"})
        for kind, value in kinds.items():
            cfg = _entry(spec, value, f"defaults.{kind}")
            table.defaults[kind] = cfg
            if cfg is not None and spec.check is not None:
                # a default serves every m that has no entry, on every layer of its kind: check them all
                for layer in problem.layers.values():
                    if layer.dual != (kind == "dual"):
                        continue
                    for m in (1, 8, 16, dispatch.GEMV_MAX_M):
                        error = spec.check(layer, m, cfg)
                        if error:
                            raise value.fail(f"defaults.{kind} on {layer.name} m={m}: {error}")
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
            if type(m) is not int or not spec.m_ok(m):
                raise m_loc.fail(f"{layer_name}: m must be an integer with {spec.m_rule}, got {m!r}")
            what = f"{spec.name}[{layer_name}, {m}]"
            cfg = _entry(spec, value, what)
            if cfg is not None and spec.check is not None:
                error = spec.check(layer, m, cfg)
                if error:
                    raise value.fail(f"{what}: {error}")
            table.entries[(layer_name, m)] = cfg
            table.lines[(layer_name, m)] = value.line
    if table.entries and not spec.implemented:
        first_line = min(table.lines.values())
        raise Located(None, first_line, doc.file).fail(
            f"{spec.name} has entries but no engine implements it yet"
        )
    return table


def load_tables(problem: Problem, root: Path = REPO_ROOT) -> dict[str, Table]:
    out = {}
    for spec in TABLES:
        path = Path(root) / "tables" / spec.file
        out[spec.name] = parse_table(spec, load_located(path, display_path(path, Path(root))), problem)
    return out
