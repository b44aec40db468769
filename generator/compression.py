"""What the 12-bit format (kernels_src/compress.py) makes of a weight matrix, without refusing it: the figures the
`compression` command prints (tooling: the submission only compresses)."""

from __future__ import annotations

import torch

from kernels_src.compress import MAX_BITS_PER_WEIGHT, PATCHES_PER_GROUP, _build, _check_input, footprint


def report(w: torch.Tensor, name: str = "weight", patches_per_group: int = PATCHES_PER_GROUP) -> dict:
    """What the 12-bit format makes of one matrix, without refusing it: {"name", "shape", "bits": bits per
    weight split into "payload" / "headers" / "exceptions" (overflow entries + offsets) and their "total",
    "exception_rate" (exceptions / weights), "exceptions" (count), "overflow" (entries past the headers),
    "max_block_exceptions" / "max_block_overflow" (the largest 16-row block's), "refused": whether compress()
    refuses it (bits["total"] >= MAX_BITS_PER_WEIGHT)}."""
    _check_input(w, name, patches_per_group)
    z = _build(w, patches_per_group)
    bits = footprint(z)
    return {
        "name": name,
        "shape": tuple(w.shape),
        "bits": bits,
        "exception_rate": z["count"] / w.numel(),
        "exceptions": z["count"],
        "overflow": z["overflow"].numel(),
        "max_block_exceptions": z["max_block_count"],
        "max_block_overflow": z["max_block_overflow"],
        "refused": bits["total"] >= MAX_BITS_PER_WEIGHT,
    }


def format_report(rows: list[dict]) -> str:
    """report() rows as a fixed-width text table, one line per matrix."""
    lines = [
        f"{'matrix':<12} {'shape':>11} {'bits/w':>7} {'payload':>7} {'headers':>7} {'exc+off':>7}"
        f" {'exc rate':>9} {'overflow':>8} {'max/blk':>7} {'ovf/blk':>7}"
    ]
    for row in rows:
        b = row["bits"]
        shape = "x".join(str(d) for d in row["shape"])
        lines.append(
            f"{row['name']:<12} {shape:>11} {b['total']:7.3f} {b['payload']:7.3f} {b['headers']:7.3f}"
            f" {b['exceptions']:7.3f} {100 * row['exception_rate']:8.4f}% {row['overflow']:8d}"
            f" {row['max_block_exceptions']:7d} {row['max_block_overflow']:7d}"
            + ("  refused" if row["refused"] else "")
        )
    return "\n".join(lines)
