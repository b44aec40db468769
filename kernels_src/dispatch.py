"""Which engine serves a call, and which GEMV configurations the CUDA kernel can run.

Pure Python (no torch): the generator imports it to validate tables/ctable.yaml, and the built submission
inlines it so that kernel_fn and `python -m generator dispatch` take the very same decisions."""

# m up to GEMV_MAX_M runs on the tensor-core GEMV: x is the mma's B operand, 8 tokens per column block.
GEMV_MAX_M = 32
# Values the kernel is instantiated for (kernels_src/gemv.cuh launch switch).
GEMV_NW = (1, 2, 4, 8, 16)
GEMV_S = (1, 2, 4, 8, 16, 32)
GEMV_U = (1, 2, 4, 8)
GEMV_P = (0, 1, 2, 3)
GEMV_R = (1, 2, 4)
GEMV_C = (
    0,
    1,
)  # split-K reduction: 0 semaphore + workspace, 1 thread-block cluster (distributed shared memory)
GEMV_X = (
    0,
    1,
)  # weights: 0 straight into registers (gemv.cuh); 1 through a shared-memory ring filled by bulk copies (gemv_ring.cuh)
GEMV_RING_MAX_NW = 8  # X=1: NW consumer warps + 1 producer warp per CTA
GEMV_CLUSTER_MAX_S = 16  # Hopper's largest (non-portable) cluster
GEMV_SMEM_MAX = 227 * 1024  # shared memory one CTA may opt in to on sm_90
# Data registers a thread may hold (kernels_src/gemv.cuh, gemv_fits): weight and x fragments of one loop trip
# (both live trips for the double-buffered P = 1, 3) plus the accumulators.
GEMV_BATCH_DATA_REGS = 112
GEMV_DOUBLE_DATA_REGS = 100


def column_blocks(m):
    """8-token column blocks (NB) of the mma's B operand that cover m tokens: 1, 2 or 4."""
    return 1 if m <= 8 else 2 if m <= 16 else 4


def ring_smem_bytes(stages, nw, u, nb, r, dual):
    """X=1 dynamic shared memory (kernels_src/gemv_ring.cuh, ring_smem_bytes): the ring of `stages` chunks of
    NW*U K blocks (1 KB each) per row block (hi and lo for dual), or the warps' partial tiles if larger."""
    return max(stages * r * (2 if dual else 1) * nw * u * 1024, nw * r * nb * 512)


def gemv_config_error(cfg, m, dual, n, k):
    """Why (NW, S, U, P, R, C, X) cannot run at m tokens on an [n, k] weight (dual: router hi+lo), or None if it can."""
    if not (isinstance(cfg, tuple) and len(cfg) == 7 and all(type(v) is int for v in cfg)):
        return f"expected 7 integers [NW, S, U, P, R, C, X], got {cfg!r}"
    nw, s, u, p, r, c, x = cfg
    for name, value, allowed in (
        ("NW", nw, GEMV_NW),
        ("S", s, GEMV_S),
        ("U", u, GEMV_U),
        ("P", p, GEMV_P),
        ("R", r, GEMV_R),
        ("C", c, GEMV_C),
        ("X", x, GEMV_X),
    ):
        if value not in allowed:
            return f"{name}={value} is not one of {allowed}"
    if not 1 <= m <= GEMV_MAX_M:
        return f"the GEMV serves 1 <= m <= {GEMV_MAX_M}, not m={m}"
    if (k // 32) % s:
        return f"S={s} does not divide the {k // 32} K blocks of K={k}"
    if c and not 2 <= s <= GEMV_CLUSTER_MAX_S:
        return f"C=1 (cluster reduction) needs 2 <= S <= {GEMV_CLUSTER_MAX_S}, got S={s}"
    if (n // 16) % r:
        return f"R={r} does not divide the {n // 16} row blocks of N={n}"
    nb = column_blocks(m)
    if x == 1:
        return _ring_config_error(nw, s, u, p, r, nb, m, dual, k)
    double = p in (1, 3)
    regs = (2 if double else 1) * u * (8 * r * (2 if dual else 1) + 4 * nb) + 4 * r * nb
    budget = GEMV_DOUBLE_DATA_REGS if double else GEMV_BATCH_DATA_REGS
    if regs > budget:
        return (
            f"U={u}, P={p}, R={r} at m={m}{' (dual)' if dual else ''} holds {regs} data registers per thread,"
            f" over the kernel's {budget}"
        )
    return None


def _ring_config_error(nw, s, u, p, r, nb, m, dual, k):
    """The ring kernel's own limits (X=1): see kernels_src/gemv_ring.cuh."""
    if nw > GEMV_RING_MAX_NW:
        return f"X=1 takes NW <= {GEMV_RING_MAX_NW} consumer warps (plus its producer warp), got NW={nw}"
    split_blocks = (k // 32) // s
    if split_blocks % (nw * u):
        return f"X=1 needs NW*U={nw * u} to divide the {split_blocks} K blocks of a split"
    regs = 2 * u * 4 * nb + u * 8 * r * (2 if dual else 1) + 4 * r * nb
    if regs > GEMV_BATCH_DATA_REGS:
        return (
            f"X=1 with U={u}, R={r} at m={m}{' (dual)' if dual else ''} holds {regs} data registers per thread,"
            f" over the kernel's {GEMV_BATCH_DATA_REGS}"
        )
    smem = ring_smem_bytes(p + 2, nw, u, nb, r, dual)
    if smem > GEMV_SMEM_MAX:
        return f"X=1 ring of {p + 2} stages needs {smem} bytes of shared memory, over {GEMV_SMEM_MAX}"
    return None


def table_m_for(m):
    """The CTABLE row an m without its own entry borrows: the largest m of its column-block class."""
    return 8 if m <= 8 else 16 if m <= 16 else 32


def route(layer, m, dual, ctable, defaults):
    """(engine, config) for a call: ("gemv", (NW, S, U, P, R, C, X)) or ("cublas", None).

    A CTABLE entry for (layer, m) wins; a missing one borrows the entry of its column-block class
    (see table_m_for), and failing that the default for the weight's kind (dual: fp32 weights run as a
    bf16 hi+lo pair). None anywhere means cuBLAS."""
    if m > GEMV_MAX_M or m < 1:
        return "cublas", None
    key = (layer, m) if (layer, m) in ctable else (layer, table_m_for(m))
    if key in ctable:
        cfg = ctable[key]
    else:
        cfg = defaults.get("dual" if dual else "plain")
    return ("cublas", None) if cfg is None else ("gemv", cfg)
