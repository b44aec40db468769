"""The compressed GEMV through a TMA ring (compressed_ring.cuh) for m <= 32, bf16 layers: compress.py's 12-bit
format repacked into ring slots. Design and figures: docs/compressed-ring.md."""

import torch

from kernels_src.compress import BUCKET, HEADER_BYTES, CompressionError, compress, table_scalars, unfragment
from kernels_src.engine import (
    SMEM_LIMIT,
    CudaConstant,
    DecodeGemv,
    Field,
    Operand,
    Variant,
    build_only,
    column_blocks,
    config_type,
)
from kernels_src.tma_gemv import TILE_ROWS, TMA_STAGES

STAGED_ENTRIES = 64  # overflow entries a CTA stages in shared memory
RING_GROUPS = (1, 2)
RING_WARPGROUPS = (1, 2, 4)
COMPRESSED_RING_FIELDS = (
    Field(
        "stages",
        int,
        TMA_STAGES,
        build_only(
            "shared-memory ring slots per CTA, each the tile's four row blocks x `groups` K groups and x's boxes"
        ),
    ),
    Field(
        "warpgroups",
        int,
        RING_WARPGROUPS,
        build_only("consumer warpgroups, taking alternate slots (stages a multiple)"),
    ),
    Field("groups", int, RING_GROUPS, build_only("64-wide K groups per slot")),
)
CompressedRingConfig = config_type("CompressedRingConfig", COMPRESSED_RING_FIELDS)


def group_bytes() -> int:
    """One 16-row block x one 64-wide K group of the stream (a function: compress.py comes later in the file)."""
    return BUCKET * 3 // 2


def slot_bytes(groups: int) -> int:
    """A slot's weight bytes: four row blocks x groups x (stream + header)."""
    return 4 * groups * (group_bytes() + HEADER_BYTES)


def ring_smem(cfg, nb: int) -> int:
    """A CTA's dynamic shared memory: its slots, the staged overflow, 1 KB to align."""
    weights = -(-slot_bytes(cfg.groups) // 1024) * 1024
    staged = 4 + STAGED_ENTRIES * (1 + 4 + 32 * 2)
    return cfg.stages * (weights + cfg.groups * nb * 8 * 128) + staged + 1024


def ring_slots(z: dict, groups: int) -> torch.Tensor:
    """compress()'s stream and headers as ring slots: uint8 [N/64, K/(64 groups), the slot's row blocks' bytes,
    then their headers], tiles outermost."""
    rb, g = z["stream"].shape[:2]
    tiles, slots = rb // 4, g // groups
    stream = z["stream"].reshape(tiles, 4, slots, groups, group_bytes()).permute(0, 2, 1, 3, 4)
    headers = z["patches"].contiguous().view(torch.uint8).reshape(tiles, 4, slots, groups, HEADER_BYTES)
    headers = headers.permute(0, 2, 1, 3, 4)
    parts = (stream.reshape(tiles, slots, -1), headers.reshape(tiles, slots, -1))
    return torch.cat(parts, dim=-1).contiguous().reshape(-1)


def wgmma_columns(device=None) -> torch.Tensor:
    """int64 [64]: the K group's column each column of compress()'s fragment order must hold for wgmma's A
    registers (register j, half h of lane (g, t), fragment f: column 16 f + 2 t + 8 (j >> 1) + h)."""
    # p at (row, column)
    where = unfragment(torch.arange(BUCKET, device=device).reshape(1, 1, 4, 32, 8), 16, 64)
    p = where[0].to(torch.int64)  # row 0: register j even
    f, lane, e = p // 256, (p // 8) % 32, p % 8
    return 16 * f + 2 * (lane & 3) + 8 * (e >> 2) + (e & 1)


def ring_operands(w: torch.Tensor, name: str, groups: int, refuse: bool = True) -> dict:
    """The ring slots and per-row overflow of a bf16 [N, K] weight; CompressionError for a tile with more overflow
    than a CTA stages (refuse=False: no limit)."""
    n, k = w.shape
    columns = wgmma_columns(w.device)
    z = compress(
        w.reshape(n, k // 64, 64)[:, :, columns].reshape(n, k),
        name,
        max_bits_per_weight=None if refuse else 1e9,
    )
    row_starts, rows, entries = ring_overflow(z, n, k, columns)
    per_tile = row_starts[TILE_ROWS::TILE_ROWS].to(torch.int64) - row_starts[:-1:TILE_ROWS].to(torch.int64)
    worst = int(per_tile.max()) if per_tile.numel() else 0
    if refuse and worst > STAGED_ENTRIES:
        raise CompressionError(
            f"{name}: {worst} overflow entries in one 64-row tile, over the {STAGED_ENTRIES} compressed_ring"
            f" stages ({int((per_tile > STAGED_ENTRIES).sum())} of {per_tile.numel()} tiles): serve this layer"
            " with the other engines"
        )
    return {
        "slots": ring_slots(z, groups),
        "row_starts": row_starts,
        "rows": rows,
        "entries": entries,
        "table_words": z["table_words"],
    }


def ring_overflow(z: dict, n: int, k: int, columns: torch.Tensor) -> tuple:
    """compress()'s overflow as a per-row list sorted by row, then k: (row_starts int32 [N + 1], rows int32 [E],
    entries int32 [E] = k | bf16 bits << 16)."""
    device = z["overflow"].device
    groups = k // 64
    starts = z["overflow_starts"].to(torch.int64)
    count = starts[1:] - starts[:-1]
    bucket = torch.repeat_interleave(torch.arange(count.numel(), device=device), count)
    entry = z["overflow"].to(torch.int64) & 0xFFFFFFFF
    p = entry & 0x3FF
    where = unfragment(torch.arange(BUCKET, device=device).reshape(1, 1, 4, 32, 8), 16, 64).reshape(-1)
    at = torch.empty(BUCKET, dtype=torch.int64, device=device)
    at[where] = torch.arange(BUCKET, device=device)
    row = bucket // groups * 16 + at[p] // 64
    col = bucket % groups * 64 + columns.to(device)[at[p] % 64]
    order = torch.argsort(row * k + col)
    row, col, bits = row[order], col[order], (entry >> 16)[order]
    words = col | bits << 16
    words = torch.where(words >= 1 << 31, words - (1 << 32), words).to(torch.int32)
    row_starts = torch.zeros(n + 1, dtype=torch.int64, device=device)
    row_starts[1:] = torch.cumsum(torch.bincount(row, minlength=n), dim=0)
    return row_starts.to(torch.int32), row.to(torch.int32), words


class CompressedRing(DecodeGemv):
    name = "compressed_ring"
    precedence = build_only(20)  # the compressed GEMVs first: their 12-bit weights are 25 % fewer bytes
    may_refuse = build_only(True)
    FIELDS = build_only(COMPRESSED_RING_FIELDS)
    Config = CompressedRingConfig
    launcher = build_only("okc::launch_compressed_ring")

    @build_only
    @property
    def cuda_constants(self):  # a property: compress.py comes later in the file
        return (
            CudaConstant(
                "kStagedOverflowEntries",
                STAGED_ENTRIES,
                "compressed_ring.py STAGED_ENTRIES: overflow entries a CTA stages",
            ),
            CudaConstant(
                "kCompressedHeaderBytes", HEADER_BYTES, "compress.py HEADER_BYTES: a K group's header"
            ),
        )

    summary = build_only(
        "compressed_ring (m <= 32, bf16 layers): the same 12-bit stream in ring slots beside x's boxes (TMA),"
        " decoded straight into wgmma's A registers: x crosses into an SM once per 64 rows."
    )

    @build_only
    def rule(self, cfg, layer, m):
        if layer.dual:
            return "the router's fp32 weights are never compressed (its hi + lo split is already 32 bits)"
        n, k = layer.n_for(m), layer.k
        if n % TILE_ROWS or k % (64 * cfg.groups):
            return f"the compressed_ring engine needs N % {TILE_ROWS} == 0 and K % {64 * cfg.groups} == 0, got N={n} K={k}"
        if k > 1 << 16:
            return f"the compressed_ring engine's overflow entries hold k in 16 bits: K <= 65536, got K={k}"
        if cfg.stages % cfg.warpgroups:
            return f"stages={cfg.stages} must be a multiple of warpgroups={cfg.warpgroups} (a stage is one warpgroup's)"
        smem = ring_smem(cfg, column_blocks(m))
        if smem > SMEM_LIMIT:
            return f"stages={cfg.stages}, groups={cfg.groups} at m={m} need {smem} bytes of shared memory, over {SMEM_LIMIT}"
        return None

    def operands(self, cfg, layer):
        return (Operand("ring_slots", (cfg.groups,)),)

    def build_operand(self, operand, parts, layer):
        return ring_operands(parts[0], layer.name, operand.shape[0])

    def variant(self, cfg, layer, m):
        nb = column_blocks(m)
        kernel = dict(NB=nb, stages=cfg.stages, warpgroups=cfg.warpgroups, groups=cfg.groups)
        return Variant.of(self.name, kernel, smem_bytes=ring_smem(cfg, nb))

    def plan(self, cfg, layer, m, ctx):
        r = ctx.operands[self.operands(cfg, layer)[0]]
        entries = r["entries"]
        if entries.numel() == 0:  # a valid address the kernel never reads
            entries = r["row_starts"]
        pointers = (r["slots"], r["row_starts"], r["rows"] if r["rows"].numel() else entries, entries)
        return ctx.cuda_plan(
            self.variant(cfg, layer, m),
            layer,
            m,
            pointers,
            (*table_scalars(r["table_words"]), r["entries"].numel()),
        )


COMPRESSED_RING = CompressedRing()
