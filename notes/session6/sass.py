"""Next session, on the H200 (its CUDA 13 has cuobjdump; this machine has none): why the compressed GEMV's main
loop got slower when only the code after it changed (notes/README.md, session 6, call 4).

Compiles CUDA_SRC twice for sm_90a, as shipped (kernels_src/) and with call 4's zgemv.cuh / zlaunch.cu
(notes/session6/zstage_vs_main.patch applied to a copy), dumps each zgemv_kernel<UG, NB, R, P> instantiation's SASS to OUT/, and prints
per variant and kernel: instructions in total and inside the hottest loop (the block between the loop's label
and its backward branch that holds the HMMAs), with counts of HMMA, PRMT, LDG, STL/LDL and BAR.

usage: python notes/session6/sass.py OUT"""

import collections
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from generator import REPO_ROOT
from generator.compile import nvcc_flags
from generator.sources import assemble_c_sources, load_sources

OPS = ("HMMA", "PRMT", "LDG", "LDS", "STL", "LDL", "BAR")


def cuda_source(variant: str) -> str:
    sources = load_sources()
    if variant == "shipped":
        return sources.cuda
    with tempfile.TemporaryDirectory() as tmp:
        src = Path(tmp) / "kernels_src"
        shutil.copytree(REPO_ROOT / "kernels_src", src)
        patch = REPO_ROOT / "notes/session6/zstage_vs_main.patch"
        tool = ["git", "apply"] if shutil.which("git") else ["patch", "-p1", "-i"]
        subprocess.run([*tool, str(patch)], cwd=tmp, check=True, capture_output=True)
        return assemble_c_sources(list(sources.cuda_files), src, Path(tmp))


def sass_of(cuda: str, out: Path, variant: str) -> str:
    cu, cubin = out / f"{variant}.cu", out / f"{variant}.cubin"
    cu.write_text(cuda)
    flags = [f for f in nvcc_flags() if f not in ("-Xptxas", "-v")]
    subprocess.run(["nvcc", "-cubin", *flags, str(cu), "-o", str(cubin)], check=True, capture_output=True)
    return subprocess.run(["cuobjdump", "-sass", str(cubin)], check=True, capture_output=True, text=True).stdout


def functions(sass: str) -> dict[str, list[str]]:
    found, name = {}, None
    for line in sass.splitlines():
        match = re.search(r"Function : (\S+)", line)
        if match:
            name = match.group(1)
            found[name] = []
        elif name:
            found[name].append(line)
    return found


def hot_loop(lines: list[str]) -> list[str]:
    """The backward branch whose body holds the most HMMAs: lines from its target label to it."""
    address = {}
    for i, line in enumerate(lines):
        match = re.search(r"/\*([0-9a-f]{4,})\*/", line)
        if match:
            address[int(match.group(1), 16)] = i
    best: list[str] = []
    for i, line in enumerate(lines):
        target = re.search(r"\bBRA\b.*?0x([0-9a-f]+)", line)
        if target and int(target.group(1), 16) in address and address[int(target.group(1), 16)] < i:
            body = lines[address[int(target.group(1), 16)] : i + 1]
            if sum("HMMA" in b for b in body) > sum("HMMA" in b for b in best):
                best = body
    return best


def counts(lines: list[str]) -> str:
    c = collections.Counter(op for line in lines for op in OPS if re.search(rf"\b{op}\b", line))
    n = sum(1 for line in lines if re.search(r"/\*[0-9a-f]{4,}\*/\s+\S", line))
    return f"{n:5d} instr  " + "  ".join(f"{op} {c[op]:3d}" for op in OPS)


def main(out: Path) -> None:
    out.mkdir(parents=True, exist_ok=True)
    for variant in ("shipped", "zstage"):
        sass = functions(sass_of(cuda_source(variant), out, variant))
        for name, lines in sass.items():
            if "zgemv_kernel" not in name:
                continue
            (out / f"{variant}_{name[:80]}.sass").write_text("\n".join(lines))
        for name, lines in sorted(sass.items()):
            if "zgemv_kernel" in name:
                print(f"{variant:8s} {name[:60]:60s} all {counts(lines)} | loop {counts(hot_loop(lines))}")


if __name__ == "__main__":
    main(Path(sys.argv[1]))
