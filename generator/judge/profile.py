"""profile: Nsight Compute (ncu) on chosen GEMV launches, and the two views of its report a kernel engineer reads
first: per kernel, time, DRAM throughput and issue rate; per SASS instruction, how often it ran and where the warps
stalled.

Why a command: leave-one-out timing could not tell why an experimental compressed-tile TMA GEMV was
slow; one ncu run did (its consumer loop issued ~255 instructions per warp per 64 x 64 tile against ~88 for bf16
tiles). Run it on the H200, from the source tree (PYTHONPATH=.); the report and its exports land in one folder.

A launch is written `layer:m:engine:config`, e.g. `qkv_gate:32:tma:3,8,2` or `pooler:1:z:8,1,4,0,1,0`: the
engine's table fields in order (README, tables/*.yaml). Each is checked like a table entry before ncu starts.
Inside ncu, `python -m generator.judge.profile FILE LAUNCH...` launches each once to warm up, then each once
between cudaProfilerStart and cudaProfilerStop, so ncu (`--profile-from-start off`) sees exactly those."""

from __future__ import annotations

import csv
import io
import re
import sys
from pathlib import Path

from generator.judge.launches import Launch, parse_launch

# What the summary reads from ncu's details page (metric name -> key); Duration comes in ns, us or ms.
DETAIL_METRICS = {
    "Duration": "duration_us",
    "DRAM Throughput": "dram_pct",
    "Executed Ipc Active": "ipc_active",
    "Registers Per Thread": "registers",
}
_TO_US = {
    "nsecond": 1e-3,
    "ns": 1e-3,
    "usecond": 1.0,
    "us": 1.0,
    "msecond": 1e3,
    "ms": 1e3,
    "second": 1e6,
    "s": 1e6,
}


def ncu_commands(ncu: str, report: Path, python: str, file: Path, launches: list[Launch], section_set: str):
    """The three ncu runs: profile the launches into `report` (.ncu-rep), then export its details page and its
    SASS source page (CSV). Clocks are left alone (--clock-control none: the device's notes say so)."""
    profile = [
        ncu, "--clock-control", "none", "--profile-from-start", "off", "--target-processes", "application-only",
        "--set", section_set, "--import-source", "no", "-f", "-o", str(report),
        python, "-m", "generator.judge.profile", str(file), *(launch.spec for launch in launches),
    ]  # fmt: skip
    rep = f"{report}.ncu-rep"
    details = [ncu, "-i", rep, "--page", "details"]
    source = [ncu, "-i", rep, "--page", "source", "--csv", "--print-source", "sass"]
    return profile, details, source


def kernel_summaries(details: str) -> list[dict]:
    """Per profiled kernel of ncu's details page: its name and launch shape, and DETAIL_METRICS where present."""
    header = re.compile(r"^  (\S.*?) \((\d+), (\d+), (\d+)\)x\((\d+), (\d+), (\d+)\), Context ")
    kernels = []
    for line in details.splitlines():
        found = header.match(line)
        if found:
            grid, block = found.groups()[1:4], found.groups()[4:7]
            kernels.append({"kernel": found.group(1), "grid": "x".join(grid), "block": "x".join(block)})
            continue
        if not kernels:
            continue
        fields = line.split()
        for name, key in DETAIL_METRICS.items():
            words = name.split()
            if fields[: len(words)] == words and key not in kernels[-1] and len(fields) >= len(words) + 1:
                value = float(fields[-1].replace(",", ""))
                unit = fields[len(words)] if len(fields) == len(words) + 2 else ""
                if key != "duration_us":
                    kernels[-1][key] = value
                elif unit in _TO_US:  # a unit this table does not know: no figure rather than a wrong one
                    kernels[-1][key] = value * _TO_US[unit]
    return kernels


def sass_tables(source_csv: str) -> list[tuple[str, list[dict]]]:
    """ncu's SASS source page (CSV, one block per kernel, each opened by a "Kernel Name" row) -> per kernel, the
    instructions that ran: index, address, SASS, times executed (warp level), warp-state samples and the two
    stall reasons sampled most. A kernel whose block repeats an earlier one exactly is listed once."""
    blocks, current = [], None
    for line in source_csv.splitlines():
        if line.startswith('"Kernel Name"'):
            current = [line]
            blocks.append(current)
        elif current is not None:
            current.append(line)
    tables, seen = [], set()
    for block in blocks:
        name = next(csv.reader([block[0]]))[1]
        rows = list(csv.reader(io.StringIO("\n".join(block[1:]))))
        if not rows:
            continue
        head = rows[0]
        col = {h: i for i, h in enumerate(head)}
        stalls = [i for i, h in enumerate(head) if h.startswith("stall_") and "Not Issued" not in h]
        ran = []
        for index, row in enumerate(rows[1:]):
            if len(row) != len(head):
                continue
            executed = int(float(row[col["Instructions Executed"]] or 0))
            if executed == 0:
                continue
            by_reason = sorted(((float(row[i] or 0), head[i][len("stall_") :]) for i in stalls), reverse=True)
            ran.append(
                {
                    "index": index,
                    "address": row[col["Address"]],
                    "sass": row[col["Source"]],
                    "executed": executed,
                    "samples": int(float(row[col["Warp Stall Sampling (All Samples)"]] or 0)),
                    "stalls": [(reason, int(n)) for n, reason in by_reason[:2] if n > 0],
                }
            )
        key = (name, tuple((r["sass"], r["executed"], r["samples"]) for r in ran))
        if key not in seen:
            seen.add(key)
            tables.append((name, ran))
    return tables


def format_instruction(row: dict) -> str:
    """One instruction that ran: warp-state samples, times executed (warp level), top stall reasons, SASS."""
    stalls = " ".join(f"{reason}:{n}" for reason, n in row["stalls"])
    return f"{row['samples']:6} {row['executed']:9}  {stalls:34} {row['sass']}"


def format_sass(tables: list[tuple[str, list[dict]]]) -> str:
    """The trimmed source pages as text: one line per instruction that ran, after its index on the page."""
    lines = ["# index, warp-state samples, times executed (warp level), top stall reasons, SASS"]
    for name, rows in tables:
        lines.append(f"\n## {name}")
        lines += [f"{r['index']:5} {format_instruction(r)}" for r in rows]
    return "\n".join(lines) + "\n"


def format_summary(summary: dict) -> str:
    """One kernel of kernel_summaries: its name, grid x block and the DETAIL_METRICS the page had."""
    figures = " ".join(f"{key} {summary[key]:g}" for key in DETAIL_METRICS.values() if key in summary)
    return f"{summary['kernel']} {summary['grid']} x {summary['block']}: {figures}"


def hot_instructions(rows: list[dict], count: int = 8) -> list[dict]:
    """The instructions with the most warp-state samples: where the kernel's warps spent their time."""
    return sorted(rows, key=lambda r: -r["samples"])[:count]


def launch_under_profiler(file: Path, specs: list[str]) -> None:
    """What runs inside ncu: the file loaded and prepared on the `normal` weights, each launch's engine state built,
    each launch run once to warm up (module load, tensor maps, shared-memory opt-in), then once each between
    cudaProfilerStart and cudaProfilerStop."""
    import torch

    from generator.judge.launches import launch_calls
    from generator.judge.loader import load_submission
    from generator.problem import load_problem

    problem = load_problem()
    launches = [parse_launch(spec, problem) for spec in specs]
    calls, _ = launch_calls(load_submission(file), problem, launches)
    for call, _, _ in calls:
        call()
    torch.cuda.synchronize()
    torch.cuda.cudart().cudaProfilerStart()
    for call, _, _ in calls:
        call()
        torch.cuda.synchronize()
    torch.cuda.cudart().cudaProfilerStop()


if __name__ == "__main__":
    launch_under_profiler(Path(sys.argv[1]), sys.argv[2:])
