"""A submission stand-in on the CPU for the harness tests (ab, profile): what generator.judge.launches.make_plans
uses of a built file (problem, TABLES and CUBLAS, prepare, add_operands, PlanContext), with every engine
computing x . W^T in float32 and returning bf16 (fp32 for the router), as the real kernels do. `flaw`: how it goes
wrong."""

import os

import torch

from generator.engines import BY_NAME, ENGINES
from kernels_src.engine import Layer
from kernels_src.registry import Table


class StandInEngine:
    def __init__(self, real, owner):
        self.real, self.owner = real, owner
        self.name, self.Config, self.fields = real.name, real.Config, real.fields

    def __getattr__(self, name):
        return getattr(self.real, name)  # its rule, fields and describe(): the real engine's

    def variant(self, cfg, layer, m):
        return None

    def plan(self, cfg, layer, m, ctx):
        w = ctx.parts[0][: layer.n_for(m)]
        flaw = self.owner.flaw

        def call(x):
            out = x.float() @ w.float().t()
            out = out if layer.dual else out.to(torch.bfloat16)
            if flaw == "off by one row" or (
                flaw == "under OKC_AB_FLAW=1" and os.environ.get("OKC_AB_FLAW") == "1"
            ):
                out[:, 1:] = out[:, :-1].clone()
            if flaw == "leaves a row unwritten":
                written = torch.empty_like(out)  # poisoned: NaN until written
                written[:, :-1] = out[:, :-1]
                out = written
            return out

        return call


class StandInModule:
    CompressionError = ValueError

    def __init__(self, problem, flaw=None):
        self.problem_ = problem
        self.flaw = flaw
        self.BY_NAME = {name: StandInEngine(engine, self) for name, engine in BY_NAME.items()}
        self.TABLES = tuple(Table(self.BY_NAME[engine.name], {}, {}) for engine in ENGINES)
        self.CUBLAS = self.BY_NAME["cublas"]

    def problem(self):
        layers = [
            Layer(l.name, l.n, l.k, l.dtype, l.narrow_n, l.narrow_max_m)
            for l in self.problem_.layers.values()
        ]
        return layers, self.TABLES

    def prepare(self, weights):
        return {"parts": {name: (w,) for name, w in weights.items()}}

    def add_operands(self, state, engine, cfg, layer):
        pass

    def PlanContext(self, state, layer):
        return type("Ctx", (), {"parts": state["parts"][layer.name]})()
