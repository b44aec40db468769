"""One host-only C++ program, built with nvcc once a run (conftest.py, host_program), that prints what the tests
read of the CUDA side's own arithmetic, each line behind its section's tag: the layout-fit check of every launch
the rules admit, tma_gemv.cuh's cluster owners and thread counts, compressed_gemv.cuh's tile map."""

import itertools
import shutil
import subprocess
from pathlib import Path

from generator import REPO_ROOT
from generator.engines import ENGINES
from generator.problem import load_problem

SRC = REPO_ROOT / "kernels_src"
HEADERS = ("mma_gemv.cuh", "compressed_gemv.cuh", "compressed_ring.cuh", "tma_gemv.cuh")
# The layout-fit check each CUDA launcher static_asserts (its case's smem_bytes, from its engine's rule, against the
# shared memory its kernel lays out).
LAYOUT_FITS = {
    "tma_gemv": "tma_layout_fits",
    "tma_gemm": "tma_layout_fits",
    "mma_gemv": "mma_gemv_layout_fits",
    "compressed_gemv": "compressed_gemv_layout_fits",
    "compressed_ring": "compressed_ring_layout_fits",
}
# Launch arguments no layout-fit check reads (the checks of cases differing only in these are one check).
NOT_LAYOUT = {"unroll", "pipeline", "out"}


def admitted_variants() -> list:
    """The launch-table case of every config each CUDA engine's rule admits on the problem's layers, at the largest
    m of each of its classes (splits, which the fields leave to the rule, in 1 .. 32), one per layout; then a
    tma_gemv case one byte short of its ring, which the check must refuse."""
    from kernels_src.engine import Variant

    found, problem = {}, load_problem()
    for engine in ENGINES:
        if engine.name not in LAYOUT_FITS:
            continue
        fields = [f.allowed if f.allowed is not None else (1, 2, 3, 4, 8, 16, 32) for f in engine.FIELDS]
        for layer, m, values in itertools.product(
            problem.layers.values(), engine.class_maxima(), itertools.product(*fields)
        ):
            cfg = engine.Config(*values)
            if engine.config_error(cfg, layer, m) is None:
                v = engine.variant(cfg, layer, m)
                layout = tuple((name, value) for name, value in v.args if name not in NOT_LAYOUT)
                found.setdefault((v.engine, layout), v)
    cases = list(found.values())
    tight = next(v for v in cases if v.engine == "tma_gemv" and dict(v.args)["splits"] == 1)
    launch = tuple((name, value - 1 if name == "smem_bytes" else value) for name, value in tight.launch)
    return cases + [Variant(tight.engine, tight.kernel, launch)]


def source() -> str:
    """The program: each section's definitions, then a main() that prints every section."""
    from generator.launch_table import launch_table

    cases = admitted_variants()
    fits = ", ".join(f"okc::{LAYOUT_FITS[v.engine]}<okc::launch::Case{i}>()" for i, v in enumerate(cases))
    named = ", ".join(f'"{v.case}"' for v in cases)
    return (
        "".join(f'#include "{SRC / name}"\n' for name in HEADERS)
        + "#include <cstdio>\n"
        + launch_table(cases, launchers=False)
        + f"\nconstexpr bool kFits[] = {{{fits}}};\nconst char* const kCases[] = {{{named}}};\n"
        "template <int NB> int bad_indices() {\n"
        " int bad = 0;\n"
        " for (int idx = 0; idx < 4 * NB * 4 * 32; ++idx) {\n"
        "  int r = 0, i = 0, t = 0;\n"
        "  okc::tile_coords<NB>(idx, r, i, t);\n"
        "  bad += okc::tile_index<NB>(r, i, t) != idx;\n"
        " }\n"
        " return bad;\n"
        "}\n"
        "int main() {\n"
        ' for (int i = 0; i < (int)(sizeof kFits / sizeof kFits[0]); ++i) printf("fits %d %s\\n", kFits[i], kCases[i]);\n'
        " for (int s = 2; s <= 16; ++s) {\n"
        '  printf("owners %d", s);\n'
        '  for (int r = 0; r <= s; ++r) printf(" %d", okc::tma_owned_from(r, s));\n'
        '  for (int t = 0; t < 128; ++t) printf(" %d", okc::tma_owner(t, s));\n'
        '  printf("\\n");\n'
        " }\n"
        ' printf("tile_index %d\\n", bad_indices<1>() + bad_indices<2>() + bad_indices<4>());\n'
        ' for (int wg : {1, 2, 4}) printf("threads %d %d\\n", wg, okc::tma_threads(wg));\n'
        "}\n"
    )


def run(folder: Path) -> str:
    """The program built (nvcc, host code only) and run in `folder`: its stdout."""
    if shutil.which("nvcc") is None:
        raise RuntimeError("no nvcc on PATH")
    (folder / "host_program.cu").write_text(source())
    subprocess.run(
        ["nvcc", "-std=c++17", str(folder / "host_program.cu"), "-o", str(folder / "host_program")],
        check=True,
    )
    return subprocess.run([str(folder / "host_program")], capture_output=True, text=True, check=True).stdout


def section(output: str, tag: str) -> list[str]:
    """The lines of one section, its tag taken off."""
    return [line.split(" ", 1)[1] for line in output.splitlines() if line.startswith(tag + " ")]
