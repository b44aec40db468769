"""probe-gemm: the persistent GEMM's kernel on a plain GEMM out[M, N] = x[M, K] . W[N, K]^T (bf16 in and out)
against cuBLAS (torch.mm) in the same run, cold (L2 read-flushed) and warm, each config checked against an fp32
reference first. The milestone table of docs/persistent-gemm.md comes from here."""

from __future__ import annotations

from types import ModuleType
from typing import NamedTuple

GEMM_ENGINE = "persistent_gemm"
# rows, tokens, stages, ctas: the configs timed when none is given
DEFAULT_CONFIGS = ((128, 256, 4, 132), (128, 256, 4, 128), (256, 128, 4, 132), (128, 128, 6, 132))
REL_TOLERANCE = 2e-2  # bf16 output against an fp32 reference, relative Frobenius norm


class GemmRow(NamedTuple):
    shape: str
    config: str
    rel_error: float
    cold_us: float
    warm_us: float
    cublas_cold_us: float
    cublas_warm_us: float

    def tflops(self, us: float) -> float:
        m, n, k = (int(v) for v in self.shape.split("x"))
        return 2.0 * m * n * k / us / 1e6


class ProbeError(Exception):
    pass


def parse_config(text: str) -> tuple:
    """`rows,tokens,stages,ctas` -> a tuple of four ints (ProbeError if not)."""
    try:
        values = tuple(int(v) for v in text.split(","))
    except ValueError:
        values = ()
    if len(values) != 4:
        raise ProbeError(f"--config {text!r}: expected rows,tokens,stages,ctas, e.g. 128,256,4,132")
    return values


def run(module: ModuleType, m: int, n: int, k: int, configs, reps: int) -> list[GemmRow]:
    """Every config's row, after its correctness check; cuBLAS timed in the same run."""
    import torch

    from generator.judge.timing import L2Flusher, settle, time_cold_us, time_warm_us

    layer = module.Layer("probe", n, k, "bfloat16")
    variants = [module.PERSISTENT_GEMM.variant(module.GemmConfig(*c), layer, m) for c in configs]
    ext = module.build_extension(variants)
    gen = torch.Generator(device="cuda").manual_seed(0)
    x = torch.randn(m, k, device="cuda", generator=gen).to(torch.bfloat16)
    w = torch.randn(n, k, device="cuda", generator=gen).to(torch.bfloat16)
    torch.backends.cuda.matmul.allow_tf32 = False
    reference = x.float() @ w.float().t()
    tiles = module.pack_tma_bulk(w)  # prepare()'s weight layout: packed, pre-swizzled 8 KB tiles
    workspace = torch.empty(
        max(module.persistent_workspace_floats(module.GemmConfig(*c)) for c in configs), device="cuda"
    )
    semaphores = torch.zeros(module.SEMAPHORES, dtype=torch.int32, device="cuda")
    out = torch.empty(m, n, device="cuda", dtype=torch.bfloat16)
    flush = L2Flusher()
    settle(flush)
    cublas = lambda: torch.mm(x, w.t(), out=out)  # noqa: E731
    cublas_cold, cublas_warm = time_cold_us(cublas, flush, reps), time_warm_us(cublas, calls=5, reps=reps)
    rows = []
    for number, config in enumerate(configs):
        plan = ext.plan(
            number,
            n,
            k,
            (tiles.data_ptr(), tiles.data_ptr()),
            (workspace.numel(),),
            workspace.data_ptr(),
            semaphores.data_ptr(),
        )
        call = lambda: ext.run(  # noqa: E731
            plan, x.data_ptr(), out.data_ptr(), m, torch.cuda.current_stream().cuda_stream
        )
        out.fill_(float("nan"))
        refused = call()
        if refused:
            raise ProbeError(f"{GEMM_ENGINE} {config}: {refused}")
        torch.cuda.synchronize()
        error = ((out.float() - reference).norm() / reference.norm()).item()
        cold = warm = float("nan")
        if error < REL_TOLERANCE:  # time only what computes the GEMM
            cold, warm = time_cold_us(call, flush, reps), time_warm_us(call, calls=5, reps=reps)
        shape = f"{m}x{n}x{k}"
        rows.append(GemmRow(shape, ",".join(map(str, config)), error, cold, warm, cublas_cold, cublas_warm))
    return rows


def table(rows: list[GemmRow]) -> str:
    """A markdown table: times, TFLOP/s and the ratio of TFLOP/s against cuBLAS's, cold and warm."""
    lines = [
        "| M x N x K | rows,tokens,stages,ctas | rel. error | cold us | cold TFLOP/s | cuBLAS cold | x cuBLAS"
        " | warm us | warm TFLOP/s | cuBLAS warm | x cuBLAS |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        lines.append(
            f"| {r.shape} | {r.config} | {r.rel_error:.1e} | {r.cold_us:.1f} | {r.tflops(r.cold_us):.0f}"
            f" | {r.tflops(r.cublas_cold_us):.0f} | {r.cublas_cold_us / r.cold_us:.3f} | {r.warm_us:.1f}"
            f" | {r.tflops(r.warm_us):.0f} | {r.tflops(r.cublas_warm_us):.0f} | {r.cublas_warm_us / r.warm_us:.3f} |"
        )
    return "\n".join(lines)
