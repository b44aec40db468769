"""The bulk-copy + wgmma GEMM for m > 32: tma_gemv.cuh's kernel with 1-4 consumer warpgroups and up to 256 tokens
a slot. Design and figures: docs/tma-gemm.md."""

from kernels_src.engine import (
    ACCUMULATOR_FLOATS,
    SMEM_LIMIT,
    WORKSPACE_FLOATS,
    Engine,
    Field,
    build_only,
    config_type,
    split_rule,
)
from kernels_src.tma_gemv import (
    CONSUMERS,
    PRODUCER,
    TILE_K,
    TILE_ROWS,
    TILES,
    TMA_CUDA_CONSTANTS,
    TmaGemv,
    TMA_STAGES,
    ring_bytes,
    tma_variant,
)

TMA_GEMM_WARPGROUPS = (1, 2, 4)
TMA_GEMM_REDUCTIONS = ("none", "semaphore", "atomic")
TMA_GEMM_EPILOGUES = ("direct", "staged")
# what a thread holds besides its 4 NB accumulators, at least (docs/tma-gemm.md, the rule)
_OTHER_REGISTERS = build_only(40)


@build_only
def tma_threads(warpgroups: int) -> int:
    """Threads of a CTA of tma_gemv.cuh's kernel (its tma_threads): the consumer warpgroups, the producer warp."""
    return CONSUMERS * warpgroups + PRODUCER


@build_only
def register_budget(warpgroups: int) -> int:
    """Registers a thread may hold under __launch_bounds__(tma_threads, 1): 64 K a SM over the CTA's threads, in
    steps of 8, at most 255."""
    return min(255, 65536 // tma_threads(warpgroups) // 8 * 8)


def gemm_column_blocks(m: int) -> int:
    """8-token column blocks of the x box that cover m tokens: 8, 16 or 32."""
    return 8 if m <= 64 else 16 if m <= 128 else 32


TMA_GEMM_FIELDS = (
    Field(
        "warpgroups",
        int,
        TMA_GEMM_WARPGROUPS,
        build_only("consumer warpgroups per CTA, each a 64-row weight tile against the slot's one x box"),
    ),
    Field(
        "splits",
        int,
        None,
        build_only("CTAs that split the CTA tile's K"),
        bounds=build_only("1 .. K/64, uneven splits allowed"),
    ),
    Field(
        "stages",
        int,
        TMA_STAGES,
        build_only("shared-memory ring slots per CTA, the warpgroups' tiles and x's box each"),
    ),
    Field(
        "reduce",
        str,
        TMA_GEMM_REDUCTIONS,
        build_only(
            "none (splits = 1), semaphore (workspace, the last CTA sums in split order), atomic (four-float L2 atomics"
            " into a zeroed accumulator, the last CTA writes out and re-zeroes)"
        ),
    ),
    Field(
        "epilogue",
        str,
        TMA_GEMM_EPILOGUES,
        build_only(
            "direct (each accumulator stored as one bf16) or staged (reduce none, one warpgroup, bf16: the tile goes"
            " token-major through the idle ring and out in whole 128-byte token rows)"
        ),
        default="direct",
    ),
)
TmaGemmConfig = config_type("TmaGemmConfig", TMA_GEMM_FIELDS)


def gemm_smem_bytes(cfg: TmaGemmConfig, nb: int, dual: bool) -> int:
    """A CTA's shared memory: its ring."""
    return ring_bytes(cfg.stages, nb, dual, warpgroups=cfg.warpgroups)


class TmaGemm(Engine):
    name = "tma_gemm"
    precedence = build_only(60)  # the GEMMs (m > 32) after the GEMVs: persistent_gemm, tma_gemm, splitk_gemm
    FIELDS = build_only(TMA_GEMM_FIELDS)
    Config = TmaGemmConfig
    m_min, m_max = 33, 256
    sweep_m = build_only((64, 128, 256))  # one row per column-block class
    launcher = build_only("okc::launch_tma")
    cuda_constants = build_only(TMA_CUDA_CONSTANTS)
    summary = build_only(
        "tma_gemm (33 <= m <= 256): tma_gemv's kernel with 1-4 consumer warpgroups against one x box of up to"
        " 256 tokens; K split over CTAs, reduced by the semaphore or L2 atomics."
    )

    def m_class(self, m):
        return gemm_column_blocks(m)

    @build_only
    def class_maxima(self):
        return (64, 128, 256)

    @build_only
    def rule(self, cfg, layer, m):
        n, k, dual, wg = layer.n_for(m), layer.k, layer.dual, cfg.warpgroups
        nb = gemm_column_blocks(m)
        if (
            not 1 <= cfg.splits <= k // TILE_K
        ):  # the range before the pairing with reduce: splits=-1 is out of it
            return f"splits={cfg.splits} must be 1..{k // TILE_K} (the {TILE_K}-wide K tiles of K={k})"
        if split_rule(cfg):
            return split_rule(cfg)
        if n % (TILE_ROWS * wg) or k % TILE_K:
            return f"warpgroups={wg} needs N divisible by {TILE_ROWS * wg} and K by {TILE_K}, got N={n} K={k}"
        if 4 * nb + _OTHER_REGISTERS > register_budget(wg):
            return (
                f"warpgroups={wg} at m={m} holds {4 * nb} accumulators a thread (+{_OTHER_REGISTERS}), over the"
                f" {register_budget(wg)} registers {tma_threads(wg)} threads a CTA leave"
            )
        smem = gemm_smem_bytes(cfg, nb, dual)
        if smem > SMEM_LIMIT:
            return f"stages={cfg.stages}, warpgroups={wg} at m={m} need {smem} bytes of shared memory, over {SMEM_LIMIT}"
        tile_floats = n * 8 * nb  # every 64-row tile's partial of 8 NB tokens
        if cfg.reduce == "semaphore" and tile_floats * cfg.splits > WORKSPACE_FLOATS:
            return f"splits={cfg.splits} needs more workspace than the {WORKSPACE_FLOATS} floats there are"
        if cfg.reduce == "atomic" and tile_floats > ACCUMULATOR_FLOATS:
            return f"reduce=atomic at m={m}, N={n} needs {tile_floats} accumulator floats, over {ACCUMULATOR_FLOATS}"
        if cfg.epilogue == "staged" and (cfg.reduce != "none" or wg != 1 or dual):
            return (
                "epilogue=staged is the plain write's of one warpgroup in bf16 (reduce none, warpgroups 1, not the"
                f" router), got reduce={cfg.reduce}, warpgroups={wg}{' for the router' if dual else ''}"
            )
        return None

    def operands(self, cfg, layer):
        return (TILES,)  # tma_gemv's packed 64 x 64 tiles: one copy serves both engines

    build_operand = TmaGemv.build_operand

    def variant(self, cfg, layer, m):
        nb = gemm_column_blocks(m)
        staged, smem = cfg.epilogue == "staged", gemm_smem_bytes(cfg, nb, layer.dual)
        return tma_variant(self.name, cfg, layer, nb, False, cfg.warpgroups, staged, smem)

    def plan(self, cfg, layer, m, ctx):
        tiles = ctx.operands[TILES]
        accumulator = ctx.buffers["accumulator"]
        return ctx.cuda_plan(self.variant(cfg, layer, m), layer, m, (tiles[0], tiles[-1], accumulator))


TMA_GEMM = TmaGemm()
