"""The engines in precedence order, and the routing rule: a (layer, m) runs on the first engine whose table gives
it a config; what none takes goes to cuBLAS (README.md, "The design")."""

from typing import NamedTuple

from kernels_src.compressed_gemv import COMPRESSED_GEMV  # noqa: F401 (each import makes its engine)
from kernels_src.compressed_ring import COMPRESSED_RING  # noqa: F401
from kernels_src.cublas import CUBLAS
from kernels_src.engine import ENGINES_MADE, PLAN_MAX_M
from kernels_src.mma_gemv import MMA_GEMV  # noqa: F401
from kernels_src.persistent_gemm import PERSISTENT_GEMM  # noqa: F401
from kernels_src.splitk_gemm import SPLITK_GEMM  # noqa: F401
from kernels_src.tma_gemm import TMA_GEMM  # noqa: F401
from kernels_src.tma_gemv import TMA_GEMV  # noqa: F401

PRECEDENCE = (
    "compressed_gemv",
    "compressed_ring",
    "tma_gemv",
    "mma_gemv",
    "persistent_gemm",
    "tma_gemm",
    "splitk_gemm",
)
# The engines made: every one here, the routed ones in dist/submission.py (the build leaves the others out).
ENGINES = tuple(
    sorted((e for e in ENGINES_MADE if e.name in PRECEDENCE), key=lambda e: PRECEDENCE.index(e.name))
)
BY_NAME = {engine.name: engine for engine in ENGINES + (CUBLAS,)}
SKIPPABLE = ("compressed_gemv", "compressed_ring")


class Table(NamedTuple):
    """(layer, m) -> config or None; defaults: weight kind -> config or None."""

    entries: dict
    defaults: dict

    def listed(self, layer: str) -> list:
        return sorted(m for name, m in self.entries if name == layer)


def make_tables(raw: dict) -> dict:
    """The file's TABLES literal (configs as values in field order) as a Table of Configs per engine."""
    tables = {}
    for engine in ENGINES:
        given = raw.get(engine.name, {})

        def config(values, engine=engine):
            return None if values is None else engine.Config(*values)

        entries = {key: config(fields) for key, fields in given.get("entries", {}).items()}
        defaults = {kind: config(fields) for kind, fields in given.get("defaults", {}).items()}
        tables[engine.name] = Table(entries, defaults)
    return tables


def lookup(engine, table: Table, layer, m: int):
    """The config engine's table gives (layer, m), or None."""
    listed = table.listed(layer.name)
    row = m if m in listed else engine.borrowed_m(m, listed)
    if row is not None:
        return table.entries[(layer.name, row)]
    if engine.has_defaults:
        return table.defaults.get("dual" if layer.dual else "plain")
    return None


def route(layer, m: int, tables: dict, skip=()) -> tuple:
    """(engine, config) for m tokens of `layer`; engines named in `skip` are passed over."""
    for engine in ENGINES:
        if engine.name in skip or not engine.serves(m):
            continue
        cfg = lookup(engine, tables[engine.name], layer, m)
        if cfg is not None:
            return engine, cfg
    return CUBLAS, CUBLAS.Config()


def plan_max_m(tables: dict) -> int:
    """prepare() plans every m up to this: PLAN_MAX_M, or the largest m a table lists."""
    return max([PLAN_MAX_M] + [m for table in tables.values() for _, m in table.entries])


def skip_sets(layer) -> tuple:
    """The sets of compressed engines prepare() may pass over for `layer`."""
    if layer.dual:
        return ((),)
    subsets = [()]
    for name in SKIPPABLE:
        subsets += [subset + (name,) for subset in subsets]
    return tuple(subsets)


def routes(layers, tables: dict):
    """Every (layer, m, skip, engine, config) prepare() can take: m = 1 .. plan_max_m, each skip set."""
    top = plan_max_m(tables)
    for layer in layers:
        for skip in skip_sets(layer):
            for m in range(1, top + 1):
                engine, cfg = route(layer, m, tables, skip)
                yield layer, m, skip, engine, cfg


def variants(layers, tables: dict) -> list:
    """The CUDA kernels the tables can reach, in a fixed order: what the extension compiles."""
    found = {engine.variant(cfg, layer, m) for layer, m, _, engine, cfg in routes(layers, tables)}
    found.discard(None)
    order = {engine.name: i for i, engine in enumerate(ENGINES)}
    return sorted(found, key=lambda v: (order[v.engine], v.kernel, v.launch))
