"""The routing rule: a (layer, m) runs on the first engine, in the tables' order, whose table gives it a config;
what none takes goes to cuBLAS (README.md, "The design")."""

from typing import NamedTuple

from kernels_src.cublas import CUBLAS
from kernels_src.engine import PLAN_MAX_M, build_only


class Table(NamedTuple):
    """An engine's table: (layer, m) -> config or None; defaults: weight kind -> config or None."""

    engine: object
    entries: dict
    defaults: dict = {}

    def listed(self, layer: str) -> list:
        return sorted(m for name, m in self.entries if name == layer)


def lookup(table: Table, layer, m: int):
    """The config the table gives (layer, m), or None."""
    listed = table.listed(layer.name)
    row = m if m in listed else table.engine.borrowed_m(m, listed)
    if row is not None:
        return table.entries[(layer.name, row)]
    if table.engine.has_defaults:
        return table.defaults.get("dual" if layer.dual else "plain")
    return None


def route(layer, m: int, tables, skip=()) -> tuple:
    """(engine, config) for m tokens of `layer` by the tables, in their order; engines named in `skip` are passed
    over."""
    for table in tables:
        engine = table.engine
        if engine.name in skip or not engine.serves(m):
            continue
        cfg = lookup(table, layer, m)
        if cfg is not None:
            return engine, cfg
    return CUBLAS, CUBLAS.Config()


def plan_max_m(tables) -> int:
    """prepare() plans every m up to this: PLAN_MAX_M, or the largest m a table lists."""
    return max([PLAN_MAX_M] + [m for table in tables for _, m in table.entries])


@build_only
def in_routing_order(tables) -> tuple:
    """The tables in the order their engines state (Engine.precedence): the order route() reads them in."""
    return tuple(sorted(tables, key=lambda table: table.engine.precedence))


@build_only
def skip_sets(layer, tables) -> tuple:
    """The sets of engines prepare() may pass over for `layer`: those compress() may refuse (bf16 layers only)."""
    if layer.dual:
        return ((),)
    subsets = [()]
    for table in tables:
        if table.engine.may_refuse:
            subsets += [subset + (table.engine.name,) for subset in subsets]
    return tuple(subsets)


@build_only
def routes(layers, tables):
    """Every (layer, m, skip, engine, config) prepare() can take: m = 1 .. plan_max_m, each skip set."""
    top = plan_max_m(tables)
    for layer in layers:
        for skip in skip_sets(layer, tables):
            for m in range(1, top + 1):
                engine, cfg = route(layer, m, tables, skip)
                yield layer, m, skip, engine, cfg


@build_only
def variants(layers, tables) -> list:
    """The CUDA kernels the tables can reach, in a fixed order (the tables', then by arguments): the launch table's
    cases, what the file's extension compiles."""
    found = {engine.variant(cfg, layer, m) for layer, m, _, engine, cfg in routes(layers, tables)}
    found.discard(None)
    order = {table.engine.name: i for i, table in enumerate(tables)}
    return sorted(found, key=lambda v: (order[v.engine], v.kernel, v.launch))
