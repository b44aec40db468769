"""If the compressed GEMV's GPU test fails: which part is wrong. Each case prints the worst error and where it
falls (row within its 16-row block, token, K split), against float64.
  decode  weights with at most 16 hi bytes (no exceptions): the stream, the prmt decode, the mma feeding
  exc     Gaussian weights: the per-row exception pass on top
  split   the same at S = 2 (semaphore) and S = 4 (cluster)"""

import sys

import torch

from generator.judge.loader import load_submission

mod = load_submission(sys.argv[1])
gen = torch.Generator(device="cuda").manual_seed(0)
n, k = 256, 2048


def weights(kind):
    if kind == "decode":
        mags = torch.tensor([0.5, 1.0, 2.0, 4.0, 8.0, 16.0, 32.0, 64.0], device="cuda") / 64
        w = mags[torch.randint(0, 8, (n, k), generator=gen, device="cuda")]
        w = (
            w
            * torch.sign(torch.randn(n, k, generator=gen, device="cuda"))
            * (1 + torch.rand(n, k, generator=gen, device="cuda"))
        )
        return w.to(torch.bfloat16)
    return (torch.randn(n, k, generator=gen, device="cuda") / k**0.5).to(torch.bfloat16)


state = {
    "ws": torch.empty(mod.WORKSPACE_FLOATS, device="cuda"),
    "sem": torch.zeros(4096, dtype=torch.int32, device="cuda"),
}
for kind, cfgs in (
    ("decode", [(4, 1, 1, 0, 1, 0), (8, 1, 2, 1, 2, 0)]),
    ("exc", [(4, 1, 1, 0, 1, 0)]),
    ("split", [(4, 2, 1, 0, 1, 0), (4, 4, 1, 0, 1, 1)]),
):
    w = weights(kind)
    z = mod.compress(w, kind)
    state["z:diag"] = z
    for m in (1, 9, 32):
        x = torch.randn(m, k, generator=gen, device="cuda").to(torch.bfloat16)
        ref = x.double() @ w.double().t()
        for cfg in cfgs:
            if mod.zgemv_config_error(cfg, m, False, n, k):
                continue
            out = mod._zgemv(x, "diag", n, cfg, state).double()
            err = (out - ref).abs()
            tol = 1e-2 * ref.abs().max().item() + 1e-6
            t, r = divmod(int(err.argmax()), n)
            print(
                f"{kind:6} m={m:2} cfg={cfg}: exceptions {z['count']:5}, max err {err.max().item():.3g}"
                f" (tol {tol:.3g}) at token {t} row {r} (row {r % 16} of its block)"
                f" {'ok' if err.max().item() <= tol else 'WRONG'}; wrong rows mod 16:"
                f" {sorted(set((err > tol).nonzero()[:, 1].remainder(16).tolist()))[:16]}",
                flush=True,
            )
