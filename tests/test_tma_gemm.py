"""tma_gemm (kernels_src/tma_gemm.py), on the CPU: its rule names the field and the limit, its variants are the
kernel template tma_gemv.cuh instantiates (and the CUDA side checks the same limits), it routes between the GEMVs
and splitk_gemm, and its candidates are all admitted. Its kernels run in tests/test_gpu.py."""

import re

import pytest

from tools import needs

from generator import REPO_ROOT
from generator.candidates import candidates
from generator.problem import load_problem
from generator.engines import ENGINES
from kernels_src.engine import ACCUMULATOR_FLOATS, REDUCTION, SMEM_LIMIT, Layer
from kernels_src.registry import Table, route
from kernels_src.splitk_gemm import SPLITK_GEMM
from kernels_src.tma_gemm import TMA_GEMM, TmaGemmConfig, gemm_column_blocks, gemm_smem_bytes
from kernels_src.tma_gemv import TMA_GEMV, TmaGemvConfig

PROBLEM = load_problem()
QKV, ROUTER = PROBLEM.layers["qkv_gate"], PROBLEM.layers["router"]


@pytest.mark.parametrize("m, nb", [(33, 8), (64, 8), (65, 16), (128, 16), (129, 32), (256, 32)])
def test_column_blocks_cover_m_by_one_wgmma_of_n_8nb(m, nb):
    assert gemm_column_blocks(m) == nb
    assert nb * 8 >= m and nb in (8, 16, 32)  # tma_gemv.cuh: one wgmma of N = 8 NB = 64, 128 or 256


@pytest.mark.parametrize(
    "cfg, layer, m, says",
    [
        (
            TmaGemmConfig(warpgroups=1, splits=2, stages=4, reduce="none"),
            QKV,
            64,
            "reduce=none with splits=2",
        ),
        (
            TmaGemmConfig(warpgroups=1, splits=1, stages=4, reduce="atomic"),
            QKV,
            64,
            "reduce=atomic with splits=1",
        ),
        (
            TmaGemmConfig(warpgroups=2, splits=1, stages=4, reduce="none"),
            Layer("odd", 320, 1024, "bfloat16"),
            64,
            "warpgroups=2 needs N divisible by 128",
        ),
        (
            TmaGemmConfig(warpgroups=1, splits=129, stages=4, reduce="atomic"),
            QKV,
            64,
            "splits=129 must be 1..128",
        ),
        (
            TmaGemmConfig(warpgroups=4, splits=2, stages=4, reduce="atomic"),
            QKV,
            256,
            "warpgroups=4 at m=256 holds 128 accumulators",
        ),
        (
            TmaGemmConfig(warpgroups=2, splits=1, stages=6, reduce="none"),
            QKV,
            256,
            "stages=6, warpgroups=2 at m=256 need",
        ),
        (
            TmaGemmConfig(warpgroups=1, splits=1, stages=4, reduce="none"),
            QKV,
            32,
            "serves 33 <= m <= 256, not m=32",
        ),
        (TmaGemmConfig(warpgroups=1, splits=1, stages=4, reduce="none"), QKV, 257, "not m=257"),
        (
            TmaGemmConfig(warpgroups=3, splits=1, stages=4, reduce="none"),
            QKV,
            64,
            "warpgroups=3 is not one of (1, 2, 4)",
        ),
        (TmaGemmConfig(warpgroups=1, splits=1, stages=5, reduce="none"), QKV, 64, "stages=5 is not one of"),
        (
            TmaGemmConfig(warpgroups=1, splits=64, stages=4, reduce="semaphore"),
            Layer("wide", 8192, 8192, "bfloat16"),
            256,
            "workspace",
        ),
        (
            TmaGemmConfig(warpgroups=1, splits=2, stages=4, reduce="atomic", epilogue="staged"),
            QKV,
            128,
            "epilogue=staged is the plain write's",
        ),
        (
            TmaGemmConfig(warpgroups=2, splits=1, stages=4, reduce="none", epilogue="staged"),
            QKV,
            128,
            "warpgroups=2",
        ),
        (
            TmaGemmConfig(warpgroups=1, splits=1, stages=4, reduce="none", epilogue="staged"),
            ROUTER,
            128,
            "for the router",
        ),
        (
            TmaGemmConfig(warpgroups=1, splits=1, stages=4, reduce="none", epilogue="tma"),
            QKV,
            128,
            "epilogue=tma is not one of direct, staged",
        ),
    ],
)
def test_the_rule_names_the_field_and_the_limit(cfg, layer, m, says):
    err = TMA_GEMM.config_error(cfg, layer, m)
    assert err is not None and says in err, err


def test_the_atomic_tile_fits_the_shared_accumulator_on_every_layer():
    for layer in PROBLEM.layers.values():
        cfg = TmaGemmConfig(warpgroups=1, splits=2, stages=4, reduce="atomic")
        assert layer.n_for(256) * 8 * gemm_column_blocks(256) <= ACCUMULATOR_FLOATS
        assert TMA_GEMM.config_error(cfg, layer, 256) is None, layer.name


def test_smem_matches_the_kernels_slot_layout():
    # the kernel's slots (tma_gemv.cuh, TmaStream): stages x (8 KB a weight block x (2 for dual) x WG + 8 NB x 128
    # bytes) + 1 KB
    assert (
        gemm_smem_bytes(TmaGemmConfig(warpgroups=2, splits=1, stages=6, reduce="none"), 16, False)
        == 6 * (16384 + 16384) + 1024
    )
    assert (
        gemm_smem_bytes(TmaGemmConfig(warpgroups=1, splits=1, stages=4, reduce="none"), 32, True)
        == 4 * (16384 + 32768) + 1024
    )
    assert (
        gemm_smem_bytes(TmaGemmConfig(warpgroups=2, splits=1, stages=4, reduce="none"), 32, False)
        <= SMEM_LIMIT
    )


def test_variants_are_the_shared_launchers_arguments_by_name():
    """Both engines launch tma_gemv.cuh's kernel through one launcher, with the same arguments by name: the GEMV
    with one warpgroup, the GEMM with its column blocks and warpgroups; reduce by the shared REDUCTION's code,
    the output type from the layer, shared memory from each engine's rule."""
    cfg = TmaGemmConfig(warpgroups=2, splits=7, stages=6, reduce="atomic")
    v = dict(TMA_GEMM.variant(cfg, QKV, 100).args)
    assert v == dict(
        NB=16, stages=6, dual=False, half=False, warpgroups=2, staged=False, out="__nv_bfloat16", splits=7,
        reduce=REDUCTION.code("atomic"), smem_bytes=gemm_smem_bytes(cfg, 16, False),
    )  # fmt: skip
    semaphore = TmaGemmConfig(warpgroups=1, splits=3, stages=4, reduce="semaphore")
    router = dict(TMA_GEMM.variant(semaphore, ROUTER, 64).args)
    assert (router["NB"], router["dual"], router["out"]) == (8, True, "float")
    assert router["reduce"] == REDUCTION.code("semaphore")
    gemv = TMA_GEMV.variant(TmaGemvConfig(splits=3, stages=8, tile="full", reduce="cluster_scatter"), QKV, 32)
    assert [name for name, _ in gemv.args] == list(v) and dict(gemv.args)["warpgroups"] == 1
    assert dict(gemv.args)["reduce"] == REDUCTION.code("cluster_scatter")
    assert TMA_GEMM.launcher == TMA_GEMV.launcher
    assert TMA_GEMM.operands(
        TmaGemmConfig(warpgroups=1, splits=1, stages=4, reduce="none"), QKV
    ) == TMA_GEMV.operands(
        TmaGemvConfig(splits=1, stages=8, tile="full", reduce="none"), QKV
    )  # one packed copy of the weights serves both


def test_it_routes_between_the_gemvs_and_splitk():
    gemm = TmaGemmConfig(warpgroups=1, splits=3, stages=8, reduce="atomic")
    split = SPLITK_GEMM.Config(
        block_n=64, block_m=64, block_k=128, splits=16, warps=4, stages=3, loads="tma", reduce="atomic"
    )
    given = {
        "tma_gemm": {("qkv_gate", 64): gemm, ("qkv_gate", 128): None},
        "splitk_gemm": {("qkv_gate", 128): split},
    }
    tables = tuple(Table(engine, given.get(engine.name, {}), {}) for engine in ENGINES)
    assert route(QKV, 33, tables) == (TMA_GEMM, gemm)  # borrows m = 64
    assert route(QKV, 64, tables) == (TMA_GEMM, gemm)
    assert route(QKV, 65, tables) == (SPLITK_GEMM, split)  # None at 128: the next engine
    assert route(QKV, 129, tables)[0].name == "cublas"  # no row in 129..256 and splitk has none past 128
    assert route(QKV, 32, tables)[0].name == "cublas"  # below its range, and the GEMV tables are empty


def test_the_reduce_codes_are_named_in_the_launch_table():
    """tma_gemm's and tma_gemv's variants pass their reduction as the generated enum's enumerator, by name."""
    from generator.launch_table import launch_table

    kernels = [
        TMA_GEMM.variant(TmaGemmConfig(warpgroups=1, splits=3, stages=8, reduce="atomic"), QKV, 64),
        TMA_GEMV.variant(TmaGemvConfig(splits=4, stages=8, tile="full", reduce="cluster_scatter"), QKV, 32),
        TMA_GEMV.variant(TmaGemvConfig(splits=1, stages=8, tile="full", reduce="none"), QKV, 32),
    ]
    table = launch_table(kernels)
    assert "static constexpr Reduce reduce = Reduce::kAtomic;" in table
    assert "static constexpr Reduce reduce = Reduce::kClusterScatter;" in table
    assert "static constexpr Reduce reduce = Reduce::kNone;" in table  # splits = 1 reduces nothing


@pytest.mark.parametrize("m", TMA_GEMM.sweep_m)
def test_the_sweep_reaches_every_warpgroup_count_and_reduction_it_can(m):
    """What the candidates leave out must be what the rule refuses: at m <= 128 every warpgroup count and both
    reductions are timed somewhere, at m = 256 (128 accumulators a thread) four warpgroups never are."""
    found = {
        (cfg.warpgroups, cfg.reduce)
        for layer in PROBLEM.layers.values()
        for cfg in candidates(TMA_GEMM, layer, m)
    }
    warpgroups = (1, 2) if m > 128 else (1, 2, 4)
    assert found >= {(wg, reduce) for wg in warpgroups for reduce in ("none", "semaphore", "atomic")}
    assert all(wg in warpgroups for wg, _ in found)


def test_the_register_budget_is_what_the_launch_bounds_leave():
    from kernels_src.tma_gemm import register_budget

    assert [register_budget(wg) for wg in (1, 2, 4)] == [255, 224, 120]  # 160, 288, 544 threads


def test_every_config_the_gpu_tests_name_runs_on_some_shape():
    """tests/test_gpu.py times configs beyond the tables, dropping each one at the shapes its engine's rule
    refuses; a config refused everywhere would be a test that never runs (two such were found this way). Its
    extra_launches() asserts the opposite; this runs it on the CPU."""
    from test_gpu import extra_launches

    launches = extra_launches()
    assert sum(launch[2] == "tma_gemm" for launch in launches) > 200


@needs("nvcc")
def test_the_register_budget_divides_by_the_kernels_threads(host_program):
    """The thread count under tma_kernel's __launch_bounds__ (tma_gemv.cuh, tma_threads) is the one register_budget
    divides 64 K registers by."""
    from host_program import section

    from kernels_src.tma_gemm import register_budget, tma_threads

    rows = [tuple(map(int, line.split())) for line in section(host_program, "threads")]
    assert len(rows) == 3
    for wg, threads in rows:
        assert threads == tma_threads(wg) and min(255, 65536 // threads // 8 * 8) == register_budget(wg)


def test_the_staged_epilogue_is_an_argument_of_the_same_launcher():
    """epilogue=staged sets the launcher's `staged` (the kernel's Staged template argument); direct configs pass
    false, so their kernels are the ones the tables reached before."""
    from generator.launch_table import launch_table

    staged = TmaGemmConfig(warpgroups=1, splits=1, stages=6, reduce="none", epilogue="staged")
    direct = TmaGemmConfig(warpgroups=1, splits=1, stages=6, reduce="none")
    assert TMA_GEMM.config_error(staged, PROBLEM.layers["o"], 128) is None
    assert dict(TMA_GEMM.variant(staged, QKV, 128).args)["staged"] is True
    assert dict(TMA_GEMM.variant(direct, QKV, 128).args)["staged"] is False
    table = launch_table([TMA_GEMM.variant(staged, QKV, 128)])
    assert re.search(r"static constexpr bool [^;]*\bstaged = true[,;]", table)
    assert "case 0: return okc::launch_tma<okc::launch::Case0>(call);" in table
    src = (REPO_ROOT / "kernels_src" / "tma_gemv.cuh").read_text()
    assert "typename L::out, L::staged>" in src  # the kernel's Staged
    o = PROBLEM.layers["o"]
    assert any(cfg.epilogue == "staged" for cfg in candidates(TMA_GEMM, o, 128))
    assert all(
        cfg.reduce == "none" and cfg.warpgroups == 1
        for cfg in candidates(TMA_GEMM, o, 128)
        if cfg.epilogue == "staged"
    )


@pytest.mark.parametrize("nb, m", [(8, 33), (8, 64), (16, 100), (16, 128), (32, 129), (32, 256)])
def test_the_staged_write_puts_every_element_where_the_direct_one_does(nb, m):
    """A model of write_staged (tma_gemv.cuh) against tma_write's map: thread t's accumulator e goes to shared
    memory at token * kStagedPitch + row; then piece c (16 bytes, 8 rows) of token c / 8 goes to out. Every
    (token < M, row) of the 64-row tile comes out exactly once, from the accumulator tma_write would store there;
    pieces and the staged tile stay 16-byte aligned and within the ring's smallest size. The model's formulas are
    the kernel's: each is looked up, as written, in write_staged and tma_write."""
    src = (REPO_ROOT / "kernels_src" / "tma_gemv.cuh").read_text()
    staged = src[src.index("void write_staged(") : src.index("// One CTA's stream")]
    element = src[src.index("void tma_element(") : src.index("void store_element(")]
    direct = src[src.index("void store_element(") : src.index("void write_staged(")]
    for line in (
        "row = row0 + warp * 16 + (lane >> 2) + ((e & 2) ? 8 : 0);",
        "token = (e >> 2) * 8 + (lane & 3) * 2 + (e & 1);",
    ):
        assert line in element, line  # the element map the model uses
    assert "tma_element(t, e, 0, row, token);" in staged and "tma_element(t, e, row0, row, token);" in direct
    for line in (
        "tile[token * kStagedPitch + row] = __float2bfloat16_rn(acc[e]);",
        "for (int c = t; c < 8 * NB * 8; c += kTmaConsumers) {",
        "const int token = c >> 3, part = c & 7;",
        "if (token < a.M)",
        "*reinterpret_cast<uint4*>(out + (size_t)token * a.N + row0 + part * 8) =",
        "*reinterpret_cast<const uint4*>(tile + token * kStagedPitch + part * 8);",
    ):
        assert line in staged, line
    assert "constexpr int kStagedPitch = kTmaTileRows + 8;" in src
    assert "__float2bfloat16_rn(v)" in (REPO_ROOT / "kernels_src" / "common.cuh").read_text()  # store_out's
    pitch = 64 + 8
    assert (pitch * 2) % 16 == 0
    staged = {}
    for t in range(128):
        warp, lane = t >> 5, t & 31
        for e in range(4 * nb):
            row = warp * 16 + (lane >> 2) + (8 if e & 2 else 0)
            token = (e >> 2) * 8 + (lane & 3) * 2 + (e & 1)
            where = token * pitch + row
            assert where not in staged, (t, e)
            staged[where] = (t, e, token, row)
    assert max(staged) < 8 * nb * pitch and 8 * nb * pitch * 2 <= 2 * (8 * 1024 + nb * 8 * 64 * 2)
    written = {}
    for c in range(0, 8 * nb * 8):
        token, part = c >> 3, c & 7
        if token >= m:
            continue
        assert (token * pitch + part * 8) * 2 % 16 == 0
        for j in range(8):  # the 16-byte piece: rows part * 8 .. part * 8 + 7 of this token
            t, e, src_token, src_row = staged[token * pitch + part * 8 + j]
            assert (src_token, src_row) == (token, part * 8 + j)
            assert (token, part * 8 + j) not in written
            written[(token, part * 8 + j)] = (t, e)
    assert set(written) == {(token, row) for token in range(min(m, 8 * nb)) for row in range(64)}
