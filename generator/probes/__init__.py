"""Probes: small CUDA kernels that isolate one hardware limit the engines' design depends on, each with its
harness and a `python -m generator probe-*` command. They are not part of the submission."""

from pathlib import Path

KERNELS_SRC = Path(__file__).resolve().parents[2] / "kernels_src"


def cuda_source(source: Path) -> str:
    """A probe's CUDA: its .cu, which includes the kernels' headers and the constants they share with Python
    (kernels_src/generated/constants.h, which `build` keeps current) from build_probe()'s include path."""
    return f'#line 1 "{source.name}"\n' + source.read_text()


def build_probe(name: str, source: Path, launcher: str, params: str):
    """A probe's extension, cached by torch like the submission's: its CUDA and a pybind11 shim (no torch headers)
    whose `launch(...)` passes plain integers to `launcher` and returns its message. params: the launcher's C++
    parameters, `int grid, long long stream, ...`."""
    from torch.utils.cpp_extension import load_inline

    names = ", ".join(p.split()[-1] for p in params.split(", "))
    types = ", ".join(p.rsplit(" ", 1)[0] for p in params.split(", "))
    binding = (
        "#include <pybind11/pybind11.h>\n#include <string>\n"
        f"const char* {launcher}({types});\n"
        f"static std::string launch({params}) {{ return {launcher}({names}); }}\n"
    )
    return load_inline(
        name=name,
        cpp_sources=binding,
        cuda_sources=cuda_source(source),
        functions=["launch"],
        extra_include_paths=[str(KERNELS_SRC)],
        extra_cflags=["-O1"],
        extra_cuda_cflags=["-O3", "-std=c++17", "-gencode=arch=compute_90a,code=sm_90a"],
        no_implicit_headers=True,
        with_pytorch_error_handling=False,  # plain pybind11: no torch headers to wrap errors with
        verbose=False,
    )
