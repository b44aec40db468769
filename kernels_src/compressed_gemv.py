"""The GEMV on 12-bit lossless weights (kernels_src/compressed_gemv.cuh, format in kernels_src/compress.py) for
m <= 32, plain bf16 layers only: its config, rule, operands and launch.

Design and the measurements behind each field: docs/compressed-gemv.md."""

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

COMPRESSED_PIPELINES = MMA_PIPELINE.members[
    :2
]  # batch and double: as mma_gemv's, by the same MmaPipeline codes
COMPRESSED = Operand("compressed")  # the 12-bit stream and its parts (compress.compress)
COMPRESSED_REDUCTIONS = ("none", "semaphore", "cluster")
# Data-register budgets (the rule's): batch under mma_gemv's because the decode needs temporaries (the spill that
# set it: docs/compressed-gemv.md); double the plain kernel's.
COMPRESSED_BATCH_DATA_REGS = build_only(104)
COMPRESSED_DOUBLE_DATA_REGS = build_only(100)


def overflow_smem(warps: int, row_blocks: int, groups_per_cta: int) -> int:
    """Shared memory the overflow pass adds for a matrix with overflow entries (the launch's overflow_bytes, laid
    out by compressed_gemv.cuh after the warps' tiles and the inbox): a 2 KB tile per warp and the CTA's row_blocks
    x (groups_per_cta + 1) bucket offsets, 16-byte aligned. Fixed by the config and K, whatever the number of entries, so every config can run any
    matrix: it is counted for all of them."""
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
    FIELDS = COMPRESSED_GEMV_FIELDS
    Config = CompressedGemvConfig
    launcher = "okc::launch_compressed_gemv"
    cuda_constants = build_only((MMA_PIPELINE,))
    summary = build_only(
        "compressed_gemv (m <= 32, bf16 layers): the weights stream 12-bit and lossless (each weight's low byte"
        " plus a 4-bit index into a 16-entry table of sign/exponent bytes; 25 % fewer bytes than bf16) through"
        " mma_gemv's skeleton, each fragment rebuilt in registers with byte permutes. Weights outside the table"
        " are exceptions: a K group's first three ride in its header and are added by one more mma each, the rest"
        " sit in one list with an offset per (16-row block, K group) and are multiplied after the loop. A layer"
        " whose whole format would cost 14 bits a weight or more keeps its bf16 engines (prepare() says so in"
        " one line)."
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
        return compress(
            parts[0], layer.name
        )  # CompressionError: prepare() keeps the layer on its bf16 engines

    def variant(self, cfg, layer, m):
        """overflow_bytes: what the launcher adds to smem_bytes for a matrix with overflow entries."""
        kernel = dict(groups=cfg.groups, NB=column_blocks(m), row_blocks=cfg.row_blocks)
        kernel.update(pipeline=MMA_PIPELINE.code(cfg.pipeline))
        overflow = overflow_smem(cfg.warps, cfg.row_blocks, layer.k // 64 // cfg.splits)
        return Variant.of(self.name, kernel, **split_k_launch(cfg, m), overflow_bytes=overflow)

    def plan(self, cfg, layer, m, ctx):
        z = ctx.operands[COMPRESSED]  # row blocks outermost in every part: the unpooler's slice is a prefix
        pointers = (z["stream"], z["patches"], z["overflow"], z["overflow_starts"])
        scalars = (*table_scalars(z["table_words"]), z["overflow"].numel())
        return ctx.cuda_plan(self.variant(cfg, layer, m), layer, m, pointers, scalars)


COMPRESSED_GEMV = CompressedGemv()
