"""What an engine is (Engine, Field, Variant) and what every engine shares: the buffers, the C++ constants."""

from typing import NamedTuple


def build_only(thing):
    """Marks what only the tools read: dist/submission.py leaves it out (generator/sources.py)."""
    return thing


# A block's shared memory on the H200; the CUDA kernels' dynamic budget leaves STATIC_SMEM for their static part
SMEM_PER_BLOCK = build_only(227 * 1024)
STATIC_SMEM = build_only(1024)
SMEM_LIMIT = build_only(SMEM_PER_BLOCK - STATIC_SMEM)
WORKSPACE_FLOATS = 9 * 1024 * 1024  # split-K partials, shared by every engine
ACCUMULATOR_FLOATS = 256 * 8192  # the zeroed fp32 accumulator of the atomic reductions
# int32 counters: a semaphore per row group, then mma_gemv's tickets and flags per row group and split count
SEMAPHORE_GROUPS = 4096
TICKET_GROUPS = 256
TICKET_SPLITS = 5
SEMAPHORES = SEMAPHORE_GROUPS + 2 * TICKET_SPLITS * TICKET_GROUPS
CALL_OPERANDS = 4  # a launch's pointers (call.h)
CALL_SCALARS = 3
CLUSTER_MAX = build_only(16)  # Hopper's largest thread-block cluster
PLAN_MAX_M = 256  # prepare() plans every m up to this; past it, cuBLAS
DTYPE_BYTES = build_only({"bfloat16": 2, "float32": 4})


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

    @build_only
    def weight_bytes(self, m: int) -> int:
        """The memory floor's bytes."""
        return self.n_for(m) * self.k * DTYPE_BYTES[self.dtype]


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


@build_only
class CudaConstant(NamedTuple):
    """A figure both languages read, rendered as a constexpr ahead of the kernels."""

    name: str
    value: object  # an int or a tuple of ints
    meaning: str
    ctype: str = "int"

    def cpp(self) -> str:
        if isinstance(self.value, tuple):
            body = f"{self.ctype} {self.name}[] = {{{', '.join(map(str, self.value))}}}"
        else:
            body = f"{self.ctype} {self.name} = {self.value}"
        return f"// {self.meaning}\nconstexpr {body};"


class CudaCode(int):
    """A mode's code: one of its enum's (CudaEnum.codes, where the launch table finds its enumerator)."""


class CudaEnum:
    """A mode as a C++ `enum class`."""

    def __init__(self, name: str, members: tuple, meaning: str):
        self.members = tuple(members)
        self.codes = tuple(CudaCode(code) for code in range(len(self.members)))
        self.name = build_only(name)
        self.meaning = build_only(meaning)

    @build_only
    def enumerator(self, code: int) -> str:
        """The C++ enumerator of a code, in namespace okc: Reduce::kClusterGather."""
        words = self.members[code].split("_")
        return f"{self.name}::k" + "".join(word[:1].upper() + word[1:] for word in words)

    def code(self, member: str) -> CudaCode:
        return self.codes[self.members.index(member)]

    @build_only
    def cpp(self) -> str:
        codes = ", ".join(f"{self.enumerator(i).split('::')[1]} = {i}" for i in range(len(self.members)))
        return f"// {self.meaning}\nenum class {self.name} : int {{ {codes} }};"


# the split-K reductions (tma_gemv.cuh's SASS was measured at these codes)
REDUCTION = CudaEnum(
    "Reduce",
    ("none", "cluster_gather", "cluster_scatter", "atomic", "semaphore", "cluster", "atomic_out"),
    "engine.py REDUCTION: the split-K reductions (each engine's reduce field names some of them)",
)

SHARED_CUDA_CONSTANTS = build_only(
    (
        REDUCTION,
        CudaConstant(
            "kSmemOptInLimit",
            SMEM_LIMIT,
            "engine.py SMEM_LIMIT: dynamic shared memory a CUDA kernel's block may take",
            "size_t",
        ),
        CudaConstant(
            "kTicketAt",
            SEMAPHORE_GROUPS,
            "engine.py SEMAPHORE_GROUPS: int offset of the tickets in the semaphore array",
        ),
        CudaConstant(
            "kTicketGroups",
            TICKET_GROUPS,
            "engine.py TICKET_GROUPS: row groups an output-atomic launch may have",
        ),
        CudaConstant("kTicketSplits", TICKET_SPLITS, "engine.py TICKET_SPLITS: S = 2, 4, 8, 16, 32"),
        CudaConstant(
            "kSemaphoreInts", SEMAPHORES, "engine.py SEMAPHORES: the int32 counters runtime.py allocates"
        ),
        CudaConstant(
            "kCallOperands", CALL_OPERANDS, "engine.py CALL_OPERANDS: operand pointers a call holds"
        ),
        CudaConstant("kCallScalars", CALL_SCALARS, "engine.py CALL_SCALARS: 64-bit scalars a call holds"),
    )
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


@build_only
def split_rule(cfg) -> str | None:
    """reduce none exactly when splits = 1."""
    if (cfg.splits == 1) != (cfg.reduce == "none"):
        return f"reduce={cfg.reduce} with splits={cfg.splits}: none exactly when splits = 1"
    return None


def column_blocks(m: int) -> int:
    """The GEMVs' 8-token column blocks (NB) for m tokens."""
    return 1 if m <= 8 else 2 if m <= 16 else 4


class Engine:
    """An engine: a subclass sets the attributes and implements operands, build_operand, plan and variant."""

    name = ""
    # Its place in the routing order (lower first; generator/engines.py finds the engines): a (layer, m) runs on
    # the first engine whose table gives it a config. None: cuBLAS, the fallback after them all.
    precedence: int | None = build_only(None)
    FIELDS: tuple = build_only(())
    Config: type = tuple  # config_type(..., FIELDS)
    m_min, m_max = 1, None  # the m's it serves (None: no upper bound)
    has_defaults = False  # a config per weight kind (plain, dual) for m's its table does not list
    may_refuse = build_only(False)  # compress() may refuse a layer's weights: prepare() then passes it over
    sweep_m: tuple = build_only(())  # its table's rows
    launcher = build_only("")  # launcher<L>(call), L a launch table case (generator/launch_table.py)
    cuda_constants: tuple = build_only(())
    summary = build_only("")

    @build_only
    @property
    def table_file(self) -> str:
        return self.name + ".yaml"

    @build_only
    @property
    def fields(self) -> tuple:
        return tuple(f.name for f in self.FIELDS)

    @build_only
    @property
    def values(self) -> dict:
        return {f.name: f.allowed for f in self.FIELDS if f.type is int and f.allowed is not None}

    @build_only
    @property
    def modes(self) -> dict:
        return {f.name: f.allowed for f in self.FIELDS if f.type is str}

    def serves(self, m: int) -> bool:
        return m >= self.m_min and (self.m_max is None or m <= self.m_max)

    def m_class(self, m: int) -> int:
        """m's of a class borrow each other's entries."""
        return 0

    def borrowed_m(self, m: int, listed) -> int | None:
        """The smallest listed m above m in its class, or None."""
        above = [row for row in listed if row >= m and self.m_class(row) == self.m_class(m)]
        return min(above) if above else None

    @build_only
    def class_maxima(self) -> tuple:
        return ()

    @build_only
    def make_config(self, fields: dict):
        """A Config from {field: value}; ValueError for a missing, unknown or mistyped field."""
        unknown = [name for name in fields if name not in self.fields]
        if unknown:
            raise ValueError(
                f"unknown field {unknown[0]!r} (the {self.name} fields: {', '.join(self.fields)})"
            )
        missing = [f.name for f in self.FIELDS if f.name not in fields and f.default is REQUIRED]
        if missing:
            raise ValueError(
                f"missing field {missing[0]!r} (the {self.name} fields: {', '.join(self.fields)})"
            )
        for f in self.FIELDS:
            value = fields.get(f.name, f.default)
            if type(value) is not f.type:
                kind = "one of " + ", ".join(f.allowed) if f.type is str else "an integer"
                raise ValueError(f"{f.name} must be {kind}, got {value!r}")
        return self.Config(**{f.name: fields.get(f.name, f.default) for f in self.FIELDS})

    @build_only
    def named_values(self, values) -> list:
        """[(field, value)], those at their default left out."""
        return [
            (f.name, value)
            for f, value in zip(self.FIELDS, values)
            if f.default is REQUIRED or value != f.default
        ]

    @build_only
    def describe(self, cfg) -> str:
        """`warps=16 splits=1 ...`"""
        return " ".join(f"{name}={value}" for name, value in self.named_values(cfg))

    @build_only
    def field_error(self, cfg) -> str | None:
        """Why cfg's values are not this engine's, or None."""
        if not isinstance(cfg, self.Config):
            return f"cfg: expected a {self.Config.__name__}, got {cfg!r}"
        for f in self.FIELDS:
            value = getattr(cfg, f.name)
            if type(value) is not f.type:
                return f"{f.name}={value!r} must be {'an int' if f.type is int else 'a str'}"
            if f.allowed is not None and value not in f.allowed:
                shown = f.allowed if f.type is int else ", ".join(f.allowed)
                return f"{f.name}={value} is not one of {shown}"
        return None

    @build_only
    def config_error(self, cfg, layer: Layer, m: int) -> str | None:
        """Why cfg cannot serve m tokens of `layer`, or None."""
        error = self.field_error(cfg)
        if error:
            return error
        if not self.serves(m):
            top = "" if self.m_max is None else f" <= {self.m_max}"
            return f"the {self.name} engine serves {self.m_min} <= m{top}, not m={m}"
        return self.rule(cfg, layer, m)

    @build_only
    def rule(self, cfg, layer: Layer, m: int) -> str | None:
        return None

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
    sweep_m = build_only((1, 8, 16, 32))

    def m_class(self, m):
        return column_blocks(m)

    @build_only
    def class_maxima(self):
        return (8, 16, 32)
