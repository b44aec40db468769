"""The Triton split-K GEMM as an engine: m > 32."""

import torch

from kernels_src.engine import Engine
from kernels_src.splitk_gemm import (
    COUNTERS,
    LOADS,
    REDUCE,
    SPLITK_BLOCK_K,
    SPLITK_BLOCK_M,
    SPLITK_BLOCK_N,
    SPLITK_STAGES,
    SPLITK_WARPS,
    SplitKGemmConfig,
    splitk_gemm,
    splitk_gemm_config_error,
    weight_descriptors,
)


class SplitKGemm(Engine):
    name = "splitk_gemm"
    Config = SplitKGemmConfig
    values = {
        "block_n": SPLITK_BLOCK_N,
        "block_m": SPLITK_BLOCK_M,
        "block_k": SPLITK_BLOCK_K,
        "warps": SPLITK_WARPS,
        "stages": SPLITK_STAGES,
    }
    modes = {"loads": LOADS, "reduce": REDUCE}
    m_min, m_max = 33, None
    sweep_m = (64, 128, 256)  # the rows its table lists: 33..64, 65..128 and 129..256 borrow them
    summary = (
        "splitk_gemm (m > 32): a Triton GEMM with the weights on the MMA's M side (block_n rows x block_m tokens"
        " per program, wgmma), TMA descriptors for x and the weights (the weights' built once in prepare()), K"
        " split over `splits` programs and reduced in the same launch: by a self-resetting semaphore (partials"
        " to the workspace, the last program sums them in order) or by fp32 atomic adds into a zeroed accumulator"
        " that the last program writes out and re-zeroes. The router: hi and lo into one fp32 accumulator."
    )

    def rule(self, cfg, layer, m):
        return splitk_gemm_config_error(cfg, m, layer.n_for(m), layer.k, layer.dual)

    def operands(self, cfg, layer):
        return (f"descriptors_{cfg.block_n}x{cfg.block_k}",) if cfg.loads == "tma" else ()

    def build_operand(self, operand, parts, layer):
        block_n, block_k = map(int, operand.split("_")[1].split("x"))
        cfg = SplitKGemmConfig(block_n, 64, block_k, 1, 4, 3, "tma", "none")  # only the block shape matters
        return weight_descriptors(parts, cfg)

    def plan(self, cfg, layer, m, ctx):
        parts, n, fallback = ctx.parts, layer.n_for(m), ctx.fallback(m)
        descriptors = ctx.operands[self.operands(cfg, layer)[0]] if cfg.loads == "tma" else ()
        b = ctx.buffers
        workspace, counters, accumulator = b["workspace"], b["counters"], b["accumulator"]
        out_dtype, device = (torch.float32 if layer.dual else torch.bfloat16), workspace.device

        def call(x):
            if x.dtype is not torch.bfloat16 or not x.is_contiguous() or x.data_ptr() % 16:
                return fallback(x)
            out = torch.empty((x.shape[0], n), dtype=out_dtype, device=device)
            return splitk_gemm(x, parts, out, workspace, counters, accumulator, cfg, descriptors)

        return call

    def precompile(self, cfg, layer) -> None:
        """Compile cfg's kernel for `layer` into Triton's on-disk cache (the sweep does this in several processes
        at once, so that the timing process finds every kernel compiled)."""
        compile_config(cfg, layer.dual)

    def candidates(self, layer, m):
        out = []
        for block_n in (64, 128):
            for block_m in (64, 128):
                for block_k in (64, 128):
                    for splits in (1, 2, 4, 8, 16):
                        for stages in (3, 4):
                            for reduce in ("none",) if splits == 1 else ("semaphore", "atomic"):
                                cfg = SplitKGemmConfig(block_n, block_m, block_k, splits, 4, stages, "tma", reduce)
                                if self.config_error(cfg, layer, m) is None:
                                    out.append(cfg)
        return out


def compile_config(cfg, dual: bool, device="cuda") -> None:
    """(SplitKGemm.precompile's work.) Compile cfg's kernel (dual or not) into Triton's cache by one launch on small tensors: what it is keyed on
    (the constexprs, the warps and stages, the arguments' dtypes and 16-divisibility) is what a real launch has,
    and M and splits are never specialised. The sweep runs this in several processes at once."""
    m, k = 40, cfg.block_k * cfg.splits
    padded = -(-m // cfg.block_m) * cfg.block_m  # the token tiles' rows
    x = torch.randn(m, k, device=device).to(torch.bfloat16)
    weights = tuple(torch.randn(cfg.block_n, k, device=device).to(torch.bfloat16) for _ in range(2 if dual else 1))
    out = torch.empty(m, cfg.block_n, dtype=torch.float32 if dual else torch.bfloat16, device=device)
    counters = torch.zeros(COUNTERS, dtype=torch.int32, device=device)
    accumulator = torch.zeros(padded * cfg.block_n, dtype=torch.float32, device=device)
    workspace = torch.empty(padded * cfg.block_n * cfg.splits, dtype=torch.float32, device=device)
    splitk_gemm(x, weights, out, workspace, counters, accumulator, cfg)


SPLITK_GEMM = SplitKGemm()
