"""The compiled kernels' machine code (SASS, from cuobjdump), read for the one number a CPU machine can give about a
streaming GEMV's consumer: how many instructions its steady-state loop issues per tensor-core instruction.

Why it matters: a consumer warpgroup runs one warp per scheduler, so its per-slot loop is issued back to back with
nothing to hide its latencies. At 72 CTAs (qkv_gate's half tiles) a slot must be consumed every ~140 ns, and ncu
found the loop itself was the limit (notes/session15, call 3: ~106 instructions per slot, most stalls "wait" and
"selected", not memory). Counting them needs no GPU.
"""

from __future__ import annotations

import importlib.util
import re
import shutil
from dataclasses import dataclass
from pathlib import Path

_FUNCTION = re.compile(r"^\s*Function : (\S+)")
_INSTRUCTION = re.compile(r"^\s*/\*([0-9a-f]{4,})\*/\s+(.+?)\s*;")
_BACK_BRANCH = re.compile(r"\bBRA (?:`?\()?(0x[0-9a-f]+)")
MMA_OPCODES = ("HGMMA", "HMMA")  # wgmma and mma.sync


@dataclass(frozen=True)
class Loop:
    """A backward branch's body: [start, end] byte addresses, its instructions, and how many are tensor-core MMAs
    (and R2UR moves, which feed wgmma's uniform-register descriptors)."""

    start: int
    end: int
    instructions: int
    mma: int
    r2ur: int

    @property
    def per_mma(self) -> float:
        return self.instructions / self.mma


def find_cuobjdump(nvcc: str = "nvcc") -> str | None:
    """cuobjdump on PATH, beside nvcc, or the copy triton bundles (triton/backends/nvidia/bin); None if none."""
    for candidate in (shutil.which("cuobjdump"), shutil.which(nvcc)):
        if candidate:
            path = Path(candidate).resolve().parent / "cuobjdump"
            if path.is_file():
                return str(path)
    spec = importlib.util.find_spec("triton")
    for root in (spec.submodule_search_locations or []) if spec else []:
        path = Path(root) / "backends" / "nvidia" / "bin" / "cuobjdump"
        if path.is_file():
            return str(path)
    return None


def split_functions(sass: str) -> dict[str, list[tuple[int, str]]]:
    """cuobjdump -sass text -> {mangled function name: [(byte address, instruction text)]}, in order."""
    functions: dict[str, list[tuple[int, str]]] = {}
    current = None
    for line in sass.splitlines():
        if match := _FUNCTION.match(line):
            current = functions.setdefault(match.group(1), [])
        elif current is not None and (match := _INSTRUCTION.match(line)):
            current.append((int(match.group(1), 16), match.group(2)))
    return functions


def mma_loops(instructions: list[tuple[int, str]]) -> list[Loop]:
    """Every loop (a branch to an earlier address) whose body holds at least one MMA, fewest instructions per
    MMA first (then the smaller body)."""
    loops = []
    for address, text in instructions:
        match = _BACK_BRANCH.search(text)
        if not match or int(match.group(1), 16) >= address:
            continue
        start = int(match.group(1), 16)
        body = [op for at, op in instructions if start <= at <= address]
        mma = sum(op.split()[0].startswith(MMA_OPCODES) or _is_predicated_mma(op) for op in body)
        if mma:
            r2ur = sum("R2UR" in op for op in body)
            loops.append(Loop(start, address, len(body), mma, r2ur))
    return sorted(loops, key=lambda loop: (loop.per_mma, loop.instructions, loop.start))


def _is_predicated_mma(op: str) -> bool:
    parts = op.split()
    return len(parts) > 1 and parts[0].startswith("@") and parts[1].startswith(MMA_OPCODES)


def steady_loop(instructions: list[tuple[int, str]]) -> Loop | None:
    """The steady-state MMA loop: the loop with the fewest instructions per MMA; None for a kernel without one.
    Not the smallest body: an mbarrier retry block at the end of a function branches back into the middle of an
    unrolled loop, and its "body" (everything from there to the retry block) can be smaller than the loop while
    holding only its last MMAs."""
    loops = mma_loops(instructions)
    return loops[0] if loops else None
