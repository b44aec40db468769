# okc: problem=muse_bf16_proj
"""Dense projections of Muse Spark Open (muse_bf16_proj) on the NVIDIA H200, sm_90a: out[m, n] = x[m, k] . W[:n]^T.

The engines, in precedence order: a (layer, m) runs on the first engine whose table gives it a config.

compressed_gemv (m <= 32, bf16 layers): mma_gemv's skeleton on 12-bit lossless weights (each weight's low byte
and a 4-bit code into a table of 16 sign/exponent bytes; the exceptions patched in or listed apart), rebuilt
in registers: 25 % fewer bytes.

compressed_ring (m <= 32, bf16 layers): the same 12-bit stream in ring slots beside x's boxes (TMA), decoded
straight into wgmma's A registers: x crosses into an SM once per 64 rows.

tma_gemv (m <= 32): pre-swizzled 64 x 64 weight tiles by plain bulk copies into a shared-memory ring read by
one consumer warpgroup's wgmma; full tiles split K over CTAs (semaphore or cluster), half tiles take 32 rows
and the whole K.

mma_gemv (m <= 32): mma.sync with the weights repacked in fragment order (one 16-byte load a lane a fragment);
warps split K through shared memory, CTAs by a semaphore, a cluster or the router's fp32 atomics.

tma_gemm (33 <= m <= 256): tma_gemv's kernel with 1-4 consumer warpgroups against one x box of up to 256
tokens; K split over CTAs, reduced by the semaphore or L2 atomics.

splitk_gemm (m > 32): a Triton GEMM with the weights on wgmma's M side and TMA descriptors, K split over
programs and reduced in the same launch by a semaphore or fp32 atomics.

cublas (everything else): x @ W[:n].T in bf16; the router as one GEMM over K concatenated, [x, x] @ [hi, lo].T
with fp32 output.

The engine per shape the judge sends (layer, m, n, engine, config):
  qkv_gate     1  2304  mma_gemv        warps=16 splits=1 unroll=2 pipeline=double row_blocks=2 reduce=none
  qkv_gate     5  2304  tma_gemv        splits=1 stages=16 tile=half reduce=none
  qkv_gate     7  2304  tma_gemv        splits=1 stages=16 tile=half reduce=none
  qkv_gate     8  2304  tma_gemv        splits=1 stages=16 tile=half reduce=none
  qkv_gate     9  2304  tma_gemv        splits=1 stages=16 tile=half reduce=none
  qkv_gate    16  2304  tma_gemv        splits=1 stages=16 tile=half reduce=none
  qkv_gate    32  2304  tma_gemv        splits=1 stages=14 tile=half reduce=none
  qkv_gate    64  2304  tma_gemm        warpgroups=1 splits=3 stages=8 reduce=atomic
  qkv_gate   128  2304  cublas
  qkv_gate   256  2304  cublas
  o            1  8192  compressed_gemv warps=8 splits=1 groups=1 pipeline=batch row_blocks=1 reduce=none
  o            5  8192  compressed_gemv warps=8 splits=1 groups=1 pipeline=batch row_blocks=1 reduce=none
  o            7  8192  compressed_gemv warps=8 splits=1 groups=1 pipeline=batch row_blocks=1 reduce=none
  o            8  8192  compressed_gemv warps=8 splits=1 groups=1 pipeline=batch row_blocks=1 reduce=none
  o            9  8192  tma_gemv        splits=1 stages=8 tile=full reduce=none
  o           16  8192  tma_gemv        splits=1 stages=8 tile=full reduce=none
  o           32  8192  tma_gemv        splits=1 stages=8 tile=full reduce=none
  o           64  8192  tma_gemm        warpgroups=1 splits=1 stages=8 reduce=none epilogue=staged
  o          128  8192  cublas
  o          256  8192  cublas
  pooler       1  4096  compressed_gemv warps=8 splits=1 groups=4 pipeline=batch row_blocks=1 reduce=none
  pooler       5  4096  compressed_gemv warps=16 splits=1 groups=1 pipeline=batch row_blocks=1 reduce=none
  pooler       7  4096  compressed_gemv warps=16 splits=1 groups=1 pipeline=batch row_blocks=1 reduce=none
  pooler       8  4096  compressed_gemv warps=16 splits=1 groups=1 pipeline=batch row_blocks=1 reduce=none
  pooler       9  4096  tma_gemv        splits=1 stages=12 tile=half reduce=none
  pooler      16  4096  tma_gemv        splits=1 stages=12 tile=half reduce=none
  pooler      32  4096  tma_gemv        splits=1 stages=12 tile=half reduce=none
  pooler      64  4096  tma_gemm        warpgroups=1 splits=2 stages=8 reduce=semaphore
  pooler     128  4096  splitk_gemm     block_n=64 block_m=128 block_k=128 splits=2 warps=4 stages=4 loads=tma reduce=atomic
  pooler     256  4096  cublas
  unpooler     1  1024  mma_gemv        warps=16 splits=1 unroll=8 pipeline=batch row_blocks=1 reduce=none
  unpooler     5  1024  mma_gemv        warps=16 splits=1 unroll=8 pipeline=batch row_blocks=1 reduce=none
  unpooler     7  1024  mma_gemv        warps=16 splits=1 unroll=8 pipeline=batch row_blocks=1 reduce=none
  unpooler     8  1024  mma_gemv        warps=16 splits=1 unroll=8 pipeline=batch row_blocks=1 reduce=none
  unpooler     9  8192  compressed_ring stages=8 warpgroups=4 groups=2
  unpooler    16  8192  compressed_ring stages=8 warpgroups=4 groups=2
  unpooler    32  8192  compressed_ring stages=8 warpgroups=4 groups=2
  unpooler    64  8192  tma_gemm        warpgroups=1 splits=1 stages=8 reduce=none epilogue=staged
  unpooler   128  8192  tma_gemm        warpgroups=1 splits=1 stages=6 reduce=none epilogue=staged
  unpooler   256  8192  cublas
  router       1   256  mma_gemv        warps=16 splits=4 unroll=4 pipeline=batch row_blocks=1 reduce=cluster
  router       5   256  mma_gemv        warps=8 splits=8 unroll=4 pipeline=batch row_blocks=1 reduce=cluster
  router       7   256  mma_gemv        warps=8 splits=8 unroll=4 pipeline=batch row_blocks=1 reduce=cluster
  router       8   256  mma_gemv        warps=8 splits=8 unroll=4 pipeline=batch row_blocks=1 reduce=cluster
  router       9   256  mma_gemv        warps=16 splits=4 unroll=4 pipeline=batch_l2 row_blocks=1 reduce=cluster
  router      16   256  mma_gemv        warps=16 splits=4 unroll=4 pipeline=batch_l2 row_blocks=1 reduce=cluster
  router      32   256  mma_gemv        warps=8 splits=16 unroll=1 pipeline=double row_blocks=1 reduce=atomic_out
  router      64   256  splitk_gemm     block_n=64 block_m=64 block_k=128 splits=16 warps=4 stages=4 loads=tma reduce=atomic
  router     128   256  splitk_gemm     block_n=64 block_m=64 block_k=128 splits=16 warps=4 stages=3 loads=tma reduce=atomic
  router     256   256  splitk_gemm     block_n=64 block_m=64 block_k=128 splits=8 warps=4 stages=4 loads=tma reduce=atomic

The CUDA kernels this file compiles: KERNELS, the 28 cases of LAUNCH_TABLE (23 distinct kernels).
"""

# Generated by `python -m generator build` (black 26.10.1) from kernels_src/ and tables/ (inputs
# sha256:24297e2735a939d7, this file sha256:9d9ecae58e7727e9).
# Do not edit by hand: change the sources or tables and rebuild. Reading order: the problem, prepare() and
# kernel_fn(), the engines, their tables and kernels, then the C++ sources (the launch table last).

from typing import TypedDict

import torch
from torch.utils.cpp_extension import load_inline
from typing import NamedTuple
import triton
import triton.language as tl
from triton.tools.tensor_descriptor import TensorDescriptor


class Weights(TypedDict):
    qkv_gate: torch.Tensor  # bfloat16 [2304, 8192]
    o: torch.Tensor  # bfloat16 [8192, 1024]
    pooler: torch.Tensor  # bfloat16 [4096, 8192]
    unpooler: torch.Tensor  # bfloat16 [8192, 4096]
    router: torch.Tensor  # float32 [256, 8192]


class Config(TypedDict):
    m: int
    n: int  # output width: the layer's n (unpooler 1024 at m <= 8, else 8192)
    k: int
    layer: str  # one of qkv_gate, o, pooler, unpooler, router


class Inputs(TypedDict):
    x: torch.Tensor  # bfloat16 [m, k]
    config: Config


# The problem (tables/problem.yaml): each layer's weight [n, k], its dtype, and the slice the judge asks for at
# small m (narrow_n outputs at m <= narrow_max_m).
LAYERS: dict = {
    "qkv_gate": {"n": 2304, "k": 8192, "dtype": "bfloat16"},
    "o": {"n": 8192, "k": 1024, "dtype": "bfloat16"},
    "pooler": {"n": 4096, "k": 8192, "dtype": "bfloat16"},
    "unpooler": {"n": 8192, "k": 4096, "dtype": "bfloat16", "narrow_n": 1024, "narrow_max_m": 8},
    "router": {"n": 256, "k": 8192, "dtype": "float32"},
}
# Every m the judge may send; prepare() warms each one up.
WARMUP_M = (1, 5, 7, 8, 9, 16, 32, 64, 128, 256)


# ---- kernels_src/runtime.py: prepare() and kernel_fn(), the judge's entry points, and the CUDA extension of the kernels routed to.
# The template defines LAYERS and WARMUP_M ahead of this code; TABLES, KERNELS, EXTENSION, CUDA_SRC, BINDING_SRC
# and LAUNCH_TABLE after the modules.
KERNEL_DEVICE = "cuda"  # where prepare() routes to the kernels; elsewhere every shape goes to torch


def problem():
    """(layers, tables) of this file."""
    return [Layer(name, **spec) for name, spec in LAYERS.items()], TABLES


class Prepared:
    """What prepare() leaves for kernel_fn(), by layer name where it is per layer."""

    def __init__(self, top_m: int):
        self.top_m = top_m
        self.parts = {}  # (w,), or (hi, lo) for fp32 weights
        self.operands = {}
        self.refused = {}
        self.routes = {}  # [(engine, cfg) for m = 0 .. top_m]
        self.buffers = {}
        # a launch table case (Variant.case) -> (the extension that holds it, its number there)
        self.kernels = {}
        self.plans = {}  # [(n, call) for m = 0 .. top_m]


def prepare(weights: "Weights") -> Prepared:
    """Everything slow, once: weight layouts, compilation, one launch per (layer, m), warm-up."""
    layers, tables = problem()
    device = next(iter(weights.values())).device
    state = Prepared(plan_max_m(tables))
    for layer in layers:
        w = weights[layer.name].contiguous()
        if tuple(w.shape) != (layer.n, layer.k):
            raise ValueError(
                f"prepare: {layer.name} is {list(w.shape)}, this file was built for [{layer.n}, {layer.k}]"
            )
        state.parts[layer.name] = split_hi_lo(w) if layer.dual else (w,)
        state.operands[layer.name] = {}
    cuda = device.type == KERNEL_DEVICE
    if not cuda:
        tables = ()
    for layer in layers:
        state.routes[layer.name] = layer_routes(state, layer, tables)
    state.buffers = {
        "workspace": torch.empty(WORKSPACE_FLOATS, dtype=torch.float32, device=device),
        "semaphores": torch.zeros(SEMAPHORES, dtype=torch.int32, device=device),
        "counters": torch.zeros(COUNTERS, dtype=torch.int32, device=device),
        "accumulator": torch.zeros(ACCUMULATOR_FLOATS, dtype=torch.float32, device=device),
    }
    # every kernel the tables can reach, a refused layer's routes too: one build, any weights
    if cuda and KERNELS:
        extension = build_extension(EXTENSION, LAUNCH_TABLE)
        state.kernels = {case: (extension, number) for number, case in enumerate(KERNELS)}
    made = make_plans(state, layers)
    warm_up(state, layers, weights, made, device)
    return state


def make_plans(state, layers) -> dict:
    """One launch per (layer, m) into state.plans: {key: (n, call, its first m)}."""
    made = {}
    for layer in layers:
        plans = [(-1, None)]  # m = 0: no plan (kernel_fn falls back)
        for m in range(1, state.top_m + 1):
            engine, cfg = state.routes[layer.name][m]
            key = (layer.name, engine.name, cfg, layer.n_for(m), engine.variant(cfg, layer, m))
            if key not in made:
                made[key] = (layer.n_for(m), engine.plan(cfg, layer, m, PlanContext(state, layer)), m)
            n, call, _ = made[key]
            plans.append((n, call))
        state.plans[layer.name] = plans
    return made


def warm_up(state, layers, weights, made, device) -> None:
    """Every launch once (Triton compiles, cuBLAS picks its kernels), then every m the judge sends."""
    for (name, *_), (n, call, m) in made.items():
        call(torch.randn(m, weights[name].shape[1], device=device).to(torch.bfloat16))
    for layer in layers:
        for m in WARMUP_M:
            x = torch.randn(m, layer.k, device=device).to(torch.bfloat16)
            kernel_fn(
                {"x": x, "config": {"m": m, "n": layer.n_for(m), "k": layer.k, "layer": layer.name}}, state
            )
    if device.type == "cuda":
        torch.cuda.synchronize()


def layer_routes(state, layer, tables) -> list:
    """(engine, config) for m = 0 .. top_m, operands built; a compressed engine refusing the weights is skipped."""
    skip = ()
    while True:
        out = [(None, None)] + [route(layer, m, tables, skip) for m in range(1, state.top_m + 1)]
        for engine, cfg in out[1:]:
            try:
                add_operands(state, engine, cfg, layer)
            except CompressionError as refused:
                say_refusal(refused)
                state.refused[layer.name] = str(refused)
                skip += (engine.name,)
                break
        else:
            return out


def say_refusal(refused) -> None:
    """The file's one output (generator/contract.py)."""
    print(f"prepare: {refused}", flush=True)


def add_operands(state, engine, cfg, layer) -> None:
    """What `engine` reads for cfg on `layer`, built once."""
    have = state.operands[layer.name]
    for operand in engine.operands(cfg, layer):
        if operand not in have:
            have[operand] = engine.build_operand(operand, state.parts[layer.name], layer)


def kernel_fn(data: "Inputs", state: Prepared):
    """The timed call: out = x . W[:n]^T by prepare()'s launch; a wrong x fails in cuBLAS, then x_error says why."""
    x = data["x"]
    config = data["config"]
    try:
        plans = state.plans[config["layer"]]
        m = x.shape[0]
        if m < len(plans):
            n, call = plans[m]
            if n == config["n"]:
                return call(x)
        # an m past the plans, or a width the judge never asks for
        layer = Layer(config["layer"], **LAYERS[config["layer"]])
        return PlanContext(state, layer).fallback(config["n"])(x)
    except Exception:
        wrong = x_error(x, config["layer"], state)
        if wrong is None:
            raise
        raise wrong from None


def x_error(x, layer: str, state):
    """The ValueError naming the x `layer` takes, or None for a right x."""
    if layer not in LAYERS:
        return ValueError(f"kernel_fn: no layer {layer!r} in this file (it has {', '.join(LAYERS)})")
    k, device = LAYERS[layer]["k"], state.buffers["workspace"].device
    if not isinstance(x, torch.Tensor):
        got = f"a {type(x).__name__}"
    elif x.dtype is not BF16 or x.dim() != 2 or x.shape[1] != k or x.device != device:
        got = f"a {list(x.shape)} {x.dtype} tensor on {x.device}"
    else:
        return None
    return ValueError(f"kernel_fn: {layer} takes x as a [m, {k}] {BF16} tensor on {device}, got {got}")


BF16 = torch.bfloat16
# The current CUDA stream (a graph's capture stream too) as an integer: torch's fast path, else the public one
_raw_stream = getattr(torch._C, "_cuda_getCurrentRawStream", None) or (
    lambda index: torch.cuda.current_stream(index).cuda_stream
)


class PlanContext:
    """What an engine's plan() uses for one layer."""

    def __init__(self, state, layer):
        self.state = state
        self.layer = layer
        self.parts = state.parts[layer.name]
        self.operands = state.operands[layer.name]
        self.buffers = state.buffers

    def fallback(self, n):
        """x -> out by cuBLAS, n outputs."""
        add_operands(self.state, CUBLAS, None, self.layer)
        return fallback_plan(self.layer, n, self.parts, self.operands.get(HI_LO))

    def cuda_plan(self, variant, layer, m, pointers, scalars=()):
        """x -> out by the extension's kernel `variant`; an x it does not take goes to cuBLAS."""
        if variant.case not in self.state.kernels:
            raise RuntimeError(
                f"no extension holds the kernel {variant.case}: the build's KERNELS missed a route"
            )
        n, (ext, number) = layer.n_for(m), self.state.kernels[variant.case]
        # what its raw pointers point at, so that the plan outlives the state
        held = (tuple(pointers), self.buffers)
        if len(pointers) > CALL_OPERANDS or len(scalars) > CALL_SCALARS:
            raise ValueError(
                f"{variant.engine}: a call holds {CALL_OPERANDS} operands and {CALL_SCALARS} scalars at most"
            )
        addresses = tuple(p.data_ptr() for p in pointers)
        ws, sem = self.buffers["workspace"].data_ptr(), self.buffers["semaphores"].data_ptr()
        plan_id = ext.plan(number, n, layer.k, addresses, tuple(scalars), ws, sem)
        if plan_id < 0:
            raise RuntimeError(f"{variant.engine}: the extension's call layout does not hold these operands")
        run, out_dtype, fallback = ext.run, getattr(torch, layer.out_dtype), self.fallback(n)
        device = self.buffers["workspace"].device
        index = device.index

        def call(x):
            pointer = x.data_ptr()
            if x.dtype is not BF16 or pointer % 16 or not x.is_contiguous():
                return fallback(x)
            m = x.shape[0]
            out = torch.empty((m, n), dtype=out_dtype, device=device)
            refused = run(plan_id, pointer, out.data_ptr(), m, _raw_stream(index))
            if refused:
                raise RuntimeError(f"{variant.engine} ({variant.describe()}) at m={m}: {refused}")
            return out

        call.holds = held
        return call


# -gencode keeps torch from adding its default targets; hidden visibility keeps two extensions of one process
# (their okc_launch, their kernels) from binding to each other's definitions.
CUDA_FLAGS = [
    "-O3",
    "-std=c++17",
    "-gencode=arch=compute_90a,code=sm_90a",
    "-Xcompiler",
    "-fvisibility=hidden",
]
_EXTENSIONS = {}


def build_extension(name: str, launch_table: str):
    """The CUDA extension `name`: CUDA_SRC, the kernels `launch_table` instantiates, and BINDING_SRC (torch caches
    it on disk). Its names are its own (okc and okc_launch, by -D): another extension of the process, built for
    other kernels (the tools build one), binds nothing of it."""
    if name not in _EXTENSIONS:
        own_names = [f"-Dokc={name}", f"-Dokc_launch={name}_launch"]
        options = dict(
            name=name,
            cpp_sources=BINDING_SRC,
            cuda_sources=CUDA_SRC + launch_table,
            functions=["plan", "run"],
            extra_cflags=["-O1", "-fvisibility=hidden", *own_names],
            extra_cuda_cflags=CUDA_FLAGS + own_names,
            with_pytorch_error_handling=False,
            verbose=False,
        )
        try:
            _EXTENSIONS[name] = load_inline(**options, no_implicit_headers=True)
        except TypeError:  # a torch without no_implicit_headers: it adds torch/extension.h, which also works
            _EXTENSIONS[name] = load_inline(**options)
    return _EXTENSIONS[name]


# ---- kernels_src/engine.py: What an engine is (Engine, Field, Variant) and what every engine shares: the buffers, the C++ constants.
# A block's shared memory on the H200; the CUDA kernels' dynamic budget leaves STATIC_SMEM for their static part


WORKSPACE_FLOATS = 9 * 1024 * 1024  # split-K partials, shared by every engine
ACCUMULATOR_FLOATS = 256 * 8192  # the zeroed fp32 accumulator of the atomic reductions
# int32 counters: a semaphore per row group, then mma_gemv's tickets and flags per row group and split count
SEMAPHORE_GROUPS = 4096
TICKET_GROUPS = 256
TICKET_SPLITS = 5
SEMAPHORES = SEMAPHORE_GROUPS + 2 * TICKET_SPLITS * TICKET_GROUPS
CALL_OPERANDS = 4  # a launch's pointers (call.h)
CALL_SCALARS = 3

PLAN_MAX_M = 256  # prepare() plans every m up to this; past it, cuBLAS


class Layer(NamedTuple):
    """One projection: weight [n, k]; at m <= narrow_max_m the judge asks for narrow_n outputs."""

    name: str
    n: int
    k: int
    dtype: str
    narrow_n: int | None = None
    narrow_max_m: int | None = None

    @property
    def dual(self) -> bool:
        return self.dtype == "float32"

    @property
    def out_dtype(self) -> str:
        return self.dtype

    def n_for(self, m: int) -> int:
        """The output width the judge asks for at m tokens."""
        return self.narrow_n if self.narrow_n is not None and m <= self.narrow_max_m else self.n


class Operand(NamedTuple):
    """The key of what prepare() builds once per layer for an engine."""

    name: str
    shape: tuple = ()


class Variant(NamedTuple):
    """A launch table case: its kernel's and its launch's arguments by name."""

    engine: str
    kernel: tuple
    launch: tuple

    @classmethod
    def of(cls, engine: str, kernel: dict, **launch) -> "Variant":
        return cls(engine, tuple(kernel.items()), tuple(launch.items()))

    @property
    def args(self) -> tuple:
        return self.kernel + self.launch

    def describe(self) -> str:
        return " ".join(f"{name}={value}" for name, value in self.args)

    @property
    def case(self) -> str:
        """How the file's KERNELS names its launch table case: the engine, then its arguments."""
        return f"{self.engine} {self.describe()}"


class CudaType(str):
    """A C++ type as a launch argument."""


CUDA_TYPES = {"bfloat16": CudaType("__nv_bfloat16"), "float32": CudaType("float")}


class CudaCode(int):
    """A mode's code: one of its enum's (CudaEnum.codes, where the launch table finds its enumerator)."""


class CudaEnum:
    """A mode as a C++ `enum class`."""

    def __init__(self, name: str, members: tuple, meaning: str):
        self.members = tuple(members)
        self.codes = tuple(CudaCode(code) for code in range(len(self.members)))

    def code(self, member: str) -> CudaCode:
        return self.codes[self.members.index(member)]


# the split-K reductions (tma_gemv.cuh's SASS was measured at these codes)
REDUCTION = CudaEnum(
    "Reduce",
    ("none", "cluster_gather", "cluster_scatter", "atomic", "semaphore", "cluster", "atomic_out"),
    "engine.py REDUCTION: the split-K reductions (each engine's reduce field names some of them)",
)


REQUIRED = None  # a Field's default when a table entry must give it


class Field(NamedTuple):
    """One config field, declared once."""

    name: str
    type: type  # int, or str for a mode
    allowed: tuple | None  # None: the rule bounds it
    meaning: str
    default: object = REQUIRED
    bounds: str = ""


def config_type(name: str, fields: tuple) -> type:
    """The NamedTuple of these fields."""
    cls = NamedTuple(name, [(f.name, f.type) for f in fields])
    defaults = [f.default for f in fields if f.default is not REQUIRED]
    if defaults:
        if any(f.default is REQUIRED for f in fields[len(fields) - len(defaults) :]):
            raise TypeError(f"{name}: the fields with a default must come last")
        cls.__new__.__defaults__ = tuple(defaults)
        cls._field_defaults = {f.name: f.default for f in fields if f.default is not REQUIRED}
    return cls


def column_blocks(m: int) -> int:
    """The GEMVs' 8-token column blocks (NB) for m tokens."""
    return 1 if m <= 8 else 2 if m <= 16 else 4


class Engine:
    """An engine: a subclass sets the attributes and implements operands, build_operand, plan and variant."""

    name = ""
    # Its place in the routing order (lower first; generator/engines.py finds the engines): a (layer, m) runs on
    # the first engine whose table gives it a config. None: cuBLAS, the fallback after them all.

    Config: type = tuple  # config_type(..., FIELDS)
    m_min, m_max = 1, None  # the m's it serves (None: no upper bound)
    has_defaults = False  # a config per weight kind (plain, dual) for m's its table does not list

    def serves(self, m: int) -> bool:
        return m >= self.m_min and (self.m_max is None or m <= self.m_max)

    def m_class(self, m: int) -> int:
        """m's of a class borrow each other's entries."""
        return 0

    def borrowed_m(self, m: int, listed) -> int | None:
        """The smallest listed m above m in its class, or None."""
        above = [row for row in listed if row >= m and self.m_class(row) == self.m_class(m)]
        return min(above) if above else None

    def operands(self, cfg, layer: Layer) -> tuple:
        raise NotImplementedError(self.name)

    def build_operand(self, operand: str, parts: tuple, layer: Layer):
        """`operand` from the weight's parts: (w,) or (hi, lo)."""
        raise NotImplementedError(operand)

    def variant(self, cfg, layer: Layer, m: int) -> Variant | None:
        """The launch table case of cfg at m tokens; None without CUDA."""
        return None

    def plan(self, cfg, layer: Layer, m: int, ctx):
        """x -> out for m tokens (ctx: runtime.PlanContext)."""
        raise NotImplementedError


class DecodeGemv(Engine):
    """The GEMVs for m <= 32: a class is the m's of the same column blocks."""

    m_min, m_max = 1, 32

    def m_class(self, m):
        return column_blocks(m)


# ---- kernels_src/mma_gemv.py: The mma.sync tensor-core GEMV (mma_gemv.cuh) for m <= 32. Design and figures: docs/mma-gemv.md.
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


MMA_GEMV_FIELDS = (
    Field("warps", int, (1, 2, 4, 8, 16), None),
    Field("splits", int, (1, 2, 4, 8, 16, 32), None),
    Field("unroll", int, (1, 2, 4, 8), None),
    Field("pipeline", str, MMA_PIPELINES, None),
    Field("row_blocks", int, (1, 2, 4), None),
    Field("reduce", str, MMA_REDUCTIONS, None),
)
MmaGemvConfig = config_type("MmaGemvConfig", MMA_GEMV_FIELDS)


def tiles_smem(warps: int, splits: int, row_blocks: int, cluster: bool, m: int) -> int:
    """The warps' partial tiles in shared memory (and a cluster's inbox on rank 0)."""
    return (warps + (splits - 1 if cluster else 0)) * row_blocks * column_blocks(m) * 4 * 32 * 4


def split_k_launch(cfg, m: int) -> dict:
    """The launch arguments of both mma.sync GEMVs: warps, splits, the reduction and the tiles' shared memory."""
    smem = tiles_smem(cfg.warps, cfg.splits, cfg.row_blocks, cfg.reduce == "cluster", m)
    return dict(warps=cfg.warps, splits=cfg.splits, reduce=REDUCTION.code(cfg.reduce), smem_bytes=smem)


class MmaGemv(DecodeGemv):
    name = "mma_gemv"

    Config = MmaGemvConfig
    has_defaults = True

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


# ---- kernels_src/compressed_gemv.py: The GEMV on 12-bit lossless weights (compressed_gemv.cuh, compress.py) for m <= 32, bf16 layers. Design and
COMPRESSED_PIPELINES = MMA_PIPELINE.members[:2]  # batch and double, mma_gemv's codes
COMPRESSED = Operand("compressed")  # compress.compress's tensors
COMPRESSED_REDUCTIONS = ("none", "semaphore", "cluster")
# data registers a thread may hold (docs/compressed-gemv.md: batch's decode needs temporaries)


def overflow_smem(warps: int, row_blocks: int, groups_per_cta: int) -> int:
    """Shared memory the overflow pass adds (the launch's overflow_bytes): a 2 KB tile a warp and the CTA's bucket
    offsets, whatever the entries: every config runs any matrix."""
    return warps * 2048 + (row_blocks * (groups_per_cta + 1) * 4 + 15) // 16 * 16


COMPRESSED_GEMV_FIELDS = (
    Field("warps", int, (1, 2, 4, 8, 16), None),
    Field("splits", int, (1, 2, 4, 8, 16, 32), None),
    Field("groups", int, (1, 2, 4), None),
    Field("pipeline", str, COMPRESSED_PIPELINES, None),
    Field("row_blocks", int, (1, 2, 4), None),
    Field("reduce", str, COMPRESSED_REDUCTIONS, None),
)
CompressedGemvConfig = config_type("CompressedGemvConfig", COMPRESSED_GEMV_FIELDS)


class CompressedGemv(DecodeGemv):
    name = "compressed_gemv"

    Config = CompressedGemvConfig

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


# ---- kernels_src/tma_gemv.py: The bulk-copy + wgmma GEMV (tma_gemv.cuh) for m <= 32. Design and figures: docs/tma-gemv.md.
TILE_ROWS = 64  # weight rows of a full tile: the wgmma M
TILE_K = 64  # K per ring slot of a full tile (one 128-byte swizzle row of bf16)

CONSUMERS = 128  # threads of the consumer warpgroup

TMA_STAGES = (2, 4, 6, 8, 12, 14, 16)  # the ring depths the engines admit
TMA_TILES = ("full", "half")
# pre-swizzled 64 x 64 tiles (packing.pack_tma_bulk): tma_gemv's full tiles and tma_gemm
TILES = Operand("tiles")
HALF_TILES = Operand("half_tiles")  # the half tiles' stacked K halves (packing.pack_tma_half_bulk)
TMA_REDUCTIONS = ("none", "semaphore", "cluster_gather", "cluster_scatter")
TMA_GEMV_FIELDS = (
    Field("splits", int, None, None, bounds=None),
    Field("stages", int, TMA_STAGES, None),
    Field("tile", str, TMA_TILES, None),
    Field("reduce", str, TMA_REDUCTIONS, None),
)
TmaGemvConfig = config_type("TmaGemvConfig", TMA_GEMV_FIELDS)
# What tma_gemv.cuh reads from here (both engines on it: tma_gemv and tma_gemm).


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
    return Variant.of(engine, kernel, splits=cfg.splits, reduce=REDUCTION.code(cfg.reduce), smem_bytes=smem)


class TmaGemv(DecodeGemv):
    name = "tma_gemv"
    # ahead of mma_gemv, whose defaults take every m <= 32 no table before it lists

    Config = TmaGemvConfig

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


# ---- kernels_src/compressed_ring.py: The compressed GEMV through a TMA ring (compressed_ring.cuh) for m <= 32, bf16 layers: compress.py's 12-bit
STAGED_ENTRIES = 64  # overflow entries a CTA stages in shared memory
RING_GROUPS = (1, 2)
RING_WARPGROUPS = (1, 2, 4)
COMPRESSED_RING_FIELDS = (
    Field("stages", int, TMA_STAGES, None),
    Field("warpgroups", int, RING_WARPGROUPS, None),
    Field("groups", int, RING_GROUPS, None),
)
CompressedRingConfig = config_type("CompressedRingConfig", COMPRESSED_RING_FIELDS)


def group_bytes() -> int:
    """One 16-row block x one 64-wide K group of the stream (a function: compress.py comes later in the file)."""
    return BUCKET * 3 // 2


def slot_bytes(groups: int) -> int:
    """A slot's weight bytes: four row blocks x groups x (stream + header)."""
    return 4 * groups * (group_bytes() + HEADER_BYTES)


def ring_smem(cfg, nb: int) -> int:
    """A CTA's dynamic shared memory: its slots, the staged overflow, 1 KB to align."""
    weights = -(-slot_bytes(cfg.groups) // 1024) * 1024
    staged = 4 + STAGED_ENTRIES * (1 + 4 + 32 * 2)
    return cfg.stages * (weights + cfg.groups * nb * 8 * 128) + staged + 1024


def ring_slots(z: dict, groups: int) -> torch.Tensor:
    """compress()'s stream and headers as ring slots: uint8 [N/64, K/(64 groups), the slot's row blocks' bytes,
    then their headers], tiles outermost."""
    rb, g = z["stream"].shape[:2]
    tiles, slots = rb // 4, g // groups
    stream = z["stream"].reshape(tiles, 4, slots, groups, group_bytes()).permute(0, 2, 1, 3, 4)
    headers = z["patches"].contiguous().view(torch.uint8).reshape(tiles, 4, slots, groups, HEADER_BYTES)
    headers = headers.permute(0, 2, 1, 3, 4)
    parts = (stream.reshape(tiles, slots, -1), headers.reshape(tiles, slots, -1))
    return torch.cat(parts, dim=-1).contiguous().reshape(-1)


def wgmma_columns(device=None) -> torch.Tensor:
    """int64 [64]: the K group's column each column of compress()'s fragment order must hold for wgmma's A
    registers (register j, half h of lane (g, t), fragment f: column 16 f + 2 t + 8 (j >> 1) + h)."""
    # p at (row, column)
    where = unfragment(torch.arange(BUCKET, device=device).reshape(1, 1, 4, 32, 8), 16, 64)
    p = where[0].to(torch.int64)  # row 0: register j even
    f, lane, e = p // 256, (p // 8) % 32, p % 8
    return 16 * f + 2 * (lane & 3) + 8 * (e >> 2) + (e & 1)


def ring_operands(w: torch.Tensor, name: str, groups: int, refuse: bool = True) -> dict:
    """The ring slots and per-row overflow of a bf16 [N, K] weight; CompressionError for a tile with more overflow
    than a CTA stages (refuse=False: no limit)."""
    n, k = w.shape
    columns = wgmma_columns(w.device)
    z = compress(
        w.reshape(n, k // 64, 64)[:, :, columns].reshape(n, k),
        name,
        max_bits_per_weight=None if refuse else 1e9,
    )
    row_starts, rows, entries = ring_overflow(z, n, k, columns)
    per_tile = row_starts[TILE_ROWS::TILE_ROWS].to(torch.int64) - row_starts[:-1:TILE_ROWS].to(torch.int64)
    worst = int(per_tile.max()) if per_tile.numel() else 0
    if refuse and worst > STAGED_ENTRIES:
        raise CompressionError(
            f"{name}: {worst} overflow entries in one 64-row tile, over the {STAGED_ENTRIES} compressed_ring"
            f" stages ({int((per_tile > STAGED_ENTRIES).sum())} of {per_tile.numel()} tiles): serve this layer"
            " with the other engines"
        )
    return {
        "slots": ring_slots(z, groups),
        "row_starts": row_starts,
        "rows": rows,
        "entries": entries,
        "table_words": z["table_words"],
    }


def ring_overflow(z: dict, n: int, k: int, columns: torch.Tensor) -> tuple:
    """compress()'s overflow as a per-row list sorted by row, then k: (row_starts int32 [N + 1], rows int32 [E],
    entries int32 [E] = k | bf16 bits << 16)."""
    device = z["overflow"].device
    groups = k // 64
    starts = z["overflow_starts"].to(torch.int64)
    count = starts[1:] - starts[:-1]
    bucket = torch.repeat_interleave(torch.arange(count.numel(), device=device), count)
    entry = z["overflow"].to(torch.int64) & 0xFFFFFFFF
    p = entry & 0x3FF
    where = unfragment(torch.arange(BUCKET, device=device).reshape(1, 1, 4, 32, 8), 16, 64).reshape(-1)
    at = torch.empty(BUCKET, dtype=torch.int64, device=device)
    at[where] = torch.arange(BUCKET, device=device)
    row = bucket // groups * 16 + at[p] // 64
    col = bucket % groups * 64 + columns.to(device)[at[p] % 64]
    order = torch.argsort(row * k + col)
    row, col, bits = row[order], col[order], (entry >> 16)[order]
    words = col | bits << 16
    words = torch.where(words >= 1 << 31, words - (1 << 32), words).to(torch.int32)
    row_starts = torch.zeros(n + 1, dtype=torch.int64, device=device)
    row_starts[1:] = torch.cumsum(torch.bincount(row, minlength=n), dim=0)
    return row_starts.to(torch.int32), row.to(torch.int32), words


class CompressedRing(DecodeGemv):
    name = "compressed_ring"

    Config = CompressedRingConfig

    def operands(self, cfg, layer):
        return (Operand("ring_slots", (cfg.groups,)),)

    def build_operand(self, operand, parts, layer):
        return ring_operands(parts[0], layer.name, operand.shape[0])

    def variant(self, cfg, layer, m):
        nb = column_blocks(m)
        kernel = dict(NB=nb, stages=cfg.stages, warpgroups=cfg.warpgroups, groups=cfg.groups)
        return Variant.of(self.name, kernel, smem_bytes=ring_smem(cfg, nb))

    def plan(self, cfg, layer, m, ctx):
        r = ctx.operands[self.operands(cfg, layer)[0]]
        entries = r["entries"]
        if entries.numel() == 0:  # a valid address the kernel never reads
            entries = r["row_starts"]
        pointers = (r["slots"], r["row_starts"], r["rows"] if r["rows"].numel() else entries, entries)
        return ctx.cuda_plan(
            self.variant(cfg, layer, m),
            layer,
            m,
            pointers,
            (*table_scalars(r["table_words"]), r["entries"].numel()),
        )


COMPRESSED_RING = CompressedRing()


# ---- kernels_src/tma_gemm.py: The bulk-copy + wgmma GEMM for m > 32: tma_gemv.cuh's kernel with 1-4 consumer warpgroups and up to 256 tokens
TMA_GEMM_WARPGROUPS = (1, 2, 4)
TMA_GEMM_REDUCTIONS = ("none", "semaphore", "atomic")
TMA_GEMM_EPILOGUES = ("direct", "staged")
# what a thread holds besides its 4 NB accumulators, at least (docs/tma-gemm.md, the rule)


def gemm_column_blocks(m: int) -> int:
    """8-token column blocks of the x box that cover m tokens: 8, 16 or 32."""
    return 8 if m <= 64 else 16 if m <= 128 else 32


TMA_GEMM_FIELDS = (
    Field("warpgroups", int, TMA_GEMM_WARPGROUPS, None),
    Field("splits", int, None, None, bounds=None),
    Field("stages", int, TMA_STAGES, None),
    Field("reduce", str, TMA_GEMM_REDUCTIONS, None),
    Field("epilogue", str, TMA_GEMM_EPILOGUES, None, default="direct"),
)
TmaGemmConfig = config_type("TmaGemmConfig", TMA_GEMM_FIELDS)


def gemm_smem_bytes(cfg: TmaGemmConfig, nb: int, dual: bool) -> int:
    """A CTA's shared memory: its ring."""
    return ring_bytes(cfg.stages, nb, dual, warpgroups=cfg.warpgroups)


class TmaGemm(Engine):
    name = "tma_gemm"

    Config = TmaGemmConfig
    m_min, m_max = 33, 256

    def m_class(self, m):
        return gemm_column_blocks(m)

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


# ---- kernels_src/splitk_gemm.py: The Triton split-K GEMM for m > 32: the weights on wgmma's M side, TMA descriptors, K split over programs and
LOADS = ("tma", "pointers")
SPLITK_REDUCTIONS = ("none", "semaphore", "atomic")
# The reduce codes the kernel branches on (Triton reads a global only as a constexpr)
_REDUCE_NONE = tl.constexpr(int(REDUCTION.code("none")))
_REDUCE_SEMAPHORE = tl.constexpr(int(REDUCTION.code("semaphore")))
SPLITK_GEMM_FIELDS = (
    Field("block_n", int, (64, 128, 256), None),
    Field("block_m", int, (16, 32, 64, 128, 256), None),
    Field("block_k", int, (32, 64, 128), None),
    Field("splits", int, None, None, bounds=None),
    Field("warps", int, (4, 8), None),
    Field("stages", int, (1, 2, 3, 4, 5, 6, 7, 8), None),
    Field("loads", str, LOADS, None),
    Field("reduce", str, SPLITK_REDUCTIONS, None),
)
SplitKGemmConfig = config_type("SplitKGemmConfig", SPLITK_GEMM_FIELDS)
COUNTERS = 4096  # int32 tile counters, zeroed once; every launch leaves them zero

# the atomic epilogue's adds (atom) keep their old values in registers: with dual or pointer loads, 64 at most


@triton.jit
def _splitk_mma(w_tile, x_tile, acc, UPCAST: tl.constexpr):
    """acc += w_tile . x_tile^T in fp32; UPCAST (the CPU interpreter, whose bf16 tl.dot is wrong): fp32 operands."""
    if UPCAST:
        acc = tl.dot(w_tile.to(tl.float32), tl.trans(x_tile.to(tl.float32)), acc, input_precision="ieee")
    else:
        acc = tl.dot(w_tile, tl.trans(x_tile), acc)
    return acc


@triton.jit
def _splitk_k_loop(
    x, w, w2, off_n, off_m, first, last, M, K,
    BLOCK_N: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_K: tl.constexpr, TMA: tl.constexpr, DUAL: tl.constexpr,
    UPCAST: tl.constexpr,
):  # fmt: skip
    """The program's K steps [first, last): acc[BLOCK_N, BLOCK_M] = W[rows, ks] . x[tokens, ks]^T in fp32."""
    if not TMA:
        rn = tl.arange(0, BLOCK_N)
        rm = tl.arange(0, BLOCK_M)
        rk = tl.arange(0, BLOCK_K)
        w_offs = (off_n + rn)[:, None] * K + rk[None, :]
        x_offs = (off_m + rm)[:, None] * K + rk[None, :]
        x_live = (off_m + rm)[:, None] < M
    # tl.full: the CPU tests' interpreted copy cannot call Triton's jit library (tl.zeros)
    acc = tl.full((BLOCK_N, BLOCK_M), 0.0, dtype=tl.float32)
    for step in range(first, last):
        off_k = step * BLOCK_K
        if TMA:
            x_tile = x.load([off_m, off_k])
            acc = _splitk_mma(w.load([off_n, off_k]), x_tile, acc, UPCAST)
            if DUAL:
                acc = _splitk_mma(w2.load([off_n, off_k]), x_tile, acc, UPCAST)
        else:
            x_tile = tl.load(x + x_offs + off_k, mask=x_live, other=0.0)
            acc = _splitk_mma(tl.load(w + w_offs + off_k), x_tile, acc, UPCAST)
            if DUAL:
                acc = _splitk_mma(tl.load(w2 + w_offs + off_k), x_tile, acc, UPCAST)
    return acc


@triton.jit
def _splitk_ticket(counters, tile):
    """The programs of this tile that arrived before this one (the ordering: docs/splitk-gemm.md)."""
    tl.debug_barrier()
    return tl.atomic_add(counters + tile, 1, sem="acq_rel", scope="gpu")


@triton.jit
def _splitk_partial(slot, mask):
    """One split's partial of a chunk, read past L1 (another SM wrote it); 0.0 where masked."""
    return tl.load(slot, mask=mask, other=0.0, cache_modifier=".cg")


@triton.jit
def _splitk_semaphore_epilogue(
    acc, slots, local, counters, out, tile, pid_s, splits, tokens, off_n, live, N,
    BLOCK_N: tl.constexpr, BLOCK_M: tl.constexpr, EPILOGUE_N: tl.constexpr,
):  # fmt: skip
    """The partial into its slot; the last program sums the slots in split order and resets the counter."""
    TILE: tl.constexpr = BLOCK_N * BLOCK_M
    rm = tl.arange(0, BLOCK_M)
    tl.store(slots + pid_s * TILE + local, acc, mask=live)
    arrived = _splitk_ticket(counters, tile)
    if arrived == splits - 1:
        for c in tl.static_range(BLOCK_N // EPILOGUE_N):
            rc = c * EPILOGUE_N + tl.arange(0, EPILOGUE_N)
            here = slots + rm[None, :] * BLOCK_N + rc[:, None]
            total = tl.full((EPILOGUE_N, BLOCK_M), 0.0, dtype=tl.float32)
            for s in tl.range(0, splits, 4, num_stages=1):
                p0 = _splitk_partial(here + s * TILE, live)
                p1 = _splitk_partial(here + (s + 1) * TILE, live & (s + 1 < splits))
                p2 = _splitk_partial(here + (s + 2) * TILE, live & (s + 2 < splits))
                p3 = _splitk_partial(here + (s + 3) * TILE, live & (s + 3 < splits))
                total = (((total + p0) + p1) + p2) + p3
            chunk_ptrs = out + tokens[None, :] * N + (off_n + rc)[:, None]
            tl.store(chunk_ptrs, total.to(out.dtype.element_ty), mask=live)
        tl.store(counters + tile, 0)


@triton.jit
def _splitk_atomic_epilogue(
    acc, slots, counters, out_ptrs, tile, splits, live, BLOCK_N: tl.constexpr, BLOCK_M: tl.constexpr
):
    """The partial added into the accumulator; the last program writes it out and zeroes it."""
    tl.atomic_add(slots, acc, mask=live, sem="relaxed", scope="gpu")
    arrived = _splitk_ticket(counters, tile)
    if arrived == splits - 1:
        total = _splitk_partial(slots, live)
        tl.store(out_ptrs, total.to(out_ptrs.dtype.element_ty), mask=live)
        tl.store(slots, tl.full((BLOCK_N, BLOCK_M), 0.0, dtype=tl.float32), mask=live)
        tl.store(counters + tile, 0)


@triton.jit(do_not_specialize=["M", "splits"])
def _splitk_gemm_kernel(
    x,  # a descriptor (TMA) or a pointer
    w,
    w2,  # dual: the lo weight; otherwise w again
    out,
    partials,  # the workspace (semaphore) or the zeroed accumulator (atomic)
    counters,
    M,
    N,
    K,
    splits,
    BLOCK_N: tl.constexpr,
    BLOCK_M: tl.constexpr,
    BLOCK_K: tl.constexpr,
    TMA: tl.constexpr,
    DUAL: tl.constexpr,
    REDUCE: tl.constexpr,
    EPILOGUE_N: tl.constexpr,
    UPCAST: tl.constexpr,
):
    """Phases: the K loop (_splitk_k_loop), then a plain store, or one of the two epilogues."""
    pid_n = tl.program_id(0)
    pid_s = tl.program_id(1)
    pid_m = tl.program_id(2)
    off_n = pid_n * BLOCK_N
    off_m = pid_m * BLOCK_M
    steps = K // BLOCK_K
    first = pid_s * steps // splits
    last = (pid_s + 1) * steps // splits
    rn = tl.arange(0, BLOCK_N)  # weight rows of the tile = output columns
    rm = tl.arange(0, BLOCK_M)  # tokens of the tile = output rows
    acc = _splitk_k_loop(
        x, w, w2, off_n, off_m, first, last, M, K, BLOCK_N, BLOCK_M, BLOCK_K, TMA, DUAL, UPCAST
    )

    tokens = off_m + rm
    live = (tokens < M)[None, :]  # [1, BLOCK_M]: output rows that exist
    out_ptrs = out + tokens[None, :] * N + (off_n + rn)[:, None]
    if REDUCE == _REDUCE_NONE:
        tl.store(out_ptrs, acc.to(out.dtype.element_ty), mask=live)
    else:
        tile = pid_m * tl.num_programs(0) + pid_n
        local = rm[None, :] * BLOCK_N + rn[:, None]  # one tile's fp32 slot, token-major as out
        if REDUCE == _REDUCE_SEMAPHORE:
            slots = partials + tile * splits * (BLOCK_N * BLOCK_M)  # [splits] tile slots, split-major
            _splitk_semaphore_epilogue(
                acc, slots, local, counters, out, tile, pid_s, splits, tokens, off_n, live, N, BLOCK_N, BLOCK_M,
                EPILOGUE_N,
            )  # fmt: skip
        else:
            slots = partials + tile * (BLOCK_N * BLOCK_M) + local
            _splitk_atomic_epilogue(acc, slots, counters, out_ptrs, tile, splits, live, BLOCK_N, BLOCK_M)


def splitk_constexprs(cfg, dual, upcast):
    """The kernel's constexpr arguments for cfg; upcast: x is not on CUDA."""
    return dict(
        BLOCK_N=cfg.block_n,
        BLOCK_M=cfg.block_m,
        BLOCK_K=cfg.block_k,
        TMA=cfg.loads == "tma",
        DUAL=dual,
        REDUCE=int(REDUCTION.code(cfg.reduce)),
        EPILOGUE_N=min(cfg.block_n, 1024 * cfg.warps // cfg.block_m),  # <= 32 fp32 per thread per chunk
        UPCAST=upcast,
    )


def weight_descriptors(weights: tuple, cfg) -> tuple:
    """Each weight's TensorDescriptor for cfg's block (on the whole [N, K]: a smaller n reads a prefix)."""
    if cfg.loads != "tma":
        return ()
    return tuple(TensorDescriptor.from_tensor(w, [cfg.block_n, cfg.block_k]) for w in weights)


def launch_splitk_gemm(x, weights: tuple, out, workspace, counters, accumulator, cfg, descriptors=()):
    """Launch on the current stream (two weights: dual); returns Triton's compiled kernel."""
    m, k = x.shape
    n = out.shape[1]
    if cfg.loads == "tma":
        if not descriptors:
            descriptors = weight_descriptors(weights, cfg)
        elif list(descriptors[0].block_shape) != [cfg.block_n, cfg.block_k]:
            raise ValueError(
                f"splitk_gemm: weight descriptors of block {descriptors[0].block_shape} for {cfg}"
            )
        a = TensorDescriptor.from_tensor(x, [cfg.block_m, cfg.block_k])
        b = descriptors
    else:
        a = x
        b = weights
    grid = (n // cfg.block_n, cfg.splits, triton.cdiv(m, cfg.block_m))
    return _splitk_gemm_kernel[grid](
        a,
        b[0],
        b[-1],
        out,
        accumulator if cfg.reduce == "atomic" else workspace,
        counters,
        m,
        n,
        k,
        cfg.splits,
        **splitk_constexprs(cfg, len(weights) == 2, x.device.type != "cuda"),
        num_warps=cfg.warps,
        num_stages=cfg.stages,
    )


class BoundSplitKLaunch:
    """One plan's launch bound once to Triton's C launcher, skipping ~30 us of binding a call (docs/splitk-gemm.md,
    Host time); bind() returns None for a compiled kernel it does not expect."""

    CACHED_X_MAPS = 16  # x's tensor maps kept per plan, by (address, M)
    LAUNCHER_FORMAT = "iiiKKppOOOOOO"  # Triton 3.6's base arguments of the C launcher, before the kernel's

    def __init__(self, compiled, launch, expand, values, x_meta, cfg, n, device):
        self.launch, self.expand, self.x_meta = launch, expand, x_meta
        self.block_m, self.block_k, self.splits, self.grid_n = (
            cfg.block_m,
            cfg.block_k,
            cfg.splits,
            n // cfg.block_n,
        )
        self.function = compiled.function
        self.weights, self.buffers, self.rest = tuple(values[1:11]), tuple(values[12:14]), tuple(values[15:])
        self.head = (compiled.run.launch_cooperative_grid, compiled.run.launch_pdl, None, None)
        self.head += (compiled.packed_metadata, None, None, None)  # the launch metadata, enter and exit hooks
        self.stream, self.device = triton.runtime.driver.active.get_current_stream, device
        self.x_maps = {}  # (x's address, M) -> x's expanded descriptor arguments

    @classmethod
    def bind(cls, compiled, dual, n, k, workspace, counters, accumulator, cfg, descriptors):
        """The launch of `compiled` (what launch_splitk_gemm returned for cfg on a layer of (n, k)), or None."""
        if cfg.loads != "tma" or compiled is None or not hasattr(compiled, "run"):
            return None
        driver = getattr(getattr(getattr(triton, "backends", None), "nvidia", None), "driver", None)
        expand = getattr(driver, "make_tensordesc_arg", None)
        if expand is None or getattr(driver, "_BASE_ARGS_FORMAT", None) != cls.LAUNCHER_FORMAT:
            return None
        launcher = compiled.run  # Triton's CudaLauncher: .launch wraps the C launcher, expanding descriptors
        meta = getattr(compiled.metadata, "tensordesc_meta", None)
        wrapped = getattr(launcher, "launch", None)
        free = getattr(getattr(wrapped, "__code__", None), "co_freevars", ())
        scratch = getattr(launcher, "global_scratch_size", 1) or getattr(launcher, "profile_scratch_size", 1)
        flags = all(hasattr(launcher, f) for f in ("launch_cooperative_grid", "launch_pdl"))
        if not meta or len(meta) != 3 or "launcher" not in free or scratch or not flags:
            return None
        names = list(compiled.src.fn.arg_names)
        if names[:10] != ["x", "w", "w2", "out", "partials", "counters", "M", "N", "K", "splits"]:
            return None
        constexprs = splitk_constexprs(cfg, dual, False)
        if names[10:] != list(constexprs):
            return None
        values = [
            None,  # x's descriptor: per call
            *expand(descriptors[0], meta[1]),
            *expand(descriptors[-1], meta[2]),
            None,  # out: per call
            (accumulator if cfg.reduce == "atomic" else workspace).data_ptr(),
            counters.data_ptr(),
            None,  # M: per call
            n,
            k,
            cfg.splits,
            *constexprs.values(),
        ]
        launch = wrapped.__closure__[free.index("launcher")].cell_contents
        return cls(compiled, launch, expand, values, meta[0], cfg, n, workspace.device.index)

    def x_map(self, x):
        """x's tensor map, as Triton's launcher would encode it (its shape, strides and block), kept by address."""
        key = (x.data_ptr(), x.shape[0])
        found = self.x_maps.get(key)
        if found is None:
            if len(self.x_maps) >= self.CACHED_X_MAPS:
                self.x_maps.pop(next(iter(self.x_maps)))
            found = self.expand(TensorDescriptor.from_tensor(x, [self.block_m, self.block_k]), self.x_meta)
            self.x_maps[key] = found
        return found

    def __call__(self, x, out):
        m = x.shape[0]
        self.launch(
            self.grid_n,
            self.splits,
            -(-m // self.block_m),
            self.stream(self.device),
            self.function,
            *self.head,
            *self.x_map(x),
            *self.weights,
            out.data_ptr(),
            *self.buffers,
            m,
            *self.rest,
        )
        return out


# ---- The engine (kernels_src/engine.py): rule, operands, launch.


class SplitKGemm(Engine):
    name = "splitk_gemm"

    Config = SplitKGemmConfig
    m_min, m_max = 33, None

    def operands(self, cfg, layer):
        return (Operand("descriptors", (cfg.block_n, cfg.block_k)),) if cfg.loads == "tma" else ()

    def build_operand(self, operand, parts, layer):
        block_n, block_k = operand.shape
        cfg = SplitKGemmConfig(  # only the block shape matters
            block_n=block_n,
            block_m=64,
            block_k=block_k,
            splits=1,
            warps=4,
            stages=3,
            loads="tma",
            reduce="none",
        )
        return weight_descriptors(parts, cfg)

    def plan(self, cfg, layer, m, ctx):
        parts, n = ctx.parts, layer.n_for(m)
        fallback = ctx.fallback(n)
        descriptors = ctx.operands[self.operands(cfg, layer)[0]] if cfg.loads == "tma" else ()
        b = ctx.buffers
        workspace, counters, accumulator = b["workspace"], b["counters"], b["accumulator"]
        out_dtype, device = getattr(torch, layer.out_dtype), workspace.device
        bound = (
            None  # the BoundSplitKLaunch, made by the first call (prepare()'s warm-up); False: it cannot be
        )

        def call(x):
            nonlocal bound
            if (
                x.dtype is not torch.bfloat16
                or not x.is_contiguous()
                or x.data_ptr() % 16
                or x.device != device
            ):
                return fallback(x)
            out = torch.empty((x.shape[0], n), dtype=out_dtype, device=device)
            if bound:
                return bound(x, out)
            compiled = launch_splitk_gemm(x, parts, out, workspace, counters, accumulator, cfg, descriptors)
            if bound is None and x.is_cuda:
                made = BoundSplitKLaunch.bind(
                    compiled, layer.dual, n, layer.k, workspace, counters, accumulator, cfg, descriptors
                )
                if made is not None:
                    try:  # once more through the bound launch, into the same out: a misread launcher refuses here
                        made(x, out)
                    except (TypeError, ValueError, SystemError):
                        made = None
                bound = made or False
                call.bound = made
            return out

        call.bound = None
        return call


SPLITK_GEMM = SplitKGemm()


# ---- kernels_src/cublas.py: The fallback: cuBLAS through torch, for every shape no table routes and every x the kernels do not take.
HI_LO = Operand("hi_lo")  # the router's [hi, lo] concatenated along K


class CublasConfig(NamedTuple):
    pass  # cuBLAS picks its own kernel


class Cublas(Engine):
    name = "cublas"
    Config = CublasConfig
    m_min, m_max = 1, None

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


# ---- kernels_src/registry.py: The routing rule: a (layer, m) runs on the first engine, in the tables' order, whose table gives it a config;
class Table(NamedTuple):
    """An engine's table: (layer, m) -> config or None; defaults: weight kind -> config or None."""

    engine: object
    entries: dict
    defaults: dict = {}

    def listed(self, layer: str) -> list:
        return sorted(m for name, m in self.entries if name == layer)


def lookup(table: Table, layer, m: int):
    """The config the table gives (layer, m), or None."""
    listed = table.listed(layer.name)
    row = m if m in listed else table.engine.borrowed_m(m, listed)
    if row is not None:
        return table.entries[(layer.name, row)]
    if table.engine.has_defaults:
        return table.defaults.get("dual" if layer.dual else "plain")
    return None


def route(layer, m: int, tables, skip=()) -> tuple:
    """(engine, config) for m tokens of `layer` by the tables, in their order; engines named in `skip` are passed
    over."""
    for table in tables:
        engine = table.engine
        if engine.name in skip or not engine.serves(m):
            continue
        cfg = lookup(table, layer, m)
        if cfg is not None:
            return engine, cfg
    return CUBLAS, CUBLAS.Config()


def plan_max_m(tables) -> int:
    """prepare() plans every m up to this: PLAN_MAX_M, or the largest m a table lists."""
    return max([PLAN_MAX_M] + [m for table in tables for _, m in table.entries])


# ---- kernels_src/compress.py: 12-bit lossless weights for the compressed engines: each bf16 weight as its lo byte and a 4-bit code into a
TABLE_SIZE = 16
K_GROUP = 64  # weights per row per K group: two 32-wide K blocks
BUCKET = 16 * K_GROUP  # weights per (16-row block, K group): a header and one overflow offset each
PATCHES_PER_GROUP = 3  # patch words in a K group's 16-byte header (after its count)
HEADER_BYTES = 4 * (1 + PATCHES_PER_GROUP)
ENTRY_BYTES = 4  # one overflow entry (int32)
OFFSET_BYTES = 4  # one overflow offset (int32)
MAX_BITS_PER_WEIGHT = 14.0  # a matrix costing this or more stays on the bf16 engines (7/8 of 16 bits)


class CompressionError(ValueError):
    """A weight matrix the 12-bit format does not pay for (its bits per weight), or a wrong input."""


def hi_byte_table(bits: torch.Tensor) -> torch.Tensor:
    """The table's 16 hi bytes for int16-viewed bf16 `bits` (0x00, then the 15 most frequent others)."""
    hi = (bits.to(torch.int32) >> 8) & 0xFF
    counts = torch.bincount(hi.reshape(-1), minlength=256).cpu()
    counts[0] = -1  # 0x00 has its fixed slot
    order = torch.sort(-counts, stable=True).indices
    chosen = [int(b) for b in order[: TABLE_SIZE - 1] if counts[int(b)] > 0]
    return torch.tensor([0] + chosen + [0] * (TABLE_SIZE - 1 - len(chosen)), dtype=torch.int32)


def _fragments(bits: torch.Tensor) -> torch.Tensor:
    """int32 bf16 bits [N, K] -> [N/16, K/64, 4 fragments, 32 lanes, 8 elements] in pack_mma_a's order."""
    n, k = bits.shape
    flat = pack_mma_a(bits.to(torch.int16)).to(torch.int32) & 0xFFFF
    return flat.reshape(n // 16, k // K_GROUP, 4, 32, 8)


def unfragment(frags: torch.Tensor, n: int, k: int) -> torch.Tensor:
    """The inverse of _fragments: [N/16, K/64, 4, 32, 8] in fragment order -> [N, K] (any dtype)."""
    blocks = frags.reshape(n // 16, k // 32, 2, 8, 4, 2, 2, 2)  # rb, kb, step, g, t, z, a, e
    return blocks.permute(0, 6, 3, 1, 4, 2, 5, 7).reshape(n, k)


def patch_words(
    bits_f: torch.Tensor, exc_f: torch.Tensor, limit: int = PATCHES_PER_GROUP
) -> tuple[torch.Tensor, torch.Tensor]:
    """(each bucket's header of its first `limit` exceptions, the mask of the rest) from fragment-ordered bits
    and exception flags [RB, G, 4, 32, 8]."""
    rb, groups = exc_f.shape[:2]
    flags = exc_f.reshape(rb, groups, 4 * 32 * 8).to(torch.int64)
    rank = torch.cumsum(flags, dim=-1) - 1
    inline = (flags == 1) & (rank < limit)
    header = torch.zeros(rb, groups, 1 + PATCHES_PER_GROUP, dtype=torch.int64, device=exc_f.device)
    header[..., 0] = flags.sum(dim=-1).clamp(max=limit)
    b, g, p = torch.nonzero(inline, as_tuple=True)
    f, lane, e = p // 256, (p // 8) % 32, p % 8
    value = bits_f.reshape(rb, groups, -1)[b, g, p].to(torch.int64) & 0xFFFF
    header[b, g, 1 + rank[b, g, p]] = lane | (f << 5) | (e << 7) | (value << 10)
    overflow = ((flags == 1) & (rank >= limit)).reshape(exc_f.shape)
    return header.to(torch.int32), overflow


def overflow_entries(bits_f: torch.Tensor, overflow_f: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """(overflow entries int32 [E], bucket offsets int32 [RB * G + 1]) from fragment-ordered bits and
    overflow flags [RB, G, 4, 32, 8]."""
    buckets = overflow_f.shape[0] * overflow_f.shape[1]
    flags = overflow_f.reshape(buckets, BUCKET)
    b, p = torch.nonzero(flags, as_tuple=True)  # sorted by bucket, then by p
    value = bits_f.reshape(buckets, BUCKET)[b, p].to(torch.int64) & 0xFFFF
    entries = p.to(torch.int64) | (value << 16)
    entries = torch.where(entries >= 1 << 31, entries - (1 << 32), entries).to(torch.int32)  # uint32 as int32
    starts = torch.zeros(buckets + 1, dtype=torch.int64, device=overflow_f.device)
    starts[1:] = torch.cumsum(flags.sum(dim=1), dim=0)
    return entries, starts.to(torch.int32)


def _codes(bits: torch.Tensor, table: torch.Tensor) -> torch.Tensor:
    """Each weight's 4-bit code into `table`, or -1 for an exception."""
    code_of = torch.full((256,), -1, dtype=torch.int32)
    for code in range(TABLE_SIZE - 1, -1, -1):  # a repeated 0x00 keeps code 0
        code_of[int(table[code])] = code
    return code_of.to(bits.device)[(bits >> 8).reshape(-1).long()].reshape(bits.shape)


def _check_input(w: torch.Tensor, name: str, patches_per_group: int) -> None:
    if not 0 <= patches_per_group <= PATCHES_PER_GROUP:
        raise CompressionError(
            f"{name}: patches_per_group must be 0..{PATCHES_PER_GROUP}, got {patches_per_group}"
        )
    if w.dtype != torch.bfloat16 or w.dim() != 2:
        raise CompressionError(f"{name}: expected a 2-D bfloat16 matrix, got {w.dtype} {tuple(w.shape)}")
    n, k = w.shape
    if n % 16 or k % K_GROUP:
        raise CompressionError(f"{name}: [{n}, {k}] needs N % 16 == 0 and K % {K_GROUP} == 0")


def _build(w: torch.Tensor, patches_per_group: int) -> dict:
    """compress() without the refusal rule."""
    n, k = w.shape
    bits = w.contiguous().view(torch.int16).to(torch.int32) & 0xFFFF
    device = w.device
    table = hi_byte_table(bits)  # on the CPU
    codes = _codes(bits, table)
    is_exc = codes < 0
    bits_f = _fragments(bits)
    patches, overflow_f = patch_words(bits_f, _fragments(is_exc.to(torch.int32)), patches_per_group)
    overflow, overflow_starts = overflow_entries(bits_f, overflow_f)
    rb, groups = n // 16, k // K_GROUP
    block_exc = is_exc.reshape(rb, 16 * k).sum(dim=1)
    block_ovf = overflow_f.reshape(rb, -1).sum(dim=1)

    codes = torch.where(is_exc, torch.zeros_like(codes), codes)
    lo = torch.where(is_exc, torch.zeros_like(bits), bits & 0xFF)
    lo_f = _fragments(lo)  # [RB, G, 4, 32, 8]
    code_f = _fragments(codes)
    stream = torch.empty(rb, groups, 3, 32, 16, dtype=torch.uint8, device=device)
    stream[:, :, 0] = torch.cat([lo_f[:, :, 0], lo_f[:, :, 1]], dim=-1).to(torch.uint8)
    stream[:, :, 1] = torch.cat([lo_f[:, :, 2], lo_f[:, :, 3]], dim=-1).to(torch.uint8)
    shifts = torch.arange(8, dtype=torch.int64, device=device) * 4
    words = (code_f.to(torch.int64) << shifts).sum(dim=-1)  # nibble e = element e
    word_bytes = torch.stack([(words >> (8 * b)) & 0xFF for b in range(4)], dim=-1)
    stream[:, :, 2] = word_bytes.permute(0, 1, 3, 2, 4).reshape(rb, groups, 32, 16).to(torch.uint8)
    return {
        "stream": stream,
        "patches": patches,
        "table": table,
        "table_words": tuple(sum(int(table[4 * i + b]) << (8 * b) for b in range(4)) for i in range(4)),
        "overflow": overflow,
        "overflow_starts": overflow_starts,
        "count": int(is_exc.sum()),
        "max_block_count": int(block_exc.max()) if rb else 0,
        "max_block_overflow": int(block_ovf.max()) if rb else 0,
    }


def table_scalars(table_words: tuple) -> tuple:
    """The table's four uint32 words as two signed int64 call scalars: T0 | T1 << 32, T2 | T3 << 32."""
    pairs = ((table_words[0], table_words[1]), (table_words[2], table_words[3]))
    return tuple((lo | hi << 32) - ((lo | hi << 32) >> 63 << 64) for lo, hi in pairs)


def footprint(z: dict) -> dict:
    """A compressed matrix's bits per weight: payload, headers (with the table), exceptions, total."""
    rb, groups = z["stream"].shape[:2]
    weights = rb * groups * BUCKET
    parts = {
        "payload": z["stream"].numel(),
        "headers": z["patches"].numel() * 4 + TABLE_SIZE,
        "exceptions": z["overflow"].numel() * ENTRY_BYTES + z["overflow_starts"].numel() * OFFSET_BYTES,
    }
    bits = {part: 8 * size / weights for part, size in parts.items()}
    bits["total"] = sum(bits.values())
    return bits


def compress(
    w: torch.Tensor,
    name: str = "weight",
    patches_per_group: int = PATCHES_PER_GROUP,
    max_bits_per_weight: float | None = None,
) -> dict:
    """bf16 [N, K] -> the 12-bit format's tensors; CompressionError for a matrix it does not pay for."""
    _check_input(w, name, patches_per_group)
    limit = MAX_BITS_PER_WEIGHT if max_bits_per_weight is None else max_bits_per_weight
    z = _build(w, patches_per_group)
    bits = footprint(z)["total"]
    if bits >= limit:
        n, k = w.shape
        raise CompressionError(
            f"{name}: {bits:.2f} bits per weight in the 12-bit format, at or over its limit of {limit:g}"
            f" ({z['count']} of {n * k} weights are exceptions, {z['overflow'].numel()} past the headers):"
            " serve this layer with the plain GEMV"
        )
    return z


# ---- kernels_src/packing.py: Weight layouts made in prepare() (docs/mma-gemv.md, docs/tma-gemv.md), rows outermost: a slice is a prefix.
def pack_mma_a(w):
    """[N, K] bf16 -> flat [rb][kb][step y][g][t][z][a][e]: row 16 rb + 8a + g, k 32 kb + 8t + 4y + 2z + e."""
    n, k = w.shape
    if n % 16 or k % 32:
        raise ValueError(f"pack_mma_a: weight [{n}, {k}] must have N % 16 == 0 and K % 32 == 0")
    blocks = w.reshape(n // 16, 2, 8, k // 32, 4, 2, 2, 2)
    return blocks.permute(0, 3, 5, 2, 4, 6, 1, 7).contiguous().reshape(-1)


def pack_tma_tiles(w):
    """[N, K] bf16 -> [N/64, K/64, 64, 64]: each 64 x 64 tile one contiguous 8 KB block, a row tile's in K order."""
    n, k = w.shape
    if n % 64 or k % 64:
        raise ValueError(f"pack_tma_tiles: weight [{n}, {k}] must have N % 64 == 0 and K % 64 == 0")
    return w.reshape(n // 64, 64, k // 64, 64).permute(0, 2, 1, 3).contiguous()


def swizzle_128b(tiles):
    """[..., 64, 64] bf16 tiles in wgmma's 128-byte swizzle: 16-byte chunk c of row r at chunk c XOR (r mod 8)
    (an involution)."""
    if tiles.dim() < 2 or tuple(tiles.shape[-2:]) != (64, 64):
        raise ValueError(f"swizzle_128b: tiles must end in [64, 64], got {list(tiles.shape)}")
    rows = torch.arange(64, device=tiles.device)
    chunks = torch.arange(8, device=tiles.device)
    source = chunks[None, :] ^ (rows[:, None] % 8)  # the logical chunk each stored one holds
    view = tiles.reshape(-1, 64, 8, 8)
    return view[:, rows[:, None], source, :].reshape(tiles.shape).contiguous()


def pack_tma_bulk(w):
    """[N, K] bf16 -> the TMA GEMV's full tiles, pre-swizzled."""
    return swizzle_128b(pack_tma_tiles(w))


def pack_tma_half_tiles(w):
    """[N, K] bf16 -> [N/32, K/128, 64, 64]: 32 rows' two 64-wide K halves stacked (tile=half)."""
    n, k = w.shape
    if n % 32 or k % 128:
        raise ValueError(f"pack_tma_half_tiles: weight [{n}, {k}] must have N % 32 == 0 and K % 128 == 0")
    return (
        w.reshape(n // 32, 32, k // 128, 2, 64)
        .permute(0, 2, 3, 1, 4)
        .reshape(n // 32, k // 128, 64, 64)
        .contiguous()
    )


def pack_tma_half_bulk(w):
    """[N, K] bf16 -> the TMA GEMV's half tiles, pre-swizzled (the two halves swizzle as one tile)."""
    return swizzle_128b(pack_tma_half_tiles(w))


def split_hi_lo(w):
    """fp32 [N, K] -> (hi, lo) bf16, hi + lo == w to about 2^-16 relative."""
    hi = w.to(torch.bfloat16)
    lo = (w - hi.float()).to(torch.bfloat16)
    return hi.contiguous(), lo.contiguous()


# ---- The engines' tables (tables/<engine>.yaml), in routing order: (layer, m) -> its config, or None for "not
# this engine here"; an engine with defaults also names a config per weight kind (plain bf16, dual: fp32 as hi + lo).
# fmt: off
TABLES = (
    Table(COMPRESSED_GEMV, {
        ("qkv_gate", 1): None,
        ("qkv_gate", 8): None,
        ("qkv_gate", 16): None,
        ("qkv_gate", 32): None,
        ("o", 1): CompressedGemvConfig(warps=8, splits=1, groups=1, pipeline="batch", row_blocks=1, reduce="none"),
        ("o", 8): CompressedGemvConfig(warps=8, splits=1, groups=1, pipeline="batch", row_blocks=1, reduce="none"),
        ("o", 16): None,
        ("o", 32): None,
        ("pooler", 1): CompressedGemvConfig(warps=8, splits=1, groups=4, pipeline="batch", row_blocks=1, reduce="none"),
        ("pooler", 8): CompressedGemvConfig(warps=16, splits=1, groups=1, pipeline="batch", row_blocks=1, reduce="none"),
        ("pooler", 16): None,
        ("pooler", 32): None,
        ("unpooler", 1): None,
        ("unpooler", 8): None,
        ("unpooler", 16): None,
        ("unpooler", 32): None,
    }),
    Table(COMPRESSED_RING, {
        ("o", 16): None,
        ("o", 32): None,
        ("unpooler", 16): CompressedRingConfig(stages=8, warpgroups=4, groups=2),
        ("unpooler", 32): CompressedRingConfig(stages=8, warpgroups=4, groups=2),
    }),
    Table(TMA_GEMV, {
        ("qkv_gate", 1): None,
        ("qkv_gate", 8): TmaGemvConfig(splits=1, stages=16, tile="half", reduce="none"),
        ("qkv_gate", 16): TmaGemvConfig(splits=1, stages=16, tile="half", reduce="none"),
        ("qkv_gate", 32): TmaGemvConfig(splits=1, stages=14, tile="half", reduce="none"),
        ("o", 1): None,
        ("o", 8): None,
        ("o", 16): TmaGemvConfig(splits=1, stages=8, tile="full", reduce="none"),
        ("o", 32): TmaGemvConfig(splits=1, stages=8, tile="full", reduce="none"),
        ("pooler", 1): None,
        ("pooler", 8): None,
        ("pooler", 16): TmaGemvConfig(splits=1, stages=12, tile="half", reduce="none"),
        ("pooler", 32): TmaGemvConfig(splits=1, stages=12, tile="half", reduce="none"),
        ("unpooler", 1): None,
        ("unpooler", 8): None,
        ("unpooler", 16): TmaGemvConfig(splits=1, stages=12, tile="full", reduce="none"),
        ("unpooler", 32): TmaGemvConfig(splits=1, stages=12, tile="full", reduce="none"),
        ("router", 1): None,
        ("router", 8): None,
        ("router", 16): None,
        ("router", 32): None,
    }),
    Table(MMA_GEMV, {
        ("qkv_gate", 1): MmaGemvConfig(warps=16, splits=1, unroll=2, pipeline="double", row_blocks=2, reduce="none"),
        ("qkv_gate", 8): MmaGemvConfig(warps=16, splits=1, unroll=2, pipeline="double", row_blocks=2, reduce="none"),
        ("qkv_gate", 16): MmaGemvConfig(warps=16, splits=1, unroll=2, pipeline="double_w", row_blocks=2, reduce="none"),
        ("qkv_gate", 32): MmaGemvConfig(warps=4, splits=4, unroll=1, pipeline="double", row_blocks=1, reduce="cluster"),
        ("o", 1): MmaGemvConfig(warps=8, splits=1, unroll=2, pipeline="double", row_blocks=2, reduce="none"),
        ("o", 8): MmaGemvConfig(warps=8, splits=1, unroll=4, pipeline="batch", row_blocks=2, reduce="none"),
        ("o", 16): None,
        ("o", 32): None,
        ("pooler", 1): MmaGemvConfig(warps=8, splits=1, unroll=4, pipeline="double", row_blocks=1, reduce="none"),
        ("pooler", 8): MmaGemvConfig(warps=8, splits=1, unroll=8, pipeline="batch", row_blocks=1, reduce="none"),
        ("pooler", 16): MmaGemvConfig(warps=8, splits=1, unroll=2, pipeline="double", row_blocks=1, reduce="none"),
        ("pooler", 32): MmaGemvConfig(warps=4, splits=2, unroll=4, pipeline="batch", row_blocks=1, reduce="cluster"),
        ("unpooler", 1): MmaGemvConfig(warps=16, splits=1, unroll=8, pipeline="batch", row_blocks=1, reduce="none"),
        ("unpooler", 8): MmaGemvConfig(warps=16, splits=1, unroll=8, pipeline="batch", row_blocks=1, reduce="none"),
        ("unpooler", 16): MmaGemvConfig(warps=8, splits=1, unroll=4, pipeline="batch", row_blocks=2, reduce="none"),
        ("unpooler", 32): None,
        ("router", 1): MmaGemvConfig(warps=16, splits=4, unroll=4, pipeline="batch", row_blocks=1, reduce="cluster"),
        ("router", 8): MmaGemvConfig(warps=8, splits=8, unroll=4, pipeline="batch", row_blocks=1, reduce="cluster"),
        ("router", 16): MmaGemvConfig(warps=16, splits=4, unroll=4, pipeline="batch_l2", row_blocks=1, reduce="cluster"),
        ("router", 32): MmaGemvConfig(warps=8, splits=16, unroll=1, pipeline="double", row_blocks=1, reduce="atomic_out"),
    }, {"plain": MmaGemvConfig(warps=4, splits=2, unroll=4, pipeline="batch", row_blocks=1, reduce="cluster"), "dual": MmaGemvConfig(warps=16, splits=4, unroll=1, pipeline="double", row_blocks=1, reduce="cluster")}),
    Table(TMA_GEMM, {
        ("qkv_gate", 64): TmaGemmConfig(warpgroups=1, splits=3, stages=8, reduce="atomic"),
        ("qkv_gate", 128): None,
        ("qkv_gate", 256): None,
        ("o", 64): TmaGemmConfig(warpgroups=1, splits=1, stages=8, reduce="none", epilogue="staged"),
        ("o", 128): None,
        ("o", 256): None,
        ("pooler", 64): TmaGemmConfig(warpgroups=1, splits=2, stages=8, reduce="semaphore"),
        ("pooler", 128): None,
        ("pooler", 256): None,
        ("unpooler", 64): TmaGemmConfig(warpgroups=1, splits=1, stages=8, reduce="none", epilogue="staged"),
        ("unpooler", 128): TmaGemmConfig(warpgroups=1, splits=1, stages=6, reduce="none", epilogue="staged"),
        ("unpooler", 256): None,
        ("router", 64): None,
        ("router", 128): None,
        ("router", 256): None,
    }),
    Table(SPLITK_GEMM, {
        ("qkv_gate", 64): None,
        ("qkv_gate", 128): None,
        ("qkv_gate", 256): None,
        ("o", 64): SplitKGemmConfig(block_n=64, block_m=64, block_k=128, splits=1, warps=4, stages=4, loads="tma", reduce="none"),
        ("o", 128): None,
        ("o", 256): None,
        ("pooler", 64): SplitKGemmConfig(block_n=64, block_m=64, block_k=128, splits=4, warps=4, stages=3, loads="tma", reduce="atomic"),
        ("pooler", 128): SplitKGemmConfig(block_n=64, block_m=128, block_k=128, splits=2, warps=4, stages=4, loads="tma", reduce="atomic"),
        ("pooler", 256): None,
        ("unpooler", 64): SplitKGemmConfig(block_n=64, block_m=64, block_k=128, splits=1, warps=4, stages=4, loads="tma", reduce="none"),
        ("unpooler", 128): None,
        ("unpooler", 256): None,
        ("router", 64): SplitKGemmConfig(block_n=64, block_m=64, block_k=128, splits=16, warps=4, stages=4, loads="tma", reduce="atomic"),
        ("router", 128): SplitKGemmConfig(block_n=64, block_m=64, block_k=128, splits=16, warps=4, stages=3, loads="tma", reduce="atomic"),
        ("router", 256): SplitKGemmConfig(block_n=64, block_m=64, block_k=128, splits=8, warps=4, stages=4, loads="tma", reduce="atomic"),
    }),
)
# fmt: on

# ---- The CUDA kernels this file compiles, the cases of LAUNCH_TABLE in order (each its engine and its launcher's
# arguments), and the extension that holds them, named for its C++.
KERNELS = (
    "compressed_gemv groups=1 NB=1 row_blocks=1 pipeline=0 warps=8 splits=1 reduce=0 smem_bytes=4096 overflow_bytes=16464",
    "compressed_gemv groups=1 NB=1 row_blocks=1 pipeline=0 warps=16 splits=1 reduce=0 smem_bytes=8192 overflow_bytes=33296",
    "compressed_gemv groups=4 NB=1 row_blocks=1 pipeline=0 warps=8 splits=1 reduce=0 smem_bytes=4096 overflow_bytes=16912",
    "compressed_ring NB=2 stages=8 warpgroups=4 groups=2 smem_bytes=144708",
    "compressed_ring NB=4 stages=8 warpgroups=4 groups=2 smem_bytes=177476",
    "tma_gemv NB=1 stages=16 dual=False half=True warpgroups=1 out=__nv_bfloat16 staged=False splits=1 reduce=0 smem_bytes=164864",
    "tma_gemv NB=2 stages=8 dual=False half=False warpgroups=1 out=__nv_bfloat16 staged=False splits=1 reduce=0 smem_bytes=82944",
    "tma_gemv NB=2 stages=12 dual=False half=False warpgroups=1 out=__nv_bfloat16 staged=False splits=1 reduce=0 smem_bytes=123904",
    "tma_gemv NB=2 stages=12 dual=False half=True warpgroups=1 out=__nv_bfloat16 staged=False splits=1 reduce=0 smem_bytes=148480",
    "tma_gemv NB=2 stages=16 dual=False half=True warpgroups=1 out=__nv_bfloat16 staged=False splits=1 reduce=0 smem_bytes=197632",
    "tma_gemv NB=4 stages=8 dual=False half=False warpgroups=1 out=__nv_bfloat16 staged=False splits=1 reduce=0 smem_bytes=99328",
    "tma_gemv NB=4 stages=12 dual=False half=False warpgroups=1 out=__nv_bfloat16 staged=False splits=1 reduce=0 smem_bytes=148480",
    "tma_gemv NB=4 stages=12 dual=False half=True warpgroups=1 out=__nv_bfloat16 staged=False splits=1 reduce=0 smem_bytes=197632",
    "tma_gemv NB=4 stages=14 dual=False half=True warpgroups=1 out=__nv_bfloat16 staged=False splits=1 reduce=0 smem_bytes=230400",
    "mma_gemv unroll=1 NB=4 row_blocks=1 pipeline=1 dual=True atomic_out=True out=float warps=8 splits=16 reduce=6 smem_bytes=16384",
    "mma_gemv unroll=2 NB=1 row_blocks=2 pipeline=1 dual=False atomic_out=False out=__nv_bfloat16 warps=8 splits=1 reduce=0 smem_bytes=8192",
    "mma_gemv unroll=2 NB=1 row_blocks=2 pipeline=1 dual=False atomic_out=False out=__nv_bfloat16 warps=16 splits=1 reduce=0 smem_bytes=16384",
    "mma_gemv unroll=4 NB=1 row_blocks=1 pipeline=0 dual=True atomic_out=False out=float warps=8 splits=8 reduce=5 smem_bytes=7680",
    "mma_gemv unroll=4 NB=1 row_blocks=1 pipeline=0 dual=True atomic_out=False out=float warps=16 splits=4 reduce=5 smem_bytes=9728",
    "mma_gemv unroll=4 NB=1 row_blocks=1 pipeline=1 dual=False atomic_out=False out=__nv_bfloat16 warps=8 splits=1 reduce=0 smem_bytes=4096",
    "mma_gemv unroll=4 NB=1 row_blocks=2 pipeline=0 dual=False atomic_out=False out=__nv_bfloat16 warps=8 splits=1 reduce=0 smem_bytes=8192",
    "mma_gemv unroll=4 NB=2 row_blocks=1 pipeline=2 dual=True atomic_out=False out=float warps=16 splits=4 reduce=5 smem_bytes=19456",
    "mma_gemv unroll=8 NB=1 row_blocks=1 pipeline=0 dual=False atomic_out=False out=__nv_bfloat16 warps=8 splits=1 reduce=0 smem_bytes=4096",
    "mma_gemv unroll=8 NB=1 row_blocks=1 pipeline=0 dual=False atomic_out=False out=__nv_bfloat16 warps=16 splits=1 reduce=0 smem_bytes=8192",
    "tma_gemm NB=8 stages=8 dual=False half=False warpgroups=1 out=__nv_bfloat16 staged=False splits=2 reduce=4 smem_bytes=132096",
    "tma_gemm NB=8 stages=8 dual=False half=False warpgroups=1 out=__nv_bfloat16 staged=False splits=3 reduce=3 smem_bytes=132096",
    "tma_gemm NB=8 stages=8 dual=False half=False warpgroups=1 out=__nv_bfloat16 staged=True splits=1 reduce=0 smem_bytes=132096",
    "tma_gemm NB=16 stages=6 dual=False half=False warpgroups=1 out=__nv_bfloat16 staged=True splits=1 reduce=0 smem_bytes=148480",
)
EXTENSION = "okc_muse_proj_85d0d752dd53"


# ---- What both C++ sources open with: the constants generated from the engines, call.h.
CUDA_HEAD = r"""
// Generated from the engines (generator/sources.py, cuda_prelude): the constants and mode codes the
// CUDA side shares with Python, each written once, in Python.
#include <cstddef>
namespace okc {
// engine.py REDUCTION: the split-K reductions (each engine's reduce field names some of them)
enum class Reduce : int { kNone = 0, kClusterGather = 1, kClusterScatter = 2, kAtomic = 3, kSemaphore = 4, kCluster = 5, kAtomicOut = 6 };
// engine.py SMEM_LIMIT: dynamic shared memory a CUDA kernel's block may take
constexpr size_t kSmemOptInLimit = 231424;
// engine.py SEMAPHORE_GROUPS: int offset of the tickets in the semaphore array
constexpr int kTicketAt = 4096;
// engine.py TICKET_GROUPS: row groups an output-atomic launch may have
constexpr int kTicketGroups = 256;
// engine.py TICKET_SPLITS: S = 2, 4, 8, 16, 32
constexpr int kTicketSplits = 5;
// engine.py SEMAPHORES: the int32 counters runtime.py allocates
constexpr int kSemaphoreInts = 6656;
// engine.py CALL_OPERANDS: operand pointers a call holds
constexpr int kCallOperands = 4;
// engine.py CALL_SCALARS: 64-bit scalars a call holds
constexpr int kCallScalars = 3;
// mma_gemv.py MMA_PIPELINE: the software-pipelining styles (compressed_gemv: the first two)
enum class MmaPipeline : int { kBatch = 0, kDouble = 1, kBatchL2 = 2, kDoubleL2 = 3, kDoubleW = 4, kDoubleWL2 = 5 };
// compressed_ring.py STAGED_ENTRIES: overflow entries a CTA stages
constexpr int kStagedOverflowEntries = 64;
// compress.py HEADER_BYTES: a K group's header
constexpr int kCompressedHeaderBytes = 16;
// tma_gemv.py TILE_ROWS: weight rows per CTA, the wgmma M
constexpr int kTmaTileRows = 64;
// tma_gemv.py TILE_K: K per ring slot, one 128-byte swizzle row of bf16
constexpr int kTmaTileK = 64;
// tma_gemv.py CONSUMERS: threads of one consumer warpgroup
constexpr int kTmaConsumers = 128;
// tma_gemv.py PRODUCER: threads of the producer warp
constexpr int kTmaProducer = 32;
}  // namespace okc
#line 1 "kernels_src/call.h"
// What a launch gets from Python (runtime.py, PlanContext.cuda_plan), in plain C++ so that binding.cpp needs neither
// CUDA nor torch headers: prepare() fills the plan's part, each call adds x, out, M and the stream. Each launcher
// (its .cuh) says which operand and scalar slot holds what.
#pragma once
// #include "generated/constants.h"  (inlined above)

namespace okc {

struct Call {
    const void* x;  // [M, K] bf16, row-major, 16-byte aligned            (per call)
    void* out;      // [M, N]: bf16, or fp32 for the router's dual mode   (per call)
    int M;          // tokens                                             (per call)
    void* stream;   // the caller's cudaStream_t (the capture stream inside torch.cuda.graph) (per call)
    int N, K;       // output width (the unpooler's slice at small m) and K
    const void* operand[kCallOperands];  // what prepare() built for the engine: packed weights, lo weights, ...
    long long scalar[kCallScalars];      // per-layer constants (the 12-bit format's table words ...)
    float* ws;                           // split-K workspace (engine.py: WORKSPACE_FLOATS)
    int* sem;                            // self-resetting counters (engine.py: SEMAPHORES), 0 between launches
};

}  // namespace okc

// Defined by the launch table after CUDA_SRC (the file's LAUNCH_TABLE): kernel number -> launcher instantiation.
const char* okc_launch(int kernel, const okc::Call& call);
"""

# ---- The CUDA kernels and their host launchers: common.cuh, mma_gemv.cuh, hopper_ptx.cuh, ring.cuh, tma_gemv.cuh, compressed_gemv.cuh, compressed_ring.cuh.
CUDA_SRC = CUDA_HEAD + r"""#line 1 "kernels_src/common.cuh"
// Helpers every kernel shares: cached loads, the bf16 mma, mbarriers, the cluster push, the launch, and the end of
// a CTA of the two mma.sync GEMVs (their warps' tiles summed, then S = 1, cluster or semaphore split-K). Design and
// figures: docs/mma-gemv.md.
#pragma once
#include <cuda_runtime.h>
#include <cuda_bf16.h>
#include <stdint.h>

// #include "call.h"  (inlined above)
// #include "generated/constants.h"  (inlined above)

#if defined(__clang__) && !defined(__NVCC__)
// clang's CUDA headers give __stcg (store, L2 only) for bf16 alone; nvcc's give the float ones the split-K partials
// use. For clang-based tools (clangd, README "Editing kernels"): nvcc never reads these.
__device__ inline void __stcg(float* p, float v) { asm("st.global.cg.f32 [%0], %1;" ::"l"(p), "f"(v) : "memory"); }
__device__ inline void __stcg(float4* p, float4 v) {
    asm("st.global.cg.v4.f32 [%0], {%1, %2, %3, %4};" ::"l"(p), "f"(v.x), "f"(v.y), "f"(v.z), "f"(v.w) : "memory");
}
#endif

namespace okc {

// kSmemOptInLimit and the semaphore array's layout (kTicketAt, kTicketGroups, kTicketSplits, kSemaphoreInts) come
// from engine.py, in the prelude.

// One lane's 16 bytes: a whole mma A fragment (8 bf16), or 8 consecutive bf16 of x.
struct alignas(16) Frag {
    uint32_t r[4];
};

__device__ __forceinline__ Frag zero_frag() { return Frag{{0u, 0u, 0u, 0u}}; }

// Weights are read once: not into L1, which x keeps; `volatile` keeps the loads in the order a style writes them.
__device__ __forceinline__ Frag ld_weights(const Frag* p) {
    Frag f;
    asm volatile("ld.global.nc.L1::no_allocate.v4.u32 {%0, %1, %2, %3}, [%4];"
                 : "=r"(f.r[0]), "=r"(f.r[1]), "=r"(f.r[2]), "=r"(f.r[3])
                 : "l"(p));
    return f;
}

// The same, and L2 fetches the whole 256-byte sector group.
__device__ __forceinline__ Frag ld_weights_l2_256(const Frag* p) {
    Frag f;
    asm volatile("ld.global.nc.L1::no_allocate.L2::256B.v4.u32 {%0, %1, %2, %3}, [%4];"
                 : "=r"(f.r[0]), "=r"(f.r[1]), "=r"(f.r[2]), "=r"(f.r[3])
                 : "l"(p));
    return f;
}

// x: re-read by every CTA, so through L1.
__device__ __forceinline__ Frag ld_x(const Frag* p) {
    uint4 v = __ldg(reinterpret_cast<const uint4*>(p));
    return Frag{{v.x, v.y, v.z, v.w}};
}

// D = A(16x16 bf16, row) * B(16x8 bf16, col) + D, fp32 accumulate. a: 4 regs, b0/b1: 2 regs, d: 4 floats.
__device__ __forceinline__ void mma_bf16_m16n8k16(float (&d)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
    asm("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 "
        "{%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

// mbarriers in shared memory: the rings (ring.cuh) and the cluster inbox below.
__device__ __forceinline__ uint32_t smem_addr(const void* p) {
    return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}

__device__ __forceinline__ void mbar_init(uint64_t* bar, uint32_t count) {
    asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" ::"r"(smem_addr(bar)), "r"(count) : "memory");
}

__device__ __forceinline__ void mbar_arrive(uint64_t* bar) {
    asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];" ::"r"(smem_addr(bar)) : "memory");
}

__device__ __forceinline__ void mbar_arrive_expect_tx(uint64_t* bar, uint32_t bytes) {
    asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(smem_addr(bar)), "r"(bytes) : "memory");
}

// Spin until the barrier's phase of this parity has completed (acquire).
__device__ __forceinline__ void mbar_wait(uint64_t* bar, uint32_t parity) {
    asm volatile(
        "{\n"
        ".reg .pred done;\n"
        "MBAR_WAIT_%=:\n"
        "mbarrier.try_wait.parity.shared::cta.b64 done, [%0], %1;\n"
        "@!done bra MBAR_WAIT_%=;\n"
        "}\n" ::"r"(smem_addr(bar)),
        "r"(parity)
        : "memory");
}

// The same with cluster-scope acquire: the cluster's st.async stores here are visible.
__device__ __forceinline__ void mbar_wait_cluster(uint64_t* bar, uint32_t parity) {
    asm volatile(
        "{\n"
        ".reg .pred done;\n"
        "MBAR_WAIT_CLUSTER_%=:\n"
        "mbarrier.try_wait.parity.acquire.cluster.shared::cta.b64 done, [%0], %1;\n"
        "@!done bra MBAR_WAIT_CLUSTER_%=;\n"
        "}\n" ::"r"(smem_addr(bar)),
        "r"(parity)
        : "memory");
}

// Cluster split-K: the S CTAs of a tile are one cluster; the ranks that own part of it keep an inbox (a slot per
// other rank, one mbarrier), the others push into it with st.async and leave: one SM-to-SM trip where the
// semaphore takes three L2 round trips (1.7-1.9 us of the TMA GEMV's tail).
__device__ __forceinline__ uint32_t cluster_rank() {
    uint32_t r;
    asm volatile("mov.u32 %0, %%cluster_ctarank;" : "=r"(r));
    return r;
}

// At kernel start, every thread: thread 0 arms this rank's inbox for `bytes`; all arrive on the cluster barrier,
// whose wait (inbox_ready, before the first push) is long done by then.
__device__ __forceinline__ void open_inbox(uint64_t* full, uint32_t bytes) {
    if (threadIdx.x == 0) {
        mbar_init(full, 1);
        mbar_arrive_expect_tx(full, bytes);  // the one arrival; the pushes complete the byte count
        asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
    }
    asm volatile("barrier.cluster.arrive.relaxed;" ::: "memory");
}

// Every thread, once after open_inbox: every rank's inbox is armed.
__device__ __forceinline__ void inbox_ready() { asm volatile("barrier.cluster.wait;" ::: "memory"); }

// Four floats into rank `to`'s copy of `dst`, counted on its copy of `full`.
__device__ __forceinline__ void push_to_rank(int to, float* dst, uint64_t* full, float v0, float v1, float v2,
                                             float v3) {
    uint32_t remote_dst, remote_bar;
    asm volatile("mapa.shared::cluster.u32 %0, %1, %2;" : "=r"(remote_dst) : "r"(smem_addr(dst)), "r"(to));
    asm volatile("mapa.shared::cluster.u32 %0, %1, %2;" : "=r"(remote_bar) : "r"(smem_addr(full)), "r"(to));
    asm volatile(
        "st.async.shared::cluster.mbarrier::complete_tx::bytes.v4.b32 [%0], {%1, %2, %3, %4}, [%5];" ::"r"(remote_dst),
        "r"(__float_as_uint(v0)), "r"(__float_as_uint(v1)), "r"(__float_as_uint(v2)), "r"(__float_as_uint(v3)),
        "r"(remote_bar)
        : "memory");
}

// Host side: `kernel` with `smem` bytes of dynamic shared memory, grid.y the K split, a column of it one cluster if
// asked; nullptr, or the CUDA error's text.
template <typename... Params, typename... Args>
const char* launch_splits(void (*kernel)(Params...), dim3 grid, dim3 block, size_t smem, cudaStream_t stream,
                          bool cluster, Args... args) {
    if (smem > 48 * 1024) {  // past the default limit: opt in
        const cudaError_t err = cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem);
        if (err != cudaSuccess) return cudaGetErrorString(err);
    }
    if (!cluster) {
        kernel<<<grid, block, smem, stream>>>(args...);
    } else {
        if (grid.y > 8) {  // past the portable 8, on request
            const cudaError_t err = cudaFuncSetAttribute(kernel, cudaFuncAttributeNonPortableClusterSizeAllowed, 1);
            if (err != cudaSuccess) return cudaGetErrorString(err);
        }
        cudaLaunchConfig_t config = {};
        config.gridDim = grid;
        config.blockDim = block;
        config.dynamicSmemBytes = smem;
        config.stream = stream;
        cudaLaunchAttribute cluster_dim;
        cluster_dim.id = cudaLaunchAttributeClusterDimension;
        cluster_dim.val.clusterDim.x = 1;
        cluster_dim.val.clusterDim.y = grid.y;
        cluster_dim.val.clusterDim.z = 1;
        config.attrs = &cluster_dim;
        config.numAttrs = 1;
        const cudaError_t err = cudaLaunchKernelEx(&config, kernel, args...);
        if (err != cudaSuccess) return cudaGetErrorString(err);
    }
    const cudaError_t err = cudaGetLastError();
    return err == cudaSuccess ? nullptr : cudaGetErrorString(err);
}

// Output-atomic split-K (mma_gemv, reduce = atomic_out, fp32 out): split 0 zeroes the row group's output and
// raises its flag by S; every CTA adds its tile with red.add once the flag reaches the value its ticket names.
// Tickets and flags only grow, so no launch clears them (docs/mma-gemv.md).
constexpr int kFlagAt = kTicketAt + kTicketSplits * kTicketGroups;
static_assert(kFlagAt + kTicketSplits * kTicketGroups == kSemaphoreInts, "the flags end the semaphore array");

// The counters' slot for (group, S), S a power of two in 2..32.
__device__ __forceinline__ int ticket_slot(int group, int S) { return (__ffs(S) - 2) * kTicketGroups + group; }

// Thread 0 of every CTA, at kernel start; read at its end (flag_wanted).
__device__ __forceinline__ uint32_t take_ticket(int* sem, int group, int S) {
    return atomicAdd(reinterpret_cast<unsigned int*>(sem + kTicketAt + ticket_slot(group, S)), 1u);
}

__device__ __forceinline__ uint32_t flag_wanted(uint32_t ticket, int S) {
    return (ticket & ~(uint32_t)(S - 1)) + (uint32_t)S;
}

// One warp of split 0, at kernel start: zero the row group's output, then raise its flag by S.
__device__ __forceinline__ void zero_and_raise(int* sem, int group, int S, float* out, int M, int N, int row0,
                                               int rows) {
    const int lane = threadIdx.x & 31, quads = rows / 4;
    for (int i = lane; i < M * quads; i += 32) {
        float4* p = reinterpret_cast<float4*>(out + (size_t)(i / quads) * N + row0) + i % quads;
        __stcg(p, make_float4(0.f, 0.f, 0.f, 0.f));
    }
    __syncwarp();  // the lanes' stores before lane 0's release, which covers them
    if (lane == 0)
        asm volatile("red.release.gpu.global.add.u32 [%0], %1;" ::"l"(sem + kFlagAt + ticket_slot(group, S)), "r"(S)
                     : "memory");
}

// The flag, unordered: peeked once a loop trip, so that the wait after the loop rarely waits.
__device__ __forceinline__ uint32_t peek_flag(const int* sem, int group, int S) {
    uint32_t v;
    asm volatile("ld.relaxed.gpu.global.u32 %0, [%1];" : "=r"(v) : "l"(sem + kFlagAt + ticket_slot(group, S)));
    return v;
}

// Thread 0, before the CTA barrier ahead of the adds: this launch's zeroes are visible.
__device__ __forceinline__ void await_zeroed(const int* sem, int group, int S, uint32_t seen, uint32_t want) {
    while (seen != want) seen = peek_flag(sem, group, S);
    asm volatile("fence.acq_rel.gpu;" ::: "memory");
}

// out[0..3] += v, one L2 atomic; like every f32 atomic add it flushes results under 2^-126 to 0.
__device__ __forceinline__ void red_add_v4(float* p, float v0, float v1, float v2, float v3) {
    asm volatile("red.global.add.v4.f32 [%0], {%1, %2, %3, %4};" ::"l"(p), "f"(v0), "f"(v1), "f"(v2), "f"(v3)
                 : "memory");
}

__device__ __forceinline__ void store_out(float* p, float v) { *p = v; }
__device__ __forceinline__ void store_out(__nv_bfloat16* p, float v) { *p = __float2bfloat16_rn(v); }

// x as the mma's B operand: lane (g, t) reads token g of each 8-token block, one 16-byte load a 32-wide K block.
template <int NB>
__device__ __forceinline__ void x_operand(const Frag* x, int M, int K, int lane, const Frag* (&xp)[NB],
                                          bool (&xvalid)[NB]) {
#pragma unroll
    for (int nb = 0; nb < NB; ++nb) {
        const int token = nb * 8 + (lane >> 2);
        xvalid[nb] = token < M;
        xp[nb] = x + (size_t)(xvalid[nb] ? token : 0) * (K >> 3) + (lane & 3);
    }
}

template <int RowBlocks, int NB>
__device__ __forceinline__ void zero_accumulators(float (&acc)[RowBlocks][NB][4]) {
#pragma unroll
    for (int r = 0; r < RowBlocks; ++r)
#pragma unroll
        for (int nb = 0; nb < NB; ++nb)
#pragma unroll
            for (int j = 0; j < 4; ++j) acc[r][nb][j] = 0.f;
}

// red: [NW][R * NB * 4][32], each warp's accumulators in the mma C layout, conflict-free by lane.
template <int RowBlocks, int NB>
__device__ __forceinline__ void park_accumulators(float* red, const float (&acc)[RowBlocks][NB][4], int warp,
                                                  int lane) {
#pragma unroll
    for (int r = 0; r < RowBlocks; ++r)
#pragma unroll
        for (int nb = 0; nb < NB; ++nb)
#pragma unroll
            for (int j = 0; j < 4; ++j)
                red[(warp * RowBlocks * NB * 4 + (r * NB + nb) * 4 + j) * 32 + lane] = acc[r][nb][j];
}

// Element idx of a CTA's tile summed over its warps (red: [NW][kTile], conflict-free by lane).
__device__ __forceinline__ float sum_over_warps(const float* red, int kTile, int idx) {
    const int nw = blockDim.x >> 5;
    float v = 0.f;
    for (int w = 0; w < nw; ++w) v += red[w * kTile + idx];
    return v;
}

// The end of a GEMV CTA, after park_accumulators and a barrier: the warps' tiles summed and written (write(idx, v)),
// or for S > 1 reduced by cluster push into rank 0 or by semaphore, both in a fixed order. Args: S, cluster, ws, sem.
template <typename Args, typename WriteElement>
__device__ __forceinline__ void finish_tile(const Args& a, float* red, float* inbox, uint64_t* inbox_full, int kTile,
                                            int group, int split, WriteElement write) {
    const int nw = blockDim.x >> 5;
    if (a.S == 1) {
        for (int idx = threadIdx.x; idx < kTile; idx += blockDim.x) {
            float v = sum_over_warps(red, kTile, idx);
            write(idx, v);
        }
        return;
    }

    if (a.cluster) {  // rank r is split r
        inbox_ready();
        const int rank = (int)cluster_rank();
        if (rank != 0) {
            float* slot = inbox + (size_t)(rank - 1) * kTile;
            for (int i = threadIdx.x * 4; i < kTile; i += blockDim.x * 4) {
                float v[4] = {0.f, 0.f, 0.f, 0.f};
                for (int w = 0; w < nw; ++w)
#pragma unroll
                    for (int j = 0; j < 4; ++j) v[j] += red[w * kTile + i + j];
                push_to_rank(0, slot + i, inbox_full, v[0], v[1], v[2], v[3]);
            }
            return;
        }
        for (int idx = threadIdx.x; idx < kTile; idx += blockDim.x) {  // rank 0's own while the rest land
            float v = sum_over_warps(red, kTile, idx);
            red[idx] = v;  // in place of warp 0's: each idx is this thread's alone
        }
        mbar_wait_cluster(inbox_full, 0);
        for (int idx = threadIdx.x; idx < kTile; idx += blockDim.x) {
            float v = red[idx];
            for (int s = 0; s < a.S - 1; ++s) v += inbox[(size_t)s * kTile + idx];  // rank order: deterministic
            write(idx, v);
        }
        return;
    }

    // Semaphore: publish this CTA's tile; the last CTA of the row group sums all S.
    float* mine = a.ws + ((size_t)group * a.S + split) * kTile;
    for (int idx = threadIdx.x; idx < kTile; idx += blockDim.x) {
        __stcg(mine + idx, sum_over_warps(red, kTile, idx));
    }
    __threadfence();  // visible device-wide before this CTA counts itself in
    __syncthreads();
    __shared__ int is_last;
    if (threadIdx.x == 0) is_last = atomicAdd(a.sem + group, 1) == a.S - 1;
    __syncthreads();
    if (!is_last) return;
    __threadfence();  // acquire: the other CTAs' tiles
    const float* tiles = a.ws + (size_t)group * a.S * kTile;
    for (int idx = threadIdx.x; idx < kTile; idx += blockDim.x) {
        float v = 0.f;
        for (int s = 0; s < a.S; ++s) v += __ldcg(tiles + (size_t)s * kTile + idx);  // fixed order: deterministic
        write(idx, v);
    }
    if (threadIdx.x == 0) a.sem[group] = 0;  // every CTA has arrived: ready for the next launch
}

}  // namespace okc
#line 1 "kernels_src/mma_gemv.cuh"
// The mma.sync GEMV (engine mma_gemv, m <= 32): out[m, N] = x[m, K] . W[N, K]^T, every weight byte streamed once.
// W is mma's A operand, packed so that a lane's share of a fragment is one 16-byte load; x is B, 8 tokens a column
// block. A CTA owns RowBlocks 16-row blocks (each x fragment serves them all), its warps split its K range and
// reduce through shared memory; splits > 1 CTAs meet by semaphore, cluster push or, for the router's fp32 output,
// atomic adds (common.cuh). Dual: the router's hi and lo bf16 weights into one fp32 accumulator. Design and
// figures: docs/mma-gemv.md.
#pragma once
// #include "common.cuh"  (inlined above)
// #include "generated/constants.h"  (inlined above)

namespace okc {

// The pipelining styles (MmaPipeline; docs/mma-gemv.md): a trip is Unroll 32-wide K blocks a warp. double: the next
// trip's loads before this trip's mmas; double_w: its weights before them and its x after; *_l2: the L2::256B hint.
__host__ __device__ constexpr bool pipe_double(MmaPipeline p) {
    return p == MmaPipeline::kDouble || p == MmaPipeline::kDoubleL2;
}
__host__ __device__ constexpr bool pipe_double_w(MmaPipeline p) {
    return p == MmaPipeline::kDoubleW || p == MmaPipeline::kDoubleWL2;
}
__host__ __device__ constexpr bool pipe_l2_hint(MmaPipeline p) {
    return p == MmaPipeline::kBatchL2 || p == MmaPipeline::kDoubleL2 || p == MmaPipeline::kDoubleWL2;
}

struct MmaGemvArgs {
    const Frag* x;   // [M, K] bf16, row-major, 16-byte aligned
    const Frag* w;   // packed weights (dual: the hi half)
    const Frag* w2;  // packed lo weights (dual only)
    void* out;       // [M, N]: bf16, or fp32 in dual mode
    float* ws;       // split-K partials: [N/(16R)][S][R*NB*128]
    int* sem;        // arrival counter per CTA row group; 0 between launches
    int M, N, K, S;
    int cluster;  // 1: the S split CTAs are one cluster (atomic_out is the kernel's AtomicOut)
};

constexpr int kFragsPerBlock = 64;  // one 16-row x 32-k block: 2 steps x 32 lanes x 16 bytes

template <int Unroll, int NB, int RowBlocks, bool Dual>
struct Trip {
    Frag w[RowBlocks][Unroll][2];                         // row block r, K block u, steps y = 0, 1
    Frag w2[Dual ? RowBlocks : 1][Dual ? Unroll : 1][2];  // lo weights (Dual)
    Frag x[Unroll][NB];                                   // shared by all row blocks
};

template <MmaPipeline Pipeline>
__device__ __forceinline__ Frag ld_weights_pipe(const Frag* p, bool ok) {
    return ok ? (pipe_l2_hint(Pipeline) ? ld_weights_l2_256(p) : ld_weights(p)) : zero_frag();
}

// wp / w2p: this lane's first fragment of the CTA's first row block. WEIGHTS / X: which of the trip's loads.
template <int Unroll, int NB, int RowBlocks, MmaPipeline Pipeline, bool Dual, bool WEIGHTS = true, bool X = true>
__device__ __forceinline__ void load_trip(Trip<Unroll, NB, RowBlocks, Dual>& tr, const Frag* wp, const Frag* w2p,
                                          size_t row_frags, const Frag* const (&xp)[NB], const bool (&xvalid)[NB],
                                          int kb0, int kb_end) {
#pragma unroll
    for (int u = 0; u < Unroll; ++u) {
        const int kb = kb0 + u;
        const bool ok = kb < kb_end;  // warp-uniform
        if constexpr (WEIGHTS) {
#pragma unroll
            for (int r = 0; r < RowBlocks; ++r)
#pragma unroll
                for (int y = 0; y < 2; ++y) {
                    const size_t at = r * row_frags + kb * kFragsPerBlock + y * 32;
                    tr.w[r][u][y] = ld_weights_pipe<Pipeline>(wp + at, ok);
                    if constexpr (Dual) tr.w2[r][u][y] = ld_weights_pipe<Pipeline>(w2p + at, ok);
                }
        }
        if constexpr (X) {
#pragma unroll
            for (int nb = 0; nb < NB; ++nb) tr.x[u][nb] = (ok && xvalid[nb]) ? ld_x(xp[nb] + kb * 4) : zero_frag();
        }
    }
}

template <int Unroll, int NB, int RowBlocks, bool Dual>
__device__ __forceinline__ void mma_trip(float (&acc)[RowBlocks][NB][4], const Trip<Unroll, NB, RowBlocks, Dual>& tr) {
#pragma unroll
    for (int u = 0; u < Unroll; ++u)
#pragma unroll
        for (int r = 0; r < RowBlocks; ++r)
#pragma unroll
            for (int y = 0; y < 2; ++y)
#pragma unroll
                for (int nb = 0; nb < NB; ++nb) {
                    // step y consumes x elements 4y..4y+3 of the lane's 8 (see packing.py)
                    const uint32_t b0 = tr.x[u][nb].r[2 * y], b1 = tr.x[u][nb].r[2 * y + 1];
                    mma_bf16_m16n8k16(acc[r][nb], tr.w[r][u][y].r, b0, b1);
                    if constexpr (Dual) mma_bf16_m16n8k16(acc[r][nb], tr.w2[r][u][y].r, b0, b1);
                }
}

// Element idx of a reduced tile (idx = 32 * (4 (NB r + nb) + j) + lane, the mma C layout) -> out[token, row].
template <int NB, typename Out>
__device__ __forceinline__ void write_tile_element(const MmaGemvArgs& a, int rb0, int idx, float v) {
    const int lane = idx & 31, c = idx >> 5;
    const int r = c / (NB * 4), nb = (c >> 2) % NB, j = c & 3;
    const int row = (rb0 + r) * 16 + (lane >> 2) + ((j & 2) ? 8 : 0);
    const int token = nb * 8 + (lane & 3) * 2 + (j & 1);
    if (token < a.M) store_out(static_cast<Out*>(a.out) + (size_t)token * a.N + row, v);
}

// reduce = atomic_out: the warps summed conflict-free in place of warp 0's slice (into quads directly: 4x the
// wavefronts), then one red.add a quad of four rows of one token.
template <int RowBlocks, int NB>
__device__ __forceinline__ void add_tile(const MmaGemvArgs& a, float* red, int rb0) {
    constexpr int kTile = RowBlocks * NB * 4 * 32, kQuads = kTile / 4;
    for (int idx = threadIdx.x; idx < kTile; idx += blockDim.x)
        red[idx] = sum_over_warps(red, kTile, idx);  // each idx is read and written by this thread only
    __syncthreads();
    for (int i = threadIdx.x; i < kQuads; i += blockDim.x) {
        const int q = i & 3, t = (i >> 2) & 7, nb = (i >> 5) % NB, r = i / (32 * NB);
        const int token = nb * 8 + t;
        if (token >= a.M) continue;
        float v[4];
#pragma unroll
        for (int e = 0; e < 4; ++e) {
            const int lr = 4 * q + e;
            v[e] = red[((r * NB + nb) * 4 + 2 * (lr >> 3) + (t & 1)) * 32 + 4 * (lr & 7) + (t >> 1)];
        }
        float* dst = static_cast<float*>(a.out) + (size_t)token * a.N + (rb0 + r) * 16 + 4 * q;
        red_add_v4(dst, v[0], v[1], v[2], v[3]);
    }
}

// The end of a CTA: the warps' tiles reduced in shared memory, then across the splits (atomic_out: once the flag
// says split 0's zeroes are visible).
template <int NB, int RowBlocks, bool AtomicOut, typename Out>
__device__ __forceinline__ void finish_gemv(const MmaGemvArgs& a, float* red, const float (&acc)[RowBlocks][NB][4],
                                            uint64_t* inbox_full, int warp, int lane, uint32_t ticket, uint32_t seen) {
    constexpr int kTile = RowBlocks * NB * 4 * 32;
    const int group = blockIdx.x, rb0 = group * RowBlocks, split = blockIdx.y;
    park_accumulators<RowBlocks, NB>(red, acc, warp, lane);
    if constexpr (AtomicOut) {
        if (threadIdx.x == 0) await_zeroed(a.sem, group, a.S, seen, flag_wanted(ticket, a.S));
        __syncthreads();
        add_tile<RowBlocks, NB>(a, red, rb0);
    } else {
        __syncthreads();
        finish_tile(a, red, red + (blockDim.x >> 5) * kTile, inbox_full, kTile, group, split,
                    [&](int idx, float v) { write_tile_element<NB, Out>(a, rb0, idx, v); });
    }
}

// The K loop of each style: acc += every trip of this warp's K blocks from `first`, `stride` apart; peek() once a
// trip (atomic_out's look at its flag).
template <int Unroll, int NB, int RowBlocks, MmaPipeline Pipeline, bool Dual, typename Peek>
__device__ __forceinline__ void k_loop_double(float (&acc)[RowBlocks][NB][4], const Frag* wp, const Frag* w2p,
                                              size_t row_frags, const Frag* const (&xp)[NB], const bool (&xvalid)[NB],
                                              int first, int stride, int kb_end, const Peek& peek) {
    Trip<Unroll, NB, RowBlocks, Dual> t0, t1;
    load_trip<Unroll, NB, RowBlocks, Pipeline, Dual>(t0, wp, w2p, row_frags, xp, xvalid, first, kb_end);
    for (int kb = first; kb < kb_end; kb += 2 * stride) {
        peek();
        load_trip<Unroll, NB, RowBlocks, Pipeline, Dual>(t1, wp, w2p, row_frags, xp, xvalid, kb + stride, kb_end);
        mma_trip<Unroll, NB, RowBlocks, Dual>(acc, t0);
        load_trip<Unroll, NB, RowBlocks, Pipeline, Dual>(t0, wp, w2p, row_frags, xp, xvalid, kb + 2 * stride, kb_end);
        mma_trip<Unroll, NB, RowBlocks, Dual>(acc, t1);
    }
}

// t0.x and t1.x are never live at once, so ptxas gives them one set of registers.
template <int Unroll, int NB, int RowBlocks, MmaPipeline Pipeline, bool Dual, typename Peek>
__device__ __forceinline__ void k_loop_double_w(float (&acc)[RowBlocks][NB][4], const Frag* wp, const Frag* w2p,
                                                size_t row_frags, const Frag* const (&xp)[NB], const bool (&xvalid)[NB],
                                                int first, int stride, int kb_end, const Peek& peek) {
    Trip<Unroll, NB, RowBlocks, Dual> t0, t1;
    load_trip<Unroll, NB, RowBlocks, Pipeline, Dual>(t0, wp, w2p, row_frags, xp, xvalid, first, kb_end);
    for (int kb = first; kb < kb_end; kb += 2 * stride) {
        peek();
        load_trip<Unroll, NB, RowBlocks, Pipeline, Dual, true, false>(t1, wp, w2p, row_frags, xp, xvalid, kb + stride,
                                                                      kb_end);
        mma_trip<Unroll, NB, RowBlocks, Dual>(acc, t0);
        load_trip<Unroll, NB, RowBlocks, Pipeline, Dual, false, true>(t1, wp, w2p, row_frags, xp, xvalid, kb + stride,
                                                                      kb_end);
        load_trip<Unroll, NB, RowBlocks, Pipeline, Dual, true, false>(t0, wp, w2p, row_frags, xp, xvalid,
                                                                      kb + 2 * stride, kb_end);
        mma_trip<Unroll, NB, RowBlocks, Dual>(acc, t1);
        load_trip<Unroll, NB, RowBlocks, Pipeline, Dual, false, true>(t0, wp, w2p, row_frags, xp, xvalid,
                                                                      kb + 2 * stride, kb_end);
    }
}

template <int Unroll, int NB, int RowBlocks, MmaPipeline Pipeline, bool Dual, typename Peek>
__device__ __forceinline__ void k_loop_batch(float (&acc)[RowBlocks][NB][4], const Frag* wp, const Frag* w2p,
                                             size_t row_frags, const Frag* const (&xp)[NB], const bool (&xvalid)[NB],
                                             int first, int stride, int kb_end, const Peek& peek) {
    for (int kb = first; kb < kb_end; kb += stride) {
        Trip<Unroll, NB, RowBlocks, Dual> tr;
        load_trip<Unroll, NB, RowBlocks, Pipeline, Dual>(tr, wp, w2p, row_frags, xp, xvalid, kb, kb_end);
        peek();
        mma_trip<Unroll, NB, RowBlocks, Dual>(acc, tr);
    }
}

// AtomicOut: its own instantiation, so that the other kernels carry none of its registers.
template <int Unroll, int NB, int RowBlocks, MmaPipeline Pipeline, bool Dual, bool AtomicOut, typename Out>
__global__ void __launch_bounds__(512, 1) mma_gemv_kernel(const MmaGemvArgs a) {
    static_assert(!AtomicOut || Dual, "the atomic reduction adds into an fp32 output: dual mode only");
    extern __shared__ float red[];  // [NW][kTile] warps' tiles, then a cluster's inbox [S - 1][kTile]
    __shared__ __align__(8) uint64_t inbox_full;
    constexpr int kTile = RowBlocks * NB * 4 * 32;
    const int nw = blockDim.x >> 5;
    if (a.cluster) open_inbox(&inbox_full, cluster_rank() == 0 ? (uint32_t)((a.S - 1) * kTile * sizeof(float)) : 0u);
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    const int group = blockIdx.x, rb0 = group * RowBlocks, split = blockIdx.y;
    const int kb_per_split = (a.K >> 5) / a.S;
    const int kb_begin = split * kb_per_split, kb_end = kb_begin + kb_per_split;

    const Frag* xp[NB];
    bool xvalid[NB];
    x_operand<NB>(a.x, a.M, a.K, lane, xp, xvalid);
    const size_t row_frags = (size_t)(a.K >> 5) * kFragsPerBlock;
    const size_t block0 = (size_t)rb0 * row_frags + lane;
    const Frag* wp = a.w + block0;
    const Frag* w2p = Dual ? a.w2 + block0 : nullptr;

    float acc[RowBlocks][NB][4];
    zero_accumulators<RowBlocks, NB>(acc);

    // atomic_out: split 0's last warp zeroes before any load of its own (after them: ~0.5 us), thread 0 takes a
    // ticket now and peeks at the flag once a trip.
    uint32_t ticket = 0, seen = 0;
    if constexpr (AtomicOut) {
        if (threadIdx.x == 0) ticket = take_ticket(a.sem, group, a.S);
        if (split == 0 && warp == nw - 1)
            zero_and_raise(a.sem, group, a.S, static_cast<float*>(a.out), a.M, a.N, rb0 * 16, RowBlocks * 16);
    }
    auto peek = [&]() {
        if (AtomicOut && threadIdx.x == 0) seen = peek_flag(a.sem, group, a.S);
    };

    // A trip covers NW * Unroll consecutive K blocks, Unroll a warp.

    const int stride = nw * Unroll;
    const int first = kb_begin + warp * Unroll;
    if constexpr (pipe_double(Pipeline))
        k_loop_double<Unroll, NB, RowBlocks, Pipeline, Dual>(acc, wp, w2p, row_frags, xp, xvalid, first, stride, kb_end,
                                                             peek);
    else if constexpr (pipe_double_w(Pipeline))
        k_loop_double_w<Unroll, NB, RowBlocks, Pipeline, Dual>(acc, wp, w2p, row_frags, xp, xvalid, first, stride,
                                                               kb_end, peek);
    else
        k_loop_batch<Unroll, NB, RowBlocks, Pipeline, Dual>(acc, wp, w2p, row_frags, xp, xvalid, first, stride, kb_end,
                                                            peek);

    finish_gemv<NB, RowBlocks, AtomicOut, Out>(a, red, acc, &inbox_full, warp, lane, ticket, seen);
}

// Whether case L's layout fits the shared memory its engine's rule gives it: the warps' partial tiles, then for a
// cluster rank 0's inbox of S - 1 more (finish_tile).
template <typename L>
constexpr bool mma_gemv_layout_fits() {
    const int tiles = L::warps + (L::reduce == Reduce::kCluster ? L::splits - 1 : 0);
    return tiles * L::row_blocks * L::NB * 4 * 32 * (int)sizeof(float) <= L::smem_bytes &&
           L::smem_bytes <= (int)kSmemOptInLimit;
}

// Launch-table case L (generator/launch_table.py: the engine's variant(), by name). call.operand[0] = packed weights
// (dual: hi), [1] = packed lo weights (dual) or the weights again.
template <typename L>
const char* launch_mma_gemv(const Call& c) {
    constexpr bool cluster = L::reduce == Reduce::kCluster;
    static_assert(mma_gemv_layout_fits<L>(), "the warps' tiles and the cluster inbox fit the engine's shared memory");
    if (c.M < 1 || c.M > 8 * L::NB) return "mma_gemv: M does not fit this kernel's column blocks";
    const MmaGemvArgs a{static_cast<const Frag*>(c.x),
                        static_cast<const Frag*>(c.operand[0]),
                        static_cast<const Frag*>(c.operand[1]),
                        c.out,
                        c.ws,
                        c.sem,
                        c.M,
                        c.N,
                        c.K,
                        L::splits,
                        cluster};
    auto kernel =
        mma_gemv_kernel<L::unroll, L::NB, L::row_blocks, L::pipeline, L::dual, L::atomic_out, typename L::out>;
    return launch_splits(kernel, dim3(c.N / (16 * L::row_blocks), L::splits), dim3(L::warps * 32),
                         (size_t)L::smem_bytes, static_cast<cudaStream_t>(c.stream), cluster, a);
}

}  // namespace okc
#line 1 "kernels_src/hopper_ptx.cuh"
// Hopper-only PTX (sm_90a) of the ring kernels, one instruction (or descriptor formula) a wrapper: bulk and tensor
// copies counted on an mbarrier, wgmma's shared-memory descriptors, wgmma with its fence / commit / wait.
#pragma once
// #include "common.cuh"  (inlined above)

#include <cuda.h>

namespace okc {

// One box of a 2-D tensor map (c0: the inner coordinate, K; c1: rows) into shared memory, counted on `bar`.
__device__ __forceinline__ void tma_load_2d(void* dst, const CUtensorMap* map, int c0, int c1, uint64_t* bar) {
    asm volatile(
        "cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3}], [%4];" ::"r"(
            smem_addr(dst)),
        "l"(reinterpret_cast<uint64_t>(map)), "r"(c0), "r"(c1), "r"(smem_addr(bar))
        : "memory");
}

// One box of a 3-D tensor map (c0 innermost) into shared memory, counted on `bar`.
__device__ __forceinline__ void tma_load_3d(void* dst, const CUtensorMap* map, int c0, int c1, int c2, uint64_t* bar) {
    asm volatile(
        "cp.async.bulk.tensor.3d.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3, %4}], "
        "[%5];" ::"r"(smem_addr(dst)),
        "l"(reinterpret_cast<uint64_t>(map)), "r"(c0), "r"(c1), "r"(c2), "r"(smem_addr(bar))
        : "memory");
}

// `bytes` contiguous bytes (a multiple of 16) into shared memory by the bulk copy engine, counted on `bar`.
__device__ __forceinline__ void bulk_load_1d(void* dst, const void* src, uint32_t bytes, uint64_t* bar) {
    asm volatile(
        "cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];" ::"r"(smem_addr(dst)),
        "l"(src), "r"(bytes), "r"(smem_addr(bar))
        : "memory");
}

#line 46 "kernels_src/hopper_ptx.cuh"
__device__ __forceinline__ void prefetch_tensor_map(const CUtensorMap* map) {
    asm volatile("prefetch.tensormap [%0];" ::"l"(reinterpret_cast<uint64_t>(map)) : "memory");
}

// Make mbarrier initialisations visible to the async proxy (the copy engine) and the cluster.
__device__ __forceinline__ void fence_mbarrier_init() {
    asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
}

// wgmma shared-memory descriptor of a K-major operand in the 128-byte swizzle: rows 128 bytes apart, groups
// of 8 rows 1024 bytes apart (SBO); the leading offset is unused in this mode (1 by convention).
__device__ __forceinline__ uint64_t sw128_desc(uint32_t addr) {
    return (uint64_t)((addr & 0x3FFFF) >> 4) | ((uint64_t)1 << 16) | ((uint64_t)(1024 >> 4) << 32) |
           ((uint64_t)1 << 62);
}

// The descriptor `units` x 16 bytes further on, by a 32-bit add (the address field never carries): a 64-bit add
// made ptxas serialise the wgmmas (C7514).
__device__ __forceinline__ uint64_t desc_plus(uint64_t desc, uint32_t units) {
    uint64_t out;
    asm("{\n.reg .b32 lo, hi;\nmov.b64 {lo, hi}, %1;\nadd.u32 lo, lo, %2;\nmov.b64 %0, {lo, hi};\n}"
        : "=l"(out)
        : "l"(desc), "r"(units));
    return out;
}

__device__ __forceinline__ void wgmma_fence() { asm volatile("wgmma.fence.sync.aligned;" ::: "memory"); }
__device__ __forceinline__ void wgmma_commit() { asm volatile("wgmma.commit_group.sync.aligned;" ::: "memory"); }
template <int N>
__device__ __forceinline__ void wgmma_wait() {
    asm volatile("wgmma.wait_group.sync.aligned %0;" ::"n"(N) : "memory");
}

// Keep the compiler from moving accumulator reads or writes across the asynchronous wgmma boundaries.
template <int R>
__device__ __forceinline__ void fence_regs(float (&d)[R]) {
#pragma unroll
    for (int i = 0; i < R; ++i) asm volatile("" : "+f"(d[i])::"memory");
}

// D[64 x 8NB] += A[64 x 16] . B[16 x 8NB], bf16 in, fp32 accumulate, both operands from shared memory.
template <int NB>
__device__ __forceinline__ void wgmma_bf16(float (&d)[4 * NB], uint64_t a, uint64_t b);

template <>
__device__ __forceinline__ void wgmma_bf16<1>(float (&d)[4], uint64_t a, uint64_t b) {
    asm volatile(
        "{\n.reg .pred p;\nsetp.ne.b32 p, 1, 0;\n"
        "wgmma.mma_async.sync.aligned.m64n8k16.f32.bf16.bf16 {%0, %1, %2, %3}, %4, %5, p, 1, 1, 0, 0;\n}\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "l"(a), "l"(b));
}

template <>
__device__ __forceinline__ void wgmma_bf16<2>(float (&d)[8], uint64_t a, uint64_t b) {
    asm volatile(
        "{\n.reg .pred p;\nsetp.ne.b32 p, 1, 0;\n"
        "wgmma.mma_async.sync.aligned.m64n16k16.f32.bf16.bf16 {%0, %1, %2, %3, %4, %5, %6, %7}, %8, %9, p, 1, 1, "
        "0, 0;\n}\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7])
        : "l"(a), "l"(b));
}

template <>
__device__ __forceinline__ void wgmma_bf16<4>(float (&d)[16], uint64_t a, uint64_t b) {
    asm volatile(
        "{\n.reg .pred p;\nsetp.ne.b32 p, 1, 0;\n"
        "wgmma.mma_async.sync.aligned.m64n32k16.f32.bf16.bf16 {%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, "
        "%12, %13, %14, %15}, %16, %17, p, 1, 1, 0, 0;\n}\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]),
          "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15])
        : "l"(a), "l"(b));
}

template <>
__device__ __forceinline__ void wgmma_bf16<8>(float (&d)[32], uint64_t a, uint64_t b) {
    asm volatile(
        "{\n.reg .pred p;\nsetp.ne.b32 p, 1, 0;\n"
        "wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16 {%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, "
        "%12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31}, %32, "
        "%33, p, 1, 1, 0, 0;\n}\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]),
          "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]),
          "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]),
          "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31])
        : "l"(a), "l"(b));
}

template <>
__device__ __forceinline__ void wgmma_bf16<16>(float (&d)[64], uint64_t a, uint64_t b) {
    asm volatile(
        "{\n.reg .pred p;\nsetp.ne.b32 p, 1, 0;\n"
        "wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16 {"
        "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, "
        "%22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, "
        "%42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, "
        "%62, %63"
        "}, %64, %65, p, 1, 1, 0, 0;\n}\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]),
          "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]),
          "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]),
          "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]), "+f"(d[32]),
          "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]), "+f"(d[40]),
          "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]), "+f"(d[48]),
          "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]), "+f"(d[56]),
          "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63])
        : "l"(a), "l"(b));
}

template <>
__device__ __forceinline__ void wgmma_bf16<32>(float (&d)[128], uint64_t a, uint64_t b) {
    asm volatile(
        "{\n.reg .pred p;\nsetp.ne.b32 p, 1, 0;\n"
        "wgmma.mma_async.sync.aligned.m64n256k16.f32.bf16.bf16 {"
        "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, "
        "%22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, "
        "%42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, "
        "%62, %63, %64, %65, %66, %67, %68, %69, %70, %71, %72, %73, %74, %75, %76, %77, %78, %79, %80, %81, "
        "%82, %83, %84, %85, %86, %87, %88, %89, %90, %91, %92, %93, %94, %95, %96, %97, %98, %99, %100, "
        "%101, %102, %103, %104, %105, %106, %107, %108, %109, %110, %111, %112, %113, %114, %115, %116, "
        "%117, %118, %119, %120, %121, %122, %123, %124, %125, %126, %127"
        "}, %128, %129, p, 1, 1, 0, 0;\n}\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]),
          "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]),
          "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]),
          "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]), "+f"(d[32]),
          "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]), "+f"(d[40]),
          "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]), "+f"(d[48]),
          "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]), "+f"(d[56]),
          "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63]), "+f"(d[64]),
          "+f"(d[65]), "+f"(d[66]), "+f"(d[67]), "+f"(d[68]), "+f"(d[69]), "+f"(d[70]), "+f"(d[71]), "+f"(d[72]),
          "+f"(d[73]), "+f"(d[74]), "+f"(d[75]), "+f"(d[76]), "+f"(d[77]), "+f"(d[78]), "+f"(d[79]), "+f"(d[80]),
          "+f"(d[81]), "+f"(d[82]), "+f"(d[83]), "+f"(d[84]), "+f"(d[85]), "+f"(d[86]), "+f"(d[87]), "+f"(d[88]),
          "+f"(d[89]), "+f"(d[90]), "+f"(d[91]), "+f"(d[92]), "+f"(d[93]), "+f"(d[94]), "+f"(d[95]), "+f"(d[96]),
          "+f"(d[97]), "+f"(d[98]), "+f"(d[99]), "+f"(d[100]), "+f"(d[101]), "+f"(d[102]), "+f"(d[103]), "+f"(d[104]),
          "+f"(d[105]), "+f"(d[106]), "+f"(d[107]), "+f"(d[108]), "+f"(d[109]), "+f"(d[110]), "+f"(d[111]),
          "+f"(d[112]), "+f"(d[113]), "+f"(d[114]), "+f"(d[115]), "+f"(d[116]), "+f"(d[117]), "+f"(d[118]),
          "+f"(d[119]), "+f"(d[120]), "+f"(d[121]), "+f"(d[122]), "+f"(d[123]), "+f"(d[124]), "+f"(d[125]),
          "+f"(d[126]), "+f"(d[127])
        : "l"(a), "l"(b));
}

// The same with A from registers (warp w: rows 16w..16w+15 in mma.sync's A layout), read asynchronously: they must
// not change until the wgmma's group has been waited for.
template <int NB>
__device__ __forceinline__ void wgmma_bf16_rs(float (&d)[4 * NB], const uint32_t (&a)[4], uint64_t b);

template <>
__device__ __forceinline__ void wgmma_bf16_rs<1>(float (&d)[4], const uint32_t (&a)[4], uint64_t b) {
    asm volatile(
        "{\n.reg .pred p;\nsetp.ne.b32 p, 1, 0;\n"
        "wgmma.mma_async.sync.aligned.m64n8k16.f32.bf16.bf16 {%0, %1, %2, %3}, {%4, %5, %6, %7}, %8, p, 1, 1, 0;\n}\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(b));
}

template <>
__device__ __forceinline__ void wgmma_bf16_rs<2>(float (&d)[8], const uint32_t (&a)[4], uint64_t b) {
    asm volatile(
        "{\n.reg .pred p;\nsetp.ne.b32 p, 1, 0;\n"
        "wgmma.mma_async.sync.aligned.m64n16k16.f32.bf16.bf16 {%0, %1, %2, %3, %4, %5, %6, %7}, "
        "{%8, %9, %10, %11}, %12, p, 1, 1, 0;\n}\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(b));
}

template <>
__device__ __forceinline__ void wgmma_bf16_rs<4>(float (&d)[16], const uint32_t (&a)[4], uint64_t b) {
    asm volatile(
        "{\n.reg .pred p;\nsetp.ne.b32 p, 1, 0;\n"
        "wgmma.mma_async.sync.aligned.m64n32k16.f32.bf16.bf16 {%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, "
        "%12, %13, %14, %15}, {%16, %17, %18, %19}, %20, p, 1, 1, 0;\n}\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]),
          "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(b));
}

#line 261 "kernels_src/hopper_ptx.cuh"
}  // namespace okc
#line 1 "kernels_src/ring.cuh"
// The shared-memory ring every TMA kernel streams through: STAGES slots, each with a `full` mbarrier (the
// producer's expect_tx arrival plus the copy engine's bytes) and an `empty` one (one arrival per consumer party).
// Round r of a slot waits on parity r & 1; a fresh barrier counts as having completed parity 1, so the producer's
// first round passes without waiting. Design: docs/persistent-gemm.md ("The ring").
#pragma once
// #include "hopper_ptx.cuh"  (inlined above)

namespace okc {

// Named barrier ids (0 is __syncthreads), immediates: with the id in a register ptxas reserves all 16.
enum NamedBarrier : int {
    kWarpgroupBarrier = 1,  // + g: consumer warpgroup g alone (g < 4)
    kFoldBarrier = 5,       // compressed_ring's consumer warpgroups, around their fold
    kStagedBarrier = 6,     // compressed_ring's stager warp and warpgroup 0
#line 16 "kernels_src/ring.cuh"
};

template <int ID, int THREADS>
__device__ __forceinline__ void named_barrier_sync() {
    asm volatile("bar.sync %0, %1;" ::"n"(ID), "n"(THREADS) : "memory");
}

template <int ID, int THREADS>
__device__ __forceinline__ void named_barrier_arrive() {
    asm volatile("bar.arrive %0, %1;" ::"n"(ID), "n"(THREADS) : "memory");
}

#line 39 "kernels_src/ring.cuh"
template <int STAGES>
struct RingBarriers {
    uint64_t full[STAGES];
    uint64_t empty[STAGES];

#line 49 "kernels_src/ring.cuh"
    // init in two halves, for a producer whose first round (arm) leaves between them, before the CTA barrier.
    __device__ __forceinline__ void init_full() {
        for (int s = 0; s < STAGES; ++s) mbar_init(&full[s], 1);
        fence_mbarrier_init();
    }
    __device__ __forceinline__ void init_empty(uint32_t consumer_arrivals) {
        for (int s = 0; s < STAGES; ++s) mbar_init(&empty[s], consumer_arrivals);
        fence_mbarrier_init();
    }
    // Producer, a slot's first round: announce `bytes` to land on it.
    __device__ __forceinline__ uint64_t* arm(int slot, uint32_t bytes) {
        mbar_arrive_expect_tx(&full[slot], bytes);
        return &full[slot];
    }
    // Producer: wait until the slot's previous round has been handed back (wait_free); acquire also announces
    // `bytes` to land on it (the one producer arrival).
    __device__ __forceinline__ void wait_free(int slot, uint32_t phase) { mbar_wait(&empty[slot], phase ^ 1); }
    __device__ __forceinline__ uint64_t* acquire(int slot, uint32_t phase, uint32_t bytes) {
        wait_free(slot, phase);
        return arm(slot, bytes);
    }
    // Consumer: wait until the slot's bytes have landed; then, once done reading it, hand it back.
    __device__ __forceinline__ void wait_full(int slot, uint32_t phase) { mbar_wait(&full[slot], phase); }
    __device__ __forceinline__ void release(int slot) { mbar_arrive(&empty[slot]); }
};

}  // namespace okc
#line 1 "kernels_src/tma_gemv.cuh"
// The bulk-copy + wgmma kernel of engines tma_gemv (m <= 32, one consumer warpgroup) and tma_gemm (m <= 256, 1-4
// warpgroups): out[m, N] = x[m, K] . W[N, K]^T on Hopper. A CTA streams its 64-row weight tile(s) (pre-swizzled
// 8 KB blocks, plain bulk copies) and x's boxes (tensor map, rows past m zero-filled) through a shared-memory ring
// (ring.cuh) that its warpgroups read with wgmma; splits > 1 meet by semaphore, cluster (gather or scatter) or L2
// atomics; half tiles take 32 rows and the whole K. Phases: TmaStream::start, produce / consume, then finish_half
// or finish_full. Design and figures: docs/tma-gemv.md, docs/tma-gemm.md.
#pragma once
// #include "ring.cuh"  (inlined above)
// #include "generated/constants.h"  (inlined above)

#include <cudaTypedefs.h>

namespace okc {

// kTmaTileRows, kTmaTileK, kTmaConsumers, kTmaProducer (tma_gemv.py), the Reduce codes (engine.py): the prelude.
constexpr int kTmaHalfRows = 32;                          // half tiles: weight rows per CTA (and 128 of K per slot)
constexpr int kTmaWBytes = kTmaTileRows * kTmaTileK * 2;  // 8 KB of weights per slot (per matrix)
// The consumer warpgroups, then the producer warp.
__host__ __device__ constexpr int tma_threads(int wg) { return kTmaConsumers * wg + kTmaProducer; }

__host__ __device__ constexpr int tma_x_bytes(int nb) { return nb * 8 * kTmaTileK * 2; }
// cluster_scatter: rank r owns consumer threads [tma_owned_from(r, S), tma_owned_from(r + 1, S)); tma_owner(t, S)
// is the rank that owns thread t.
__host__ __device__ constexpr int tma_owned_from(int rank, int s) { return rank * kTmaConsumers / s; }
__host__ __device__ constexpr int tma_owner(int t, int s) { return ((t + 1) * s - 1) / kTmaConsumers; }

struct TmaArgs {
    const uint8_t* w;   // packing.pack_tma_bulk's [N/64][K/64] 8 KB blocks (half tiles: pack_tma_half_bulk's)
    const uint8_t* w2;  // the router's lo half (dual), else w again
    void* out;          // [M, N]: bf16, or fp32 in dual mode
    float* ws;          // split-K partials: [N/64][S][64 * 8 NB]
    float* acc;         // reduce = atomic: a zeroed fp32 accumulator, [N/64][64 * 8 NB]; left zeroed
    int* sem;           // arrival counter per 64-row tile; 0 between launches
    int M, N, K, S;
    Reduce reduce;  // S > 1: how the splits meet
};

// Consumer warpgroup g's own named barrier, by a switch: immediate ids (ring.cuh, NamedBarrier).
__device__ __forceinline__ void consumers_sync(int g = 0) {
    switch (g) {
        case 0: named_barrier_sync<kWarpgroupBarrier, kTmaConsumers>(); break;
        case 1: named_barrier_sync<kWarpgroupBarrier + 1, kTmaConsumers>(); break;
        case 2: named_barrier_sync<kWarpgroupBarrier + 2, kTmaConsumers>(); break;
        default: named_barrier_sync<kWarpgroupBarrier + 3, kTmaConsumers>(); break;
    }
}

// Accumulator element e of consumer thread t (wgmma's D layout): its row of the tile plus row0, and its token.
__device__ __forceinline__ void tma_element(int t, int e, int row0, int& row, int& token) {
    const int warp = t >> 5, lane = t & 31;
    row = row0 + warp * 16 + (lane >> 2) + ((e & 2) ? 8 : 0);
    token = (e >> 2) * 8 + (lane & 3) * 2 + (e & 1);
}

// Element e of thread t -> out[token, row0 + row] of an [M, N] output, for tokens < M.
template <typename Out>
__device__ __forceinline__ void store_element(Out* out, int M, int N, int row0, int t, int e, float v) {
    int row, token;
    tma_element(t, e, row0, row, token);
    if (token < M) store_out(out + (size_t)token * N + row, v);
}
template <typename Out>
__device__ __forceinline__ void tma_write(const TmaArgs& a, int row0, int t, int e, float v) {
    store_element(static_cast<Out*>(a.out), a.M, a.N, row0, t, e, v);
}

// epilogue = staged: the tile token-major through the idle ring, out in whole 128-byte token rows (tma_write's
// 2-byte stores took a CTA 3.6 us at m = 128: docs/tma-gemm.md).
constexpr int kStagedPitch = kTmaTileRows + 8;  // bf16 a staged token row: 144 bytes, 16-byte aligned, banks spread
template <int NB>
__device__ __forceinline__ void write_staged(const TmaArgs& a, uint8_t* ring, const float (&acc)[4 * NB], int row0,
                                             int t) {
    __nv_bfloat16* tile = reinterpret_cast<__nv_bfloat16*>(ring);  // [8 NB tokens][kStagedPitch]
#pragma unroll
    for (int e = 0; e < 4 * NB; ++e) {
        int row, token;
        tma_element(t, e, 0, row, token);
        tile[token * kStagedPitch + row] = __float2bfloat16_rn(acc[e]);
    }
    consumers_sync();
    __nv_bfloat16* out = static_cast<__nv_bfloat16*>(a.out);
    for (int c = t; c < 8 * NB * 8; c += kTmaConsumers) {  // 8 pieces of 16 bytes a token row of 64
        const int token = c >> 3, part = c & 7;
        if (token < a.M)
            *reinterpret_cast<uint4*>(out + (size_t)token * a.N + row0 + part * 8) =
                *reinterpret_cast<const uint4*>(tile + token * kStagedPitch + part * 8);
    }
}

// One CTA's stream through the ring: its slots, and the K tiles it streams. Warpgroup g reads weight block g of a
// slot (the 64-row tile Warpgroups x tile + g) and the slot's x.
template <int NB, int Stages, bool Dual, bool Half, int Warpgroups = 1>
struct TmaStream {
    static_assert(Warpgroups == 1 || !Half, "half tiles run one warpgroup");
    static_assert(NB <= 4 || NB == 8 || NB == 16 || NB == 32, "wgmma's N = 8 NB: 8 .. 32, 64, 128 or 256");
    static constexpr int kAcc = 4 * NB;                        // fp32 accumulators per consumer thread (per set)
    static constexpr int kWSet = kTmaWBytes * (Dual ? 2 : 1);  // one warpgroup's weight bytes in a slot
    static constexpr int kXOffset = kWSet * Warpgroups;        // x's box (two for half tiles) after the weights
    static constexpr int kStage = kXOffset + tma_x_bytes(NB) * (Half ? 2 : 1);  // bytes TMA lands in a slot
    static constexpr int kSlotK = kTmaTileK * (Half ? 2 : 1);                   // K one slot covers
    // wgmma groups left open before a slot goes back: half tiles carry twice the MMAs a slot (1-3 within 1 %).
    static constexpr int kInFlight = Half ? (Stages > 3 ? 3 : Stages - 1) : 1;

    uint8_t* slots;
    RingBarriers<Stages>& bars;
    const CUtensorMap* x_map;
    const TmaArgs& a;
    int tile, kt0, n_k;

    // Slot i's copies into ring slot s, counted on `full`; x rows past M count too (as zeros).
    __device__ __forceinline__ void issue(int i, int s, uint64_t* full) const {
        uint8_t* slot = slots + s * kStage;
        const int k_tiles = a.K / kSlotK;
        const int k0 = (kt0 + i) * kSlotK;
#pragma unroll
        for (int g = 0; g < Warpgroups; ++g) {  // packed: one 8 KB block per 64-row tile and K tile
            const size_t block = (size_t)((tile * Warpgroups + g) * k_tiles + kt0 + i) * kTmaWBytes;
            bulk_load_1d(slot + g * kWSet, a.w + block, kTmaWBytes, full);
            if constexpr (Dual) bulk_load_1d(slot + g * kWSet + kTmaWBytes, a.w2 + block, kTmaWBytes, full);
        }
        if constexpr (Half)  // both 64-wide K chunks of the slot in one copy (see tma_load_3d)
            tma_load_3d(slot + kXOffset, x_map, 0, 0, k0 / kTmaTileK, full);
        else
            tma_load_2d(slot + kXOffset, x_map, k0, 0, full);
    }

    // The producer's lane, before the CTA barrier: the first round leaves before it (1.4-2.0 % off o m = 16 / 32).
    __device__ __forceinline__ void start() const {
        prefetch_tensor_map(x_map);
        bars.init_full();
        for (int s = 0; s < Stages && s < n_k; ++s) issue(s, s, bars.arm(s, kStage));
        bars.init_empty(4 * Warpgroups);  // one arrival per consumer warp
    }

    // The producer's lane: the other rounds, slots unrolled (a test per slot cost the half tiles 1.5 us).
    __device__ __forceinline__ void produce() const {
        for (int round = 1; round * Stages < n_k; ++round) {
#pragma unroll
            for (int s = 0; s < Stages; ++s) {
                const int i = round * Stages + s;
                if (i >= n_k) break;
                issue(i, s, bars.acquire(s, round & 1, kStage));
            }
        }
    }

    // Warpgroup Warpgroup's wgmmas into acc, a round at a time, slots unrolled: every descriptor is slot 0's plus a
    // constant (~32 instructions a slot, from ~106); a template warpgroup keeps them uniform (a run-time one: 604
    // against 447 a round). Half tiles: acc[kAcc, 2 kAcc) meets x's second box.
    template <int Warpgroup = 0>
    __device__ __forceinline__ void consume(float (&acc)[(Half ? 2 : 1) * kAcc], int lane) const {
        const uint64_t w_desc0 = sw128_desc(smem_addr(slots) + Warpgroup * kWSet);
        const uint64_t x_desc0 = sw128_desc(smem_addr(slots) + kXOffset);
        uint32_t phase = 0;
        for (int round = 0; round * Stages < n_k; ++round, phase ^= 1) {
#pragma unroll
            for (int s = 0; s < Stages; ++s) {
                const int i = round * Stages + s;
                if (i >= n_k) break;
                bars.wait_full(s, phase);
                fence_regs(acc);
                wgmma_fence();
#pragma unroll
                for (int kk = 0; kk < kTmaTileK / 16; ++kk) {  // 16 k: 32 bytes of the 128-byte swizzled row
                    const uint32_t at = (s * kStage + kk * 32) / 16;
                    const uint64_t b = desc_plus(x_desc0, at);
                    if constexpr (Half) {  // both boxes as one B (0.7-2.4 % faster than a wgmma each)
                        wgmma_bf16<2 * NB>(acc, desc_plus(w_desc0, at), b);
                    } else {
                        wgmma_bf16<NB>(acc, desc_plus(w_desc0, at), b);
                        if constexpr (Dual) wgmma_bf16<NB>(acc, desc_plus(w_desc0, at + kTmaWBytes / 16), b);
                    }
                }
                wgmma_commit();
                fence_regs(acc);
                wgmma_wait<kInFlight>();  // slot i - kInFlight is read: back to the producer
                fence_regs(acc);
                if (i >= kInFlight && lane == 0) bars.release((s + Stages - kInFlight) % Stages);
            }
        }
        wgmma_wait<0>();
        fence_regs(acc);
    }
};

// consume<g> for a run-time g, uniform across each warp.
template <int Warpgroup, int Warpgroups, typename Stream, typename Acc>
__device__ __forceinline__ void consume_as(const Stream& stream, Acc& acc, int lane, int g) {
    if constexpr (Warpgroup + 1 >= Warpgroups) {
        stream.template consume<Warpgroup>(acc, lane);
    } else if (g == Warpgroup) {
        stream.template consume<Warpgroup>(acc, lane);
    } else {
        consume_as<Warpgroup + 1, Warpgroups>(stream, acc, lane, g);
    }
}

// Half tiles: row r of the 32 is box 1's result of warp r / 16 plus box 2's of warp 2 + r / 16; warps 2-3 hand
// theirs over through the idle ring.
template <int kAcc, typename Out>
__device__ __forceinline__ void finish_half(const TmaArgs& a, uint8_t* ring, const float (&acc)[2 * kAcc], int tile,
                                            int t, int warp) {
    float* fold = reinterpret_cast<float*>(ring);
    if (warp >= 2) {
#pragma unroll
        for (int e = 0; e < kAcc; ++e) fold[e * 64 + (t - 64)] = acc[kAcc + e];
    }
    consumers_sync();
    if (warp < 2) {
#pragma unroll
        for (int e = 0; e < kAcc; ++e) tma_write<Out>(a, tile * kTmaHalfRows, t, e, acc[e] + fold[e * 64 + t]);
    }
}

// A cluster split: thread t's accumulators meet on rank 0 (gather) or tma_owner(t) (scatter); the others push.
template <int kAcc, typename Out>
__device__ __forceinline__ void finish_cluster(const TmaArgs& a, float* inbox, uint64_t* inbox_full,
                                               const float (&acc)[kAcc], int tile, int t) {
    inbox_ready();
    const int rank = (int)cluster_rank();  // split `rank`: the cluster spans grid.y
    const bool scattered = a.reduce == Reduce::kClusterScatter;
    const int owner = scattered ? tma_owner(t, a.S) : 0;
    const int from = scattered ? tma_owned_from(owner, a.S) : 0;
    const int owned = scattered ? tma_owned_from(owner + 1, a.S) - from : kTmaConsumers;
    if (owner != rank) {  // the owner's inbox slots skip the owner
        const int slot = rank < owner ? rank : rank - 1;
        float* dst = inbox + ((size_t)slot * owned + (t - from)) * kAcc;  // thread-major: 16-byte pushes
#pragma unroll
        for (int e = 0; e < kAcc; e += 4)
            push_to_rank(owner, dst + e, inbox_full, acc[e], acc[e + 1], acc[e + 2], acc[e + 3]);
        return;
    }
    mbar_wait_cluster(inbox_full, 0);
    float sum[kAcc];
#pragma unroll
    for (int e = 0; e < kAcc; ++e) sum[e] = 0.f;
    for (int r = 0; r < a.S; ++r) {  // rank order: deterministic
        if (r == rank) {
#pragma unroll
            for (int e = 0; e < kAcc; ++e) sum[e] += acc[e];
            continue;
        }
        const int slot = r < rank ? r : r - 1;
        const float4* part = reinterpret_cast<const float4*>(inbox + ((size_t)slot * owned + (t - from)) * kAcc);
#pragma unroll
        for (int e = 0; e < kAcc; e += 4) {
            const float4 v = part[e / 4];
            sum[e] += v.x, sum[e + 1] += v.y, sum[e + 2] += v.z, sum[e + 3] += v.w;
        }
    }
#pragma unroll
    for (int e = 0; e < kAcc; ++e) tma_write<Out>(a, tile * kTmaTileRows, t, e, sum[e]);
}

// After a split's partial is published: true in the CTA that arrives last, once it has acquired the others'.
__device__ __forceinline__ bool arrived_last(const TmaArgs& a, int* is_last, int tile, int t, int g) {
    __threadfence();  // the partial is visible device-wide before this CTA counts itself in
    consumers_sync(g);
    if (t == 0) *is_last = atomicAdd(a.sem + tile, 1) == a.S - 1;
    consumers_sync(g);
    if (!*is_last) return false;
    __threadfence();  // acquire: the other CTAs' partials
    return true;
}

// The semaphore split: every CTA stores its partial; the last sums all S in split order and resets the counter.
template <int kAcc, typename Out>
__device__ __forceinline__ void finish_semaphore(const TmaArgs& a, const float (&acc)[kAcc], int* is_last, int tile,
                                                 int split, int t, int g = 0) {
    constexpr int kTile = kAcc * kTmaConsumers;  // floats in one partial tile, thread-major
    float* mine = a.ws + ((size_t)tile * a.S + split) * kTile;
#pragma unroll
    for (int e = 0; e < kAcc; ++e) __stcg(mine + e * kTmaConsumers + t, acc[e]);
    if (!arrived_last(a, is_last, tile, t, g)) return;
    const float* parts = a.ws + (size_t)tile * a.S * kTile + t;
    // A chunk of partials loaded before any is added (one L2 round trip each), kE accumulators at a time: 96 registers.
    constexpr int kE = kAcc > 32 ? 32 : kAcc;
    constexpr int kChunk = 64 / kE;
#pragma unroll
    for (int e0 = 0; e0 < kAcc; e0 += kE) {
        float sum[kE];
#pragma unroll
        for (int e = 0; e < kE; ++e) sum[e] = 0.f;
        int s = 0;
        for (; s + kChunk <= a.S; s += kChunk) {
            float v[kChunk][kE];
#pragma unroll
            for (int c = 0; c < kChunk; ++c)
#pragma unroll
                for (int e = 0; e < kE; ++e)
                    v[c][e] = __ldcg(parts + (size_t)(s + c) * kTile + (e0 + e) * kTmaConsumers);
#pragma unroll
            for (int c = 0; c < kChunk; ++c)
#pragma unroll
                for (int e = 0; e < kE; ++e) sum[e] += v[c][e];
        }
        for (; s < a.S; ++s)
#pragma unroll
            for (int e = 0; e < kE; ++e) sum[e] += __ldcg(parts + (size_t)s * kTile + (e0 + e) * kTmaConsumers);
#pragma unroll
        for (int e = 0; e < kE; ++e) tma_write<Out>(a, tile * kTmaTileRows, t, e0 + e, sum[e]);
    }
    if (t == 0) a.sem[tile] = 0;  // every CTA has arrived: ready for the next launch
}

// The atomic split: every CTA adds its partial into the zeroed accumulator (red.add.v4: f32 atomics flush outputs
// under 2^-126 to 0); the last writes the sum, zeroes it and resets the counter. Blocks past M stay zero.
template <int kAcc, typename Out>
__device__ __forceinline__ void finish_atomic(const TmaArgs& a, const float (&acc)[kAcc], int* is_last, int tile, int t,
                                              int g) {
    float4* mine = reinterpret_cast<float4*>(a.acc) + (size_t)tile * (kAcc / 4) * kTmaConsumers + t;
#pragma unroll
    for (int q = 0; q < kAcc / 4; ++q)
        if (8 * q < a.M)
            red_add_v4(reinterpret_cast<float*>(mine + q * kTmaConsumers), acc[4 * q], acc[4 * q + 1], acc[4 * q + 2],
                       acc[4 * q + 3]);
    if (!arrived_last(a, is_last, tile, t, g)) return;
    constexpr int kQ = kAcc / 4 > 8 ? 8 : kAcc / 4;  // float4s loaded before any is written: 32 registers
#pragma unroll
    for (int q0 = 0; q0 < kAcc / 4; q0 += kQ) {
        if (8 * q0 >= a.M) break;
        float4 v[kQ];
#pragma unroll
        for (int q = 0; q < kQ; ++q) v[q] = __ldcg(mine + (q0 + q) * kTmaConsumers);
#pragma unroll
        for (int q = 0; q < kQ; ++q) {
            __stcg(mine + (q0 + q) * kTmaConsumers, make_float4(0.f, 0.f, 0.f, 0.f));
            const int e = 4 * (q0 + q);
            tma_write<Out>(a, tile * kTmaTileRows, t, e, v[q].x);
            tma_write<Out>(a, tile * kTmaTileRows, t, e + 1, v[q].y);
            tma_write<Out>(a, tile * kTmaTileRows, t, e + 2, v[q].z);
            tma_write<Out>(a, tile * kTmaTileRows, t, e + 3, v[q].w);
        }
    }
    if (t == 0) a.sem[tile] = 0;  // every CTA has arrived: ready for the next launch
}

// A full tile's end (warpgroup g's 64-row tile tile64): the plain write, or the split's reduction.
template <int NB, int Warpgroups, typename Out, bool Staged, int kAcc>
__device__ __forceinline__ void finish_full(const TmaArgs& a, uint8_t* slots, float* inbox, uint64_t* inbox_full,
                                            int* is_last, const float (&acc)[kAcc], int tile, int tile64, int split,
                                            int t, int g, bool cluster) {
    if (a.S == 1) {
        if constexpr (Staged) {
            write_staged<NB>(a, slots, acc, tile64 * kTmaTileRows, t);
        } else {
#pragma unroll
            for (int e = 0; e < kAcc; ++e) tma_write<Out>(a, tile64 * kTmaTileRows, t, e, acc[e]);
        }
    } else if (a.reduce == Reduce::kAtomic) {
        finish_atomic<kAcc, Out>(a, acc, &is_last[g], tile64, t, g);
    } else if (cluster) {
        if constexpr (Warpgroups == 1 && NB <= 4)
            finish_cluster<kAcc, Out>(a, inbox, inbox_full, acc, tile, t);
        else
            __trap();  // the launcher asserts the clusters are the GEMV's
    } else {
        finish_semaphore<kAcc, Out>(a, acc, &is_last[g], tile64, split, t, g);
    }
}

// At kernel start, a cluster split: this rank's inbox, for S - 1 partials of the threads it owns.
template <int kAcc>
__device__ __forceinline__ void open_tma_inbox(const TmaArgs& a, uint64_t* inbox_full) {
    const int rank = (int)cluster_rank();
    const int owned = a.reduce == Reduce::kClusterScatter ? tma_owned_from(rank + 1, a.S) - tma_owned_from(rank, a.S)
                                                          : (rank == 0 ? kTmaConsumers : 0);
    open_inbox(inbox_full, (uint32_t)((a.S - 1) * owned * kAcc * sizeof(float)));
}

template <int NB, int Stages, bool Dual, bool Half, int Warpgroups, typename Out, bool Staged>
__global__ void __launch_bounds__(tma_threads(Warpgroups), 1)
    tma_kernel(const __grid_constant__ CUtensorMap x_map, const TmaArgs a) {
    static_assert(!(Half && Dual), "half tiles are for plain bf16 weights");
    static_assert(!Staged || (Warpgroups == 1 && !Dual && !Half && NB >= 8),
                  "the staged write: the GEMM's, one warpgroup, bf16");
    using Stream = TmaStream<NB, Stages, Dual, Half, Warpgroups>;
    static_assert(!Staged || 8 * NB * kStagedPitch * 2 <= Stages * Stream::kStage, "the staged tile fits the ring");
    constexpr int kAcc = Stream::kAcc;
    extern __shared__ uint8_t smem_raw[];
    __shared__ RingBarriers<Stages> bars;
    __shared__ int is_last[Warpgroups];
    __shared__ __align__(8) uint64_t inbox_full;
    uint8_t* slots = smem_raw + ((1024 - (smem_addr(smem_raw) & 1023)) & 1023);
    float* inbox = reinterpret_cast<float*>(slots + Stages * Stream::kStage);  // clusters: [S - 1][owned][kAcc]

    const int tile = blockIdx.x, split = blockIdx.y;
    const int k_tiles = a.K / Stream::kSlotK;                 // slots of a tile's whole K
    const int kt0 = (int)((long long)split * k_tiles / a.S);  // uneven splits differ by at most one K tile
    const int n_k = (int)((long long)(split + 1) * k_tiles / a.S) - kt0;
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    const Stream stream{slots, bars, &x_map, a, tile, kt0, n_k};

    const bool cluster = a.S > 1 && (a.reduce == Reduce::kClusterGather || a.reduce == Reduce::kClusterScatter);

    if (threadIdx.x == kTmaConsumers * Warpgroups) stream.start();
    if (cluster) open_tma_inbox<kAcc>(a, &inbox_full);
    __syncthreads();

    float acc[(Half ? 2 : 1) * kAcc];
#pragma unroll
    for (int e = 0; e < (Half ? 2 : 1) * kAcc; ++e) acc[e] = 0.f;
    if (warp == Warpgroups * kTmaConsumers / 32) {  // the producer warp: one lane issues every copy
        if (lane == 0) stream.produce();
        __syncwarp();
        if (cluster) inbox_ready();  // every thread of a cluster waits once
        return;
    }
    const int g = warp / 4;  // this thread's warpgroup
    consume_as<0, Warpgroups>(stream, acc, lane, g);

    const int t = threadIdx.x % kTmaConsumers, tile64 = tile * Warpgroups + g;
    if constexpr (Half)
        finish_half<kAcc, Out>(a, slots, acc, tile, t, warp);
    else
        finish_full<NB, Warpgroups, Out, Staged>(a, slots, inbox, &inbox_full, is_last, acc, tile, tile64, split, t, g,
                                                 cluster);
}

// ---- Host side: x's tensor map, then the launcher.

// cuTensorMapEncodeTiled is a driver-API function: fetched through the runtime, so nothing links libcuda.
inline PFN_cuTensorMapEncodeTiled_v12000 tensor_map_encoder(const char** error) {
    static PFN_cuTensorMapEncodeTiled_v12000 encode = nullptr;
    if (encode == nullptr) {
        void* fn = nullptr;
        cudaDriverEntryPointQueryResult found;
        const cudaError_t err =
            cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &fn, 12000, cudaEnableDefault, &found);
        if (err != cudaSuccess || found != cudaDriverEntryPointSuccess || fn == nullptr) {
            *error = "cuTensorMapEncodeTiled is not available from the driver";
            return nullptr;
        }
        encode = reinterpret_cast<PFN_cuTensorMapEncodeTiled_v12000>(fn);
    }
    return encode;
}

// A [rows, K] bf16 matrix in boxes of box_rows x 64, 128-byte swizzled, rows past the end zero; k_chunks = 2 (half
// tiles): 3-D, [K/64][rows][64], so a slot's two boxes land in one copy.
inline const char* bf16_rows_map(CUtensorMap* map, const void* base, int rows, int K, int box_rows, int k_chunks) {
    const char* error = nullptr;
    auto encode = tensor_map_encoder(&error);
    if (encode == nullptr) return error;
    const cuuint64_t dims[3] = {(cuuint64_t)kTmaTileK, (cuuint64_t)rows, (cuuint64_t)(K / kTmaTileK)};
    const cuuint64_t strides[2] = {(cuuint64_t)K * 2, (cuuint64_t)kTmaTileK * 2};  // bytes between rows, chunks
    const cuuint32_t box[3] = {(cuuint32_t)kTmaTileK, (cuuint32_t)box_rows, (cuuint32_t)k_chunks};
    const cuuint32_t steps[3] = {1, 1, 1};
    // 2-D: [rows, K] itself, boxes of box_rows x 64.
    const cuuint64_t dims2[2] = {(cuuint64_t)K, (cuuint64_t)rows};
    const cuuint32_t box2[2] = {(cuuint32_t)kTmaTileK, (cuuint32_t)box_rows};
    const bool flat = k_chunks == 1;
    const CUresult r =
        encode(map, CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, flat ? 2 : 3, const_cast<void*>(base), flat ? dims2 : dims,
               strides, flat ? box2 : box, steps, CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B,
               CU_TENSOR_MAP_L2_PROMOTION_L2_256B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
    return r == CUDA_SUCCESS ? nullptr : "cuTensorMapEncodeTiled rejected the tensor";
}

template <typename L>
constexpr bool tma_cluster() {
    return L::splits > 1 && (L::reduce == Reduce::kClusterGather || L::reduce == Reduce::kClusterScatter);
}

// Whether case L's layout fits the shared memory its engine's rule gives it: the ring (+1 KB to align it), then
// for a cluster split the inbox, S - 1 partials of the most consumer threads a rank owns.
template <typename L>
constexpr bool tma_layout_fits() {
    int owned = tma_cluster<L>() && L::reduce == Reduce::kClusterGather ? kTmaConsumers : 0;  // threads a rank owns
    for (int rank = 0; tma_cluster<L>() && L::reduce == Reduce::kClusterScatter && rank < L::splits; ++rank) {
        const int share = tma_owned_from(rank + 1, L::splits) - tma_owned_from(rank, L::splits);
        owned = share > owned ? share : owned;
    }
    const int ring = L::stages * TmaStream<L::NB, L::stages, L::dual, L::half, L::warpgroups>::kStage + 1024;
    return ring + (L::splits - 1) * owned * 4 * L::NB * 4 <= L::smem_bytes && L::smem_bytes <= (int)kSmemOptInLimit;
}

// Launch-table case L (generator/launch_table.py: the engine's variant(), by name). call.operand[0] = the packed tiles
// (dual: hi), [1] = the lo tiles (dual) or the tiles again, [2] = the zeroed accumulator (atomic).
template <typename L>
const char* launch_tma(const Call& c) {
    constexpr bool cluster = tma_cluster<L>();
    static_assert(tma_layout_fits<L>(), "the ring and the cluster inbox fit the engine's shared memory");
    static_assert(!cluster || (L::warpgroups == 1 && L::NB <= 4), "the cluster reductions are the GEMV's");
    static_assert(!L::staged || L::splits == 1, "the staged write is the plain one's (splits = 1)");
    if (c.M < 1 || c.M > 8 * L::NB) return "tma_gemv: M does not fit this kernel's column blocks";
    if (L::reduce == Reduce::kAtomic && c.operand[2] == nullptr) return "tma_gemv: reduce=atomic needs its accumulator";
    if (c.N % (kTmaTileRows * L::warpgroups)) return "tma_gemv: N is not a multiple of the CTA's rows";
    CUtensorMap x_map;
    const char* err = bf16_rows_map(&x_map, c.x, c.M, c.K, L::NB * 8, L::half ? 2 : 1);
    if (err != nullptr) return err;
    const TmaArgs a{static_cast<const uint8_t*>(c.operand[0]),
                    static_cast<const uint8_t*>(c.operand[1]),
                    c.out,
                    c.ws,
                    static_cast<float*>(const_cast<void*>(c.operand[2])),
                    c.sem,
                    c.M,
                    c.N,
                    c.K,
                    L::splits,
                    L::reduce};
    auto kernel = tma_kernel<L::NB, L::stages, L::dual, L::half, L::warpgroups, typename L::out, L::staged>;
    return launch_splits(kernel, dim3(c.N / (L::half ? kTmaHalfRows : kTmaTileRows * L::warpgroups), L::splits),
                         dim3(tma_threads(L::warpgroups)), (size_t)L::smem_bytes, static_cast<cudaStream_t>(c.stream),
                         cluster, x_map, a);
}

}  // namespace okc
#line 1 "kernels_src/compressed_gemv.cuh"
// The mma.sync GEMV on 12-bit lossless weights (engine compressed_gemv, m <= 32, format: compress.py), on
// mma_gemv.cuh's skeleton: a 64-wide K group is three 16-byte loads a lane (25 % fewer bytes than bf16), each
// fragment rebuilt in registers by byte permutes just before its mmas. A group's first three exceptions ride in
// its header and add one mma each (mma_patches); the rest, the overflow, are multiplied after the loop
// (overflow_pass) from buckets staged by cp.async meanwhile. Design and figures: docs/compressed-gemv.md.
#pragma once
// #include "common.cuh"  (inlined above)
// #include "generated/constants.h"  (inlined above)

namespace okc {

constexpr int kCompressedParts = 3;                              // 16-byte parts per lane per row block and K group
constexpr int kCompressedFragsPerGroup = kCompressedParts * 32;  // Frags (16 bytes) per row block and K group
constexpr int kOverflowTileBytes = 16 * 64 * 2;                  // a warp's overflow tile: one bucket, 16 x 64 bf16

struct CompressedGemvArgs {
    const Frag* x;               // [M, K] bf16, row-major, 16-byte aligned
    const Frag* w;               // compressed stream: [N/16][K/64][3][32 lanes] Frags
    const uint32_t* patches;     // [N/16][K/64][4] group headers: n <= 3, patch words p0, p1, p2
    const uint32_t* overflow;    // [n_overflow] entries p | bf16 bits << 16 (p: 256 f + 8 lane + e), by bucket, p
    const int* overflow_starts;  // [N/16 * K/64 + 1]: bucket b = rb * K/64 + g holds entries [starts[b], starts[b+1])
    __nv_bfloat16* out;          // [M, N]
    float* ws;                   // split-K partials: [N/(16R)][S][R*NB*128]
    int* sem;                    // arrival counter per CTA row group; 0 between launches
    uint4 table;                 // the 16 hi bytes as four words (compress.py: table_words)
    int M, N, K, S, n_overflow;  // n_overflow: the entries of the whole matrix (0: no staging, no pass)
    int cluster;
};

__device__ __forceinline__ uint32_t prmt(uint32_t a, uint32_t b, uint32_t sel) {
    uint32_t d;
    asm("prmt.b32 %0, %1, %2, %3;" : "=r"(d) : "r"(a), "r"(b), "r"(sel));
    return d;
}

// cp.async (L1-cached): the overflow offsets land while the main loop streams.
template <int Bytes>
__device__ __forceinline__ void cp_async(void* smem, const void* gmem) {
    const uint32_t dst = static_cast<uint32_t>(__cvta_generic_to_shared(smem));
    asm volatile("cp.async.ca.shared.global [%0], [%1], %2;" ::"r"(dst), "l"(gmem), "n"(Bytes) : "memory");
}
__device__ __forceinline__ void cp_async_wait_all() { asm volatile("cp.async.wait_all;" ::: "memory"); }

// Shared memory of a CTA: the warps' partial tiles, then (cluster only, `inbox_tiles` = S - 1) rank 0's cluster
// inbox, then, for a matrix with overflow entries, one 2 KB overflow tile per warp and the CTA's R x (K groups / S
// + 1) staged bucket offsets (compressed_gemv.py, overflow_smem).
__host__ __device__ constexpr size_t compressed_gemv_inbox_offset(int nw, int r, int nb) {
    return (size_t)nw * r * nb * 4 * 32 * sizeof(float);
}
__host__ __device__ constexpr size_t compressed_gemv_overflow_offset(int nw, int r, int nb, int inbox_tiles) {
    return compressed_gemv_inbox_offset(nw, r, nb) + (size_t)inbox_tiles * r * nb * 4 * 32 * sizeof(float);
}
// Four hi bytes from four 4-bit codes (the low 16 bits of c).
__device__ __forceinline__ uint32_t hi_bytes(uint32_t c, const uint4& t) {
    const uint32_t idx = c & 0x7777u;
    const uint32_t low8 = prmt(t.x, t.y, idx), high8 = prmt(t.z, t.w, idx);
    const uint32_t take_high = prmt(0x0000FF00u, 0u, (c >> 3) & 0x1111u);  // 0xFF where code >= 8
    return (low8 & ~take_high) | (high8 & take_high);
}

// Fragment f (0..3) of a K group from its lane's three parts -> the mma A registers (as pack_mma_a lays them).
__device__ __forceinline__ void decode_fragment(uint32_t (&a)[4], const Frag (&part)[kCompressedParts], int f,
                                                const uint4& t) {
    const Frag& lo = part[f >> 1];
    const uint32_t l0 = lo.r[2 * (f & 1)], l1 = lo.r[2 * (f & 1) + 1];
    const uint32_t c = part[2].r[f];
    const uint32_t h0 = hi_bytes(c & 0xFFFFu, t), h1 = hi_bytes(c >> 16, t);
    a[0] = prmt(l0, h0, 0x5140u);
    a[1] = prmt(l0, h0, 0x7362u);
    a[2] = prmt(l1, h1, 0x5140u);
    a[3] = prmt(l1, h1, 0x7362u);
}

// A trip's headers, one 4-byte word a lane (lane l: word l % 4 of group l / 4); group u's patch count n.
__device__ __forceinline__ uint32_t hdr_count(uint32_t word, int u) { return __shfl_sync(0xFFFFFFFFu, word, 4 * u); }

// A patched group's correction after its mmas: patch q as an A operand that is zero but in the lane and register
// it names, through one more mma against its fragment's x (the slot decoded to 0). Apart from the decode, so that
// the common group (n = 0, ~3 in 4) runs without it.
template <int NB>
__device__ __forceinline__ void mma_patches(float (&acc)[NB][4], uint32_t word, int u, uint32_t n,
                                            const Frag (&x)[2][NB], int lane) {
#pragma unroll 1
    for (uint32_t q = 0; q < n; ++q) {
        const uint32_t p = __shfl_sync(0xFFFFFFFFu, word, 4 * u + 1 + q);
        const uint32_t j = (p >> 8) & 3u;
        const uint32_t value = (int)(p & 31u) == lane ? (p >> 10) << (16 * ((p >> 7) & 1u)) : 0u;
        const uint32_t a[4] = {j == 0 ? value : 0u, j == 1 ? value : 0u, j == 2 ? value : 0u, j == 3 ? value : 0u};
        const uint32_t f = (p >> 5) & 3u;  // warp-uniform; x's registers picked by value (no local-memory array)
#pragma unroll
        for (int nb = 0; nb < NB; ++nb) {
            const Frag &x0 = x[0][nb], &x1 = x[1][nb];  // K blocks 2G, 2G + 1: fragments 0, 1 and 2, 3
            const uint32_t b0 = f == 0 ? x0.r[0] : f == 1 ? x0.r[2] : f == 2 ? x1.r[0] : x1.r[2];
            const uint32_t b1 = f == 0 ? x0.r[1] : f == 1 ? x0.r[3] : f == 2 ? x1.r[1] : x1.r[3];
            mma_bf16_m16n8k16(acc[nb], a, b0, b1);
        }
    }
}

template <int Groups, int NB, int RowBlocks>
struct CompressedTrip {
    Frag w[RowBlocks][Groups][kCompressedParts];
    uint32_t hdr[RowBlocks];  // the trip's headers, a word a lane (hdr_count, mma_patches)
    Frag x[Groups][2][NB];    // K blocks 2G and 2G + 1 of each group
};

// hp: the CTA's first row block's headers; 4 `groups` words per row block.
template <int Groups, int NB, int RowBlocks>
__device__ __forceinline__ void load_compressed_trip(CompressedTrip<Groups, NB, RowBlocks>& tr, const Frag* wp,
                                                     size_t row_frags, const uint32_t* hp, int groups,
                                                     const Frag* const (&xp)[NB], const bool (&xvalid)[NB], int g0,
                                                     int g_end) {
    const int lane = threadIdx.x & 31;
    const bool hdr_ok = lane < 4 * Groups && g0 + (lane >> 2) < g_end;  // this lane's word: group g0 + lane / 4
#pragma unroll
    for (int r = 0; r < RowBlocks; ++r) tr.hdr[r] = hdr_ok ? __ldg(hp + ((size_t)r * groups + g0) * 4 + lane) : 0u;
#pragma unroll
    for (int u = 0; u < Groups; ++u) {
        const int g = g0 + u;
        const bool ok = g < g_end;  // warp-uniform
#pragma unroll
        for (int r = 0; r < RowBlocks; ++r)
#pragma unroll
            for (int p = 0; p < kCompressedParts; ++p)
                tr.w[r][u][p] =
                    ok ? ld_weights(wp + r * row_frags + (size_t)g * kCompressedFragsPerGroup + p * 32) : zero_frag();
#pragma unroll
        for (int b = 0; b < 2; ++b)
#pragma unroll
            for (int nb = 0; nb < NB; ++nb)
                tr.x[u][b][nb] = (ok && xvalid[nb]) ? ld_x(xp[nb] + (2 * g + b) * 4) : zero_frag();
    }
}

// A trip's mmas: each fragment decoded, then multiplied; then a patched group's correction.
template <int Groups, int NB, int RowBlocks>
__device__ __forceinline__ void mma_compressed_trip(float (&acc)[RowBlocks][NB][4],
                                                    const CompressedTrip<Groups, NB, RowBlocks>& tr, const uint4& t,
                                                    int lane) {
#pragma unroll
    for (int u = 0; u < Groups; ++u)
#pragma unroll
        for (int r = 0; r < RowBlocks; ++r) {
#pragma unroll
            for (int f = 0; f < 4; ++f) {
                uint32_t a[4];
                decode_fragment(a, tr.w[r][u], f, t);
                const int b = f >> 1, y = f & 1;  // K block 2G + b, mma step y
#pragma unroll
                for (int nb = 0; nb < NB; ++nb)
                    mma_bf16_m16n8k16(acc[r][nb], a, tr.x[u][b][nb].r[2 * y], tr.x[u][b][nb].r[2 * y + 1]);
            }
            const uint32_t n = hdr_count(tr.hdr[r], u);
            if (n) mma_patches<NB>(acc[r], tr.hdr[r], u, n, tr.x[u], lane);
        }
}

// An overflow entry into its 16-bit slot of a warp's tile, in PTX with a memory clobber: never reordered with the
// tile's 16-byte loads and stores.
__device__ __forceinline__ void scatter_entry(Frag* tile, uint32_t entry) {
    const uint32_t slot = smem_addr(tile) + 2u * (entry & 1023u);
    asm volatile("st.shared.u16 [%0], %1;" ::"r"(slot), "h"((unsigned short)(entry >> 16)) : "memory");
}

// A group's x fragments (K blocks 2g, 2g + 1), as load_compressed_trip loads them.
template <int NB>
__device__ __forceinline__ void load_group_x(Frag (&x)[2][NB], const Frag* const (&xp)[NB], const bool (&xvalid)[NB],
                                             int g) {
#pragma unroll
    for (int b = 0; b < 2; ++b)
#pragma unroll
        for (int nb = 0; nb < NB; ++nb) x[b][nb] = xvalid[nb] ? ld_x(xp[nb] + (2 * g + b) * 4) : zero_frag();
}

// The first bucket after gl whose entries end past entry e (the one that holds e), 32 buckets a step.
__device__ __forceinline__ int next_bucket(const int* st, int ng, int gl, int e, int lane) {
#pragma unroll 1
    for (int base = gl + 1;; base += 32) {
        const int c = base + lane;
        const uint32_t found = __ballot_sync(0xFFFFFFFFu, c < ng && st[c + 1] > e);
        if (found) return base + __ffs(found) - 1;
    }
}

// One bucket's tile (the stream's fragment order) times the group's x into acc; each lane zeroes what it read.
template <int NB>
__device__ __forceinline__ void mma_overflow_tile(float (&acc)[NB][4], Frag* tile, const Frag (&x)[2][NB], int lane) {
#pragma unroll
    for (int f = 0; f < 4; ++f) {
        const Frag v = tile[f * 32 + lane];
        tile[f * 32 + lane] = zero_frag();
        const uint32_t a[4] = {v.r[0], v.r[1], v.r[2], v.r[3]};
        const int b = f >> 1, y = f & 1;  // K block 2G + b, mma step y
#pragma unroll
        for (int nb = 0; nb < NB; ++nb) mma_bf16_m16n8k16(acc[nb], a, x[b][nb].r[2 * y], x[b][nb].r[2 * y + 1]);
    }
}

// One warp's overflow pass: per row block, the w-th of nw equal shares of the CTA's entries, walked in 32-entry
// chunks, each bucket scattered into the warp's tile and multiplied where it ends; into acc, so deterministic.
template <int NB, int RowBlocks>
__device__ __forceinline__ void overflow_pass(float (&acc)[RowBlocks][NB][4], const CompressedGemvArgs& a, Frag* tile,
                                              const int* starts, int ng, int g_begin, const Frag* const (&xp)[NB],
                                              const bool (&xvalid)[NB], int warp, int lane) {
    const int nw = blockDim.x >> 5;
#pragma unroll
    for (int f = 0; f < 4; ++f) tile[f * 32 + lane] = zero_frag();
    __syncwarp();
#pragma unroll
    for (int r = 0; r < RowBlocks; ++r) {  // unrolled: acc[r] stays in registers
        const int* st = starts + r * (ng + 1);
        const int first = st[0], len = st[ng] - first;
        const int e_begin = first + len * warp / nw, e_end = first + len * (warp + 1) / nw;
        if (e_begin == e_end) continue;                   // warp-uniform
        int gl = next_bucket(st, ng, -1, e_begin, lane);  // the bucket holding e_begin
        int bend = min(st[gl + 1], e_end);
        Frag x[2][NB];
        load_group_x<NB>(x, xp, xvalid, g_begin + gl);
        int c0 = e_begin, done = e_begin;  // this chunk's first entry; entries before `done` are multiplied
        uint32_t cur = c0 + lane < e_end ? __ldg(a.overflow + c0 + lane) : 0u;
        uint32_t nxt = c0 + 32 + lane < e_end ? __ldg(a.overflow + c0 + 32 + lane) : 0u;
#pragma unroll 1
        for (;;) {
            const int e = c0 + lane;
            if (e >= done && e < bend) scatter_entry(tile, cur);
            if (bend > c0 + 32) {  // the bucket goes on in the next chunk
                c0 += 32;
                cur = nxt;
                nxt = c0 + 32 + lane < e_end ? __ldg(a.overflow + c0 + 32 + lane) : 0u;
                continue;
            }
            __syncwarp();  // the scatter before the tile's loads
            mma_overflow_tile<NB>(acc[r], tile, x, lane);
            __syncwarp();  // the zeroes before the next scatter
            done = bend;
            if (done == e_end) break;
            gl = next_bucket(st, ng, gl, done, lane);
            bend = min(st[gl + 1], e_end);
            load_group_x<NB>(x, xp, xvalid, g_begin + gl);
            if (done == c0 + 32) {  // the bucket ended with the chunk
                c0 += 32;
                cur = nxt;
                nxt = c0 + 32 + lane < e_end ? __ldg(a.overflow + c0 + 32 + lane) : 0u;
            }
        }
    }
}

// Element idx of a partial tile (the mma C layout) <-> (row block r, row i, token): tile_coords, tile_index.
template <int NB>
__host__ __device__ constexpr void tile_coords(int idx, int& r, int& i, int& token) {
    const int lane = idx & 31, c = idx >> 5, j = c & 3;
    r = c / (NB * 4);
    i = (lane >> 2) + ((j & 2) ? 8 : 0);
    token = ((c >> 2) % NB) * 8 + (lane & 3) * 2 + (j & 1);
}
#line 262 "kernels_src/compressed_gemv.cuh"

template <int NB>
__device__ __forceinline__ void write_compressed_element(const CompressedGemvArgs& a, int rb0, int idx, float v) {
    int r = 0, i = 0, token = 0;
    tile_coords<NB>(idx, r, i, token);
    if (token < a.M) store_out(a.out + (size_t)token * a.N + (rb0 + r) * 16 + i, v);
}

// Before the main loop: this CTA's bucket offsets into shared memory by cp.async; nothing waits here.
template <int NB, int RowBlocks>
__device__ __forceinline__ void stage_offsets(const CompressedGemvArgs& a, float* red, int inbox_tiles, int rb0,
                                              int groups, int g_begin, int g_per_split) {
    const int nw = blockDim.x >> 5;
    int* starts = reinterpret_cast<int*>(reinterpret_cast<uint8_t*>(red) +
                                         compressed_gemv_overflow_offset(nw, RowBlocks, NB, inbox_tiles) +
                                         (size_t)nw * kOverflowTileBytes);
    for (int e = threadIdx.x; e < RowBlocks * (g_per_split + 1); e += blockDim.x) {
        const int r = e / (g_per_split + 1), gl = e - r * (g_per_split + 1);
        cp_async<4>(starts + e, a.overflow_starts + (size_t)(rb0 + r) * groups + g_begin + gl);
    }
}

// After the main loop (a matrix with overflow entries): the staged offsets complete, then the overflow pass into
// acc, on this warp's tile of the overflow region (after the warps' tiles and the inbox).
template <int NB, int RowBlocks>
__device__ __forceinline__ void compressed_gemv_overflow(float (&acc)[RowBlocks][NB][4], const CompressedGemvArgs& a,
                                                         float* red, int inbox_tiles, int g_per_split, int g_begin,
                                                         const Frag* const (&xp)[NB], const bool (&xvalid)[NB],
                                                         int warp, int lane) {
    const int nw = blockDim.x >> 5;
    cp_async_wait_all();
    __syncthreads();  // every thread's staged offsets
    uint8_t* region = reinterpret_cast<uint8_t*>(red) + compressed_gemv_overflow_offset(nw, RowBlocks, NB, inbox_tiles);
    overflow_pass<NB, RowBlocks>(acc, a, reinterpret_cast<Frag*>(region) + warp * (kOverflowTileBytes / sizeof(Frag)),
                                 reinterpret_cast<const int*>(region + (size_t)nw * kOverflowTileBytes), g_per_split,
                                 g_begin, xp, xvalid, warp, lane);
}

template <int Groups, int NB, int RowBlocks, MmaPipeline Pipeline>
__global__ void __launch_bounds__(512, 1) compressed_gemv_kernel(const CompressedGemvArgs a) {
    extern __shared__ float red[];  // [NW][R * NB * 4][32], inbox, overflow tiles [NW][2 KB], offsets [R][ng + 1]
    __shared__ __align__(8) uint64_t inbox_full;
    constexpr int kTile = RowBlocks * NB * 4 * 32;
    const int nw = blockDim.x >> 5;
    if (a.cluster) open_inbox(&inbox_full, cluster_rank() == 0 ? (uint32_t)((a.S - 1) * kTile * sizeof(float)) : 0u);
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    const int group = blockIdx.x, rb0 = group * RowBlocks, split = blockIdx.y;
    const int groups = a.K >> 6;
    const int g_per_split = groups / a.S;
    const int g_begin = split * g_per_split, g_end = g_begin + g_per_split;
    const int inbox_tiles = a.cluster ? a.S - 1 : 0;

    // n_overflow is the same for every CTA: the branch is uniform.
    if (a.n_overflow) stage_offsets<NB, RowBlocks>(a, red, inbox_tiles, rb0, groups, g_begin, g_per_split);

    const Frag* xp[NB];
    bool xvalid[NB];
    x_operand<NB>(a.x, a.M, a.K, lane, xp, xvalid);
    const size_t row_frags = (size_t)groups * kCompressedFragsPerGroup;
    const Frag* wp = a.w + (size_t)rb0 * row_frags + lane;
    const uint32_t* hp = a.patches + (size_t)rb0 * groups * 4;
    const uint4 t = a.table;

    float acc[RowBlocks][NB][4];
    zero_accumulators<RowBlocks, NB>(acc);

    const int stride = nw * Groups;
    const int first = g_begin + warp * Groups;
    if constexpr (Pipeline == MmaPipeline::kBatch) {
        for (int g = first; g < g_end; g += stride) {
            CompressedTrip<Groups, NB, RowBlocks> tr;
            load_compressed_trip<Groups, NB, RowBlocks>(tr, wp, row_frags, hp, groups, xp, xvalid, g, g_end);
            mma_compressed_trip<Groups, NB, RowBlocks>(acc, tr, t, lane);
        }
    } else {
        CompressedTrip<Groups, NB, RowBlocks> t0, t1;
        load_compressed_trip<Groups, NB, RowBlocks>(t0, wp, row_frags, hp, groups, xp, xvalid, first, g_end);
        for (int g = first; g < g_end; g += 2 * stride) {
            load_compressed_trip<Groups, NB, RowBlocks>(t1, wp, row_frags, hp, groups, xp, xvalid, g + stride, g_end);
            mma_compressed_trip<Groups, NB, RowBlocks>(acc, t0, t, lane);
            load_compressed_trip<Groups, NB, RowBlocks>(t0, wp, row_frags, hp, groups, xp, xvalid, g + 2 * stride,
                                                        g_end);
            mma_compressed_trip<Groups, NB, RowBlocks>(acc, t1, t, lane);
        }
    }

    if (a.n_overflow)
        compressed_gemv_overflow<NB, RowBlocks>(acc, a, red, inbox_tiles, g_per_split, g_begin, xp, xvalid, warp, lane);

    park_accumulators<RowBlocks, NB>(red, acc, warp, lane);
    __syncthreads();

    float* inbox =
        reinterpret_cast<float*>(reinterpret_cast<uint8_t*>(red) + compressed_gemv_inbox_offset(nw, RowBlocks, NB));
    finish_tile(a, red, inbox, &inbox_full, kTile, group, split,
                [&](int idx, float v) { write_compressed_element<NB>(a, rb0, idx, v); });
}

// Whether case L's layout fits the shared memory its engine's rule gives it: the warps' tiles and the cluster inbox
// in smem_bytes, the overflow tiles (and the bucket offsets, which K sizes) in overflow_bytes.
template <typename L>
constexpr bool compressed_gemv_layout_fits() {
    const int inbox_tiles = L::reduce == Reduce::kCluster ? L::splits - 1 : 0;
    return compressed_gemv_overflow_offset(L::warps, L::row_blocks, L::NB, inbox_tiles) <= L::smem_bytes &&
           L::warps * kOverflowTileBytes < L::overflow_bytes &&
           L::smem_bytes + L::overflow_bytes <= (int)kSmemOptInLimit;
}

// Launch-table case L (generator/launch_table.py: the engine's variant(), by name). call.operand: [0] the 12-bit
// stream, [1] the group headers (patches), [2] the overflow entries, [3] their bucket offsets; call.scalar: [0] table
// words T0 | T1 << 32, [1] T2 | T3 << 32, [2] the number of overflow entries (0: none, the pass after the loop skipped
// and L::overflow_bytes not taken).
template <typename L>
const char* launch_compressed_gemv(const Call& c) {
    constexpr bool cluster = L::reduce == Reduce::kCluster;
    static_assert(compressed_gemv_layout_fits<L>(), "the tiles, the inbox and the overflow fit the engine's budget");
    if (c.M < 1 || c.M > 8 * L::NB) return "compressed_gemv: M does not fit this kernel's column blocks";
    CompressedGemvArgs a{};
    a.x = static_cast<const Frag*>(c.x);
    a.w = static_cast<const Frag*>(c.operand[0]);
    a.patches = static_cast<const uint32_t*>(c.operand[1]);
    a.overflow = static_cast<const uint32_t*>(c.operand[2]);
    a.overflow_starts = static_cast<const int*>(c.operand[3]);
    a.out = static_cast<__nv_bfloat16*>(c.out);
    a.ws = c.ws;
    a.sem = c.sem;
    a.table = make_uint4((uint32_t)c.scalar[0], (uint32_t)(c.scalar[0] >> 32), (uint32_t)c.scalar[1],
                         (uint32_t)(c.scalar[1] >> 32));
    a.M = c.M, a.N = c.N, a.K = c.K, a.S = L::splits, a.n_overflow = (int)c.scalar[2], a.cluster = cluster;
    const size_t smem = L::smem_bytes + (a.n_overflow ? L::overflow_bytes : 0);
    auto kernel = compressed_gemv_kernel<L::groups, L::NB, L::row_blocks, L::pipeline>;
    return launch_splits(kernel, dim3(c.N / (16 * L::row_blocks), L::splits), dim3(L::warps * 32), smem,
                         static_cast<cudaStream_t>(c.stream), cluster, a);
}

}  // namespace okc
#line 1 "kernels_src/compressed_ring.cuh"
// The 12-bit weights through a TMA ring (engine compressed_ring, m <= 32, bf16 layers): a CTA owns a 64-row tile
// and the whole K; a slot is the tile's four row blocks x Groups K groups of compress.py's stream and their headers
// (one bulk copy) beside x's boxes (one tensor copy), so each x byte serves 64 rows. Warp q of a warpgroup decodes
// row block q straight into wgmma's A registers; a stager warp puts the tile's overflow in shared memory meanwhile.
// Phases: start, produce, stage, consume, fold, add_overflow, write. Design and figures: docs/compressed-ring.md.
#pragma once
// #include "tma_gemv.cuh"  (inlined above)
// #include "compressed_gemv.cuh"  (inlined above)
// #include "generated/constants.h"  (inlined above)

namespace okc {

// kStagedOverflowEntries and kCompressedHeaderBytes (compressed_ring.py, compress.py) come from the prelude.
constexpr int kCompressedGroupBytes = kCompressedFragsPerGroup * sizeof(Frag);  // 1536: one 16-row block x one K group
// The tile's overflow entries, staged (count past kStagedOverflowEntries: none; add_overflow reads them itself).
struct StagedOverflow {
    int count;
    uint8_t row[kStagedOverflowEntries];          // the entry's row in the tile
    uint32_t entry[kStagedOverflowEntries];       // k | bits << 16
    __nv_bfloat16 x[kStagedOverflowEntries][32];  // x[token, k] for tokens < M, else 0
};

struct CompressedRingArgs {
    const uint8_t* slots;     // [N/64][K/(64 G)] slots of kWBytes (compressed_ring.py, ring_slots)
    const int* row_starts;    // [N + 1]: row r's overflow entries are [row_starts[r], row_starts[r + 1])
    const int* entry_rows;    // [E] each entry's row
    const uint32_t* entries;  // [E] k | bf16 bits << 16, by row, then k
    const __nv_bfloat16* x;   // [M, K]
    __nv_bfloat16* out;       // [M, N]
    uint4 table;              // the 16 hi bytes as four words (compress.py: table_words)
    int M, N, K, n_overflow;  // n_overflow: the whole matrix's entries (0: nothing staged, nothing added)
};

// The stager warp: the tile's overflow entries and the x values each meets.
__device__ __forceinline__ void stage_overflow(const CompressedRingArgs& a, StagedOverflow& st, int row0, int lane) {
    const int s0 = __ldg(a.row_starts + row0), count = __ldg(a.row_starts + row0 + kTmaTileRows) - s0;
    if (lane == 0) st.count = count;
    if (count > kStagedOverflowEntries) return;
    for (int j = lane; j < count; j += 32) {
        const uint32_t entry = __ldg(a.entries + s0 + j);
        st.row[j] = (uint8_t)(__ldg(a.entry_rows + s0 + j) - row0);
        st.entry[j] = entry;
        const int k = entry & 0xFFFF;
        for (int token = 0; token < 32; ++token)
            st.x[j][token] = token < a.M ? a.x[(size_t)token * a.K + k] : __float2bfloat16_rn(0.f);
    }
}

__device__ __forceinline__ float entry_weight(uint32_t entry) {
    return __bfloat162float(__ushort_as_bfloat16((unsigned short)(entry >> 16)));
}

// Warpgroup 0: thread t adds its two rows' entries (rA = 16 warp + lane / 4, rA + 8), in the list's order.
template <int NB>
__device__ __forceinline__ void add_overflow(const CompressedRingArgs& a, const StagedOverflow& st,
                                             float (&acc)[4 * NB], int row0, int t) {
    const int lane = t & 31, r_a = (t >> 5) * 16 + (lane >> 2);
    if (st.count <= kStagedOverflowEntries) {
        for (int j = 0; j < st.count; ++j) {
            const int r = st.row[j];
            if (r != r_a && r != r_a + 8) continue;
            const float w = entry_weight(st.entry[j]);
#pragma unroll
            for (int e = 0; e < 4 * NB; ++e) {
                int row, token;
                tma_element(t, e, 0, row, token);
                if (row == r) acc[e] += w * __bfloat162float(st.x[j][token]);
            }
        }
        return;
    }
    for (int h = 0; h < 2; ++h) {  // a tile past the staging: its rows' entries from global memory
        const int r = r_a + 8 * h;
        const int end = __ldg(a.row_starts + row0 + r + 1);
        for (int j = __ldg(a.row_starts + row0 + r); j < end; ++j) {
            const uint32_t entry = __ldg(a.entries + j);
            const float w = entry_weight(entry);
            const int k = entry & 0xFFFF;
#pragma unroll
            for (int e = 0; e < 4 * NB; ++e) {
                int row, token;
                tma_element(t, e, 0, row, token);
                if (row == r && token < a.M) acc[e] += w * __bfloat162float(a.x[(size_t)token * a.K + k]);
            }
        }
    }
}

// A header's patch word (compress.py) ORed into the decoded register it names, by selects: no local memory.
__device__ __forceinline__ void patch_registers(uint32_t (&a)[4][4], uint32_t p, int lane) {
    const uint32_t f = (p >> 5) & 3u, j = (p >> 8) & 3u;
    const uint32_t v = (int)(p & 31u) == lane ? (p >> 10) << (16 * ((p >> 7) & 1u)) : 0u;
#pragma unroll
    for (int ff = 0; ff < 4; ++ff)
#pragma unroll
        for (int jj = 0; jj < 4; ++jj) a[ff][jj] |= (ff == (int)f && jj == (int)j) ? v : 0u;
}

// Threads of a CTA: the consumer warpgroups, the producer warp, the stager warp.
__host__ __device__ constexpr int compressed_ring_threads(int wg) { return tma_threads(wg) + 32; }

// One CTA's stream through the ring: slot i in stage i % Stages, warpgroup g's slots g, g + Warpgroups, ...
template <int NB, int Stages, int Warpgroups, int Groups>
struct CompressedRingStream {
    static constexpr int kAcc = 4 * NB;
    static constexpr int kWBytes = 4 * Groups * (kCompressedGroupBytes + kCompressedHeaderBytes);  // a slot's weights
    static constexpr int kWPad = (kWBytes + 1023) / 1024 * 1024;  // x's boxes 1 KB aligned: the 128-byte swizzle
    static constexpr int kStage = kWPad + Groups * tma_x_bytes(NB);
    static constexpr int kSlotK = 64 * Groups;
    static constexpr int kXBytes = tma_x_bytes(NB);
    static constexpr uint32_t kBytes =
        kWBytes + Groups * kXBytes;  // a slot's copies: x rows past M count too (as zeros)

    uint8_t* ring;
    RingBarriers<Stages>& bars;
    const CUtensorMap* x_map;
    const CompressedRingArgs& a;
    const uint8_t* src;  // the tile's slots
    int n_k;

    // Slot i's copies, counted on `full`: its weights (one bulk copy) and x's G boxes (one tensor copy).
    __device__ __forceinline__ void issue(int i, uint64_t* full) const {
        uint8_t* slot = ring + (i % Stages) * kStage;
        bulk_load_1d(slot, src + (size_t)i * kWBytes, kWBytes, full);
        if constexpr (Groups == 1)
            tma_load_2d(slot + kWPad, x_map, i * kSlotK, 0, full);
        else
            tma_load_3d(slot + kWPad, x_map, 0, 0, i * Groups, full);
    }

    // The producer's lane, before the CTA barrier: the first round leaves before it, as tma_gemv.cuh's does.
    __device__ __forceinline__ void start() const {
        prefetch_tensor_map(x_map);
        bars.init_full();
        for (int i = 0; i < Stages && i < n_k; ++i) issue(i, bars.arm(i, kBytes));
        bars.init_empty(4);  // one arrival per warp of the slot's warpgroup
    }

    __device__ __forceinline__ void produce() const {
        for (int i = Stages; i < n_k; ++i) issue(i, bars.acquire(i % Stages, (i / Stages) & 1, kBytes));
    }

    // Warp q's row block of a slot's G groups, decoded into wgmma's A registers and patched.
    __device__ __forceinline__ void decode(uint32_t (&av)[Groups][4][4], const uint8_t* slot, int q, int lane) const {
        Frag part[Groups][kCompressedParts];
#pragma unroll
        for (int u = 0; u < Groups; ++u)
#pragma unroll
            for (int p = 0; p < kCompressedParts; ++p)
                part[u][p] = *reinterpret_cast<const Frag*>(slot + (q * Groups + u) * kCompressedGroupBytes +
                                                            p * (kCompressedGroupBytes / kCompressedParts) + lane * 16);
        // the slot's headers of this warp's G groups: lane l holds word l % 4 of group l / 4 (n, p0, p1, p2)
        const uint32_t hdr =
            lane < 4 * Groups ? *reinterpret_cast<const uint32_t*>(slot + 4 * Groups * kCompressedGroupBytes +
                                                                   (q * Groups + (lane >> 2)) * kCompressedHeaderBytes +
                                                                   (lane & 3) * 4)
                              : 0u;
#pragma unroll
        for (int u = 0; u < Groups; ++u) {
#pragma unroll
            for (int f = 0; f < 4; ++f) decode_fragment(av[u][f], part[u], f, a.table);
            const uint32_t n = hdr_count(hdr, u);
#pragma unroll 1
            for (uint32_t pq = 0; pq < n; ++pq)
                patch_registers(av[u], __shfl_sync(0xFFFFFFFFu, hdr, 4 * u + 1 + pq), lane);
        }
    }

    // Warpgroup g's slots: warp q decodes row block q; the wgmmas read the registers, so each is waited for.
    __device__ __forceinline__ void consume(float (&acc)[kAcc], int g, int q, int lane) const {
        const uint64_t x_desc0 = sw128_desc(smem_addr(ring) + kWPad);
        for (int i = g; i < n_k; i += Warpgroups) {
            const int s = i % Stages;
            bars.wait_full(s, (i / Stages) & 1);
            uint32_t av[Groups][4][4];
            decode(av, ring + s * kStage, q, lane);
            fence_regs(acc);
            wgmma_fence();
#pragma unroll
            for (int u = 0; u < Groups; ++u)
#pragma unroll
                for (int f = 0; f < 4; ++f)  // fragment f: 32 bytes along x's row
                    wgmma_bf16_rs<NB>(acc, av[u][f], desc_plus(x_desc0, (s * kStage + u * kXBytes + f * 32) / 16));
            wgmma_commit();
            fence_regs(acc);
            wgmma_wait<0>();  // before av changes and before the slot is handed back
            fence_regs(acc);
            __syncwarp();
            if (lane == 0) bars.release(s);
        }
    }

    // Warpgroups 1.. hand their partials to warpgroup 0 through the idle ring, added in warpgroup order; false in
    // the warpgroups that are done.
    __device__ __forceinline__ bool fold(float (&acc)[kAcc], int g, int t) const {
        if constexpr (Warpgroups > 1) {
            named_barrier_sync<kFoldBarrier, Warpgroups * kTmaConsumers>();
            float* fold = reinterpret_cast<float*>(ring);
            if (g > 0) {
#pragma unroll
                for (int e = 0; e < kAcc; ++e) fold[((g - 1) * kAcc + e) * kTmaConsumers + t] = acc[e];
            }
            named_barrier_sync<kFoldBarrier, Warpgroups * kTmaConsumers>();
            if (g != 0) return false;
            for (int h = 1; h < Warpgroups; ++h)
#pragma unroll
                for (int e = 0; e < kAcc; ++e) acc[e] += fold[((h - 1) * kAcc + e) * kTmaConsumers + t];
        }
        return true;
    }
};

template <int NB, int Stages, int Warpgroups, int Groups>
__global__ void __launch_bounds__(compressed_ring_threads(Warpgroups), 1)
    compressed_ring_kernel(const __grid_constant__ CUtensorMap x_map, const CompressedRingArgs a) {
    using Stream = CompressedRingStream<NB, Stages, Warpgroups, Groups>;
    static_assert(Stages % Warpgroups == 0, "every stage belongs to one warpgroup");
    static_assert(NB == 1 || NB == 2 || NB == 4, "wgmma_bf16_rs: N = 8, 16 or 32");
    static_assert(Warpgroups * Stream::kAcc * kTmaConsumers * 4 <= Stages * Stream::kStage, "the fold fits the ring");
    constexpr int kConsumers = Warpgroups * kTmaConsumers;
    extern __shared__ uint8_t smem_raw[];
    __shared__ RingBarriers<Stages> bars;
    uint8_t* ring = smem_raw + ((1024 - (smem_addr(smem_raw) & 1023)) & 1023);
    StagedOverflow& staged = *reinterpret_cast<StagedOverflow*>(ring + Stages * Stream::kStage);
    const int tile = blockIdx.x, row0 = tile * kTmaTileRows, n_k = a.K / Stream::kSlotK;
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    const Stream stream{ring, bars, &x_map, a, a.slots + (size_t)tile * n_k * Stream::kWBytes, n_k};

    if (threadIdx.x == kConsumers) stream.start();
    __syncthreads();
    if (warp == kConsumers / 32) {  // the producer warp
        if (lane == 0) stream.produce();
        return;
    }
    if (warp == kConsumers / 32 + 1) {  // the stager warp
        if (a.n_overflow) {
            stage_overflow(a, staged, row0, lane);
            __syncwarp();
            named_barrier_arrive<kStagedBarrier, kTmaConsumers + 32>();
        }
        return;
    }
    const int g = warp >> 2;
    float acc[Stream::kAcc];
#pragma unroll
    for (int e = 0; e < Stream::kAcc; ++e) acc[e] = 0.f;
    stream.consume(acc, g, warp & 3, lane);
    const int t = threadIdx.x % kTmaConsumers;
    if (!stream.fold(acc, g, t)) return;
    if (a.n_overflow) {
        named_barrier_sync<kStagedBarrier, kTmaConsumers + 32>();
        add_overflow<NB>(a, staged, acc, row0, t);
    }
#pragma unroll
    for (int e = 0; e < Stream::kAcc; ++e) store_element(a.out, a.M, a.N, row0, t, e, acc[e]);
}

// Whether case L's layout fits the shared memory its engine's rule gives it: the ring (+1 KB to align it), then
// the staged overflow.
template <typename L>
constexpr bool compressed_ring_layout_fits() {
    const int ring = L::stages * CompressedRingStream<L::NB, L::stages, L::warpgroups, L::groups>::kStage + 1024;
    return ring + (int)sizeof(StagedOverflow) <= L::smem_bytes && L::smem_bytes <= (int)kSmemOptInLimit;
}

// Launch-table case L (generator/launch_table.py: the engine's variant(), by name). call.operand: [0] the ring slots,
// [1] the overflow's row starts, [2] its entries' rows, [3] its entries; call.scalar: [0] table words T0 | T1 << 32,
// [1] T2 | T3 << 32, [2] the number of overflow entries.
template <typename L>
const char* launch_compressed_ring(const Call& c) {
    static_assert(compressed_ring_layout_fits<L>(), "the ring and the staged overflow fit the engine's budget");
    if (c.M < 1 || c.M > 8 * L::NB) return "compressed_ring: M does not fit this kernel's column blocks";
    if (c.N % kTmaTileRows || c.K % (64 * L::groups)) return "compressed_ring: N or K does not fit the tile and slot";
    CUtensorMap x_map;
    const char* err = bf16_rows_map(&x_map, c.x, c.M, c.K, L::NB * 8, L::groups);
    if (err != nullptr) return err;
    CompressedRingArgs a{};
    a.slots = static_cast<const uint8_t*>(c.operand[0]);
    a.row_starts = static_cast<const int*>(c.operand[1]);
    a.entry_rows = static_cast<const int*>(c.operand[2]);
    a.entries = static_cast<const uint32_t*>(c.operand[3]);
    a.x = static_cast<const __nv_bfloat16*>(c.x);
    a.out = static_cast<__nv_bfloat16*>(c.out);
    a.table = make_uint4((uint32_t)c.scalar[0], (uint32_t)(c.scalar[0] >> 32), (uint32_t)c.scalar[1],
                         (uint32_t)(c.scalar[1] >> 32));
    a.M = c.M, a.N = c.N, a.K = c.K, a.n_overflow = (int)c.scalar[2];
    auto kernel = compressed_ring_kernel<L::NB, L::stages, L::warpgroups, L::groups>;
    return launch_splits(kernel, dim3(c.N / kTmaTileRows), dim3(compressed_ring_threads(L::warpgroups)),
                         (size_t)L::smem_bytes, static_cast<cudaStream_t>(c.stream), false, x_map, a);
}

}  // namespace okc
"""

# ---- The Python-facing C++ shim (pybind11): binding.cpp.
BINDING_SRC = CUDA_HEAD + r"""#line 1 "kernels_src/binding.cpp"
// The Python-facing shim, compiled by the host compiler with pybind11 alone (no torch headers: they took most
// of a one-kernel build's 48 s on the H200). plan() keeps a launch's fixed part once, in prepare(); run() adds the
// per-call part and launches. Tensors cross as integers (data_ptr): prepare() has checked them, and each
// launcher checks what a call can change (M against the kernel's column blocks).
#include <pybind11/pybind11.h>

#include <cstdint>
#include <string>
#include <vector>

// #include "call.h"  (inlined above)
// #include "generated/constants.h"  (inlined above)

namespace {
std::vector<std::pair<int, okc::Call>> plans;  // (kernel number, fixed part); every prepare() appends its own
}

// The launch table's kernel `kernel` for a layer's (N, K), its operands (addresses) and scalars, up to
// kCallOperands and kCallScalars of each (slots past them are 0), and the shared buffers: returns the plan number
// run() takes, or -1 for too many.
static int64_t plan(int64_t kernel, int64_t n, int64_t k, const pybind11::tuple& operands,
                    const pybind11::tuple& scalars, int64_t ws, int64_t sem) {
    if (operands.size() > okc::kCallOperands || scalars.size() > okc::kCallScalars) return -1;
    okc::Call c{};
    c.N = (int)n, c.K = (int)k;
    for (size_t i = 0; i < operands.size(); ++i)
        c.operand[i] = reinterpret_cast<const void*>(operands[i].cast<int64_t>());
    for (size_t i = 0; i < scalars.size(); ++i) c.scalar[i] = scalars[i].cast<long long>();
    c.ws = reinterpret_cast<float*>(ws);
    c.sem = reinterpret_cast<int*>(sem);
    plans.emplace_back((int)kernel, c);
    return (int64_t)plans.size() - 1;
}

// Launch plan `id` on x [m, K] into out on `stream`: "" once launched, else one line saying why not (runtime.py
// raises it). The line is made of strings only: on the H200 image, formatting a number through std::ostream in
// an extension's refusal ended the process with a segfault.
static std::string run(int64_t id, int64_t x, int64_t out, int64_t m, int64_t stream) {
    if (id < 0 || id >= (int64_t)plans.size()) return "run: no such plan";
    okc::Call c = plans[(size_t)id].second;
    c.x = reinterpret_cast<const void*>(x);
    c.out = reinterpret_cast<void*>(out);
    c.M = (int)m;
    c.stream = reinterpret_cast<void*>(stream);
    const char* refused = okc_launch(plans[(size_t)id].first, c);
    return refused == nullptr ? std::string() : std::string(refused);
}
"""

# ---- The launch table: each kernel of KERNELS instantiated, by its case number (templates/launch_table.cu.j2).
LAUNCH_TABLE = r"""#line 1 "launch table (templates/launch_table.cu.j2)"
// One case a kernel this extension compiles: a struct of its launcher's arguments by name (the file's KERNELS
// names each case in Python), then the launcher it runs (generator/launch_table.py).
namespace okc::launch {
struct Case0 { static constexpr int groups = 1, NB = 1, row_blocks = 1, warps = 8, splits = 1, smem_bytes = 4096, overflow_bytes = 16464; static constexpr MmaPipeline pipeline = MmaPipeline::kBatch; static constexpr Reduce reduce = Reduce::kNone; };
struct Case1 { static constexpr int groups = 1, NB = 1, row_blocks = 1, warps = 16, splits = 1, smem_bytes = 8192, overflow_bytes = 33296; static constexpr MmaPipeline pipeline = MmaPipeline::kBatch; static constexpr Reduce reduce = Reduce::kNone; };
struct Case2 { static constexpr int groups = 4, NB = 1, row_blocks = 1, warps = 8, splits = 1, smem_bytes = 4096, overflow_bytes = 16912; static constexpr MmaPipeline pipeline = MmaPipeline::kBatch; static constexpr Reduce reduce = Reduce::kNone; };
struct Case3 { static constexpr int NB = 2, stages = 8, warpgroups = 4, groups = 2, smem_bytes = 144708; };
struct Case4 { static constexpr int NB = 4, stages = 8, warpgroups = 4, groups = 2, smem_bytes = 177476; };
struct Case5 { using out = __nv_bfloat16; static constexpr int NB = 1, stages = 16, warpgroups = 1, splits = 1, smem_bytes = 164864; static constexpr bool dual = false, half = true, staged = false; static constexpr Reduce reduce = Reduce::kNone; };
struct Case6 { using out = __nv_bfloat16; static constexpr int NB = 2, stages = 8, warpgroups = 1, splits = 1, smem_bytes = 82944; static constexpr bool dual = false, half = false, staged = false; static constexpr Reduce reduce = Reduce::kNone; };
struct Case7 { using out = __nv_bfloat16; static constexpr int NB = 2, stages = 12, warpgroups = 1, splits = 1, smem_bytes = 123904; static constexpr bool dual = false, half = false, staged = false; static constexpr Reduce reduce = Reduce::kNone; };
struct Case8 { using out = __nv_bfloat16; static constexpr int NB = 2, stages = 12, warpgroups = 1, splits = 1, smem_bytes = 148480; static constexpr bool dual = false, half = true, staged = false; static constexpr Reduce reduce = Reduce::kNone; };
struct Case9 { using out = __nv_bfloat16; static constexpr int NB = 2, stages = 16, warpgroups = 1, splits = 1, smem_bytes = 197632; static constexpr bool dual = false, half = true, staged = false; static constexpr Reduce reduce = Reduce::kNone; };
struct Case10 { using out = __nv_bfloat16; static constexpr int NB = 4, stages = 8, warpgroups = 1, splits = 1, smem_bytes = 99328; static constexpr bool dual = false, half = false, staged = false; static constexpr Reduce reduce = Reduce::kNone; };
struct Case11 { using out = __nv_bfloat16; static constexpr int NB = 4, stages = 12, warpgroups = 1, splits = 1, smem_bytes = 148480; static constexpr bool dual = false, half = false, staged = false; static constexpr Reduce reduce = Reduce::kNone; };
struct Case12 { using out = __nv_bfloat16; static constexpr int NB = 4, stages = 12, warpgroups = 1, splits = 1, smem_bytes = 197632; static constexpr bool dual = false, half = true, staged = false; static constexpr Reduce reduce = Reduce::kNone; };
struct Case13 { using out = __nv_bfloat16; static constexpr int NB = 4, stages = 14, warpgroups = 1, splits = 1, smem_bytes = 230400; static constexpr bool dual = false, half = true, staged = false; static constexpr Reduce reduce = Reduce::kNone; };
struct Case14 { using out = float; static constexpr int unroll = 1, NB = 4, row_blocks = 1, warps = 8, splits = 16, smem_bytes = 16384; static constexpr MmaPipeline pipeline = MmaPipeline::kDouble; static constexpr bool dual = true, atomic_out = true; static constexpr Reduce reduce = Reduce::kAtomicOut; };
struct Case15 { using out = __nv_bfloat16; static constexpr int unroll = 2, NB = 1, row_blocks = 2, warps = 8, splits = 1, smem_bytes = 8192; static constexpr MmaPipeline pipeline = MmaPipeline::kDouble; static constexpr bool dual = false, atomic_out = false; static constexpr Reduce reduce = Reduce::kNone; };
struct Case16 { using out = __nv_bfloat16; static constexpr int unroll = 2, NB = 1, row_blocks = 2, warps = 16, splits = 1, smem_bytes = 16384; static constexpr MmaPipeline pipeline = MmaPipeline::kDouble; static constexpr bool dual = false, atomic_out = false; static constexpr Reduce reduce = Reduce::kNone; };
struct Case17 { using out = float; static constexpr int unroll = 4, NB = 1, row_blocks = 1, warps = 8, splits = 8, smem_bytes = 7680; static constexpr MmaPipeline pipeline = MmaPipeline::kBatch; static constexpr bool dual = true, atomic_out = false; static constexpr Reduce reduce = Reduce::kCluster; };
struct Case18 { using out = float; static constexpr int unroll = 4, NB = 1, row_blocks = 1, warps = 16, splits = 4, smem_bytes = 9728; static constexpr MmaPipeline pipeline = MmaPipeline::kBatch; static constexpr bool dual = true, atomic_out = false; static constexpr Reduce reduce = Reduce::kCluster; };
struct Case19 { using out = __nv_bfloat16; static constexpr int unroll = 4, NB = 1, row_blocks = 1, warps = 8, splits = 1, smem_bytes = 4096; static constexpr MmaPipeline pipeline = MmaPipeline::kDouble; static constexpr bool dual = false, atomic_out = false; static constexpr Reduce reduce = Reduce::kNone; };
struct Case20 { using out = __nv_bfloat16; static constexpr int unroll = 4, NB = 1, row_blocks = 2, warps = 8, splits = 1, smem_bytes = 8192; static constexpr MmaPipeline pipeline = MmaPipeline::kBatch; static constexpr bool dual = false, atomic_out = false; static constexpr Reduce reduce = Reduce::kNone; };
struct Case21 { using out = float; static constexpr int unroll = 4, NB = 2, row_blocks = 1, warps = 16, splits = 4, smem_bytes = 19456; static constexpr MmaPipeline pipeline = MmaPipeline::kBatchL2; static constexpr bool dual = true, atomic_out = false; static constexpr Reduce reduce = Reduce::kCluster; };
struct Case22 { using out = __nv_bfloat16; static constexpr int unroll = 8, NB = 1, row_blocks = 1, warps = 8, splits = 1, smem_bytes = 4096; static constexpr MmaPipeline pipeline = MmaPipeline::kBatch; static constexpr bool dual = false, atomic_out = false; static constexpr Reduce reduce = Reduce::kNone; };
struct Case23 { using out = __nv_bfloat16; static constexpr int unroll = 8, NB = 1, row_blocks = 1, warps = 16, splits = 1, smem_bytes = 8192; static constexpr MmaPipeline pipeline = MmaPipeline::kBatch; static constexpr bool dual = false, atomic_out = false; static constexpr Reduce reduce = Reduce::kNone; };
struct Case24 { using out = __nv_bfloat16; static constexpr int NB = 8, stages = 8, warpgroups = 1, splits = 2, smem_bytes = 132096; static constexpr bool dual = false, half = false, staged = false; static constexpr Reduce reduce = Reduce::kSemaphore; };
struct Case25 { using out = __nv_bfloat16; static constexpr int NB = 8, stages = 8, warpgroups = 1, splits = 3, smem_bytes = 132096; static constexpr bool dual = false, half = false, staged = false; static constexpr Reduce reduce = Reduce::kAtomic; };
struct Case26 { using out = __nv_bfloat16; static constexpr int NB = 8, stages = 8, warpgroups = 1, splits = 1, smem_bytes = 132096; static constexpr bool dual = false, half = false, staged = true; static constexpr Reduce reduce = Reduce::kNone; };
struct Case27 { using out = __nv_bfloat16; static constexpr int NB = 16, stages = 6, warpgroups = 1, splits = 1, smem_bytes = 148480; static constexpr bool dual = false, half = false, staged = true; static constexpr Reduce reduce = Reduce::kNone; };
}  // namespace okc::launch
const char* okc_launch(int kernel, const okc::Call& call) {
    switch (kernel) {
        case 0: return okc::launch_compressed_gemv<okc::launch::Case0>(call);
        case 1: return okc::launch_compressed_gemv<okc::launch::Case1>(call);
        case 2: return okc::launch_compressed_gemv<okc::launch::Case2>(call);
        case 3: return okc::launch_compressed_ring<okc::launch::Case3>(call);
        case 4: return okc::launch_compressed_ring<okc::launch::Case4>(call);
        case 5: return okc::launch_tma<okc::launch::Case5>(call);
        case 6: return okc::launch_tma<okc::launch::Case6>(call);
        case 7: return okc::launch_tma<okc::launch::Case7>(call);
        case 8: return okc::launch_tma<okc::launch::Case8>(call);
        case 9: return okc::launch_tma<okc::launch::Case9>(call);
        case 10: return okc::launch_tma<okc::launch::Case10>(call);
        case 11: return okc::launch_tma<okc::launch::Case11>(call);
        case 12: return okc::launch_tma<okc::launch::Case12>(call);
        case 13: return okc::launch_tma<okc::launch::Case13>(call);
        case 14: return okc::launch_mma_gemv<okc::launch::Case14>(call);
        case 15: return okc::launch_mma_gemv<okc::launch::Case15>(call);
        case 16: return okc::launch_mma_gemv<okc::launch::Case16>(call);
        case 17: return okc::launch_mma_gemv<okc::launch::Case17>(call);
        case 18: return okc::launch_mma_gemv<okc::launch::Case18>(call);
        case 19: return okc::launch_mma_gemv<okc::launch::Case19>(call);
        case 20: return okc::launch_mma_gemv<okc::launch::Case20>(call);
        case 21: return okc::launch_mma_gemv<okc::launch::Case21>(call);
        case 22: return okc::launch_mma_gemv<okc::launch::Case22>(call);
        case 23: return okc::launch_mma_gemv<okc::launch::Case23>(call);
        case 24: return okc::launch_tma<okc::launch::Case24>(call);
        case 25: return okc::launch_tma<okc::launch::Case25>(call);
        case 26: return okc::launch_tma<okc::launch::Case26>(call);
        case 27: return okc::launch_tma<okc::launch::Case27>(call);
    }
    return "no such kernel in this build";
}
"""
