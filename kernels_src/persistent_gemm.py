"""The persistent warp-specialized GEMM for m > 32 (kernels_src/persistent_gemm.cuh): its config, rule and launch.
Design and the measurements behind each field: docs/persistent-gemm.md."""

from kernels_src.tma_gemv import TILE_K, TILES, TmaGemv
from kernels_src.engine import (
    CUDA_TYPES,
    SEMAPHORE_GROUPS,
    SMEM_LIMIT,
    CudaConstant,
    Engine,
    Field,
    Variant,
    build_only,
    config_type,
)

GEMM_ROWS = (128, 256)  # weight rows a tile: two consumer warpgroups of rows / 2 (one or two m64 wgmmas)
GEMM_TOKENS = (64, 128, 256)  # tokens a tile: the wgmma N
GEMM_STAGES = (3, 4, 5, 6, 7, 8)
GEMM_SLOT_K = TILE_K  # K per ring slot: the packed tiles' (tma_gemv's), one 128-byte swizzle row of bf16
GEMM_STAGED_BYTES = 8192  # output bytes a consumer warpgroup stages at a time in the epilogue
GEMM_MAX_ACCUMULATORS = build_only(128)  # a consumer thread's fp32 accumulators: (rows / 2) x tokens / 128
SMS = build_only(132)  # the H200's SMs: a grid of at most this many CTAs is one wave
GEMM_CUDA_CONSTANTS = build_only(
    (
        CudaConstant(
            "kGemmStagedBytes",
            GEMM_STAGED_BYTES,
            "persistent_gemm.py GEMM_STAGED_BYTES: output bytes a consumer warpgroup stages at a time",
        ),
        CudaConstant(
            "kGemmMaxAccumulators",
            GEMM_MAX_ACCUMULATORS,
            "persistent_gemm.py GEMM_MAX_ACCUMULATORS: fp32 accumulators a consumer thread holds",
        ),
    )
)

GEMM_FIELDS = (
    Field("rows", int, GEMM_ROWS, build_only("weight rows a tile, split over the two consumer warpgroups")),
    Field("tokens", int, GEMM_TOKENS, build_only("tokens a tile (wgmma N); m past it takes more tiles")),
    Field(
        "stages",
        int,
        GEMM_STAGES,
        build_only("shared-memory ring slots, each the tile's 64-wide K slice of W and x"),
    ),
    Field(
        "ctas",
        int,
        None,
        build_only(
            "the persistent grid: each CTA takes whole tiles for the full waves, then the tiles left are split over"
            " equal groups of CTAs (split-K: each stores its partial but its own share, then sums that share of the"
            " tile's and writes it)"
        ),
        bounds=build_only(f"1 .. {SMS}"),
    ),
)
GemmConfig = config_type("GemmConfig", GEMM_FIELDS)


def gemm_class_tokens(m: int) -> int:
    """The table row class of m: 33..64, 65..128, 129..256 (m's of one class borrow each other's entries)."""
    return 64 if m <= 64 else 128 if m <= 128 else 256


def persistent_smem_bytes(rows: int, tokens: int, stages: int, dual: bool) -> int:
    """One CTA's dynamic shared memory: the ring, each consumer warpgroup's epilogue staging, 1 KB of alignment."""
    slot = (rows * (2 if dual else 1) + tokens) * GEMM_SLOT_K * 2
    out_bytes = 4 if dual else 2
    chunk = GEMM_STAGED_BYTES // (rows // 2 * out_bytes)  # tokens a staging round
    staging = chunk * (rows // 2 + 16 // out_bytes) * out_bytes
    return stages * slot + 2 * staging + 1024


@build_only
def persistent_tiles(cfg, n: int, m: int) -> int:
    """Tiles of an [m, n] output: row tiles x token tiles."""
    return n // cfg.rows * -(-m // cfg.tokens)


@build_only
def persistent_split_tiles(cfg, n: int, m: int) -> int:
    """The tiles past the full waves, each split over ctas / this many CTAs (split-K)."""
    return persistent_tiles(cfg, n, m) % cfg.ctas


@build_only
def persistent_workspace_floats(cfg) -> int:
    """The split tiles' partials: a slot per CTA, rows x tokens fp32."""
    return cfg.ctas * cfg.rows * cfg.tokens


class PersistentGemm(Engine):
    name = "persistent_gemm"
    precedence = build_only(50)  # the GEMMs (m > 32) after the GEMVs: persistent_gemm, tma_gemm, splitk_gemm
    FIELDS = build_only(GEMM_FIELDS)
    Config = GemmConfig
    m_min, m_max = 33, 256
    sweep_m = build_only((64, 128, 256))
    launcher = build_only("okc::launch_persistent_gemm")
    cuda_constants = build_only(GEMM_CUDA_CONSTANTS)
    summary = build_only(
        "persistent_gemm (33 <= m <= 256): a CTA per SM; a producer warp streams W (rows a tile, evict-first)"
        " and x (tokens a tile) by TMA into a ring that two consumer warpgroups read with wgmma; whole tiles in"
        " full waves, the rest split over equal groups of CTAs: each stores its partial but its own share, then"
        " sums and writes that share of the tile's."
    )

    def m_class(self, m):
        return gemm_class_tokens(m)

    @build_only
    def class_maxima(self):
        return (64, 128, 256)

    @build_only
    def rule(self, cfg, layer, m):
        n, k = layer.n_for(m), layer.k
        if n % cfg.rows or k % GEMM_SLOT_K:
            return f"rows={cfg.rows} needs N divisible by {cfg.rows} and K by {GEMM_SLOT_K}, got N={n} K={k}"
        if cfg.rows // 2 * cfg.tokens // 128 > GEMM_MAX_ACCUMULATORS:
            return (
                f"rows={cfg.rows} x tokens={cfg.tokens}: over {GEMM_MAX_ACCUMULATORS} accumulators a thread"
            )
        smem = persistent_smem_bytes(cfg.rows, cfg.tokens, cfg.stages, layer.dual)
        if smem > SMEM_LIMIT:
            return f"stages={cfg.stages} at rows={cfg.rows}, tokens={cfg.tokens} need {smem} bytes, over {SMEM_LIMIT}"
        if not 1 <= cfg.ctas <= SMS:
            return f"ctas={cfg.ctas} must be 1..{SMS} (one wave)"
        split = persistent_split_tiles(cfg, n, m)
        if split and cfg.ctas % split:
            return f"ctas={cfg.ctas} is no multiple of the {split} tiles past the full waves (equal splits)"
        if split and k // GEMM_SLOT_K < cfg.ctas // split:
            return f"ctas={cfg.ctas} splits each of {split} tiles {cfg.ctas // split} ways, over its {k // GEMM_SLOT_K} k-blocks"
        if 4 * split > SEMAPHORE_GROUPS:
            return f"{split} split tiles need {4 * split} counters, over {SEMAPHORE_GROUPS}"
        return None

    def operands(self, cfg, layer):
        return (TILES,)  # tma_gemv's packed 64 x 64 tiles: one copy serves the three engines

    build_operand = TmaGemv.build_operand

    def variant(self, cfg, layer, m):
        kernel = dict(rows=cfg.rows, tokens=cfg.tokens, stages=cfg.stages, dual=layer.dual)
        kernel.update(out=CUDA_TYPES[layer.out_dtype])
        smem = persistent_smem_bytes(cfg.rows, cfg.tokens, cfg.stages, layer.dual)
        return Variant.of(self.name, kernel, ctas=cfg.ctas, smem_bytes=smem)

    def plan(self, cfg, layer, m, ctx):
        tiles, workspace = ctx.operands[TILES], ctx.buffers["workspace"]
        return ctx.cuda_plan(
            self.variant(cfg, layer, m), layer, m, (tiles[0], tiles[-1]), (workspace.numel(),)
        )


PERSISTENT_GEMM = PersistentGemm()
