"""GEMV launches named on the command line, `layer:m:engine:config` (e.g. `qkv_gate:32:tma:3,8,2`), or
`layer:m:cublas` for the file's cuBLAS fallback (what a null table entry runs): parsed and checked like table
entries, and made into calls on a prepared submission. Shared by `profile` (ncu) and `ab` (interleaved timing),
so a GEMV config can be timed against cuBLAS in one process, where a sweep's 2 % margin is too close to call.
"""

from __future__ import annotations

from dataclasses import dataclass
from types import ModuleType

from generator.problem import Problem
from kernels_src import dispatch

# engine -> (runtime launcher name, number of fields, the config check a table entry gets)
ENGINES = {
    "gemv": ("_gemv", len(dispatch.GEMV_FIELDS), dispatch.gemv_config_error),
    "tma": ("_tma_gemv", 3, dispatch.tma_config_error),
    "z": ("_zgemv", len(dispatch.ZGEMV_FIELDS), dispatch.zgemv_config_error),
    "cublas": ("_cublas", 0, None),  # runtime.py's fallback: serves any shape, takes no config
}


@dataclass(frozen=True)
class Launch:
    layer: str
    m: int
    engine: str
    config: tuple[int, ...]

    @property
    def spec(self) -> str:
        if not self.config:
            return f"{self.layer}:{self.m}:{self.engine}"
        return f"{self.layer}:{self.m}:{self.engine}:{','.join(map(str, self.config))}"


def parse_launch(text: str, problem: Problem) -> Launch:
    """`layer:m:engine:c1,c2,...` or `layer:m:cublas` -> Launch, or ValueError with one line saying what is
    wrong."""
    parts = text.split(":")
    if len(parts) == 3 and parts[2] == "cublas":
        parts.append("")
    if len(parts) != 4:
        raise ValueError(
            f"{text!r}: expected layer:m:engine:config or layer:m:cublas, e.g. qkv_gate:32:tma:3,8,2"
        )
    layer_name, m_text, engine, cfg_text = parts
    if layer_name not in problem.layers:
        raise ValueError(f"{text!r}: unknown layer {layer_name!r} (one of {', '.join(problem.layers)})")
    if engine not in ENGINES:
        raise ValueError(f"{text!r}: unknown engine {engine!r} (one of {', '.join(ENGINES)})")
    try:
        m = int(m_text)
        cfg = tuple(int(v) for v in cfg_text.split(",")) if cfg_text else ()
    except ValueError:
        raise ValueError(f"{text!r}: m and the config fields must be integers") from None
    _, fields, config_error = ENGINES[engine]
    if len(cfg) != fields:
        raise ValueError(f"{text!r}: the {engine} engine takes {fields} config fields, got {len(cfg)}")
    layer = problem.layers[layer_name]
    if config_error is None:  # cuBLAS: any m the judge may send
        error = None if m >= 1 else f"m must be at least 1, got m={m}"
    else:
        error = config_error(cfg, m, layer.dual, layer.n_for(m), layer.k)
    if error is not None:
        raise ValueError(f"{text!r}: {error}")
    return Launch(layer_name, m, engine, cfg)


def launch_calls(
    module: ModuleType, problem: Problem, launches: list[Launch], seed: int = 1, device: str = "cuda"
):
    """For each launch: (call, x, n), a no-argument call of its engine on fresh x (N(0, 1), never zeros) against
    the `normal` weights, prepared by the file and given every engine state the launches need; and those
    weights, for a reference. device: cuda, or cpu for a stand-in module in the tests."""
    import torch

    from generator.judge.sweep import add_engine_state
    from generator.judge.weights import make_weights, make_x

    weights = make_weights(problem, "normal", 0, device)
    state = module.prepare({name: w.clone() for name, w in weights.items()})
    for engine in {launch.engine for launch in launches}:
        add_engine_state(module, state, problem, engine, {launch.layer for launch in launches})
    gen = torch.Generator(device=device).manual_seed(seed)
    calls = []
    for launch in launches:
        layer = problem.layers[launch.layer]
        x, n = make_x(launch.m, layer.k, gen, device), layer.n_for(launch.m)
        run = getattr(module, ENGINES[launch.engine][0])
        # the GEMVs take (x, layer, n, config, state); the cuBLAS fallback has no config
        args = (x, launch.layer, n, *((launch.config,) if launch.config else ()), state)
        calls.append((lambda run=run, args=args: run(*args), x, n))
    return calls, weights
