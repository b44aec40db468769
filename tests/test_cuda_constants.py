"""Each constant and mode code the CUDA side shares with Python is written once, in Python: the engines declare
them (engine.CudaConstant, engine.CudaEnum) and generator/sources.py (cuda_prelude) renders them ahead of the kernels. These
tests fail when a hand-written CUDA source defines one of them again, types one of their figures, or a Python
module maps mode names to numbers by hand."""

import re

from generator import REPO_ROOT
from generator.engines import ENGINES
from generator.launch_table import launch_table
from generator.sources import cuda_prelude
from kernels_src.engine import SHARED_CUDA_CONSTANTS, CudaConstant, CudaEnum
from kernels_src.registry import variants

SRC = REPO_ROOT / "kernels_src"
CUDA_FILES = sorted(SRC.glob("*.cuh")) + sorted(SRC.glob("*.h")) + sorted(SRC.glob("*.cpp"))


def declared():
    items = dict.fromkeys(SHARED_CUDA_CONSTANTS)
    for engine in ENGINES:
        items.update(dict.fromkeys(engine.cuda_constants))
    return list(items)


def code_lines(path):
    """The file's lines with // comments and string literals blanked (what the compiler reads as code)."""
    for number, line in enumerate(path.read_text().splitlines(), 1):
        line = re.sub(r'"(\\.|[^"\\])*"', '""', line)
        yield number, line.split("//", 1)[0]


def test_every_declared_constant_and_mode_is_read_by_the_cpp_a_build_compiles():
    """A constant or mode the prelude carries is one the C++ reads (a kernel source, the binding, the probe, or
    the launch table the tables make): a declaration nothing reads is a figure kept up for nobody. And no two
    declarations share a C++ name."""
    from generator.problem import load_problem
    from generator.tables import load_tables

    problem = load_problem()
    tables = load_tables(problem)
    read = "\n".join(line for path in CUDA_FILES for _, line in code_lines(path))
    read += "".join(path.read_text() for path in (REPO_ROOT / "generator" / "probes").glob("*.cu"))
    read += launch_table(variants(problem.layers.values(), tables))
    items = declared()
    assert {type(item) for item in items} == {CudaConstant, CudaEnum} and len(items) >= 10
    assert len({item.name for item in items}) == len(items)
    unread = [item.name for item in items if not re.search(rf"\b{item.name}\b", read)]
    assert unread == []


def test_no_cuda_source_defines_or_types_a_generated_constant_again():
    items = declared()
    names = [item.name for item in items]
    definition = re.compile(
        r"\b("
        + "|".join(names)
        + r")\b\s*(\[\s*\])?\s*=[^=]|\b(enum|enum\s+class|struct|using)\s+("
        + "|".join(names)
        + r")\b"
    )
    # figures distinctive enough to spot: large values, value lists, and the SMEM limit's KB form
    figures = []
    for item in items:
        if isinstance(item, CudaConstant) and isinstance(item.value, tuple):
            figures.append(re.escape(", ".join(map(str, item.value))))
        elif isinstance(item, CudaConstant) and item.value >= 1000:
            figures.append(rf"\b{item.value}\b")
    figures.append(r"\b226\b")  # kSmemOptInLimit in KB
    figure = re.compile("|".join(figures))
    found = []
    for path in CUDA_FILES:
        for number, line in code_lines(path):
            if definition.search(line) or figure.search(line):
                found.append(f"{path.name}:{number}: {line.strip()}")
    assert found == []


def test_a_redefinition_would_be_found():
    """The search above is not vacuous: the old hand-written spellings match it."""
    names = [item.name for item in declared()]
    definition = re.compile(r"\b(" + "|".join(names) + r")\b\s*(\[\s*\])?\s*=[^=]")
    assert definition.search("constexpr size_t kSmemOptInLimit = 226 * 1024;")
    assert definition.search("constexpr int kTmaConsumers[] = {2, 4};")
    assert not definition.search("if (smem > kSmemOptInLimit) return")


def test_mode_codes_are_enum_classes_not_integers():
    """A mode travels as a scoped enum: a hand-written integer comparison with one would not compile, and the
    Python side has no hand map of mode names to numbers."""
    for path in CUDA_FILES:
        for number, line in code_lines(path):
            assert not re.search(
                r"\b(Pipeline|p|reduce|a\.reduce|L::reduce)\s*[!=]=\s*\d", line
            ), f"{path.name}:{number}: {line}"
    for path in sorted(SRC.glob("*.py")):
        text = path.read_text()
        assert not re.search(r'\{\s*"[a-z_]+"\s*:\s*\d+\s*,', text), path.name
        assert "mode_index" not in text, path.name


def test_the_launch_table_names_mode_codes():
    from kernels_src.mma_gemv import MMA_GEMV, MmaGemvConfig
    from kernels_src.engine import Layer

    layer = Layer("o", 8192, 1024, "bfloat16")
    cfg = MmaGemvConfig(warps=8, splits=1, unroll=2, pipeline="double_w_l2", row_blocks=2, reduce="none")
    variant = MMA_GEMV.variant(cfg, layer, 8)
    assert dict(variant.args)["pipeline"] == 5  # its code: the member's position
    table = launch_table([variant])
    assert "static constexpr MmaPipeline pipeline = MmaPipeline::kDoubleWL2;" in table
    assert "static constexpr Reduce reduce = Reduce::kNone;" in table


def test_the_submission_carries_the_prelude_ahead_of_both_sources():
    """CUDA_SRC and BINDING_SRC open with the generated constants (those the file's C++ reads, in the prelude's
    words and order), so each compiles on its own."""
    from generator.judge.loader import load_submission

    module = load_submission(REPO_ROOT / "dist" / "submission.py", module_name="prelude_test_submission")
    assert module.CUDA_SRC.startswith(module.CUDA_HEAD) and module.BINDING_SRC.startswith(module.CUDA_HEAD)
    prelude, head = cuda_prelude().splitlines(), module.CUDA_HEAD.lstrip("\n").splitlines()
    shipped = head[: head.index("}  // namespace okc") + 1]
    assert shipped[:4] == prelude[:4] and "kCallOperands" in module.CUDA_HEAD
    at = iter(prelude)
    assert all(line in at for line in shipped)  # the prelude's lines, in order, some left out
