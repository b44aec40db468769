"""Launches named on the command line, `layer:m:engine:values` (values: the engine's config fields in order, or
`field=value`, comma-separated; e.g. `qkv_gate:32:tma_gemv:1,14,half,none` or
`router:128:splitk_gemm:block_n=64,block_m=64,block_k=128,splits=16,warps=4,stages=3,loads=tma,reduce=atomic`),
or `layer:m:cublas` for the fallback: parsed and checked like table entries, and made into calls on a prepared
submission. Shared by `profile` (ncu) and `ab` (interleaved timing)."""

from __future__ import annotations

from dataclasses import dataclass
from types import ModuleType

from generator.engines import BY_NAME
from generator.judge.loader import engines_of
from generator.problem import Problem


@dataclass(frozen=True)
class Launch:
    layer: str
    m: int
    engine: str
    config: tuple

    @property
    def spec(self) -> str:
        """The launch as the command line writes it, every field named (but those at their default)."""
        if not self.config:
            return f"{self.layer}:{self.m}:{self.engine}"
        named = BY_NAME[self.engine].named_values(self.config)
        values = ",".join(f"{name}={value}" for name, value in named)
        return f"{self.layer}:{self.m}:{self.engine}:{values}"


def parse_values(engine, texts):
    """A Config of `engine` from command-line values: positional in field order, or name=value (ValueError if
    wrong)."""
    fields = {}
    for position, text in enumerate(texts):
        name, eq, value = text.partition("=")
        if not eq:
            if position >= len(engine.fields):
                raise ValueError(f"the {engine.name} engine has {len(engine.fields)} fields, got more values")
            name, value = engine.fields[position], text
        if name not in engine.modes:
            try:
                value = int(value)
            except ValueError:
                raise ValueError(f"{name} must be an integer, got {value!r}") from None
        fields[name] = value
    return engine.make_config(fields)


def parse_launch(text: str, problem: Problem) -> Launch:
    """`layer:m:engine:values` or `layer:m:cublas` -> Launch, or ValueError with one line saying what is wrong."""
    parts = text.split(":")
    if len(parts) == 3:
        parts.append("")
    if len(parts) != 4:
        raise ValueError(
            f"{text!r}: expected layer:m:engine:values or layer:m:cublas, e.g. qkv_gate:32:tma_gemv:1,14,half,none"
        )
    layer_name, m_text, engine_name, values = parts
    if layer_name not in problem.layers:
        raise ValueError(f"{text!r}: unknown layer {layer_name!r} (one of {', '.join(problem.layers)})")
    engine = BY_NAME.get(engine_name)
    if engine is None:
        raise ValueError(f"{text!r}: unknown engine {engine_name!r} (one of {', '.join(BY_NAME)})")
    try:
        m = int(m_text)
    except ValueError:
        raise ValueError(f"{text!r}: m must be an integer, got {m_text!r}") from None
    try:
        cfg = parse_values(engine, values.split(",") if values else [])
    except ValueError as exc:
        raise ValueError(f"{text!r}: {exc}") from None
    error = engine.config_error(cfg, problem.layers[layer_name], m)
    if error is not None:
        raise ValueError(f"{text!r}: {error}")
    return Launch(layer_name, m, engine_name, tuple(cfg))


def module_config(module: ModuleType, engine: str, config: tuple):
    """The submission's own engine and a Config of its own class (the file defines its engines anew)."""
    engine = engines_of(module)[engine]
    return engine, engine.Config(*config)


def launch_calls(
    module: ModuleType, problem: Problem, launches: list[Launch], seed: int = 1, device: str = "cuda"
):
    """For each launch: (call, x, n), a no-argument call on fresh x (N(0, 1), never zeros) against the `normal`
    weights, prepared by the file, its engine's operands built and its kernel compiled into the extension beside
    the file's own; and those weights, for a reference. device: cuda, or cpu for a stand-in module in the tests.
    """
    import torch

    from generator.judge.weights import make_weights, make_x

    weights = make_weights(problem, "normal", 0, device)
    state = module.prepare({name: w.clone() for name, w in weights.items()})
    plans = make_plans(
        module, state, [(launch.layer, launch.m, launch.engine, launch.config) for launch in launches]
    )
    gen = torch.Generator(device=device).manual_seed(seed)
    calls = []
    for launch, plan in zip(launches, plans):
        layer = problem.layers[launch.layer]
        x, n = make_x(launch.m, layer.k, gen, device), layer.n_for(launch.m)
        calls.append((lambda plan=plan, x=x: plan(x), x, n))
    return calls, weights


def use_kernels(module: ModuleType, state, extra) -> None:
    """Make `extra` kernels (this checkout's engines' Variants) launchable on a prepared state too (configs no
    table names): an extension of their own beside the file's (their launch table rendered here: the file holds
    none for them)."""
    from generator.launch_table import extension_of

    missing = [variant for variant in dict.fromkeys(extra) if variant.case not in state.kernels]
    if missing:
        extension = extension_of(module, missing)
        state.kernels.update({variant.case: (extension, number) for number, variant in enumerate(missing)})


def make_plans(module: ModuleType, state: dict, wanted) -> list:
    """A launch (x -> out) for each (layer, m, engine, config) on a prepared state: the operands built, and every
    CUDA kernel they need compiled into one extension with the file's own (compress() refusing a layer raises).
    """
    layers = {layer.name: layer for layer in module.problem()[0]}
    chosen = []
    for layer_name, m, engine_name, config in wanted:
        engine, cfg = module_config(module, engine_name, config)
        layer = layers[layer_name]
        module.add_operands(state, engine, cfg, layer)
        chosen.append((engine, cfg, layer, m))
    cuda = [
        (BY_NAME[e.name], tuple(cfg), layer, m) for e, cfg, layer, m in chosen if e.variant(cfg, layer, m)
    ]
    use_kernels(
        module, state, [engine.variant(engine.Config(*cfg), layer, m) for engine, cfg, layer, m in cuda]
    )
    return [engine.plan(cfg, layer, m, module.PlanContext(state, layer)) for engine, cfg, layer, m in chosen]
