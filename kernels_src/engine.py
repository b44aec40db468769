"""What an engine is: a config of named fields, the rule saying where it runs, its table, what prepare() builds
for it, and its launch. Each engine module (kernels_src/<engine>.py) defines one Engine; registry.py lists them in
precedence order, and nothing else lists engines or their fields: the table loader, route(), prepare(), the CLI
and the generated docstring all read them from there.

A config field is declared once, as a Field: its name, type, allowed values, one-line meaning and default. The
engine's Config (a NamedTuple), its `values` / `modes`, its table's header and `make_config` are derived from its
FIELDS. A mode the CUDA side reads is a CudaEnum, and every constant both languages need is a CudaConstant: both
are rendered into the C++ ahead of the kernels (registry.cuda_prelude), so the CUDA side never types a code or a
figure of its own. A CUDA engine turns a config, a layer and m into a Variant: its C++ launcher's arguments by
name, the shared memory its rule counts among them; runtime.py's launch_table() renders each as a struct of
constants the launcher (at the end of the engine's .cuh) reads by name, and the CUDA side only asserts that its
layout fits."""

from typing import NamedTuple


def build_only(thing):
    """Marks what only the build and the tools read: dist/submission.py leaves out a def or class it decorates and
    an assignment of its value, and holds None for any other build_only(x) (generator/sources.py)."""
    return thing

# Shared memory a block may opt into on the H200 (static and dynamic together): 227 KB. Triton's kernels take theirs
# dynamically and count their barriers in (splitk_gemm); the CUDA kernels keep STATIC_SMEM of it for their static
# __shared__ variables (barriers, flags: 272 bytes at most today), the rest, SMEM_LIMIT, is their dynamic budget.
SMEM_PER_BLOCK = 227 * 1024
STATIC_SMEM = 1024
SMEM_LIMIT = SMEM_PER_BLOCK - STATIC_SMEM
# The split-K workspace every engine shares (one launch at a time), in floats: 36 MB (persistent_gemm's 128 x 256
# partials of 132 CTAs take 33 MB).
WORKSPACE_FLOATS = 9 * 1024 * 1024
# The zeroed fp32 accumulator of the accumulator split-K reductions (tma_gemm, splitk_gemm), in floats: every
# launch leaves it zero (8 MB: a 256-token tile of 8192 rows).
ACCUMULATOR_FLOATS = 256 * 8192
# The self-resetting int32 counters the CUDA engines share: one per row group for the semaphore reductions and
# tma_gemm's accumulator one (SEMAPHORE_GROUPS; tma_gemm takes one per 64-row tile, 128 at most here), then
# mma_gemv's output-atomic reduction's tickets and flags: one each per row group (TICKET_GROUPS) and split count
# (TICKET_SPLITS: S = 2, 4, 8, 16, 32). common.cuh reads the layout from the prelude.
SEMAPHORE_GROUPS = 4096
TICKET_GROUPS = 256
TICKET_SPLITS = 5
SEMAPHORES = SEMAPHORE_GROUPS + 2 * TICKET_SPLITS * TICKET_GROUPS
# The call layout (call.h, okc::Call; binding.cpp's plan()): a launch's operand pointers and 64-bit scalars.
CALL_OPERANDS = 4
CALL_SCALARS = 3
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
        """The output's dtype, the weight's: bf16 layers write bf16, the router fp32 (CUDA_TYPES: its C++ type)."""
        return self.dtype

    def n_for(self, m: int) -> int:
        """The output width the judge asks for at m tokens."""
        return self.narrow_n if self.narrow_n is not None and m <= self.narrow_max_m else self.n

    @build_only
    def weight_bytes(self, m: int) -> int:
        """Bytes of weight a call at m tokens must read at least once (the memory floor's numerator)."""
        return self.n_for(m) * self.k * DTYPE_BYTES[self.dtype]


class Operand(NamedTuple):
    """What prepare() builds once per layer for an engine, as the key its state holds it under: a name, and the
    block shape for operands built per shape (splitk_gemm's weight descriptors)."""

    name: str
    shape: tuple = ()


class Variant(NamedTuple):
    """One case of the launch table: the engine, the arguments that pick its kernel (its template arguments) and
    the rest of its launch's, each ((name, value), ...). runtime.launch_table renders them all as one struct the
    engine's launcher reads by name (`L::stages`): no argument order is written twice."""

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


class CudaType(str):
    """A C++ type as a launch argument (the output's element type): the launch table renders it as `using`."""


# The C++ element type of each dtype a layer's output may have (Layer.out_dtype).
CUDA_TYPES = {"bfloat16": CudaType("__nv_bfloat16"), "float32": CudaType("float")}


@build_only
class CudaConstant(NamedTuple):
    """A figure both languages read, written once in Python and rendered into the C++ ahead of the kernels
    (registry.cuda_prelude) as `constexpr <ctype> <name> = <value>;`, or a constexpr array for a tuple."""

    name: str  # its C++ name in namespace okc
    value: object  # an int, or a tuple of ints
    meaning: str  # the comment it carries there
    ctype: str = "int"

    def cpp(self) -> str:
        if isinstance(self.value, tuple):
            body = f"{self.ctype} {self.name}[] = {{{', '.join(map(str, self.value))}}}"
        else:
            body = f"{self.ctype} {self.name} = {self.value}"
        return f"// {self.meaning}\nconstexpr {body};"


class CudaCode(int):
    """A mode's code: compares, hashes and sorts as its number; the launch table writes its C++ name (and type)."""

    cpp: str
    ctype: str

    def __new__(cls, value: int, cpp: str, ctype: str):
        code = int.__new__(cls, value)
        code.cpp, code.ctype = cpp, ctype
        return code


class CudaEnum:
    """A mode as the CUDA side numbers it (CUTLASS's way: the Python names with their C++ spelling beside them):
    rendered into the C++ ahead of the kernels as `enum class <name> : int {k<Member> = <code>, ...}`, the codes
    the members' positions; the launch table names the enumerators (`okc::<name>::k<Member>`)."""

    def __init__(self, name: str, members: tuple, meaning: str):
        self.name, self.members, self.meaning = name, tuple(members), meaning

    @staticmethod
    def enumerator(member: str) -> str:
        return "k" + "".join(part[:1].upper() + part[1:] for part in member.split("_"))

    def code(self, member: str) -> CudaCode:
        return CudaCode(self.members.index(member), f"okc::{self.name}::{self.enumerator(member)}", f"okc::{self.name}")

    @build_only
    def cpp(self) -> str:
        codes = ", ".join(f"{self.enumerator(m)} = {i}" for i, m in enumerate(self.members))
        return f"// {self.meaning}\nenum class {self.name} : int {{ {codes} }};"


# The split-K reductions, one vocabulary from the tables to the kernels: each engine's `reduce` field names some of
# them, its launcher and kernel read the code. (tma_gemv.cuh's kernel compares cluster_gather, cluster_scatter and
# atomic at run time: at these codes, its SASS is the one measured.)
REDUCTION = CudaEnum(
    "Reduce",
    ("none", "cluster_gather", "cluster_scatter", "atomic", "semaphore", "cluster", "atomic_out"),
    "engine.py REDUCTION: the split-K reductions (each engine's reduce field names some of them)",
)

# The constants every CUDA engine shares (each engine adds its own: Engine.cuda_constants).
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
        "kTicketGroups", TICKET_GROUPS, "engine.py TICKET_GROUPS: row groups an output-atomic launch may have"
    ),
    CudaConstant("kTicketSplits", TICKET_SPLITS, "engine.py TICKET_SPLITS: S = 2, 4, 8, 16, 32"),
    CudaConstant(
        "kSemaphoreInts", SEMAPHORES, "engine.py SEMAPHORES: the int32 counters runtime.py allocates"
    ),
    CudaConstant("kCallOperands", CALL_OPERANDS, "engine.py CALL_OPERANDS: operand pointers a call holds"),
    CudaConstant("kCallScalars", CALL_SCALARS, "engine.py CALL_SCALARS: 64-bit scalars a call holds"),
    )
)


REQUIRED = None  # a Field's default when a table entry must give it
ENGINES_MADE: list = []  # every Engine in the order its module made it (registry.ENGINES orders them)


class Field(NamedTuple):
    """One config field, declared once: the Config, `values` / `modes`, make_config, the describe() lines and the
    table header (generator/tables.py renders it) all read it. `allowed` None: any integer (the engine's rule bounds it; `bounds` says how).
    """

    name: str
    type: type  # int, or str for a mode
    allowed: tuple | None
    meaning: str  # one line: what the field is (the table header's line for it)
    default: object = REQUIRED  # what a table entry that leaves the field out takes
    bounds: str = ""  # for allowed None: the range the rule admits, in words


def config_type(name: str, fields: tuple) -> type:
    """The NamedTuple of these fields, in order, with their defaults (fields with one must come last)."""
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
    """The rule every split-K engine shares: reduce none exactly when splits = 1."""
    if (cfg.splits == 1) != (cfg.reduce == "none"):
        return f"reduce={cfg.reduce} with splits={cfg.splits}: none exactly when splits = 1"
    return None


def column_blocks(m: int) -> int:
    """8-token column blocks (NB) of the GEMVs' x operand that cover m tokens: 1, 2 or 4."""
    return 1 if m <= 8 else 2 if m <= 16 else 4


class Engine:
    """The interface every engine implements; see the module docstring. Subclasses set the class attributes and
    override what applies: `rule` (admissibility beyond the fields' values), `operands` / `build_operand` (what
    prepare() makes once per layer), `variant` (CUDA engines) and `plan` (the launch). What only the tools read
    stays in generator/: the sweep's candidates (generator/candidates.py), the table headers (generator/tables.py).
    """

    name = ""
    FIELDS: tuple = ()  # its config's Fields, in order
    Config: type = tuple  # config_type(..., FIELDS)
    m_min, m_max = 1, None  # the m range the engine serves (None: no upper bound)
    has_defaults = False  # the table may name a config per weight kind (plain, dual) for m's it does not list
    sweep_m: tuple = build_only(())  # the m's its table lists, which `sweep` tunes (others borrow their entries)
    launcher = ""  # C++ launcher template (CUDA engines): launcher<L>(call), L the launch table's case (variant)
    cuda_constants: tuple = build_only(())  # the CudaConstants and CudaEnums its kernel reads
    summary = build_only("")  # one paragraph for the submission's docstring

    def __init__(self):
        ENGINES_MADE.append(self)

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
        """integer field -> its allowed values (fields the rule alone bounds are left out)"""
        return {f.name: f.allowed for f in self.FIELDS if f.type is int and f.allowed is not None}

    @build_only
    @property
    def modes(self) -> dict:
        """mode field -> its allowed names"""
        return {f.name: f.allowed for f in self.FIELDS if f.type is str}

    def serves(self, m: int) -> bool:
        return m >= self.m_min and (self.m_max is None or m <= self.m_max)

    def m_class(self, m: int) -> int:
        """m's of one class may borrow each other's table entries (GEMVs: the same column blocks)."""
        return 0

    def borrowed_m(self, m: int, listed) -> int | None:
        """The table row an unlisted m takes: the smallest listed m above it in its class, or None."""
        above = [row for row in listed if row >= m and self.m_class(row) == self.m_class(m)]
        return min(above) if above else None

    @build_only
    def class_maxima(self) -> tuple:
        """The largest m of each class (where a default is checked): every m a default could serve is no harder."""
        return ()

    @build_only
    def make_config(self, fields: dict):
        """A Config from a table entry's {field: value}, a field left out taking its default; ValueError (one line
        naming the field) if a field is missing, unknown or of the wrong type. Values are checked by config_error.
        """
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
        """[(field, value)] of a config (or its values in field order), a field left at its default left out: a
        field added with a default changes no existing description, label or docstring line."""
        return [
            (f.name, value)
            for f, value in zip(self.FIELDS, values)
            if f.default is REQUIRED or value != f.default
        ]

    @build_only
    def describe(self, cfg) -> str:
        """`warps=16 splits=1 ...`: a config as a reader wants it."""
        return " ".join(f"{name}={value}" for name, value in self.named_values(cfg))

    @build_only
    def config_error(self, cfg, layer: Layer, m: int) -> str | None:
        """Why cfg cannot serve m tokens of `layer` on this engine, or None if it can."""
        if not isinstance(cfg, self.Config):
            return f"cfg: expected a {self.Config.__name__}, got {cfg!r}"
        for f in self.FIELDS:
            value = getattr(cfg, f.name)
            if type(value) is not f.type:
                return f"{f.name}={value!r} must be {'an int' if f.type is int else 'a str'}"
            if f.allowed is not None and value not in f.allowed:
                shown = f.allowed if f.type is int else ", ".join(f.allowed)
                return f"{f.name}={value} is not one of {shown}"
        if not self.serves(m):
            top = "" if self.m_max is None else f" <= {self.m_max}"
            return f"the {self.name} engine serves {self.m_min} <= m{top}, not m={m}"
        return self.rule(cfg, layer, m)

    @build_only
    def rule(self, cfg, layer: Layer, m: int) -> str | None:
        return None

    def operands(self, cfg, layer: Layer) -> tuple:
        """The Operands prepare() builds once per layer for cfg (shared by every m routed to it)."""
        raise NotImplementedError(self.name)

    def build_operand(self, operand: str, parts: tuple, layer: Layer):
        """Build `operand` from the layer's weight parts ((w,) bf16, or (hi, lo) for fp32 weights)."""
        raise NotImplementedError(operand)

    def variant(self, cfg, layer: Layer, m: int) -> Variant | None:
        """The launch-table case cfg runs at m tokens of `layer`: its launcher's arguments by name, the dynamic shared
        memory (the engine's own figure, which its rule bounds) among them; None for an engine without CUDA."""
        return None

    def plan(self, cfg, layer: Layer, m: int, ctx):
        """A callable x -> out for m tokens of `layer` (ctx: runtime.PlanContext: operands, extension, buffers)."""
        raise NotImplementedError


class DecodeGemv(Engine):
    """What the three GEMVs for decode batches share: m <= 32, and m's of one class are those with the same number
    of 8-token column blocks (m <= 8, <= 16, <= 32), which borrow each other's entries; their tables list the rows
    m = 1, 8, 16, 32."""

    m_min, m_max = 1, 32
    sweep_m = build_only((1, 8, 16, 32))

    def m_class(self, m):
        return column_blocks(m)

    @build_only
    def class_maxima(self):
        return (8, 16, 32)
