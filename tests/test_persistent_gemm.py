"""persistent_gemm: its schedule and rule on the CPU; on a CUDA machine (the H200), every layer at every class edge
past 32 tokens against float64 on both weight distributions, whole tiles, split tiles and both mixed, a second
call on the same state (the accumulator and counters left clean), CUDA-graph replays, and two launches on two
streams at once."""

import pytest
import torch

from generator import REPO_ROOT
from generator.candidates import candidates
from generator.judge.launches import make_plans
from generator.judge.loader import engines_of, load_submission
from generator.judge.reference import compare, reference
from generator.judge.verify import poisoned_allocations
from generator.judge.weights import make_weights, make_x
from generator.problem import load_problem
from kernels_src.engine import Layer
from kernels_src.persistent_gemm import (
    PERSISTENT_GEMM,
    GemmConfig,
    persistent_smem_bytes,
    persistent_split_tiles,
)

PROBLEM = load_problem()
EDGES = (33, 64, 65, 100, 128, 129, 200, 255, 256)
# rows, tokens, stages, ctas: whole tiles only (ctas dividing the tiles), split tiles only (ctas a multiple of
# the tiles), whole waves then split tiles, every tile shape and the deepest rings
CONFIGS = [
    GemmConfig(128, 128, 5, 108),
    GemmConfig(128, 128, 6, 128),
    GemmConfig(128, 64, 8, 128),
    GemmConfig(256, 128, 4, 126),
    GemmConfig(128, 256, 4, 126),
    GemmConfig(128, 128, 5, 60),
    GemmConfig(256, 64, 5, 96),
    GemmConfig(128, 128, 5, 2),
]


def schedule(tiles: int, k_blocks: int, ctas: int) -> list:
    """persistent_gemm.cuh's GemmSchedule, every CTA's units: (cta, tile, k_begin, k_end)."""
    waves = tiles // ctas
    whole = waves * ctas
    rest = (tiles - whole) * k_blocks
    units = []
    for cta in range(ctas):
        units += [(cta, cta + ctas * w, 0, k_blocks) for w in range(waves)]
        at, end = rest * cta // ctas, rest * (cta + 1) // ctas
        while at < end:
            k0 = at % k_blocks
            length = min(k_blocks - k0, end - at)
            units.append((cta, whole + at // k_blocks, k0, k0 + length))
            at += length
    return units


@pytest.mark.parametrize(
    "tiles, k_blocks, ctas", [(18, 128, 132), (2048, 128, 132), (64, 16, 128), (7, 5, 3)]
)
def test_the_schedule_covers_every_k_block_of_every_tile_once(tiles, k_blocks, ctas):
    seen = {}
    for cta, tile, k0, k1 in schedule(tiles, k_blocks, ctas):
        assert 0 <= k0 < k1 <= k_blocks, (cta, tile, k0, k1)
        for kb in range(k0, k1):
            assert (tile, kb) not in seen, (tile, kb, cta, seen[(tile, kb)])
            seen[(tile, kb)] = cta
    assert len(seen) == tiles * k_blocks
    loads = [
        sum(k1 - k0 for c, _, k0, k1 in schedule(tiles, k_blocks, ctas) if c == cta) for cta in range(ctas)
    ]
    assert max(loads) - min(loads) <= 1  # every CTA the same k-blocks, to one
    whole = tiles // ctas * ctas
    rest = (tiles - whole) * k_blocks

    def owner(p):  # GemmSchedule::owner: the CTA whose range holds k-block p
        return ((p + 1) * ctas + rest - 1) // rest - 1

    for tile in range(whole, tiles):  # a split tile's participants are owner(first) .. owner(last), each once
        holders = [c for c, t, k0, k1 in schedule(tiles, k_blocks, ctas) if t == tile]
        first, last = owner((tile - whole) * k_blocks), owner((tile - whole + 1) * k_blocks - 1)
        assert holders == list(range(first, last + 1)), (tile, holders, first, last)
    partial = {tile for _, tile, k0, k1 in schedule(tiles, k_blocks, ctas) if k1 - k0 < k_blocks}
    cfg = GemmConfig(128, 128, 4, ctas)
    assert len(partial) <= persistent_split_tiles(cfg, 128 * tiles, 128)


@pytest.mark.parametrize(
    "tiles, k_blocks, ctas", [(18, 128, 108), (18, 128, 126), (68, 16, 64), (4, 128, 132)]
)
def test_equal_splits_give_a_cta_one_split_unit_its_last(tiles, k_blocks, ctas):
    """With the CTAs a multiple of the tiles past the full waves (the rule), each of those tiles has exactly
    ctas / split CTAs, and a CTA's split unit, if any, is its last: the ring is idle for its partial."""
    split = tiles % ctas
    assert split and ctas % split == 0
    units = schedule(tiles, k_blocks, ctas)
    for cta in range(ctas):
        mine = [u for u in units if u[0] == cta]
        cut = [i for i, (_, _, k0, k1) in enumerate(mine) if k1 - k0 < k_blocks]
        assert cut in ([], [len(mine) - 1]), (cta, mine)
    for tile in range(tiles - split, tiles):
        assert len([u for u in units if u[1] == tile]) == ctas // split


@pytest.mark.parametrize("blocks", [8, 16, 32])
def test_the_shares_of_a_split_tile_cover_it_once_and_each_gathers_every_other_partial(blocks):
    """persistent_gemm.cuh's GemmShare::of and gemm_gather_share's `c + (c >= share)`: the S shares of a tile's
    8-token blocks are disjoint and cover it, and participant `share` reads exactly the other S - 1 partials.
    """
    for count in range(2, 34):
        shares = [(blocks * s // count, blocks * (s + 1) // count) for s in range(count)]
        assert [b for lo, hi in shares for b in range(lo, hi)] == list(range(blocks)), count
        for share in range(count):
            others = [c + (c >= share) for c in range(count - 1)]
            assert sorted(others + [share]) == list(range(count)), (count, share)


def test_the_rule_bounds_accumulators_shared_memory_and_the_grid():
    qkv = Layer("qkv_gate", 2304, 8192, "bfloat16")
    router = Layer("router", 256, 8192, "float32")
    assert PERSISTENT_GEMM.config_error(GemmConfig(128, 128, 6, 126), qkv, 128) is None
    assert "multiple" in PERSISTENT_GEMM.config_error(GemmConfig(128, 128, 6, 132), qkv, 128)
    assert "accumulators" in PERSISTENT_GEMM.config_error(GemmConfig(256, 256, 3, 132), qkv, 256)
    assert "bytes" in PERSISTENT_GEMM.config_error(GemmConfig(128, 256, 5, 132), qkv, 256)
    assert "1..132" in PERSISTENT_GEMM.config_error(GemmConfig(128, 128, 4, 133), qkv, 128)
    assert "divisible" in PERSISTENT_GEMM.config_error(
        GemmConfig(256, 128, 4, 132), Layer("x", 2432, 8192, "bfloat16"), 64
    )
    assert persistent_smem_bytes(128, 128, 4, True) > persistent_smem_bytes(128, 128, 4, False)  # hi + lo
    assert PERSISTENT_GEMM.config_error(GemmConfig(128, 128, 4, 132), router, 128) is None
    thin = Layer(
        "thin", 128 * 133, 64, "bfloat16"
    )  # 133 tiles of one k-block over 132 CTAs: one k-block to split 132 ways
    assert "k-blocks" in PERSISTENT_GEMM.config_error(GemmConfig(128, 128, 4, 132), thin, 128)
    for layer in (qkv, router):
        for m in (64, 128, 256):
            found = candidates(PERSISTENT_GEMM, layer, m)
            assert found and all(PERSISTENT_GEMM.config_error(c, layer, m) is None for c in found)
            assert any(c.ctas >= 126 for c in found)


gpu = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")


@pytest.fixture(scope="module")
def submission(every_engine_file):
    return load_submission(every_engine_file, module_name="persistent_gemm_test_submission")


def _check(plan, x, w, layer, what):
    with poisoned_allocations():  # the output comes NaN-filled: an unwritten element fails
        out = plan(x)
    ref, scale = reference(x, w, layer.n_for(x.shape[0]))
    result = compare(out, ref, scale, fp32_out=layer.dual)
    assert result.ok, (*what, result.problem)


def _admitted(module, launches):
    layers = {layer.name: layer for layer in module.problem()[0]}
    engine = engines_of(module)["persistent_gemm"]
    return [l for l in launches if engine.config_error(engine.Config(*l[3]), layers[l[0]], l[1]) is None]


@gpu
@pytest.mark.gpu
@pytest.mark.parametrize("distribution, seed", [("normal", 3), ("heavy", 8)])
def test_every_layer_at_every_edge_twice_on_one_state(submission, distribution, seed):
    weights = make_weights(PROBLEM, distribution, seed, "cuda")
    state = submission.prepare({name: w.clone() for name, w in weights.items()})
    wanted = [
        (name, m, "persistent_gemm", tuple(c)) for name in PROBLEM.layers for m in EDGES for c in CONFIGS
    ]
    wanted = _admitted(submission, wanted)
    for cfg in CONFIGS:  # the rule may drop a config at some shapes, never everywhere
        assert any(launch[3] == tuple(cfg) for launch in wanted), cfg
    gen = torch.Generator(device="cuda").manual_seed(5)
    for launch, plan in zip(wanted, make_plans(submission, state, wanted)):
        layer = PROBLEM.layers[launch[0]]
        for call in ("first call", "second call"):
            x = make_x(launch[1], layer.k, gen, "cuda")
            _check(plan, x, weights[launch[0]], layer, (distribution, *launch, call))


@gpu
@pytest.mark.gpu
def test_graph_replays_and_two_streams_at_once(submission):
    """Replays of one captured launch on fresh x; then two prepared states launching on two streams at once,
    each a split-tile config whose partials meet in its own accumulator."""
    weights = make_weights(PROBLEM, "normal", 4, "cuda")
    states = [submission.prepare({name: w.clone() for name, w in weights.items()}) for _ in range(2)]
    gen = torch.Generator(device="cuda").manual_seed(2)
    launches = [
        ("qkv_gate", 128, "persistent_gemm", (128, 128, 6, 126)),
        ("router", 200, "persistent_gemm", (128, 128, 4, 132)),
    ]
    for name, m, engine, cfg in launches:
        layer = PROBLEM.layers[name]
        (plan,) = make_plans(submission, states[0], [(name, m, engine, cfg)])
        x = make_x(m, layer.k, gen, "cuda")
        plan(x)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            out = plan(x)
        for _ in range(3):
            x.copy_(make_x(m, layer.k, gen, "cuda"))
            out.fill_(float("nan"))
            graph.replay()
            ref, scale = reference(x, weights[name], layer.n)
            result = compare(out, ref, scale, fp32_out=layer.dual)
            assert result.ok, (name, m, cfg, "graph replay", result.problem)
    name, m, engine, cfg = launches[0]
    layer = PROBLEM.layers[name]
    plans = [make_plans(submission, state, [launches[0]])[0] for state in states]
    streams = [torch.cuda.Stream() for _ in states]
    xs = [make_x(m, layer.k, gen, "cuda") for _ in states]
    torch.cuda.synchronize()
    outs = [[], []]
    for _ in range(8):
        for i, stream in enumerate(streams):
            with torch.cuda.stream(stream):
                outs[i].append(plans[i](xs[i]))
    torch.cuda.synchronize()
    for i, x in enumerate(xs):
        ref, scale = reference(x, weights[name], layer.n)
        for out in outs[i]:
            result = compare(out, ref, scale, fp32_out=False)
            assert result.ok, ("two streams", i, result.problem)
