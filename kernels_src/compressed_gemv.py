"""The GEMV on 12-bit lossless weights (compressed_gemv.cuh, compress.py) for m <= 32, bf16 layers. Design and
figures: docs/compressed-gemv.md."""

from kernels_src.compress import compress, table_scalars
from kernels_src.engine import (
    DecodeGemv,
    Field,
    Operand,
    Variant,
    column_blocks,
    build_only,
    config_type,
    split_rule,
)
from kernels_src.mma_gemv import MMA_PIPELINE, split_error, split_k_launch, tiles_smem_error

COMPRESSED_PIPELINES = MMA_PIPELINE.members[:2]  # batch and double, mma_gemv's codes
COMPRESSED = Operand("compressed")  # compress.compress's tensors
COMPRESSED_REDUCTIONS = ("none", "semaphore", "cluster")
# data registers a thread may hold (docs/compressed-gemv.md: batch's decode needs temporaries)
COMPRESSED_BATCH_DATA_REGS = build_only(104)
COMPRESSED_DOUBLE_DATA_REGS = build_only(100)


def overflow_smem(warps: int, row_blocks: int, groups_per_cta: int) -> int:
    """Shared memory the overflow pass adds (the launch's overflow_bytes): a 2 KB tile a warp and the CTA's bucket
    offsets, whatever the entries: every config runs any matrix."""
    return warps * 2048 + (row_blocks * (groups_per_cta + 1) * 4 + 15) // 16 * 16


COMPRESSED_GEMV_FIELDS = (
    Field("warps", int, (1, 2, 4, 8, 16), build_only("warps per CTA, splitting its K range")),
    Field("splits", int, (1, 2, 4, 8, 16, 32), build_only("CTAs that split K")),
    Field(
        "groups",
        int,
        (1, 2, 4),
        build_only("64-wide K groups each warp has in flight per trip (three 16-byte loads each)"),
    ),
    Field(
        "pipeline",
        str,
        COMPRESSED_PIPELINES,
        build_only("batch, or double (two register sets), as in mma_gemv"),
    ),
    Field("row_blocks", int, (1, 2, 4), build_only("16-row blocks per CTA")),
    Field("reduce", str, COMPRESSED_REDUCTIONS, build_only("none (splits = 1), semaphore, cluster")),
)
CompressedGemvConfig = config_type("CompressedGemvConfig", COMPRESSED_GEMV_FIELDS)


class CompressedGemv(DecodeGemv):
    name = "compressed_gemv"
    precedence = build_only(10)  # the compressed GEMVs first: their 12-bit weights are 25 % fewer bytes
    may_refuse = build_only(True)
    FIELDS = build_only(COMPRESSED_GEMV_FIELDS)
    Config = CompressedGemvConfig
    launcher = build_only("okc::launch_compressed_gemv")
    cuda_constants = build_only((MMA_PIPELINE,))
    summary = build_only(
        "compressed_gemv (m <= 32, bf16 layers): mma_gemv's skeleton on 12-bit lossless weights (each weight's"
        " low byte and a 4-bit code into a table of 16 sign/exponent bytes; the exceptions patched in or listed"
        " apart), rebuilt in registers: 25 % fewer bytes."
    )

    @build_only
    def rule(self, cfg, layer, m):
        if layer.dual:
            return "the router's fp32 weights are never compressed (its hi + lo split is already 32 bits)"
        n, k = layer.n_for(m), layer.k
        if n % 16 or k % 64:
            return f"the compressed_gemv engine needs N % 16 == 0 and K % 64 == 0, got N={n} K={k}"
        error = split_rule(cfg) or split_error(
            cfg.splits, cfg.reduce, k // 64, f"64-wide K groups of K={k}", n, cfg.row_blocks, m
        )
        if error:
            return error
        overflow = overflow_smem(cfg.warps, cfg.row_blocks, k // 64 // cfg.splits)
        error = tiles_smem_error(
            cfg.warps,
            cfg.splits,
            cfg.row_blocks,
            cfg.reduce == "cluster",
            m,
            overflow,
            " with the overflow pass's" " tiles and offsets",
        )
        if error:
            return error
        nb, r, double = column_blocks(m), cfg.row_blocks, cfg.pipeline == "double"
        regs = (2 if double else 1) * (
            cfg.groups * (12 * r + 8 * nb) + r
        ) + 4 * r * nb  # + a header word a trip
        budget = COMPRESSED_DOUBLE_DATA_REGS if double else COMPRESSED_BATCH_DATA_REGS
        if regs > budget:
            return (
                f"groups={cfg.groups}, pipeline={cfg.pipeline}, row_blocks={r} at m={m} holds {regs} data registers"
                f" per thread, over the kernel's {budget}"
            )
        return None

    def operands(self, cfg, layer):
        return (COMPRESSED,)

    def build_operand(self, operand, parts, layer):
        return compress(parts[0], layer.name)

    def variant(self, cfg, layer, m):
        kernel = dict(groups=cfg.groups, NB=column_blocks(m), row_blocks=cfg.row_blocks)
        kernel.update(pipeline=MMA_PIPELINE.code(cfg.pipeline))
        overflow = overflow_smem(cfg.warps, cfg.row_blocks, layer.k // 64 // cfg.splits)
        return Variant.of(self.name, kernel, **split_k_launch(cfg, m), overflow_bytes=overflow)

    def plan(self, cfg, layer, m, ctx):
        z = ctx.operands[COMPRESSED]
        pointers = (z["stream"], z["patches"], z["overflow"], z["overflow_starts"])
        scalars = (*table_scalars(z["table_words"]), z["overflow"].numel())
        return ctx.cuda_plan(self.variant(cfg, layer, m), layer, m, pointers, scalars)


COMPRESSED_GEMV = CompressedGemv()
