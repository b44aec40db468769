"""Which engine serves a call, and which GEMV configurations the CUDA kernel can run.

Pure Python (no torch): the generator imports it to validate tables/ctable.yaml, and the built submission
inlines it so that kernel_fn and `python -m generator dispatch` take the very same decisions."""

# m up to GEMV_MAX_M runs on the tensor-core GEMV: x is the mma's B operand, 8 tokens per column block.
GEMV_MAX_M = 32
# Values the kernel is instantiated for (kernels_src/gemv.cuh launch switch).
GEMV_NW = (1, 2, 4, 8, 16)
GEMV_S = (1, 2, 4, 8, 16, 32)
GEMV_U = (1, 2, 4, 8)
GEMV_P = (0, 1, 2, 3, 4, 5)  # pipelining styles, documented in gemv.cuh
GEMV_R = (1, 2, 4)
# Split-K reduction: 0 semaphore + workspace, 1 thread-block cluster (distributed shared memory), 2 atomic adds
# into the fp32 output (dual mode only; common.cuh, take_ticket / zero_and_raise). The compressed GEMV has the
# first two.
GEMV_C = (0, 1, 2)
ZGEMV_C = (0, 1)
GEMV_ATOMIC_C = 2
GEMV_TICKET_GROUPS = 256  # row groups a C = 2 launch may have (common.cuh, kTicketGroups)
GEMV_CLUSTER_MAX_S = 16  # Hopper's largest (non-portable) cluster
# Data registers a thread may hold (kernels_src/gemv.cuh, gemv_fits): weight and x fragments of one loop trip
# (both live trips for the double-buffered P = 1, 3; two weight sets and one x set for P = 4, 5) plus the
# accumulators.
GEMV_BATCH_DATA_REGS = 112
GEMV_DOUBLE_DATA_REGS = 100

# The bulk-copy + wgmma GEMV (kernels_src/tma_gemv.cuh): a CTA takes a 64-row weight tile and a run of 64-wide
# K tiles; S CTAs split K (any S up to K/64); STAGES ring slots of one weight tile (two for the router's
# hi + lo) and one x tile each. Values it is instantiated for:
TMA_TILE = 64
TMA_CONSUMERS = 128  # threads of the consumer warpgroup (tma_gemv.cuh, kTmaConsumers)
TMA_STAGES = (2, 4, 6, 8, 12, 14, 16)  # tma_gemv.cuh, TmaRingDepths (a test keeps the two equal)
# How S > 1 splits reduce: 0 semaphore + workspace; a thread-block cluster (distributed shared memory) with the
# tile gathered on rank 0 (1) or scattered over the S ranks (2). 3 (TMA_HALF_C): no split at all (S = 1): half
# tiles, 32 weight rows x the whole K per CTA, twice the CTAs of 64-row tiles and no reduction (tma_gemv.cuh,
# HALF); a slot stacks its two K halves as wgmma's A against x's two boxes.
TMA_C = (0, 1, 2, 3)
TMA_HALF_C = 3
TMA_HALF_ROWS = 32
TMA_HALF_K = 128  # K per ring slot of the half tiles
SMEM_LIMIT = 226 * 1024  # dynamic shared memory per block, every engine: Hopper's 227 KB less 1 KB for static
# The compressed GEMV (kernels_src/zgemv.cuh, weights in kernels_src/compress.py's 12-bit format): the plain
# GEMV's (NW, S, P, R, C), with UG 64-wide K groups in flight per warp and trip instead of U 32-wide blocks.
ZGEMV_UG = (1, 2, 4)
# Its P = 0 register budget (zgemv.cuh, zgemv_fits): under the plain kernel's, as the decode needs temporaries.
ZGEMV_BATCH_DATA_REGS = 104
ZGEMV_P = (0, 1)  # 0 batch, 1 double-buffered (as the plain GEMV's P = 0, 1)
# Split-K partial tiles of either GEMV live in one fp32 workspace of this many floats (runtime.py allocates it).
WORKSPACE_FLOATS = 8 * 1024 * 1024


def column_blocks(m):
    """8-token column blocks (NB) of the mma's B operand that cover m tokens: 1, 2 or 4."""
    return 1 if m <= 8 else 2 if m <= 16 else 4


def _split_k_grid_error(cfg, fields, m, n, k, k_unit, unit_name):
    """What the two mma.sync GEMVs (plain and compressed) share: a 6-field (NW, S, U|UG, P, R, C) tuple of allowed
    values, m in range, S dividing the K units (k_unit wide), the cluster size rule, R dividing the row blocks.
    """
    names = "[" + ", ".join(name for name, _ in fields) + "]"
    if not (isinstance(cfg, tuple) and len(cfg) == 6 and all(type(v) is int for v in cfg)):
        return f"expected 6 integers {names}, got {cfg!r}"
    for (name, allowed), value in zip(fields, cfg):
        if value not in allowed:
            return f"{name}={value} is not one of {allowed}"
    _, s, _, _, r, c = cfg
    if not 1 <= m <= GEMV_MAX_M:
        return f"the GEMV serves 1 <= m <= {GEMV_MAX_M}, not m={m}"
    if k % k_unit or (k // k_unit) % s:
        return f"S={s} does not divide the {k // k_unit} {unit_name} of K={k}"
    if c == 1 and not 2 <= s <= GEMV_CLUSTER_MAX_S:
        return f"C=1 (cluster reduction) needs 2 <= S <= {GEMV_CLUSTER_MAX_S}, got S={s}"
    # (S is already one of GEMV_S: the powers of two the tickets have slots for.)
    if c == GEMV_ATOMIC_C and s < 2:
        return f"C={c} (atomic reduction) needs S a power of two in 2..32, got S={s}"
    if (n // 16) % r:
        return f"R={r} does not divide the {n // 16} row blocks of N={n}"
    return None


def _tiles_smem_error(cfg, m):
    """Both mma.sync GEMVs keep their NW warps' partial tiles in shared memory (16 R x 8 NB fp32 each) and, for
    C = 1, rank 0's cluster inbox of S - 1 more (common.cuh, finish_tile); the compressed one adds its exception
    entries, which depend on the weights, so its launcher checks the rest."""
    nw, s, _, _, r, c = cfg
    smem = (nw + (s - 1 if c == 1 else 0)) * r * column_blocks(m) * 4 * 32 * 4
    if smem > SMEM_LIMIT:
        inbox = f" and S={s} (the cluster inbox)" if c == 1 else ""
        return f"NW={nw}, R={r}{inbox} at m={m} need {smem} bytes of shared memory, over {SMEM_LIMIT}"
    return None


GEMV_FIELDS = (("NW", GEMV_NW), ("S", GEMV_S), ("U", GEMV_U), ("P", GEMV_P), ("R", GEMV_R), ("C", GEMV_C))
ZGEMV_FIELDS = (
    ("NW", GEMV_NW),
    ("S", GEMV_S),
    ("UG", ZGEMV_UG),
    ("P", ZGEMV_P),
    ("R", GEMV_R),
    ("C", ZGEMV_C),
)


def gemv_config_error(cfg, m, dual, n, k):
    """Why (NW, S, U, P, R, C) cannot run at m tokens on an [n, k] weight (dual: router hi+lo), or None if it can."""
    error = _split_k_grid_error(cfg, GEMV_FIELDS, m, n, k, 32, "K blocks")
    if error:
        return error
    nw, s, u, p, r, c = cfg
    if c == GEMV_ATOMIC_C and not dual:
        return f"C={c} (atomic reduction) adds into an fp32 output: the router (dual) only"
    if c == GEMV_ATOMIC_C and n // (16 * r) > GEMV_TICKET_GROUPS:
        return f"C={c} (atomic reduction) takes at most {GEMV_TICKET_GROUPS} row groups, N={n} at R={r} has {n // (16 * r)}"
    nb = column_blocks(m)
    weight_sets = 2 if p in (1, 3, 4, 5) else 1
    x_sets = 2 if p in (1, 3) else 1
    regs = u * (weight_sets * 8 * r * (2 if dual else 1) + x_sets * 4 * nb) + 4 * r * nb
    # the exceptions ptxas showed (gemv.cuh, gemv_fits)
    if p in (4, 5) and nb == 4 and u > 1:
        return f"U={u}, P={p} at m={m}: the x-single-buffered styles take U = 1 at m > 16"
    error = _tiles_smem_error(cfg, m)
    if error:
        return error
    roomy = weight_sets == 1 or (p in (1, 3) and nb <= 2 and not dual)
    budget = GEMV_BATCH_DATA_REGS if roomy else GEMV_DOUBLE_DATA_REGS
    if regs > budget:
        return (
            f"U={u}, P={p}, R={r} at m={m}{' (dual)' if dual else ''} holds {regs} data registers per thread,"
            f" over the kernel's {budget}"
        )
    return None


def tma_smem_bytes(nb, stages, dual, s=1, c=0):
    """Shared memory of one TMA-GEMV CTA (tma_gemv.cuh, tma_smem_bytes + tma_inbox_bytes): the ring plus 1 KB
    to align it, then, for a cluster split (C = 1, 2) over S CTAs, the inbox: S - 1 slots of 4 NB fp32
    accumulators for each consumer thread a rank owns, all 128 (C = 1) or at most ceil(128 / S) (C = 2)."""
    x_boxes = 2 if c == TMA_HALF_C else 1  # half tiles: a slot spans 128 of K, two of x's 64-wide boxes
    ring = stages * (TMA_TILE * TMA_TILE * 2 * (2 if dual else 1) + x_boxes * nb * 8 * TMA_TILE * 2) + 1024
    if c in (0, TMA_HALF_C):
        return ring
    owned = TMA_CONSUMERS if c == 1 else -(-TMA_CONSUMERS // s)
    return ring + (s - 1) * owned * 4 * nb * 4


def tma_config_error(cfg, m, dual, n, k):
    """Why (S, STAGES, C) cannot run the TMA GEMV at m tokens on an [n, k] weight, or None if it can."""
    if not (isinstance(cfg, tuple) and len(cfg) == 3 and all(type(v) is int for v in cfg)):
        return f"expected 3 integers [S, STAGES, C], got {cfg!r}"
    s, stages, c = cfg
    if stages not in TMA_STAGES:
        return f"STAGES={stages} is not one of {TMA_STAGES}"
    if c not in TMA_C:
        return f"C={c} is not one of {TMA_C}"
    if c == TMA_HALF_C and (s != 1 or dual):
        return f"C={c} (half tiles) runs plain bf16 weights unsplit: S must be 1{', not the router' if dual else ''}"
    if c in (1, 2) and not 2 <= s <= GEMV_CLUSTER_MAX_S:
        return f"C={c} (cluster reduction) needs 2 <= S <= {GEMV_CLUSTER_MAX_S}, got S={s}"
    if not 1 <= m <= GEMV_MAX_M:
        return f"the TMA GEMV serves 1 <= m <= {GEMV_MAX_M}, not m={m}"
    if n % TMA_TILE or k % TMA_TILE:
        return f"the TMA GEMV needs N and K divisible by {TMA_TILE}, got N={n} K={k}"
    if not 1 <= s <= k // TMA_TILE:
        return f"S={s} must be 1..{k // TMA_TILE} (the {TMA_TILE}-wide K tiles of K={k})"
    if c == TMA_HALF_C and k % TMA_HALF_K:
        return f"C={c} (half tiles) needs K divisible by {TMA_HALF_K}, got K={k}"
    nb = column_blocks(m)
    smem = tma_smem_bytes(nb, stages, dual, s, c)
    if smem > SMEM_LIMIT:
        inbox = f", S={s} (cluster inbox)" if c else ""
        return f"STAGES={stages}{inbox} at m={m}{' (dual)' if dual else ''} needs {smem} bytes of shared memory, over {SMEM_LIMIT}"
    if s > 1 and not c and (n // TMA_TILE) * s * TMA_TILE * 8 * nb > WORKSPACE_FLOATS:
        return f"S={s} needs more split-K workspace than the {WORKSPACE_FLOATS} floats there are"
    return None


def zgemv_overflow_smem(nw, r, groups_per_cta):
    """Shared memory the compressed GEMV adds for a matrix with overflow entries (zgemv.cuh, zgemv_overflow_bytes):
    a 2 KB tile per warp and the CTA's R x (groups_per_cta + 1) bucket offsets, 16-byte aligned. Fixed by the
    config and K, whatever the number of entries; counted for every config, so any matrix can run it."""
    return nw * 2048 + (r * (groups_per_cta + 1) * 4 + 15) // 16 * 16


def zgemv_config_error(cfg, m, dual, n, k):
    """Why (NW, S, UG, P, R, C) cannot run the compressed GEMV at m tokens on an [n, k] weight, or None if it can."""
    if dual and isinstance(cfg, tuple) and len(cfg) == 6 and all(type(v) is int for v in cfg):
        return "the router's fp32 weights are never compressed (its hi + lo split is already 32 bits)"
    error = _split_k_grid_error(cfg, ZGEMV_FIELDS, m, n, k, 64, "64-wide K groups")
    if error:
        return error
    error = _tiles_smem_error(cfg, m)
    if error:
        return error
    nw, s, ug, p, r, c = cfg
    nb = column_blocks(m)
    tiles = (nw + (s - 1 if c == 1 else 0)) * r * nb * 4 * 32 * 4
    overflow = zgemv_overflow_smem(nw, r, k // 64 // s)
    if tiles + overflow > SMEM_LIMIT:
        return (
            f"NW={nw}, R={r}, S={s} at m={m} need {tiles + overflow} bytes of shared memory with the overflow pass's"
            f" tiles and offsets, over {SMEM_LIMIT}"
        )
    regs = (2 if p else 1) * (
        ug * (12 * r + 8 * nb) + r
    ) + 4 * r * nb  # zgemv_data_regs: + a header word a trip
    budget = GEMV_DOUBLE_DATA_REGS if p else ZGEMV_BATCH_DATA_REGS
    if regs > budget:
        return f"UG={ug}, P={p}, R={r} at m={m} holds {regs} data registers per thread, over the kernel's {budget}"
    return None


def table_m_for(m):
    """The CTABLE row an m without its own entry borrows: the largest m of its column-block class."""
    return 8 if m <= 8 else 16 if m <= 16 else 32


def route(layer, m, dual, ctable, defaults, ttable=None, ztable=None):
    """(engine, config) for a call: ("z", (NW, S, UG, P, R, C)), ("tma", (S, STAGES, C)),
    ("gemv", (NW, S, U, P, R, C)) or ("cublas", None).

    ZTABLE first (the compressed GEMV streams the fewest bytes), looked up like TTABLE below; runtime.py falls
    back to the route without it for a layer whose weights compress() refused.

    A TTABLE entry for (layer, m), or failing that for its column-block class (see table_m_for), sends the call
    to the TMA GEMV; None or no entry there means "not this engine" and CTABLE decides. A CTABLE entry for
    (layer, m) wins; a missing one borrows the entry of its column-block class, and failing that the default
    for the weight's kind (dual: fp32 weights run as a bf16 hi+lo pair). None in CTABLE means cuBLAS."""
    if m > GEMV_MAX_M or m < 1:
        return "cublas", None
    if ztable:
        zkey = (layer, m) if (layer, m) in ztable else (layer, table_m_for(m))
        if ztable.get(zkey) is not None:
            return "z", ztable[zkey]
    if ttable:
        tkey = (layer, m) if (layer, m) in ttable else (layer, table_m_for(m))
        if ttable.get(tkey) is not None:
            return "tma", ttable[tkey]
    key = (layer, m) if (layer, m) in ctable else (layer, table_m_for(m))
    if key in ctable:
        cfg = ctable[key]
    else:
        cfg = defaults.get("dual" if dual else "plain")
    return ("cublas", None) if cfg is None else ("gemv", cfg)
