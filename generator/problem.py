"""The problem description (tables/problem.yaml): layers, their shapes and dtypes, and the m's the judge sends."""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from pathlib import Path

from generator import REPO_ROOT
from generator.contract import TAG_LINE
from generator.errors import display_path
from generator.yamlio import Located, load_located, require_keys
from kernels_src.engine import DTYPE_BYTES, PLAN_MAX_M, Layer

PROBLEM_NAME = TAG_LINE.rsplit("=", 1)[1]  # muse_bf16_proj
# Why no m past PLAN_MAX_M is checked, timed or tabled: the judge sends none, and prepare() plans none.
PLAN_MAX_M_IS = (
    "the largest m the judge sends and the last prepare() plans (kernels_src/engine.py PLAN_MAX_M)"
)

# Layer is the submission's own (kernels_src/engine.py): name, n, k, dtype, narrow_n, narrow_max_m, and n_for(m),
# dual, weight_bytes(m).


@dataclass(frozen=True)
class Problem:
    name: str
    layers: dict[str, Layer]
    verify_m: tuple[int, ...]
    bench_m: tuple[int, ...]
    lines: dict = field(default_factory=dict)  # layer name -> its line in tables/problem.yaml
    layers_line: int | None = None  # the line of `layers:`
    file: str = "tables/problem.yaml"

    def shapes(self, ms) -> list[tuple[str, int]]:
        return [(layer, m) for layer in self.layers for m in ms]

    def shrunk(self, factor: int) -> "Problem":
        """The same layers, m's and slice rule with every n and k divided by factor (CPU-sized checks)."""
        layers = {
            name: layer._replace(
                n=layer.n // factor,
                k=layer.k // factor,
                narrow_n=layer.narrow_n // factor if layer.narrow_n else None,
            )
            for name, layer in self.layers.items()
        }
        return replace(self, layers=layers)


def _positive_int(v: Located, what: str) -> int:
    if not isinstance(v.value, int) or isinstance(v.value, bool) or v.value <= 0:
        raise v.fail(f"{what} must be a positive integer, got {v.value!r}")
    return v.value


def _m_list(v: Located, what: str) -> tuple[int, ...]:
    if not isinstance(v.value, list) or not v.value:
        raise v.fail(f"{what} must be a non-empty list of token counts")
    ms = tuple(_positive_int(item, f"each of {what}") for item in v.value)
    for item in v.value:
        if item.value > PLAN_MAX_M:
            raise item.fail(f"{what}: {item.value} is over {PLAN_MAX_M}, {PLAN_MAX_M_IS}")
    if list(ms) != sorted(set(ms)):
        raise v.fail(f"{what} must be strictly increasing")
    return ms


def parse_problem(doc: Located) -> Problem:
    top = require_keys(doc, "the problem", {"problem", "layers", "verify_m", "bench_m"})
    layers, lines = {}, {}
    for name, (name_loc, spec) in (
        top["layers"].value.items() if isinstance(top["layers"].value, dict) else []
    ):
        if not isinstance(name, str) or not name.isidentifier():
            raise name_loc.fail(f"layer name {name!r} must be an identifier")
        fields = require_keys(spec, f"layer {name!r}", {"n", "k", "dtype"}, {"narrow"})
        dtype = fields["dtype"]
        if dtype.value not in DTYPE_BYTES:
            raise dtype.fail(
                f"layer {name!r}: dtype must be one of {sorted(DTYPE_BYTES)}, got {dtype.value!r}"
            )
        narrow_n = narrow_max_m = None
        if "narrow" in fields:
            narrow = require_keys(fields["narrow"], f"layer {name!r} narrow", {"n", "max_m"})
            narrow_n = _positive_int(narrow["n"], "narrow.n")
            narrow_max_m = _positive_int(narrow["max_m"], "narrow.max_m")
        lines[name] = name_loc.line
        layers[name] = Layer(
            name,
            _positive_int(fields["n"], f"layer {name!r} n"),
            _positive_int(fields["k"], f"layer {name!r} k"),
            dtype.value,
            narrow_n,
            narrow_max_m,
        )
    if not layers:
        raise top["layers"].fail("layers must be a non-empty mapping")
    name = top["problem"]
    if name.value != PROBLEM_NAME:
        raise name.fail(
            f"problem must be {PROBLEM_NAME} (the judge's problem, which the submission's first line names),"
            f" got {name.value!r}"
        )
    return Problem(
        name=PROBLEM_NAME,
        layers=layers,
        verify_m=_m_list(top["verify_m"], "verify_m"),
        bench_m=_m_list(top["bench_m"], "bench_m"),
        lines=lines,
        layers_line=top["layers"].line,
        file=doc.file,
    )


def load_problem(root: Path = REPO_ROOT) -> Problem:
    path = Path(root) / "tables" / "problem.yaml"
    return parse_problem(load_located(path, display_path(path, Path(root))))
