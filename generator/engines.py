"""The engines: each one a kernels_src module (of those kernels_src/sources.yaml inlines) defines, in the routing
order each states (Engine.precedence), and cuBLAS, the fallback. Nothing else lists them."""

from __future__ import annotations

import importlib
from pathlib import Path

import yaml

import kernels_src.engine
from kernels_src.cublas import CUBLAS
from kernels_src.engine import Engine

KERNELS_SRC = Path(kernels_src.engine.__file__).resolve().parent  # the kernels_src this process imported


def defined_engines() -> list:
    """Every engine the modules kernels_src/sources.yaml lists define (an engine its module imports from
    another is that one's)."""
    listed = yaml.safe_load((KERNELS_SRC / "sources.yaml").read_text())["python"]
    found = []
    for file in listed:
        module = importlib.import_module(f"kernels_src.{file.removesuffix('.py')}")
        found += [
            value
            for value in vars(module).values()
            if isinstance(value, Engine) and type(value).__module__ == module.__name__
        ]
    return found


def _in_routing_order(engines: list) -> tuple:
    routed = [engine for engine in engines if engine.precedence is not None]
    places = [engine.precedence for engine in routed]
    if len(set(places)) != len(places):
        twice = next(engine for engine in routed if places.count(engine.precedence) > 1)
        raise ValueError(f"{twice.name}: precedence {twice.precedence} is another engine's too")
    return tuple(sorted(routed, key=lambda engine: engine.precedence))


ENGINES = _in_routing_order(defined_engines())  # every engine but the fallback, in routing order
BY_NAME = {engine.name: engine for engine in ENGINES + (CUBLAS,)}
