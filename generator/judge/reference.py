"""The exact math in float64, and how far from it an answer may be (with the reasons)."""

from __future__ import annotations

from dataclasses import dataclass

import torch

# Dense layers (bf16 in, bf16 out, fp32 accumulation expected):
#   |out - ref| <= 2^-7 |ref| + 2^-14 S,   S = |x| . |W|^T (the sum of the magnitudes of the k products).
#   2^-7: rounding the output to bf16 (8 significant bits) costs up to 2^-8 |ref|; twice that for headroom.
#   2^-14 S: fp32 accumulation over K <= 8192 in any order stays far below it (about sqrt(K) 2^-24 S), while a
#   dropped or doubled 32-wide K block, or a bf16 accumulator, exceeds it.
#   And ||out - ref|| / ||ref|| <= 2^-7 over the whole output (bf16 output rounding alone gives about 2^-10).
# Router (fp32 weights, fp32 out):
#   |out - ref| <= 2^-15 S: a bf16 hi+lo split represents each weight to 2^-16 relative; twice that for fp32
#   accumulation. ||out - ref|| / ||ref|| <= 2^-13: hi+lo lands near 2^-17, a bf16-only router near 2^-10.
DENSE_RTOL, DENSE_STOL, DENSE_FROB = 2.0**-7, 2.0**-14, 2.0**-7
ROUTER_RTOL, ROUTER_STOL, ROUTER_FROB = 0.0, 2.0**-15, 2.0**-13


@dataclass
class Comparison:
    ok: bool
    worst: float  # max over elements of |out - ref| / allowed (<= 1 passes)
    frob: float  # ||out - ref|| / ||ref||
    problem: str = ""


def reference(x: torch.Tensor, w: torch.Tensor, n: int) -> tuple[torch.Tensor, torch.Tensor]:
    """(x . W[:n]^T, |x| . |W[:n]|^T) in float64, on x's device."""
    xd, wd = x.double(), w[:n].double()
    return xd @ wd.t(), xd.abs() @ wd.abs().t()


def compare(out, ref: torch.Tensor, scale: torch.Tensor, fp32_out: bool) -> Comparison:
    rtol, stol, frob_tol = (
        (ROUTER_RTOL, ROUTER_STOL, ROUTER_FROB) if fp32_out else (DENSE_RTOL, DENSE_STOL, DENSE_FROB)
    )
    got = out.double()
    if torch.isnan(got).any():
        bad = torch.isnan(got).nonzero()[0].tolist()
        count = int(torch.isnan(got).sum())
        return Comparison(
            False, float("inf"), float("inf"), f"{count} NaN / unwritten elements, first at {bad}"
        )
    err = (got - ref).abs()
    allowed = rtol * ref.abs() + stol * scale + 1e-300
    ratio = err / allowed
    worst = float(ratio.max())
    frob = float(torch.linalg.vector_norm(got - ref) / torch.linalg.vector_norm(ref).clamp_min(1e-300))
    if worst > 1.0:
        where = divmod(int(ratio.argmax()), ref.shape[1])
        return Comparison(False, worst, frob, f"error {worst:.3g}x the bound at [token, row] = {list(where)}")
    if frob > frob_tol:
        return Comparison(False, worst, frob, f"relative error {frob:.3g} over {frob_tol:.3g}")
    return Comparison(True, worst, frob)
