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
GEMV_CLUSTER_MAX_S = 16  # Hopper's largest (non-portable) cluster
# Data registers a thread may hold (kernels_src/gemv.cuh, gemv_fits): weight and x fragments of one loop trip
# (both live trips for the double-buffered P = 1, 3) plus the accumulators.
GEMV_BATCH_DATA_REGS = 112
GEMV_DOUBLE_DATA_REGS = 100


def column_blocks(m):
    """8-token column blocks (NB) of the mma's B operand that cover m tokens: 1, 2 or 4."""
    return 1 if m <= 8 else 2 if m <= 16 else 4


def gemv_config_error(cfg, m, dual, n, k):
    """Why (NW, S, U, P, R, C) cannot run at m tokens on an [n, k] weight (dual: router hi+lo), or None if it can."""
    if not (isinstance(cfg, tuple) and len(cfg) == 6 and all(type(v) is int for v in cfg)):
        return f"expected 6 integers [NW, S, U, P, R, C], got {cfg!r}"
    nw, s, u, p, r, c = cfg
    for name, value, allowed in (
        ("NW", nw, GEMV_NW),
        ("S", s, GEMV_S),
        ("U", u, GEMV_U),
        ("P", p, GEMV_P),
        ("R", r, GEMV_R),
        ("C", c, GEMV_C),
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
    double = p in (1, 3)
    regs = (2 if double else 1) * u * (8 * r * (2 if dual else 1) + 4 * nb) + 4 * r * nb
    budget = GEMV_DOUBLE_DATA_REGS if double else GEMV_BATCH_DATA_REGS
    if regs > budget:
        return (
            f"U={u}, P={p}, R={r} at m={m}{' (dual)' if dual else ''} holds {regs} data registers per thread,"
            f" over the kernel's {budget}"
        )
    return None


def table_m_for(m):
    """The CTABLE row an m without its own entry borrows: the largest m of its column-block class."""
    return 8 if m <= 8 else 16 if m <= 16 else 32


def route(layer, m, dual, ctable, defaults):
    """(engine, config) for a call: ("gemv", (NW, S, U, P, R, C)) or ("cublas", None).

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
