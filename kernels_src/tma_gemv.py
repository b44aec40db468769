"""The bulk-copy + wgmma GEMV (tma_gemv.cuh) for m <= 32. Design and figures: docs/tma-gemv.md."""

from kernels_src.engine import (
    CLUSTER_MAX,
    CUDA_TYPES,
    REDUCTION,
    SMEM_LIMIT,
    WORKSPACE_FLOATS,
    CudaConstant,
    DecodeGemv,
    Field,
    Operand,
    Variant,
    build_only,
    column_blocks,
    config_type,
    split_rule,
)
from kernels_src.packing import pack_tma_bulk, pack_tma_half_bulk

TILE_ROWS = 64  # weight rows of a full tile: the wgmma M
TILE_K = 64  # K per ring slot of a full tile (one 128-byte swizzle row of bf16)
HALF_K = build_only(128)  # K per ring slot of a half tile: two 64-wide halves stacked
CONSUMERS = 128  # threads of the consumer warpgroup
PRODUCER = build_only(32)  # threads of the producer warp
TMA_STAGES = (2, 4, 6, 8, 12, 14, 16)  # the ring depths the engines admit
TMA_TILES = ("full", "half")
# pre-swizzled 64 x 64 tiles (packing.pack_tma_bulk): tma_gemv's full tiles and tma_gemm
TILES = Operand("tiles")
HALF_TILES = Operand("half_tiles")  # the half tiles' stacked K halves (packing.pack_tma_half_bulk)
TMA_REDUCTIONS = ("none", "semaphore", "cluster_gather", "cluster_scatter")
TMA_GEMV_FIELDS = (
    Field(
        "splits",
        int,
        None,
        build_only("CTAs that split a tile's K"),
        bounds=build_only("1 .. K/64, uneven splits allowed"),
    ),
    Field(
        "stages",
        int,
        TMA_STAGES,
        build_only(
            "shared-memory ring slots per CTA, each one weight tile (two for the router's hi + lo) and x's slice"
        ),
    ),
    Field(
        "tile",
        str,
        TMA_TILES,
        build_only(
            "full: 64 rows x a K range per CTA; half: 32 rows x the whole K (splits = 1, plain weights)"
        ),
    ),
    Field(
        "reduce",
        str,
        TMA_REDUCTIONS,
        build_only(
            "none (splits = 1), semaphore (workspace, the last CTA sums), cluster_gather (partials meet on rank 0),"
            " cluster_scatter (on all ranks, 128/splits threads' worth each); the clusters take splits <= 16"
        ),
    ),
)
TmaGemvConfig = config_type("TmaGemvConfig", TMA_GEMV_FIELDS)
# What tma_gemv.cuh reads from here (both engines on it: tma_gemv and tma_gemm).
TMA_CUDA_CONSTANTS = build_only(
    (
        CudaConstant("kTmaTileRows", TILE_ROWS, "tma_gemv.py TILE_ROWS: weight rows per CTA, the wgmma M"),
        CudaConstant(
            "kTmaTileK", TILE_K, "tma_gemv.py TILE_K: K per ring slot, one 128-byte swizzle row of bf16"
        ),
        CudaConstant("kTmaConsumers", CONSUMERS, "tma_gemv.py CONSUMERS: threads of one consumer warpgroup"),
        CudaConstant("kTmaProducer", PRODUCER, "tma_gemv.py PRODUCER: threads of the producer warp"),
    )
)


def ring_bytes(stages: int, nb: int, dual: bool, x_boxes: int = 1, warpgroups: int = 1) -> int:
    """A CTA's ring: per slot each warpgroup's 8 KB weight block (two for dual) and x's boxes, plus 1 KB to align."""
    return (
        stages * (TILE_ROWS * TILE_K * 2 * (2 if dual else 1) * warpgroups + x_boxes * nb * 8 * TILE_K * 2)
        + 1024
    )


def smem_bytes(cfg: TmaGemvConfig, nb: int, dual: bool) -> int:
    """A CTA's shared memory: the ring, and a cluster reduction's inbox (splits - 1 slots of 4 NB floats for each
    consumer thread a rank owns)."""
    ring = ring_bytes(cfg.stages, nb, dual, 2 if cfg.tile == "half" else 1)
    if not cfg.reduce.startswith("cluster"):
        return ring
    owned = CONSUMERS if cfg.reduce == "cluster_gather" else -(-CONSUMERS // cfg.splits)
    return ring + (cfg.splits - 1) * owned * 4 * nb * 4


def tma_variant(engine, cfg, layer, nb, half, warpgroups, staged, smem) -> Variant:
    """A launch of tma_gemv.cuh's kernel (tma_gemv and tma_gemm)."""
    kernel = dict(NB=nb, stages=cfg.stages, dual=layer.dual, half=half, warpgroups=warpgroups)
    kernel.update(out=CUDA_TYPES[layer.out_dtype], staged=staged)
    return Variant.of(
        engine,
        kernel,
        splits=cfg.splits,
        reduce=REDUCTION.code(cfg.reduce),
        smem_bytes=smem,
    )


class TmaGemv(DecodeGemv):
    name = "tma_gemv"
    # ahead of mma_gemv, whose defaults take every m <= 32 no table before it lists
    precedence = build_only(30)
    FIELDS = build_only(TMA_GEMV_FIELDS)
    Config = TmaGemvConfig
    launcher = build_only("okc::launch_tma")
    cuda_constants = build_only(TMA_CUDA_CONSTANTS)
    summary = build_only(
        "tma_gemv (m <= 32): pre-swizzled 64 x 64 weight tiles by plain bulk copies into a shared-memory ring"
        " read by one consumer warpgroup's wgmma; full tiles split K over CTAs (semaphore or cluster), half"
        " tiles take 32 rows and the whole K."
    )

    @build_only
    def rule(self, cfg, layer, m):
        n, k, dual = layer.n_for(m), layer.k, layer.dual
        if (
            not 1 <= cfg.splits <= k // TILE_K
        ):  # the range before the pairing with reduce: splits=-1 is out of it
            return f"splits={cfg.splits} must be 1..{k // TILE_K} (the {TILE_K}-wide K tiles of K={k})"
        if split_rule(cfg):
            return split_rule(cfg)
        if cfg.tile == "half" and (cfg.splits != 1 or dual):
            return f"tile=half runs plain bf16 weights unsplit: splits must be 1{', not the router' if dual else ''}"
        if cfg.reduce.startswith("cluster") and not 2 <= cfg.splits <= CLUSTER_MAX:
            return f"reduce={cfg.reduce} needs 2 <= splits <= {CLUSTER_MAX}, got splits={cfg.splits}"
        if n % TILE_ROWS or k % TILE_K:
            return f"the tma_gemv engine needs N and K divisible by {TILE_ROWS}, got N={n} K={k}"
        if cfg.tile == "half" and k % HALF_K:
            return f"tile=half needs K divisible by {HALF_K}, got K={k}"
        nb = column_blocks(m)
        smem = smem_bytes(cfg, nb, dual)
        if smem > SMEM_LIMIT:
            return f"stages={cfg.stages}, reduce={cfg.reduce} at m={m} need {smem} bytes of shared memory, over {SMEM_LIMIT}"
        if (
            cfg.reduce == "semaphore"
            and (n // TILE_ROWS) * cfg.splits * TILE_ROWS * 8 * nb > WORKSPACE_FLOATS
        ):
            return f"splits={cfg.splits} needs more workspace than the {WORKSPACE_FLOATS} floats there are"
        return None

    def operands(self, cfg, layer):
        return (HALF_TILES,) if cfg.tile == "half" else (TILES,)

    def build_operand(self, operand, parts, layer):
        pack = pack_tma_half_bulk if operand == HALF_TILES else pack_tma_bulk
        return tuple(pack(part) for part in parts)

    def variant(self, cfg, layer, m):
        nb = column_blocks(m)
        return tma_variant(
            self.name, cfg, layer, nb, cfg.tile == "half", 1, False, smem_bytes(cfg, nb, layer.dual)
        )

    def plan(self, cfg, layer, m, ctx):
        tiles = ctx.operands[self.operands(cfg, layer)[0]]
        return ctx.cuda_plan(self.variant(cfg, layer, m), layer, m, (tiles[0], tiles[-1]))


TMA_GEMV = TmaGemv()
