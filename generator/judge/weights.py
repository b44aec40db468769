"""Seeded weights and inputs for the local judge, in the distributions the real weights may take."""

from __future__ import annotations

import math

import torch

from generator.problem import Problem

DISTRIBUTIONS = ("normal", "heavy")
TORCH_DTYPES = {"bfloat16": torch.bfloat16, "float32": torch.float32}


def make_weight(n: int, k: int, dtype: str, distribution: str, gen: torch.Generator, device) -> torch.Tensor:
    """[n, k] weight. normal: N(0, 1/k). heavy: Student-t (3 dof) body plus outlier rows, columns and single
    weights 30-1000x larger, as trained weights have (and as a compressor's exception path must survive)."""
    scale = 1.0 / math.sqrt(k)
    if distribution == "normal":
        w = torch.randn(n, k, generator=gen, device=device) * scale
    elif distribution == "heavy":
        # t(3) = N / sqrt(chi2_3 / 3); chi2_3 as a sum of three squared normals
        z = torch.randn(n, k, generator=gen, device=device)
        chi2 = sum(torch.randn(n, k, generator=gen, device=device) ** 2 for _ in range(3))
        w = z / torch.sqrt(chi2 / 3 + 1e-6) * (scale / math.sqrt(3))
        rows = torch.randint(0, n, (max(1, n // 512),), generator=gen, device=device)
        cols = torch.randint(0, k, (max(1, k // 512),), generator=gen, device=device)
        w[rows] *= 30.0
        w[:, cols] *= 30.0
        spikes = torch.randint(0, n * k, (16,), generator=gen, device=device)
        w.view(-1)[spikes] *= 1000.0
    else:
        raise ValueError(f"unknown distribution {distribution!r} (expected one of {DISTRIBUTIONS})")
    return w.to(TORCH_DTYPES[dtype]).contiguous()


def make_weights(problem: Problem, distribution: str, seed: int, device) -> dict[str, torch.Tensor]:
    gen = torch.Generator(device=device)
    gen.manual_seed(seed)
    return {
        name: make_weight(layer.n, layer.k, layer.dtype, distribution, gen, device)
        for name, layer in problem.layers.items()
    }


def make_x(m: int, k: int, gen: torch.Generator, device) -> torch.Tensor:
    """Fresh activations: N(0, 1) in bf16, never zeros (zeros hide unwritten outputs and bad indexing)."""
    return torch.randn(m, k, generator=gen, device=device).to(torch.bfloat16)
