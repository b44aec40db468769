"""The compiled kernels' machine code (SASS, from cuobjdump), read for what a CPU machine can tell about a streaming
GEMV: how many instructions its steady-state loop issues per tensor-core instruction (`compile --loops`), and which
loads each tensor-core instruction waits for (`compile --waits`).

Why it matters: a consumer warpgroup runs one warp per scheduler, so its per-slot loop is issued back to back with
nothing to hide its latencies. At 72 CTAs (qkv_gate's half tiles) a slot must be consumed every ~140 ns, and ncu
found the loop itself was the limit (docs/tma-gemv.md: ~106 instructions per slot, most stalls "wait" and
"selected", not memory). Counting them needs no GPU.
"""

from __future__ import annotations

import importlib.util
import re
import shutil
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

_FUNCTION = re.compile(r"^\s*Function : (\S+)")
_INSTRUCTION = re.compile(r"^\s*/\*([0-9a-f]{4,})\*/\s+(.+?)\s*;")
_BACK_BRANCH = re.compile(r"\bBRA (?:`?\()?(0x[0-9a-f]+)")
_HIGH_WORD = re.compile(r"^\s*/\* (0x[0-9a-f]{16}) \*/\s*$")  # an instruction's second line: bits 64-127
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


# Scoreboards (`compile --waits`). ptxas sets scheduling bits on every instruction, in bits 105-125 of its 128:
# stall cycles (4 bits), yield (1), the scoreboard its result will release (3: "write barrier", 7 = none), the one
# its operands' reads release (3), and a 6-bit mask of scoreboards to wait on before it issues. NVIDIA does not
# document this; the layout is the one the Volta-and-later SASS assemblers (maxas, turingas) describe, and it reads
# consistently here: in a register-fed wgmma probe a run of LDGs sets SB5 and the WARPGROUP.ARRIVE ahead of the wgmmas that read
# their registers waits on SB5. With six scoreboards, many loads share one, and waiting on it waits for all of them.
N_SCOREBOARDS = 6
# Loads whose results a later instruction may wait for (LDGDEPBAR, cp.async's group marker, is waited on by DEPBAR).
LOAD_OPCODES = ("LDG", "LDS", "LDSM", "LD.")
WAIT_SHOWN_OPCODES = ("HGMMA", "HMMA", "WARPGROUP", "BAR", "MEMBAR", "SYNCS")


@dataclass(frozen=True)
class Control:
    stall: int
    write_barrier: int | None  # the scoreboard this instruction's result releases
    read_barrier: int | None  # the scoreboard released once its operands are read
    wait_mask: int  # bit k: waits for scoreboard k before issuing

    @property
    def waits_on(self) -> tuple[int, ...]:
        return tuple(sb for sb in range(N_SCOREBOARDS) if self.wait_mask >> sb & 1)


def decode_control(high_word: int) -> Control:
    """An instruction's scheduling bits, from the second (high) 64-bit word cuobjdump prints for it."""
    bits = high_word >> 41
    write, read = (bits >> 5) & 7, (bits >> 8) & 7
    return Control(
        bits & 0xF, None if write == 7 else write, None if read == 7 else read, (bits >> 11) & 0x3F
    )


def split_controlled(sass: str) -> dict[str, list[tuple[int, str, Control]]]:
    """As split_functions, with each instruction's decoded scheduling bits (an instruction whose second word is
    missing from the text is left out)."""
    functions: dict[str, list[tuple[int, str, Control]]] = {}
    current, pending = None, None
    for line in sass.splitlines():
        if match := _FUNCTION.match(line):
            current, pending = functions.setdefault(match.group(1), []), None
        elif current is not None and (match := _INSTRUCTION.match(line)):
            pending = (int(match.group(1), 16), match.group(2))
        elif pending is not None and (match := _HIGH_WORD.match(line)):
            current.append((*pending, decode_control(int(match.group(1), 16))))
            pending = None
    return functions


def _opcode(text: str) -> str:
    parts = text.split()
    return parts[1] if parts[0].startswith("@") and len(parts) > 1 else parts[0]


def scoreboard_waits(instructions: list[tuple[int, str, Control]]) -> list[str]:
    """One line per run of loads that release the same scoreboard, and one per tensor-core, barrier or fence
    instruction that waits on a scoreboard, naming the loads it waits for: those released on that scoreboard since
    it was last waited on. Read in address order, branches ignored: a straight-line reading, exact for an unrolled
    trip, approximate across loops."""
    outstanding: dict[int, list[str]] = {sb: [] for sb in range(N_SCOREBOARDS)}  # load opcodes per scoreboard
    lines: list[str] = []
    run: list = []  # [opcode, scoreboard, first address, last address, count]

    def flush():
        if run:
            opcode, sb, first, last, count = run
            span = f"{first:04x}" if count == 1 else f"{first:04x}-{last:04x}"
            lines.append(f"{span:>9}  {count:>3} x {opcode} -> SB{sb}")
            run.clear()

    for address, text, control in instructions:
        opcode = _opcode(text)
        waited = control.waits_on
        if opcode.startswith("DEPBAR"):  # an explicit wait (cp.async groups: DEPBAR.LE SB0, n)
            flush()
            lines.append(f"{address:04x}".rjust(9) + f"  {text}")
        if waited and opcode.startswith(WAIT_SHOWN_OPCODES):
            flush()
            counts = Counter(name for sb in waited for name in outstanding[sb])
            loads = ", ".join(f"{count} x {name}" for name, count in counts.items())
            boards = ",".join(f"SB{sb}" for sb in waited)
            lines.append(
                f"{address:04x}".rjust(9)
                + f"  waits on {boards}: {loads or 'nothing issued since'}  | {text}"
            )
        for sb in waited:
            outstanding[sb] = []
        sb = control.write_barrier
        if sb is not None and opcode.startswith(LOAD_OPCODES) and not opcode.startswith("LDGDEPBAR"):
            name = opcode.split(".")[0]
            outstanding[sb].append(name)
            if run and run[0] == name and run[1] == sb:
                run[3], run[4] = address, run[4] + 1
            else:
                flush()
                run.extend([name, sb, address, address, 1])
    flush()
    return lines
