"""Each engine's sweep candidates: the configs `sweep` times for a (layer, m) (generator/judge/sweep.py), keyed
by engine name. Tooling only, so they stay out of dist/submission.py: the engine module (kernels_src/<engine>.py)
defines the fields, their allowed values and the rule; an engine's entry here says which of those are worth
timing, and candidates() keeps the ones its rule admits.

An entry is `def <engine>(engine, layer, m)` yielding `engine.Config`s (engine: the kernels_src engine, or the
same engine of a built file, which the sweep times), listed in CANDIDATES under the engine's name."""

from __future__ import annotations

from itertools import product

from kernels_src.engine import SMEM_LIMIT
from kernels_src.persistent_gemm import SMS, gemm_class_tokens, persistent_smem_bytes, persistent_tiles


def candidates(engine, layer, m: int) -> list:
    """Every config of `engine` worth timing at m tokens of `layer` that its rule admits, in the order swept."""
    make = CANDIDATES.get(engine.name)
    if make is None:
        raise KeyError(
            f"{engine.name} has no sweep candidates: add them to generator/candidates.py, CANDIDATES"
        )
    return [cfg for cfg in make(engine, layer, m) if engine.config_error(cfg, layer, m) is None]


def split_k_gemv(engine, layer, m: int, k_unit: int, trip_field: str):
    """The two mma.sync GEMVs, whose configs both read (warps, splits, per trip, pipeline, row_blocks, reduce):
    4-16 warps (1 and 2 never won a sweep), at most 2048 CTAs once K is split (past ~15 a SM more splits only
    add partial-tile traffic), every warp given a trip of k_unit-wide K units."""
    values, modes = engine.values, engine.modes
    for warps, splits, trip, pipeline, row_blocks in product(
        (4, 8, 16), values["splits"], values[trip_field], modes["pipeline"], values["row_blocks"]
    ):
        if splits > 1 and layer.n_for(m) // 16 // row_blocks * splits > 2048:
            continue
        if (layer.k // k_unit) // splits < warps * trip:
            continue
        for reduce in ("none",) if splits == 1 else modes["reduce"][1:]:
            yield engine.Config(
                **{trip_field: trip},
                warps=warps,
                splits=splits,
                pipeline=pipeline,
                row_blocks=row_blocks,
                reduce=reduce,
            )


def mma_gemv(engine, layer, m: int):
    return split_k_gemv(engine, layer, m, 32, "unroll")


def compressed_gemv(engine, layer, m: int):
    return split_k_gemv(engine, layer, m, 64, "groups")


def tma_gemv(engine, layer, m: int):
    """Splits past 32 were slower on every shape probed (each CTA pays a start-up and a reduction that fewer of
    them per SM overlap); a 2-slot ring was never faster."""
    for splits, stages, tile in product(
        (1, 2, 3, 4, 5, 6, 7, 8, 11, 12, 16, 22, 24, 32), engine.values["stages"][1:], engine.modes["tile"]
    ):
        for reduce in ("none",) if splits == 1 else engine.modes["reduce"][1:]:
            yield engine.Config(splits=splits, stages=stages, tile=tile, reduce=reduce)


def compressed_ring(engine, layer, m: int):
    for stages, warpgroups, groups in product(
        engine.values["stages"], engine.values["warpgroups"], engine.values["groups"]
    ):
        yield engine.Config(stages=stages, warpgroups=warpgroups, groups=groups)


def tma_gemm(engine, layer, m: int):
    for warpgroups, splits, stages in product(
        engine.values["warpgroups"], (1, 2, 3, 4, 6, 8, 12, 16, 24, 32), (4, 6, 8)
    ):
        for reduce in ("none",) if splits == 1 else engine.modes["reduce"][1:]:
            for epilogue in engine.modes["epilogue"] if reduce == "none" else ("direct",):
                yield engine.Config(
                    warpgroups=warpgroups, splits=splits, stages=stages, reduce=reduce, epilogue=epilogue
                )


def persistent_gemm(engine, layer, m: int):
    """Tiles no wider than m's class, the two deepest rings that fit, and grids of at least 64 CTAs (fewer
    stream too slowly): whole waves of tiles, or the four widest equal splits of the tiles that one wave holds.
    """
    for rows in engine.values["rows"]:
        for tokens in (t for t in engine.values["tokens"] if t <= gemm_class_tokens(m)):
            fitting = [
                s
                for s in engine.values["stages"]
                if persistent_smem_bytes(rows, tokens, s, layer.dual) <= SMEM_LIMIT
            ]
            for stages in fitting[-2:]:
                tiles = persistent_tiles(engine.Config(rows, tokens, stages, 1), layer.n_for(m), m)
                splits = [tiles * s for s in range(1, SMS // tiles + 1) if tiles * s >= 64]
                grids = set(splits[-4:]) | {c for c in range(64, SMS + 1) if tiles % c == 0}
                for ctas in sorted(grids):
                    yield engine.Config(rows, tokens, stages, ctas)


def splitk_gemm(engine, layer, m: int):
    """Tiles of 64 or 128 on each side; K steps of 128 with 3-4 stages, or of 64 with 4-6 (the same bytes in
    flight); 8 warps only for 128 x 128 tiles (4 would hold 128 accumulators a thread); 1-32 splits."""
    for block_n, block_m, block_k in product((64, 128), (64, 128), (64, 128)):
        for stages in (3, 4) if block_k == 128 else (4, 6):
            for warps in (4, 8) if block_n * block_m > 64 * 128 else (4,):
                for splits in (1, 2, 4, 8, 16, 32):
                    for reduce in ("none",) if splits == 1 else ("semaphore", "atomic"):
                        yield engine.Config(
                            block_n=block_n,
                            block_m=block_m,
                            block_k=block_k,
                            splits=splits,
                            warps=warps,
                            stages=stages,
                            loads="tma",
                            reduce=reduce,
                        )


CANDIDATES = {
    "compressed_gemv": compressed_gemv,
    "compressed_ring": compressed_ring,
    "tma_gemv": tma_gemv,
    "mma_gemv": mma_gemv,
    "persistent_gemm": persistent_gemm,
    "tma_gemm": tma_gemm,
    "splitk_gemm": splitk_gemm,
}
