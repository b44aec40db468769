"""probe-gemm: the persistent GEMM's kernel on a plain GEMM out[M, N] = x[M, K] . W[N, K]^T (bf16 in and out)
against cuBLAS (torch.mm) in the same run, cold (L2 read-flushed) and warm, each config checked against an fp32
reference first. The milestone table of docs/persistent-gemm.md comes from here.

With `phases`, the kernel is built with its phase stamps (persistent_gemm.cuh's gemm_stamp, OKC_GEMM_STAMPS) and
each config also gets a timeline: per CTA, from the global timer, the time from the grid's first entry to its own,
to its first slot landed, through its mainloops, its writes or partial stores, its wait for a split tile's
other participants and its share of the reduction; medians over cold launches of the median and the slowest
CTA. The shipped kernel carries none of it."""

from __future__ import annotations

import statistics
from types import ModuleType
from typing import NamedTuple

GEMM_ENGINE = "persistent_gemm"
# rows, tokens, stages, ctas: the configs timed when none is given
DEFAULT_CONFIGS = ((128, 256, 4, 132), (128, 256, 4, 128), (256, 128, 4, 132), (128, 128, 6, 132))
REL_TOLERANCE = 2e-2  # bf16 output against an fp32 reference, relative Frobenius norm
STAMP_GROUPS, STAMP_SLOTS = 2, 8  # the consumer warpgroups, 8 stamps each
# gemm_stamp's phases (GemmPhase) in order, and the spans the timeline reports between consecutive ones
PHASES = ("entry", "first slot", "mainloops", "units", "arrived", "exit")
SPANS = ("fill", "mainloops", "write / store", "wait", "reduce")
STAMPS_ON = "#define OKC_GEMM_STAMPS 1\n"


class GemmRow(NamedTuple):
    shape: str
    config: str
    rel_error: float
    cold_us: float
    warm_us: float
    cublas_cold_us: float
    cublas_warm_us: float

    @property
    def dims(self) -> tuple:
        """(M, N, K) of the shape."""
        return tuple(int(v) for v in self.shape.split("x"))

    def tflops(self, us: float) -> float:
        m, n, k = self.dims
        return 2.0 * m * n * k / us / 1e6


class PhaseRow(NamedTuple):
    shape: str
    config: str
    launches: int
    entry_us: tuple  # the median and the last CTA's entry after the grid's first
    spans_us: dict  # span name -> (median CTA, slowest CTA), consumer warpgroup 0
    intake_gbs: float  # the median CTA's copies over its mainloops
    span_us: float  # the grid's first entry to its last exit


class ProbeError(Exception):
    pass


def stamp_floats(ctas: int) -> int:
    """The workspace floats the stamps of `ctas` CTAs take (int64: two floats each)."""
    return ctas * STAMP_GROUPS * STAMP_SLOTS * 2


def parse_config(text: str) -> tuple:
    """`rows,tokens,stages,ctas` -> a tuple of four ints (ProbeError if not)."""
    try:
        values = tuple(int(v) for v in text.split(","))
    except ValueError:
        values = ()
    if len(values) != 4:
        raise ProbeError(f"--config {text!r}: expected rows,tokens,stages,ctas, e.g. 128,256,4,132")
    return values


def parse_define(text: str) -> str:
    """`NAME=VALUE` (a macro of persistent_gemm.cuh's, e.g. OKC_GEMM_FIRST_GAP=600) -> its #define line."""
    name, _, value = text.partition("=")
    if not name.isidentifier() or not value.strip():
        raise ProbeError(f"--define {text!r}: expected NAME=VALUE, e.g. OKC_GEMM_FIRST_GAP=600")
    return f"#define {name} {value.strip()}\n"


def run(module: ModuleType, m: int, n: int, k: int, configs, reps: int, phases: int = 0, defines=()):
    """Every config's row, after its correctness check, cuBLAS timed in the same run; and with phases > 0 (the
    stamped build) each config's timeline over that many cold launches: (rows, phase rows). `defines`: #define
    lines put ahead of the file's CUDA (parse_define)."""
    import torch

    from generator.judge.timing import L2Flusher, settle, time_cold_us, time_warm_us
    from generator.launch_table import extension_of
    from kernels_src.persistent_gemm import PERSISTENT_GEMM, GemmConfig

    layer = module.Layer("probe", n, k, "bfloat16")
    head = "".join(defines) + (STAMPS_ON if phases else "")
    if head and not module.CUDA_SRC.startswith(head):
        module.CUDA_SRC = head + module.CUDA_SRC
    ext = extension_of(module, [PERSISTENT_GEMM.variant(GemmConfig(*c), layer, m) for c in configs])
    gen = torch.Generator(device="cuda").manual_seed(0)
    x = torch.randn(m, k, device="cuda", generator=gen).to(torch.bfloat16)
    w = torch.randn(n, k, device="cuda", generator=gen).to(torch.bfloat16)
    torch.backends.cuda.matmul.allow_tf32 = False
    reference = x.float() @ w.float().t()
    tiles = module.pack_tma_bulk(w)  # prepare()'s weight layout: packed, pre-swizzled 8 KB tiles
    workspace = torch.empty(  # the stamps lie past the partials
        max(module.persistent_workspace_floats(module.GemmConfig(*c)) for c in configs)
        + stamp_floats(max(c[3] for c in configs)),
        device="cuda",
    )
    semaphores = torch.zeros(module.SEMAPHORES, dtype=torch.int32, device="cuda")
    out = torch.empty(m, n, device="cuda", dtype=torch.bfloat16)
    flush = L2Flusher()
    settle(flush)
    cublas = lambda: torch.mm(x, w.t(), out=out)  # noqa: E731
    cublas_cold, cublas_warm = time_cold_us(cublas, flush, reps), time_warm_us(cublas, calls=5, reps=reps)
    rows, phase_rows = [], []
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
        if phases and error < REL_TOLERANCE:
            phase_rows.append(_phase_row(module, rows[-1], config, call, workspace, flush, phases))
    return rows, phase_rows


def _phase_row(
    module: ModuleType, row: GemmRow, config: tuple, call, workspace, flush, launches: int
) -> PhaseRow:
    """One config's timeline: its stamps (past its partials in the workspace) read after each cold launch."""
    import torch

    m, n, k = row.dims
    gemm = module.GemmConfig(*config)
    offset = module.persistent_workspace_floats(gemm)
    stamps = workspace[offset : offset + stamp_floats(config[3])].view(torch.int64)
    per_launch = []
    for _ in range(launches):
        stamps.zero_()
        flush()
        call()
        torch.cuda.synchronize()
        per_launch.append(stamps.view(config[3], STAMP_GROUPS, STAMP_SLOTS).tolist())
    slot_bytes = (gemm.rows + gemm.tokens) * module.GEMM_SLOT_K * 2  # bf16 weights and x
    copies = module.persistent_tiles(gemm, n, m) * (k // module.GEMM_SLOT_K) * slot_bytes / gemm.ctas
    return timeline(row.shape, row.config, per_launch, copies)


def timeline(shape: str, config: str, launches: list, copies_per_cta: float) -> PhaseRow:
    """The phase row of one config from its launches' stamps ([CTA][consumer warpgroup][phase] ns; 0 where a CTA never got
    there): per launch the median and the slowest CTA of each span, then the median over launches."""
    per_launch = []
    for stamps in launches:
        consumer = [cta[0] for cta in stamps if all(cta[0][: len(PHASES)])]
        start = min(c[0] for c in consumer)
        entries = sorted(c[0] - start for c in consumer)
        spans = {name: sorted(c[i + 1] - c[i] for c in consumer) for i, name in enumerate(SPANS)}
        mainloops = statistics.median(spans["mainloops"])
        per_launch.append(
            (
                (statistics.median(entries), entries[-1]),
                {name: (statistics.median(v), v[-1]) for name, v in spans.items()},
                copies_per_cta / mainloops,  # bytes per ns = GB/s
                max(c[len(PHASES) - 1] for c in consumer) - start,
            )
        )
    mid = lambda values: statistics.median(values) / 1000.0  # noqa: E731  ns -> us
    return PhaseRow(
        shape,
        config,
        len(launches),
        (mid([p[0][0] for p in per_launch]), mid([p[0][1] for p in per_launch])),
        {
            name: (mid([p[1][name][0] for p in per_launch]), mid([p[1][name][1] for p in per_launch]))
            for name in SPANS
        },
        statistics.median(p[2] for p in per_launch),
        mid([p[3] for p in per_launch]),
    )


def phase_table(rows: list[PhaseRow]) -> str:
    """A markdown table of the timelines: us, median CTA / slowest CTA."""
    head = " | ".join(f"{name} us" for name in SPANS)
    lines = [
        f"| M x N x K | rows,tokens,stages,ctas | entry us | {head} | intake GB/s a SM | span us |",
        "|---|---|---|" + "---|" * len(SPANS) + "---|---|",
    ]
    pair = lambda p: f"{p[0]:.2f} / {p[1]:.2f}"  # noqa: E731
    for r in rows:
        spans = " | ".join(pair(r.spans_us[name]) for name in SPANS)
        lines.append(
            f"| {r.shape} | {r.config} | {pair(r.entry_us)} | {spans} | {r.intake_gbs:.1f} | {r.span_us:.2f} |"
        )
    return "\n".join(lines)


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
