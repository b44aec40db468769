"""What an engine is: a config of named fields, the rule saying where it runs, its table, what prepare() builds
for it, and its launch. Each engine module (mma_gemv.py, tma_gemv.py, compressed_gemv.py, tma_gemm.py,
splitk_gemm.py, cublas.py) defines one Engine; registry.py lists them in precedence order, and nothing else lists engines or
their fields: the table loader, route(), prepare(), the CLI and the generated docstring all read them from there.

A config is a NamedTuple. Integer fields take the values in `Engine.values`; mode fields (`Engine.modes`) take one
of a few names, which the CUDA side receives as the name's index. A CUDA engine turns a config, a layer and m into
a Variant: the template arguments of its C++ launcher (the host launcher at the end of its .cuh) and the run-time
arguments after the call, in the config's field order; runtime.py's launch_table() writes one call per Variant, so
the table, the generated launch table and the launcher read the same fields in the same order."""

from typing import NamedTuple

# Dynamic shared memory a block may take: Hopper's 227 KB less 1 KB for the kernels' static variables
# (kernels_src/common.cuh, kSmemOptInLimit).
SMEM_LIMIT = 226 * 1024
# The split-K workspace every engine shares (one launch at a time), in floats: 32 MB.
WORKSPACE_FLOATS = 8 * 1024 * 1024
# The zeroed fp32 accumulator of the atomic split-K reductions (tma_gemm, splitk_gemm), in floats: every launch
# leaves it zero (8 MB: a 256-token tile of 8192 rows).
ACCUMULATOR_FLOATS = 256 * 8192
# Self-resetting int32 counters the CUDA engines share: one per row group for the semaphore reductions and
# tma_gemm's atomic one (0..4095; tma_gemm takes one per 64-row tile, 128 at most here), then mma_gemv's atomic
# reduction's tickets and flags (common.cuh, kSemaphoreInts; a test keeps them equal).
SEMAPHORES = 6656
# Hopper's largest thread-block cluster (past the portable 8, on request): the cluster reductions' splits limit.
CLUSTER_MAX = 16
# prepare() plans every m from 1 to this (or to the largest m a table lists); a larger m goes to cuBLAS.
PLAN_MAX_M = 256
DTYPE_BYTES = {"bfloat16": 2, "float32": 4}


class Layer(NamedTuple):
    """One projection of the problem (tables/problem.yaml): weight [n, k] of `dtype`; at m <= narrow_max_m the
    judge asks only for the first narrow_n outputs (the unpooler's slice on this GPU)."""

    name: str
    n: int
    k: int
    dtype: str
    narrow_n: int | None = None
    narrow_max_m: int | None = None

    @property
    def dual(self) -> bool:
        """fp32 weights (the router) run as a bf16 hi+lo pair into one fp32 accumulator, fp32 output."""
        return self.dtype == "float32"

    @property
    def out_dtype(self) -> str:
        return self.dtype

    def n_for(self, m: int) -> int:
        """The output width the judge asks for at m tokens."""
        return self.narrow_n if self.narrow_n is not None and m <= self.narrow_max_m else self.n

    def weight_bytes(self, m: int) -> int:
        """Bytes of weight a call at m tokens must read at least once (the memory floor's numerator)."""
        return self.n_for(m) * self.k * DTYPE_BYTES[self.dtype]


class Variant(NamedTuple):
    """One compiled kernel: the engine, its C++ launcher's template arguments and run-time arguments."""

    engine: str
    template: tuple
    runtime: tuple


def column_blocks(m: int) -> int:
    """8-token column blocks (NB) of the GEMVs' x operand that cover m tokens: 1, 2 or 4."""
    return 1 if m <= 8 else 2 if m <= 16 else 4


class Engine:
    """The interface every engine implements; see the module docstring. Subclasses set the class attributes and
    override what applies: `rule` (admissibility beyond the fields' values), `operands` / `build_operand` (what
    prepare() makes once per layer), `variant` (CUDA engines), `plan` (the launch) and `candidates` (sweep).
    """

    name = ""
    Config: type = tuple
    values: dict = {}  # integer field -> its allowed values
    modes: dict = {}  # mode field -> its allowed names
    m_min, m_max = 1, None  # the m range the engine serves (None: no upper bound)
    has_defaults = False  # the table may name a config per weight kind (plain, dual) for m's it does not list
    sweep_m: tuple = ()  # the m's its table lists, which `sweep` tunes (others borrow their entries)
    launcher = ""  # C++ launcher template (CUDA engines)
    template_fields: tuple = ()  # what the launcher's template arguments are, for the launch table's comments
    summary = ""  # one paragraph for the submission's docstring

    @property
    def table_file(self) -> str:
        return self.name + ".yaml"

    @property
    def fields(self) -> tuple:
        return self.Config._fields

    def serves(self, m: int) -> bool:
        return m >= self.m_min and (self.m_max is None or m <= self.m_max)

    def m_class(self, m: int) -> int:
        """m's of one class may borrow each other's table entries (GEMVs: the same column blocks)."""
        return 0

    def borrowed_m(self, m: int, listed) -> int | None:
        """The table row an unlisted m takes: the smallest listed m above it in its class, or None."""
        above = [row for row in listed if row >= m and self.m_class(row) == self.m_class(m)]
        return min(above) if above else None

    def class_maxima(self) -> tuple:
        """The largest m of each class (where a default is checked): every m a default could serve is no harder."""
        return ()

    def make_config(self, fields: dict):
        """A Config from a table entry's {field: value}; ValueError (one line naming the field) if a field is
        missing, unknown or of the wrong type. Values are checked by config_error."""
        unknown = [name for name in fields if name not in self.fields]
        if unknown:
            raise ValueError(
                f"unknown field {unknown[0]!r} (the {self.name} fields: {', '.join(self.fields)})"
            )
        missing = [name for name in self.fields if name not in fields]
        if missing:
            raise ValueError(
                f"missing field {missing[0]!r} (the {self.name} fields: {', '.join(self.fields)})"
            )
        for name in self.fields:
            want = str if name in self.modes else int
            value = fields[name]
            if type(value) is not want:
                kind = "one of " + ", ".join(self.modes[name]) if want is str else "an integer"
                raise ValueError(f"{name} must be {kind}, got {value!r}")
        return self.Config(**{name: fields[name] for name in self.fields})

    def parse_values(self, texts) -> object:
        """A Config from command-line values: positional in field order, or name=value (ValueError if wrong)."""
        fields = {}
        for position, text in enumerate(texts):
            name, eq, value = text.partition("=")
            if not eq:
                if position >= len(self.fields):
                    raise ValueError(f"the {self.name} engine has {len(self.fields)} fields, got more values")
                name, value = self.fields[position], text
            fields[name] = value if name in self.modes else _integer(name, value)
        return self.make_config(fields)

    def describe(self, cfg) -> str:
        """`warps=16 splits=1 ...`: a config as a reader wants it."""
        return " ".join(f"{name}={value}" for name, value in zip(self.fields, cfg))

    def config_error(self, cfg, layer: Layer, m: int) -> str | None:
        """Why cfg cannot serve m tokens of `layer` on this engine, or None if it can."""
        if not isinstance(cfg, self.Config):
            return f"expected a {self.Config.__name__}, got {cfg!r}"
        for name, allowed in self.values.items():
            if getattr(cfg, name) not in allowed:
                return f"{name}={getattr(cfg, name)} is not one of {allowed}"
        for name, allowed in self.modes.items():
            if getattr(cfg, name) not in allowed:
                return f"{name}={getattr(cfg, name)} is not one of {', '.join(allowed)}"
        if not self.serves(m):
            top = "" if self.m_max is None else f" <= {self.m_max}"
            return f"the {self.name} engine serves {self.m_min} <= m{top}, not m={m}"
        return self.rule(cfg, layer, m)

    def rule(self, cfg, layer: Layer, m: int) -> str | None:
        return None

    def operands(self, cfg, layer: Layer) -> tuple:
        """Names of what prepare() builds once per layer for cfg (shared by every m routed to it)."""
        return ()

    def build_operand(self, operand: str, parts: tuple, layer: Layer):
        """Build `operand` from the layer's weight parts ((w,) bf16, or (hi, lo) for fp32 weights)."""
        raise NotImplementedError(operand)

    def variant(self, cfg, layer: Layer, m: int) -> Variant | None:
        """The CUDA kernel cfg runs at m tokens of `layer`, or None (not a CUDA engine)."""
        return None

    def plan(self, cfg, layer: Layer, m: int, ctx):
        """A callable x -> out for m tokens of `layer` (ctx: runtime.PlanContext: operands, extension, buffers)."""
        raise NotImplementedError

    def candidates(self, layer: Layer, m: int) -> list:
        """Every config worth timing for this shape (sweep)."""
        return []


def _integer(name: str, text: str) -> int:
    try:
        return int(text)
    except ValueError:
        raise ValueError(f"{name} must be an integer, got {text!r}") from None


def mode_index(engine: Engine, cfg, name: str) -> int:
    """A mode field's value as the CUDA side numbers it: its position among the allowed names."""
    return engine.modes[name].index(getattr(cfg, name))


class DecodeGemv(Engine):
    """What the three GEMVs for decode batches share: m <= 32, and m's of one class are those with the same number
    of 8-token column blocks (m <= 8, <= 16, <= 32), which borrow each other's entries; their tables list the rows
    m = 1, 8, 16, 32."""

    m_min, m_max = 1, 32
    sweep_m = (1, 8, 16, 32)

    def m_class(self, m):
        return column_blocks(m)

    def class_maxima(self):
        return (8, 16, 32)
