"""README.md's facts that the source decides, derived here: `headers` rewrites them and `headers --check` names a
stale one, as it does a table's field lines. The engine table's engines (in precedence order, cuBLAS last), the m's
each serves and its kernel's source; the launch table's size; the judge's m lists; the file's tag line. The prose
stays the README's: an engine's `what it is` cell, and the rows themselves (a missing one is an error: its words
are the writer's)."""

from __future__ import annotations

import re
from pathlib import Path

from generator.candidates import candidates
from generator.contract import TAG_LINE
from generator.judge.precompile import PRECOMPILERS
from generator.engines import BY_NAME, ENGINES
from generator.errors import display_path, read_text
from generator.judge.sweep import sweep_m
from kernels_src.registry import plan_max_m, variants

ENGINE_HEADER = "| engine | serves | kernel | what it is |"
ENGINE_ROW = re.compile(r"^\| `(\w+)` \| (.*?) \| (.*?) \| (.*) \|$")
COMMAND_ROW = re.compile(r"^\| `([\w-]+)[ `]")


def serves(engine, problem) -> str:
    """The m's an engine takes (and `bf16 layers` where no config of it serves an fp32 one), as the table says."""
    if engine.name not in {e.name for e in ENGINES}:
        return "anything else"
    low, high = engine.m_min, engine.m_max
    text = "any m" if low == 1 and high is None else f"m <= {high}" if low == 1 else f"m > {low - 1}"
    if low > 1 and high is not None:
        text += f", up to {high}"
    dual = [layer for layer in problem.layers.values() if layer.dual]
    if dual and not any(candidates(engine, layer, m) for layer in dual for m in sweep_m(engine, problem)):
        text += ", bf16 layers"
    return text


def kernel(engine, cuda_files: dict) -> str:
    """Where an engine's kernel is: the .cuh that defines its launcher, its own module for a Triton kernel (the
    engines Triton compiles at their first launch), torch for cuBLAS."""
    if engine.launcher:
        name = engine.launcher.rsplit("::", 1)[-1]
        defining = [
            file for file, text in cuda_files.items() if re.search(rf"\b{re.escape(name)}\s*\(", text)
        ]
        return f"`{defining[0]}`" if defining else f"(no .cuh defines {name})"
    if engine.name in PRECOMPILERS:
        return f"`{type(engine).__module__.rsplit('.', 1)[-1]}.py` (Triton)"
    return "torch"


def facts(problem, tables: dict) -> list[tuple[re.Pattern, tuple]]:
    """(a pattern of the README's, the values its groups must read): each figure the source decides."""
    kernels = variants(problem.layers.values(), tables)
    return [
        (re.compile(r"`(# okc: problem=[^`]*)`"), (TAG_LINE,)),
        (re.compile(r"every layer x m in \{([\d,]+)\}"), (",".join(map(str, problem.verify_m)),)),
        (re.compile(r"the (\d+) benchmark shapes"), (str(len(problem.layers) * len(problem.bench_m)),)),
        (re.compile(r"routes every m = 1 \.\. (\d+)"), (str(plan_max_m(tables)),)),
        (
            re.compile(r"(\d+) cases, (\d+) distinct kernels"),
            (str(len(kernels)), str(len({(v.engine, v.kernel) for v in kernels}))),
        ),
    ]


def fresh_readme(text: str, problem, tables: dict, root: Path, commands) -> tuple[str, list[tuple[int, str]]]:
    """(the README with every derived figure and cell as the source has it, [(line, what) that no rewrite can
    fix]): a pattern the README no longer holds, an engine or a command (of `commands`) without its row."""
    problems = []
    for pattern, values in facts(problem, tables):
        if not pattern.search(text):
            problems.append(
                (None, f"no line matches {pattern.pattern!r} (generator/readme.py reads it there)")
            )
        text = pattern.sub(lambda match: _with_groups(match, values), text)
    text, engine_problems = _with_engine_table(text, problem, root)
    return text, problems + engine_problems + _missing_commands(text, commands)


def _with_groups(match: re.Match, values: tuple) -> str:
    out, at = [], match.start()
    for group, value in enumerate(values, 1):
        out += [match.string[at : match.start(group)], value]
        at = match.end(group)
    return "".join(out) + match.string[at : match.end()]


def _with_engine_table(text: str, problem, root: Path) -> tuple[str, list[tuple[int, str]]]:
    lines = text.split("\n")
    if ENGINE_HEADER not in lines:
        return text, [(None, f"no engine table (its header: {ENGINE_HEADER})")]
    start = lines.index(ENGINE_HEADER) + 2
    end = next((i for i in range(start, len(lines)) if not lines[i].startswith("|")), len(lines))
    rows = {match.group(1): match for match in map(ENGINE_ROW.match, lines[start:end]) if match}
    engines = ENGINES + (BY_NAME["cublas"],)
    missing = [engine.name for engine in engines if engine.name not in rows]
    if missing:
        return text, [
            (start + 1, f"the engine table has no row for {missing[0]}: add it, its words your own")
        ]
    cuda_files = {
        path.name: read_text(path, display_path(path, root))
        for path in sorted((root / "kernels_src").glob("*.cuh"))
    }
    table = [
        f"| `{e.name}` | {serves(e, problem)} | {kernel(e, cuda_files)} | {rows[e.name].group(4)} |"
        for e in engines
    ]
    return "\n".join(lines[:start] + table + lines[end:]), []


def _missing_commands(text: str, commands) -> list[tuple[int, str]]:
    listed = {match.group(1) for match in map(COMMAND_ROW.match, text.split("\n")) if match}
    missing = sorted(set(commands) - listed)
    return [(None, f"the command table has no row for `{missing[0]}`")] if missing else []
