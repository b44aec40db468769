"""The mma.sync tensor-core GEMV (mma_gemv.cuh) for m <= 32. Design and figures: docs/mma-gemv.md."""

from kernels_src.engine import (
    CLUSTER_MAX,
    CUDA_TYPES,
    REDUCTION,
    SEMAPHORE_GROUPS,
    SMEM_LIMIT,
    TICKET_GROUPS,
    WORKSPACE_FLOATS,
    CudaEnum,
    build_only,
    DecodeGemv,
    Field,
    Operand,
    Variant,
    column_blocks,
    config_type,
    split_rule,
)
from kernels_src.packing import pack_mma_a

# The software-pipelining styles: mma_gemv.cuh's MmaPipeline (docs/mma-gemv.md says what each does).
MMA_PIPELINE = CudaEnum(
    "MmaPipeline",
    ("batch", "double", "batch_l2", "double_l2", "double_w", "double_w_l2"),
    "mma_gemv.py MMA_PIPELINE: the software-pipelining styles (compressed_gemv: the first two)",
)
MMA_PIPELINES = MMA_PIPELINE.members
FRAGMENTS = Operand("fragments")  # the weights repacked in mma fragment order (packing.pack_mma_a)
MMA_REDUCTIONS = ("none", "semaphore", "cluster", "atomic_out")
# Data registers a thread may hold (register_error): one set of weight and x fragments, or two live sets, under
# the 128 registers of a 512-thread CTA without spilling (the spills that set them: docs/mma-gemv.md).
MMA_BATCH_DATA_REGS = build_only(112)
MMA_DOUBLE_DATA_REGS = build_only(100)

MMA_GEMV_FIELDS = (
    Field(
        "warps",
        int,
        (1, 2, 4, 8, 16),
        build_only("warps per CTA; they split the CTA's K range and reduce through shared memory"),
    ),
    Field("splits", int, (1, 2, 4, 8, 16, 32), build_only("CTAs that split K")),
    Field("unroll", int, (1, 2, 4, 8), build_only("32-wide K blocks each warp has in flight per loop trip")),
    Field(
        "pipeline",
        str,
        MMA_PIPELINES,
        build_only("software-pipelining style (docs/mma-gemv.md says what each does)"),
    ),
    Field(
        "row_blocks",
        int,
        (1, 2, 4),
        build_only("16-row blocks per CTA: each x fragment serves all of them, cutting x's L2 re-reads"),
    ),
    Field(
        "reduce",
        str,
        MMA_REDUCTIONS,
        build_only(
            "how splits > 1 meet: none (splits = 1), semaphore (workspace, the last CTA sums), cluster (thread-block"
            " cluster, splits <= 16), atomic_out (red.add into the fp32 output, ordered by a ticket: the router only)"
        ),
    ),
)
MmaGemvConfig = config_type("MmaGemvConfig", MMA_GEMV_FIELDS)


@build_only
def data_registers(cfg: MmaGemvConfig, nb: int, dual: bool) -> int:
    """Fragment registers a thread holds: weights and x per K block and live set, and the accumulators."""
    double = cfg.pipeline in ("double", "double_l2")
    weight_sets = 2 if double or cfg.pipeline in ("double_w", "double_w_l2") else 1
    x_sets = 2 if double else 1
    r = cfg.row_blocks
    return cfg.unroll * (weight_sets * 8 * r * (2 if dual else 1) + x_sets * 4 * nb) + 4 * r * nb


@build_only
def register_error(cfg: MmaGemvConfig, nb: int, dual: bool) -> str | None:
    """The register budget, with the two exceptions ptxas showed (docs/mma-gemv.md)."""
    if cfg.pipeline in ("double_w", "double_w_l2") and nb == 4 and cfg.unroll > 1:
        return f"unroll={cfg.unroll}, pipeline={cfg.pipeline} at NB=4: the x-single-buffered styles take unroll 1"
    one_set = cfg.pipeline in ("batch", "batch_l2")
    roomy = one_set or (cfg.pipeline in ("double", "double_l2") and nb <= 2 and not dual)
    budget = MMA_BATCH_DATA_REGS if roomy else MMA_DOUBLE_DATA_REGS
    regs = data_registers(cfg, nb, dual)
    if regs > budget:
        return (
            f"unroll={cfg.unroll}, pipeline={cfg.pipeline}, row_blocks={cfg.row_blocks} at NB={nb}"
            f"{' (dual)' if dual else ''} holds {regs} data registers per thread, over the kernel's {budget}"
        )
    return None


def tiles_smem(warps: int, splits: int, row_blocks: int, cluster: bool, m: int) -> int:
    """The warps' partial tiles in shared memory (and a cluster's inbox on rank 0)."""
    return (warps + (splits - 1 if cluster else 0)) * row_blocks * column_blocks(m) * 4 * 32 * 4


def split_k_launch(cfg, m: int) -> dict:
    """The launch arguments of both mma.sync GEMVs: warps, splits, the reduction and the tiles' shared memory."""
    smem = tiles_smem(cfg.warps, cfg.splits, cfg.row_blocks, cfg.reduce == "cluster", m)
    return dict(warps=cfg.warps, splits=cfg.splits, reduce=REDUCTION.code(cfg.reduce), smem_bytes=smem)


@build_only
def tiles_smem_error(
    warps: int, splits: int, row_blocks: int, cluster: bool, m: int, extra: int = 0, extra_what: str = ""
) -> str | None:
    """tiles_smem, and `extra` bytes more (the compressed GEMV's overflow pass, `extra_what`), within the limit."""
    smem = tiles_smem(warps, splits, row_blocks, cluster, m) + extra
    if smem > SMEM_LIMIT:
        return (
            f"warps={warps}, row_blocks={row_blocks}, splits={splits} at m={m} need {smem} bytes of shared memory"
            f"{extra_what}, over {SMEM_LIMIT}"
        )
    return None


@build_only
def split_error(splits: int, reduce: str, units: int, unit_name: str, n: int, row_blocks: int, m: int):
    """What the two mma.sync GEMVs' rules share about K splits."""
    if units % splits:
        return f"splits={splits} does not divide the {units} {unit_name}"
    if reduce == "cluster" and not 2 <= splits <= CLUSTER_MAX:
        return f"reduce=cluster needs 2 <= splits <= {CLUSTER_MAX}, got splits={splits}"
    if (n // 16) % row_blocks:
        return f"row_blocks={row_blocks} does not divide the {n // 16} row blocks of N={n}"
    if reduce == "semaphore" and (n // 16) * splits * column_blocks(m) * 128 > WORKSPACE_FLOATS:
        return f"splits={splits} needs more workspace than the {WORKSPACE_FLOATS} floats there are"
    if reduce == "semaphore" and n // (16 * row_blocks) > SEMAPHORE_GROUPS:
        return (
            f"reduce=semaphore takes at most {SEMAPHORE_GROUPS} row groups, N={n} at row_blocks={row_blocks}"
            " has more"
        )
    return None


class MmaGemv(DecodeGemv):
    name = "mma_gemv"
    precedence = build_only(40)  # the last GEMV: its defaults take every m <= 32 the tables before it leave
    FIELDS = build_only(MMA_GEMV_FIELDS)
    Config = MmaGemvConfig
    has_defaults = True
    launcher = build_only("okc::launch_mma_gemv")
    cuda_constants = build_only((MMA_PIPELINE,))
    summary = build_only(
        "mma_gemv (m <= 32): mma.sync with the weights repacked in fragment order (one 16-byte load a lane a"
        " fragment); warps split K through shared memory, CTAs by a semaphore, a cluster or the router's fp32"
        " atomics."
    )

    @build_only
    def rule(self, cfg, layer, m):
        n, k = layer.n_for(m), layer.k
        if n % 16 or k % 32:
            return f"the mma_gemv engine needs N % 16 == 0 and K % 32 == 0, got N={n} K={k}"
        error = split_rule(cfg) or split_error(
            cfg.splits, cfg.reduce, k // 32, f"32-wide K blocks of K={k}", n, cfg.row_blocks, m
        )
        if error:
            return error
        if cfg.reduce == "atomic_out":
            if not layer.dual:
                return "reduce=atomic_out adds into an fp32 output: the router (dual) only"
            if n // (16 * cfg.row_blocks) > TICKET_GROUPS:
                return (
                    f"reduce=atomic_out takes at most {TICKET_GROUPS} row groups, N={n} at"
                    f" row_blocks={cfg.row_blocks}"
                )
        return register_error(cfg, column_blocks(m), layer.dual) or tiles_smem_error(
            cfg.warps, cfg.splits, cfg.row_blocks, cfg.reduce == "cluster", m
        )

    def operands(self, cfg, layer):
        return (FRAGMENTS,)

    def build_operand(self, operand, parts, layer):
        return tuple(pack_mma_a(part) for part in parts)

    def variant(self, cfg, layer, m):
        kernel = dict(unroll=cfg.unroll, NB=column_blocks(m), row_blocks=cfg.row_blocks)
        kernel.update(pipeline=MMA_PIPELINE.code(cfg.pipeline), dual=layer.dual)
        kernel.update(atomic_out=cfg.reduce == "atomic_out", out=CUDA_TYPES[layer.out_dtype])
        return Variant.of(self.name, kernel, **split_k_launch(cfg, m))

    def plan(self, cfg, layer, m, ctx):
        packed = ctx.operands[FRAGMENTS]  # dual: hi, lo; plain: the one matrix
        return ctx.cuda_plan(self.variant(cfg, layer, m), layer, m, (packed[0], packed[-1]))


MMA_GEMV = MmaGemv()
