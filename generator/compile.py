"""Compile CUDA_SRC with the local nvcc for sm_90a and read ptxas's resource report (no GPU needed)."""

from __future__ import annotations

import re
import shutil
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path


def nvcc_flags() -> list[str]:
    """What load_inline passes nvcc on the judge's machine (torch's common flags + ours), plus the ptxas report."""
    from torch.utils.cpp_extension import COMMON_NVCC_FLAGS

    from kernels_src.runtime import CUDA_FLAGS

    return [*COMMON_NVCC_FLAGS, *CUDA_FLAGS, "-Xptxas", "-v"]


_ENTRY = re.compile(r"Compiling entry function '(\S+)' for '(\w+)'")
_PROPS = re.compile(r"Function properties for (\S+)")
_FRAME = re.compile(r"(\d+) bytes stack frame, (\d+) bytes spill stores, (\d+) bytes spill loads")
_USED = re.compile(r"Used (\d+) registers(?:.*?, (\d+) bytes smem)?")


@dataclass
class KernelResources:
    mangled: str
    name: str = ""
    registers: int = 0
    smem_static: int = 0
    stack_frame: int = 0
    spill_stores: int = 0
    spill_loads: int = 0

    @property
    def spills(self) -> bool:
        return self.spill_stores > 0 or self.spill_loads > 0


def parse_ptxas(report: str) -> list[KernelResources]:
    """Kernels (entry functions) in ptxas -v output, in order of appearance."""
    kernels: dict[str, KernelResources] = {}
    current = None
    for line in report.splitlines():
        if match := _ENTRY.search(line):
            current = kernels.setdefault(match.group(1), KernelResources(match.group(1)))
        elif match := _PROPS.search(line):
            current = kernels.get(match.group(1))
        elif (match := _FRAME.search(line)) and current is not None:
            current.stack_frame, current.spill_stores, current.spill_loads = map(int, match.groups())
        elif (match := _USED.search(line)) and current is not None:
            current.registers = int(match.group(1))
            current.smem_static = int(match.group(2) or 0)
    return list(kernels.values())


# ptxas reports, as mere "info", when it had to serialise a kernel's wgmma instructions (each one waits for the
# previous to finish): "(C75xx) Potential Performance Loss: wgmma.mma_async instructions are serialized due to
# ..." (C7513 and C7515 were seen on an experimental compressed-tile TMA GEMV). That silently undoes a wgmma
# pipeline, so
# `compile` treats it as a failure.
_SERIALIZED = re.compile(
    r"\((C75\d\d)\) Potential Performance Loss: wgmma\.mma_async instructions are serialized(.*?)"
    r" in the function '(\S+)'"
)


def serialized_wgmma(report: str) -> list[tuple[str, str, str]]:
    """(code, reason, mangled kernel) for each wgmma serialisation ptxas reported."""
    return [(m.group(1), m.group(2).strip(), m.group(3)) for m in _SERIALIZED.finditer(report)]


def demangle(names: list[str]) -> list[str]:
    tool = shutil.which("cu++filt") or shutil.which("c++filt")
    if not tool or not names:
        return names
    out = subprocess.run([tool], input="\n".join(names), capture_output=True, text=True, check=False).stdout
    lines = out.splitlines()
    return lines if len(lines) == len(names) else names


def compile_cuda(
    cuda_src: str, nvcc: str = "nvcc", extra_flags: list[str] | None = None, cuobjdump: str | None = None
) -> tuple[int, str, list, str]:
    """(nvcc return code, its messages, kernels, SASS) for CUDA_SRC compiled to an object file in a temp folder.
    The SASS (cuobjdump -sass of the object) is "" unless a cuobjdump is given and nvcc succeeded."""
    with tempfile.TemporaryDirectory(prefix="okc_compile_") as tmp:
        src = Path(tmp) / "cuda_src.cu"
        obj = Path(tmp) / "cuda_src.o"
        src.write_text(cuda_src)
        cmd = [nvcc, "-c", *nvcc_flags(), *(extra_flags or []), str(src), "-o", str(obj)]
        proc = subprocess.run(cmd, capture_output=True, text=True, check=False)
        sass = ""
        if cuobjdump and proc.returncode == 0:
            dump = subprocess.run([cuobjdump, "-sass", str(obj)], capture_output=True, text=True, check=False)
            sass = dump.stdout if dump.returncode == 0 else ""
    messages = proc.stdout + proc.stderr
    kernels = parse_ptxas(messages)
    for kernel, name in zip(kernels, demangle([k.mangled for k in kernels])):
        kernel.name = name
    return proc.returncode, messages, kernels, sass


# nvcc's front end: `file(line): error: what`; the host compiler (gcc): `file:line:col: error: what`.
_NVCC_ERROR = re.compile(r"^(.+?)\((\d+)\): (?:catastrophic )?error:?\s*(.*)$")
_HOST_ERROR = re.compile(r"^(.+?):(\d+):(?:\d+:)? (?:fatal )?error: (.*)$")


def first_compile_error(messages: str, code: int) -> str:
    """A compiler's first error as one line `file:line: what` (the file a #line of the source names), and how many
    more there are; else its last line."""
    found = []
    for line in messages.splitlines():
        match = _NVCC_ERROR.match(line) or _HOST_ERROR.match(line)
        if match:
            found.append(f"{match.group(1)}:{match.group(2)}: {match.group(3).strip()}")
    if found:
        more = len(found) - 1
        more = f" (and {more} more error{'s' if more > 1 else ''})" if more else ""
        return found[0] + more
    tail = [line for line in messages.splitlines() if line.strip()][-1:] or ["(no message)"]
    return f"the compiler exited {code}: {tail[0].strip()}"


def python_headers() -> Path | None:
    """The folder holding Python.h, which pybind11 needs (a machine without python3-dev has none)."""
    import sysconfig

    include = Path(sysconfig.get_paths()["include"])
    return include if (include / "Python.h").is_file() else None


def syntax_check(
    cuda_src: str, binding_src: str, nvcc: str | None = "nvcc", cxx: str | None = "c++"
) -> str | None:
    """The first error, as one line, of CUDA_SRC (with the launch table it is built with: every kernel
    instantiated) through nvcc's front end and unoptimised code generation (PTX at cicc -O0: 0.7 s where the
    optimised build takes 5 s) and of BINDING_SRC through the host compiler (-fsyntax-only, with torch's pybind11),
    both at once; None when both compile. A compiler given as None is skipped. What only the optimised build
    finds (registers, spills, serialised wgmma) is `compile`'s job."""
    from torch.utils.cpp_extension import include_paths

    flags = [flag for flag in nvcc_flags() if flag not in ("-Xptxas", "-v")]
    with tempfile.TemporaryDirectory(prefix="okc_syntax_") as tmp:
        cuda, binding = Path(tmp) / "cuda_src.cu", Path(tmp) / "binding_src.cpp"
        cuda.write_text(cuda_src)
        binding.write_text(binding_src)
        includes = [f"-I{path}" for path in [*include_paths(), python_headers()]]
        commands = []
        if nvcc:
            commands.append(
                [nvcc, "-ptx", "-Xcicc", "-O0", *flags, str(cuda), "-o", str(Path(tmp) / "cuda.ptx")]
            )
        if cxx:
            commands.append([cxx, "-fsyntax-only", "-std=c++17", *includes, str(binding)])
        return first_error(commands)


def first_error(commands: list) -> str | None:
    """Run the commands at once: the first one's first error that fails, as one line, else None."""
    running = [
        subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True) for cmd in commands
    ]
    results = [(proc.communicate()[0], proc.returncode) for proc in running]
    for messages, code in results:
        if code != 0:
            return first_compile_error(messages, code)
    return None


def sources_check(cuda_src: str, nvcc: str = "nvcc") -> str | None:
    """The first error, as one line, of a CUDA_SRC without a launch table through nvcc (0.8 s: nothing is
    instantiated): what `compile` runs on every engine's source, the ones no table routes too."""
    flags = [flag for flag in nvcc_flags() if flag not in ("-Xptxas", "-v")]
    with tempfile.TemporaryDirectory(prefix="okc_sources_") as tmp:
        cuda = Path(tmp) / "cuda_src.cu"
        cuda.write_text(cuda_src)
        return first_error([[nvcc, "-c", *flags, str(cuda), "-o", str(Path(tmp) / "cuda_src.o")]])
