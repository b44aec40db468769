"""Compile many Triton kernels at once: an engine whose configs compile on their first launch (Triton's JIT, keyed
on constexprs) can have hundreds of candidates, ~1-2 s of compiling each. Worker processes, each loading the
submission file, fill Triton's on-disk cache in parallel; the timing process then loads every kernel from it.
"""

from __future__ import annotations

import multiprocessing
import os
from pathlib import Path


def compile_splitk_gemm(module, cfg, layer, device="cuda") -> None:
    """splitk_gemm's kernel for cfg on `layer`'s weight kind, compiled into Triton's cache by one launch of the
    file's own on small tensors: what the cache is keyed on (the constexprs, the warps and stages, the arguments'
    dtypes and 16-divisibility) is what a real launch has, and M and splits are never specialised."""
    import torch

    m, k, dual = 40, cfg.block_k * cfg.splits, layer.dual
    padded = -(-m // cfg.block_m) * cfg.block_m  # the token tiles' rows
    x = torch.randn(m, k, device=device).to(torch.bfloat16)
    weights = tuple(
        torch.randn(cfg.block_n, k, device=device).to(torch.bfloat16) for _ in range(2 if dual else 1)
    )
    out = torch.empty(m, cfg.block_n, dtype=getattr(torch, layer.out_dtype), device=device)
    counters = torch.zeros(module.COUNTERS, dtype=torch.int32, device=device)
    accumulator = torch.zeros(padded * cfg.block_n, dtype=torch.float32, device=device)
    workspace = torch.empty(padded * cfg.block_n * cfg.splits, dtype=torch.float32, device=device)
    module.launch_splitk_gemm(x, weights, out, workspace, counters, accumulator, cfg)


# The engines whose kernels compile at their first launch (Triton's JIT), by name: how to compile one config.
PRECOMPILERS = {"splitk_gemm": compile_splitk_gemm}


def _compile_chunk(job) -> int:
    file, engine_name, items = job
    from generator.judge.loader import engines_of, load_submission

    module = load_submission(Path(file), module_name=f"okc_precompile_{os.getpid()}")
    engine = engines_of(module)[engine_name]
    layers = {layer.name: layer for layer in module.problem()[0]}
    for config, layer_name in items:
        PRECOMPILERS[engine_name](module, engine.Config(*config), layers[layer_name])
    return len(items)


def precompile(file: Path, engine_name: str, items, workers: int | None = None) -> int:
    """Compile each (config, layer) of engine `engine_name` into Triton's cache, in `workers` processes (default:
    the CPUs less two, at most 16). One (config, weight kind) is compiled once. Returns how many were compiled.
    """
    unique = list(dict.fromkeys((tuple(config), layer) for config, layer in items))
    if not unique:
        return 0
    workers = workers or max(1, min(16, (os.cpu_count() or 2) - 2))
    chunks = [unique[i::workers] for i in range(workers) if unique[i::workers]]
    context = multiprocessing.get_context("spawn")  # CUDA does not survive a fork
    with context.Pool(len(chunks)) as pool:
        return sum(pool.map(_compile_chunk, [(str(file), engine_name, chunk) for chunk in chunks]))
