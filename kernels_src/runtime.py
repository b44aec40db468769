"""prepare() and kernel_fn(), the judge's entry points, and the CUDA extension of the kernels routed to."""

import torch
from torch.utils.cpp_extension import load_inline

from kernels_src.compress import CompressionError
from kernels_src.cublas import CUBLAS, HI_LO, fallback_plan
from kernels_src.engine import (
    ACCUMULATOR_FLOATS,
    CALL_OPERANDS,
    CALL_SCALARS,
    SEMAPHORES,
    WORKSPACE_FLOATS,
    Layer,
)
from kernels_src.packing import split_hi_lo
from kernels_src.registry import plan_max_m, route
from kernels_src.splitk_gemm import COUNTERS

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
