"""Compile many Triton kernels at once: an engine whose configs compile on their first launch (Triton's JIT, keyed
on constexprs) can have hundreds of candidates, ~1-2 s of compiling each. Worker processes, each loading the
submission file, fill Triton's on-disk cache in parallel; the timing process then loads every kernel from it.
"""

from __future__ import annotations

import multiprocessing
import os
from pathlib import Path


def _compile_chunk(job) -> int:
    file, engine_name, items = job
    from generator.judge.loader import load_submission

    module = load_submission(Path(file), module_name=f"okc_precompile_{os.getpid()}")
    engine = module.BY_NAME[engine_name]
    layers = {layer.name: layer for layer in module.problem()[0]}
    for config, layer_name in items:
        engine.precompile(engine.Config(*config), layers[layer_name])
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
