"""The fallback: cuBLAS through torch, for every shape no table routes and every x the kernels do not take."""

from typing import NamedTuple

import torch

from kernels_src.engine import Engine, Operand, build_only

HI_LO = Operand("hi_lo")  # the router's [hi, lo] concatenated along K


class CublasConfig(NamedTuple):
    pass  # cuBLAS picks its own kernel


class Cublas(Engine):
    name = "cublas"
    Config = CublasConfig
    m_min, m_max = 1, None
    summary = build_only(
        "cublas (everything else): x @ W[:n].T in bf16; the router as one GEMM over K concatenated,"
        " [x, x] @ [hi, lo].T with fp32 output."
    )

    def operands(self, cfg, layer):
        return (HI_LO,) if layer.dual else ()

    def build_operand(self, operand, parts, layer):
        return torch.cat(parts, dim=1).contiguous()

    def plan(self, cfg, layer, m, ctx):
        return fallback_plan(layer, layer.n_for(m), ctx.parts, ctx.operands.get(HI_LO))


def fallback_plan(layer, n: int, parts: tuple, hi_lo=None):
    """out = x . W[:n]^T by cuBLAS, for any m; the router through its hi+lo concatenation."""
    if layer.dual:
        w_t = hi_lo[:n].t()
        if w_t.device.type != "cuda":  # bf16 x bf16 -> fp32 GEMMs are CUDA's
            return cpu_dual_plan(w_t.float())
        return lambda x: torch.mm(torch.cat([x, x], dim=1), w_t, out_dtype=getattr(torch, layer.out_dtype))
    w_t = parts[0][:n].t()
    return lambda x: torch.mm(x, w_t)


def cpu_dual_plan(w_t):
    """The router's GEMM off the GPU (verify --device cpu), in fp32, for a bf16 x only."""

    def call(x):
        if x.dtype is not torch.bfloat16:  # as the GPU's GEMM refuses it
            raise TypeError(f"expected a bfloat16 x, got {x.dtype}")
        return torch.cat([x, x], dim=1).float() @ w_t

    return call


CUBLAS = Cublas()
