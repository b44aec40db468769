"""On a CUDA machine (the H200): the built file passes verify, and the GEMV matches float64 on every config the
tables use. Skipped without CUDA (CI has none); run with `PYTHONPATH=. python -m pytest tests/test_gpu.py`."""

import pytest
import torch

from generator import REPO_ROOT
from generator.judge.loader import load_submission
from generator.judge.reference import compare, reference
from generator.judge.verify import poisoned_allocations, verify_distribution
from generator.judge.weights import make_weights, make_x
from generator.problem import load_problem

pytestmark = [pytest.mark.gpu, pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")]


@pytest.fixture(scope="module")
def submission():
    return load_submission(REPO_ROOT / "dist" / "submission.py", module_name="gpu_test_submission")


def test_built_file_passes_verify(submission):
    results, _, error = verify_distribution(submission, load_problem(), "heavy", 7, "cuda")
    assert not error
    assert all(r.ok for r in results), [f"{r.layer} m={r.m}: {r.problem}" for r in results if not r.ok]


def test_every_tabulated_gemv_config_is_exact_enough(submission):
    """Every CTABLE entry, NaN-poisoned outputs. Also the entries of layers ZTABLE and TTABLE take over entirely,
    for which prepare() packs nothing: a layer whose weights compress() refuses falls back to them."""
    problem = load_problem()
    weights = make_weights(problem, "normal", 3, "cuda")
    state = submission.prepare({name: w.clone() for name, w in weights.items()})
    for name in weights:
        if "packed:" + name not in state:
            state["packed:" + name] = tuple(submission.pack_mma_a(part) for part in state[name])
    gen = torch.Generator(device="cuda").manual_seed(4)
    for (layer_name, m), cfg in submission.CTABLE.items():
        if cfg is None:
            continue
        layer = problem.layers[layer_name]
        n = layer.n_for(m)
        x = make_x(m, layer.k, gen, "cuda")
        with poisoned_allocations():
            out = submission._gemv(x, layer_name, n, cfg, state)
        ref, scale = reference(x, weights[layer_name], n)
        assert compare(out, ref, scale, fp32_out=layer.dual).ok, (layer_name, m, cfg)


def test_tma_gemv_is_exact_enough_on_every_layer(submission):
    """The TMA + wgmma GEMV on every layer, the column-block edges, uneven K splits, both weight distributions,
    NaN-poisoned outputs, and every configuration TTABLE uses."""
    problem = load_problem()
    gen = torch.Generator(device="cuda").manual_seed(5)
    for distribution, seed in (("normal", 3), ("heavy", 8)):
        weights = make_weights(problem, distribution, seed, "cuda")
        state = submission.prepare({name: w.clone() for name, w in weights.items()})
        for name in weights:
            state["tiles:" + name] = tuple(submission.pack_tma_bulk(part) for part in state[name])
            if not problem.layers[name].dual:
                state["halftiles:" + name] = tuple(
                    submission.pack_tma_half_bulk(part) for part in state[name]
                )
        configs = ((1, 4, 0), (3, 8, 0), (7, 6, 0), (3, 8, 1), (16, 4, 1), (3, 8, 2), (5, 6, 2), (16, 4, 2))
        half_configs = (
            (1, 2, 3),
            (1, 8, 3),
            (1, 12, 3),
        )  # plain layers only
        plan = [
            (layer, m, cfg)
            for layer in problem.layers
            for m in (1, 5, 9, 16, 17, 32)
            for cfg in configs + (() if problem.layers[layer].dual else half_configs)
        ]
        plan += [(layer, m, cfg) for (layer, m), cfg in submission.TTABLE.items() if cfg is not None]
        for layer_name, m, cfg in plan:
            layer = problem.layers[layer_name]
            n = layer.n_for(m)
            x = make_x(m, layer.k, gen, "cuda")
            with poisoned_allocations():  # the output comes NaN-filled: an unwritten element fails
                out = submission._tma_gemv(x, layer_name, n, cfg, state)
            ref, scale = reference(x, weights[layer_name], n)
            result = compare(out, ref, scale, fp32_out=layer.dual)
            assert result.ok, (distribution, layer_name, m, cfg, result.problem)


def zgemv_against_float64(submission, layer_name, m, n, cfg, state, w, gen):
    """One compressed-GEMV launch on fresh x (on gen's device) into a NaN-poisoned output, compared with
    float64 x . W[:n]^T."""
    x = make_x(m, w.shape[1], gen, gen.device)
    with poisoned_allocations():
        out = submission._zgemv(x, layer_name, n, cfg, state)
    ref, scale = reference(x, w, n)
    return compare(out, ref, scale, fp32_out=False)


def test_compressed_gemv_is_exact_enough_on_every_layer(submission):
    """The compressed GEMV on every plain layer: the column-block edges, uneven exception counts per row, K splits
    of both kinds, NaN-poisoned outputs, both weight distributions (a matrix compress() refuses must be refused
    in one line), and every configuration ZTABLE uses."""
    problem = load_problem()
    gen = torch.Generator(device="cuda").manual_seed(6)
    configs = [
        (4, 1, 1, 0, 1, 0),
        (8, 1, 1, 0, 1, 0),
        (8, 1, 2, 1, 2, 0),
        (16, 1, 1, 0, 1, 0),
        (4, 4, 1, 0, 1, 1),
        (8, 2, 2, 0, 1, 0),
    ]
    configs += [(4, 8, 1, 1, 4, 1), (16, 2, 1, 1, 2, 0)]
    for distribution, seed in (("normal", 3), ("heavy", 8)):
        weights = make_weights(problem, distribution, seed, "cuda")
        state = submission.prepare({name: w.clone() for name, w in weights.items()})
        for name, layer in problem.layers.items():
            if layer.dual:
                continue
            try:
                state["z:" + name] = submission.compress(state[name][0], name)
            except submission.CompressionError as refused:
                assert "\n" not in str(refused) and str(refused).startswith(name + ": ")
                continue
            plan = [(m, cfg) for m in (1, 5, 9, 16, 17, 32) for cfg in configs]
            plan += [(m, cfg) for (lname, m), cfg in submission.ZTABLE.items() if lname == name and cfg]
            for m, cfg in plan:
                n = layer.n_for(m)
                if submission.zgemv_config_error(cfg, m, False, n, layer.k) is not None:
                    continue
                result = zgemv_against_float64(submission, name, m, n, cfg, state, weights[name], gen)
                assert result.ok, (distribution, name, m, cfg, result.problem)


def test_planted_overflow_reaches_the_compressed_gemv(submission):
    """Exceptions the headers cannot carry, three ways on o: row blocks with 6 weights outside the hi-byte table in
    one K group and 2 in another, compressed with 3 patches a group (3 of the 6 overflow) and with none (all
    overflow); an outlier row (2^40 x: ~1000 entries in one row); a 16-row block with 5,000 exceptions (past any
    fixed capacity). The overflow pass after the main loop must add every entry once: at every column block,
    batch and double-buffered, one to four row blocks a CTA, one to sixteen warps sharing a row block's entries,
    K split over 2..16 CTAs (semaphore and cluster: each adds only its own K range)."""
    problem = load_problem()
    layer = problem.layers["o"]
    gen = torch.Generator(device="cuda").manual_seed(11)
    base = make_weights(problem, "normal", 12, "cuda")["o"]
    planted = base.clone()
    for block, row in ((0, 0), (0, 9), (37, 15), (511, 4)):
        r = 16 * block + row
        for j, col in enumerate((1, 8, 17, 30, 44, 63, 960, 1023)):
            planted[r, col] = (-1) ** j * 3.0 * 2.0 ** (8 + j)  # hi bytes far from the Gaussian's
    outlier = base.clone()
    outlier[4100] = (outlier[4100].float() * 2.0**40).to(torch.bfloat16)
    cluster = base.clone()
    cpu_gen = torch.Generator().manual_seed(13)
    where = torch.randperm(16 * layer.k, generator=cpu_gen)[:5000].to("cuda")
    exponent = torch.randint(40, 100, (5000,), generator=cpu_gen).float()
    values = (torch.randn(5000, generator=cpu_gen) * torch.exp2(exponent)).to(torch.bfloat16).to("cuda")
    block = cluster[16 * 300 : 16 * 301].reshape(-1)
    block[where] = values
    cluster[16 * 300 : 16 * 301] = block.reshape(16, layer.k)
    configs = [
        (8, 1, 1, 0, 1, 0),
        (16, 1, 1, 1, 2, 0),
        (1, 1, 1, 0, 1, 0),
        (4, 2, 2, 0, 4, 0),
        (4, 4, 1, 0, 1, 1),
        (2, 16, 1, 0, 2, 0),
        (8, 8, 1, 1, 1, 1),
    ]
    cases = [(planted, 3), (planted, 0), (outlier, 3), (cluster, 3)]
    for case, (w, patches) in enumerate(cases):
        state = submission.prepare({"o": w.clone()})
        state["z:o"] = submission.compress(state["o"][0], "o", patches_per_group=patches)
        assert state["z:o"]["overflow"].numel() > 0, case  # the overflow is not empty
        for m in (1, 9, 16, 32):
            for cfg in configs:
                if submission.zgemv_config_error(cfg, m, False, layer.n, layer.k) is not None:
                    continue  # e.g. (16, 1, 1, 1, 2, 0) at m = 32: over the register budget
                result = zgemv_against_float64(submission, "o", m, layer.n, cfg, state, w, gen)
                assert result.ok, (case, m, cfg, result.problem)


def test_atomic_split_zeroes_adds_and_leaves_its_tickets_ready(submission):
    """C = 2 (the router's atomic split-K) on NaN-poisoned outputs, so the first CTA of every row group must zero
    its part; every loop style (P = 0, 1, 4: where warp 0 claims its ticket differs); S changing from one launch
    to the next on one semaphore array, so each launch must leave the tickets ready for any S; the column-block
    edges; both weight distributions; then a CUDA graph replayed on fresh x with its output re-poisoned."""
    problem = load_problem()
    layer = problem.layers["router"]
    gen = torch.Generator(device="cuda").manual_seed(9)
    configs = [(16, s, 1, 1, r, 2) for s in (2, 4, 8, 16) for r in (1, 2)]
    configs += [(8, 8, 4, 0, 1, 2), (16, 4, 4, 2, 1, 2), (16, 8, 1, 4, 1, 2), (4, 32, 1, 0, 4, 2)]
    for distribution, seed in (("normal", 3), ("heavy", 8)):
        weights = make_weights(problem, distribution, seed, "cuda")
        state = submission.prepare({"router": weights["router"].clone()})
        state["packed:router"] = tuple(submission.pack_mma_a(part) for part in state["router"])
        launched = 0
        for m in (1, 5, 9, 16, 17, 32):
            for cfg in configs:
                if submission.gemv_config_error(cfg, m, True, layer.n, layer.k) is not None:
                    continue
                x = make_x(m, layer.k, gen, "cuda")
                ref, scale = reference(x, weights["router"], layer.n)
                with poisoned_allocations():
                    out = submission._gemv(x, "router", layer.n, cfg, state)
                result = compare(out, ref, scale, fp32_out=True)
                assert result.ok, (distribution, m, cfg, result.problem)
                launched += 1
        assert launched >= 50, launched  # the rules must not have filtered the plan away

    x = make_x(32, layer.k, gen, "cuda")
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        out = submission._gemv(x, "router", layer.n, (16, 8, 1, 1, 1, 2), state)
    for _ in range(4):
        x.copy_(make_x(32, layer.k, gen, "cuda"))
        out.fill_(float("nan"))
        graph.replay()
        ref, scale = reference(x, weights["router"], layer.n)
        result = compare(out, ref, scale, fp32_out=True)
        assert result.ok, ("graph replay", result.problem)
