"""The engines, in precedence order, and the one routing rule: which engine and config serve (layer, m).

A (layer, m) goes to the first engine, in ENGINES order, that serves m and whose table gives it a config there:
the entry for m itself, else the entry of the smallest listed m above it in its class (the GEMVs: the same number
of 8-token column blocks), else the table's default for the weight's kind (plain, or dual for fp32 weights), if
the engine has defaults. An entry of None means "not this engine". What no engine takes goes to cuBLAS. A layer
whose weights a compressed engine refuses (SKIPPABLE) skips that engine (prepare() says so in one line)."""

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

# Precedence: the compressed engines stream the fewest bytes (the register GEMV, then the ring, where each table
# says so); the TMA GEMV leads where its table says so; the
# mma.sync GEMV covers every other m <= 32 through its defaults; past 32 tokens the persistent GEMM, then the TMA
# GEMM, then the Triton split-K GEMM, each where its table says so.
PRECEDENCE = (
    "compressed_gemv",
    "compressed_ring",
    "tma_gemv",
    "mma_gemv",
    "persistent_gemm",
    "tma_gemm",
    "splitk_gemm",
)
# The engines made, in precedence order: every one here; in dist/submission.py the ones its tables route (the
# build leaves the others' modules out).
ENGINES = tuple(sorted((e for e in ENGINES_MADE if e.name in PRECEDENCE), key=lambda e: PRECEDENCE.index(e.name)))
BY_NAME = {engine.name: engine for engine in ENGINES + (CUBLAS,)}
# the engines prepare() may find a layer's weights unfit for (each passed over alone)
SKIPPABLE = ("compressed_gemv", "compressed_ring")


class Table(NamedTuple):
    """An engine's table: (layer, m) -> config or None; defaults: weight kind -> config or None."""

    entries: dict
    defaults: dict

    def listed(self, layer: str) -> list:
        return sorted(m for name, m in self.entries if name == layer)


def make_tables(raw: dict) -> dict:
    """The submission's TABLES literal ({engine: {"entries": {(layer, m): values | None}, "defaults": {kind: values
    | None}}}, values in field order) as Table objects of Configs, one per engine (empty where none is given)."""
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
    """The config engine's table gives (layer, m), or None (see the module docstring)."""
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
    """The engine sets prepare() may have to pass over for `layer`: none, or any of the compressed engines (each
    refuses the weights it does not pay for on its own: compress.py's bits, compressed_ring's staging), in the
    order runtime.layer_routes adds them."""
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
    """The CUDA kernels the tables and defaults can reach, in a fixed order: what the extension compiles."""
    found = {engine.variant(cfg, layer, m) for layer, m, _, engine, cfg in routes(layers, tables)}
    found.discard(None)
    order = {engine.name: i for i, engine in enumerate(ENGINES)}
    return sorted(found, key=lambda v: (order[v.engine], v.kernel, v.launch))
