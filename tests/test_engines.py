"""The engines: routing, each engine's rule (and the CUDA layouts fit the shared memory it gives them), and the
kernels a build compiles (exactly those its routes reach)."""

import re

import pytest
from click.testing import CliRunner

from tools import needs

from generator import REPO_ROOT
from generator.cli import main
from generator.engines import BY_NAME, ENGINES
from generator.problem import load_problem
from generator.tables import load_tables
from kernels_src.compressed_gemv import COMPRESSED_GEMV, CompressedGemvConfig
from kernels_src.compressed_ring import COMPRESSED_RING, CompressedRingConfig
from kernels_src.engine import TICKET_SPLITS, Engine, Layer, column_blocks
from kernels_src.mma_gemv import MMA_GEMV, MmaGemvConfig, tiles_smem_error
from kernels_src.registry import Table, in_routing_order, plan_max_m, route, routes, skip_sets, variants
from kernels_src.tma_gemv import TMA_GEMV, TmaGemvConfig, smem_bytes

PROBLEM = load_problem()
O, POOLER, ROUTER = PROBLEM.layers["o"], PROBLEM.layers["pooler"], PROBLEM.layers["router"]
needs_nvcc = needs("nvcc")


def mma(**fields):
    return MmaGemvConfig(**fields)


def tables(
    mma_entries=None,
    mma_defaults=None,
    tma=None,
    compressed=None,
    splitk=None,
    gemm=None,
    ring=None,
    persistent=None,
):
    given = {
        "persistent_gemm": persistent,
        "compressed_gemv": compressed,
        "compressed_ring": ring,
        "tma_gemv": tma,
        "mma_gemv": mma_entries,
        "tma_gemm": gemm,
        "splitk_gemm": splitk,
    }
    made = [Table(BY_NAME[name], entries or {}, {}) for name, entries in given.items()]
    made = [t._replace(defaults=mma_defaults or {}) if t.engine is MMA_GEMV else t for t in made]
    return in_routing_order(made)


O1 = mma(warps=8, splits=1, unroll=2, pipeline="double", row_blocks=2, reduce="none")
PLAIN = mma(warps=4, splits=1, unroll=2, pipeline="batch", row_blocks=1, reduce="none")
TABLES = tables({("o", 1): O1, ("o", 8): None, ("o", 16): PLAIN}, {"plain": PLAIN, "dual": None})


@pytest.mark.parametrize(
    "layer, m, expected",
    [
        (O, 1, ("mma_gemv", O1)),
        (O, 5, ("cublas", ())),  # borrows ("o", 8), which is None: not this engine, and no engine after it
        (O, 9, ("mma_gemv", PLAIN)),  # borrows ("o", 16)
        (O, 32, ("mma_gemv", PLAIN)),  # no row in its class: the plain default
        (ROUTER, 8, ("cublas", ())),  # the dual default is None
        (O, 33, ("cublas", ())),  # past the GEMVs, and splitk_gemm's table is empty
        (O, 256, ("cublas", ())),
    ],
)
def test_route_walks_the_engines_in_precedence_order(layer, m, expected):
    engine, cfg = route(layer, m, TABLES)
    assert (engine.name, tuple(cfg)) == expected


def test_an_earlier_engine_takes_precedence_and_none_passes_on():
    half = TmaGemvConfig(splits=1, stages=12, tile="half", reduce="none")
    zcfg = CompressedGemvConfig(warps=8, splits=1, groups=2, pipeline="batch", row_blocks=1, reduce="none")
    t = tables(
        {("o", 32): PLAIN},
        {"plain": PLAIN},
        tma={("o", 32): half, ("o", 16): None, ("pooler", 32): half},
        compressed={("pooler", 8): zcfg, ("pooler", 32): None},
    )
    assert route(O, 17, t)[0].name == "tma_gemv"  # borrows ("o", 32) of tma_gemv
    assert route(O, 16, t)[0].name == "mma_gemv"  # None in tma_gemv: mma_gemv's default
    assert route(POOLER, 5, t) == (COMPRESSED_GEMV, zcfg)  # borrows ("pooler", 8)
    assert route(POOLER, 32, t) == (TMA_GEMV, half)  # None in compressed_gemv
    # a layer compress() refused skips the compressed engine: its next engine serves
    assert route(POOLER, 8, t, ("compressed_gemv",)) == (MMA_GEMV, PLAIN)
    # the ring comes after the register GEMV and before the TMA GEMV; refused, both compressed engines are skipped
    ring = CompressedRingConfig(stages=8, warpgroups=4, groups=2)
    t = tables({}, {"plain": PLAIN}, tma={("o", 32): half}, ring={("o", 32): ring, ("pooler", 8): ring},
               compressed={("pooler", 8): zcfg})  # fmt: skip
    assert route(O, 20, t) == (COMPRESSED_RING, ring)
    assert route(POOLER, 8, t) == (COMPRESSED_GEMV, zcfg)
    assert route(O, 20, t, ("compressed_gemv", "compressed_ring")) == (TMA_GEMV, half)
    assert skip_sets(O, t)[-1] == ("compressed_gemv", "compressed_ring")  # those compress() may refuse


def test_splitk_borrows_the_next_listed_m_and_stops_past_the_last():
    cfg = BY_NAME["splitk_gemm"].Config(
        block_n=64, block_m=64, block_k=128, splits=16, warps=4, stages=3, loads="tma", reduce="atomic"
    )
    t = tables(splitk={("router", 64): cfg, ("router", 256): cfg})
    assert route(ROUTER, 33, t) == (BY_NAME["splitk_gemm"], cfg)
    assert route(ROUTER, 100, t)[1] == cfg  # no row at 128: 256's
    assert route(ROUTER, 257, t)[0].name == "cublas"


def test_the_engines_route_in_the_order_each_states():
    """ENGINES are in the order of their own precedence, each with its table; the compressed GEMVs come first
    (they stream the fewest bytes) and mma_gemv, whose defaults take every other m <= 32, after the TMA GEMV.
    """
    names = [engine.name for engine in ENGINES]
    assert [engine.precedence for engine in ENGINES] == sorted({engine.precedence for engine in ENGINES})
    assert names[:2] == ["compressed_gemv", "compressed_ring"] and names.index("tma_gemv") < names.index(
        "mma_gemv"
    )
    assert set(BY_NAME) == set(names) | {"cublas"} and BY_NAME["cublas"].precedence is None
    for engine in ENGINES:
        assert (REPO_ROOT / "tables" / engine.table_file).is_file(), engine.table_file
        assert engine.summary.startswith(engine.name)
    tables_on_disk = {path.name for path in (REPO_ROOT / "tables").glob("*.yaml")} - {"problem.yaml"}
    assert tables_on_disk == {engine.table_file for engine in ENGINES}  # no table without an engine


def test_a_table_naming_an_unknown_field_or_mode_fails(tmp_path):
    with pytest.raises(ValueError, match="unknown field 'nw'"):
        MMA_GEMV.make_config({"nw": 4})
    with pytest.raises(ValueError, match="missing field 'reduce'"):
        MMA_GEMV.make_config(dict(warps=4, splits=1, unroll=1, pipeline="batch", row_blocks=1))
    with pytest.raises(ValueError, match="pipeline must be one of batch"):
        MMA_GEMV.make_config(dict(warps=4, splits=1, unroll=1, pipeline=1, row_blocks=1, reduce="none"))
    assert "pipeline=triple is not one of batch" in MMA_GEMV.config_error(
        mma(warps=4, splits=1, unroll=1, pipeline="triple", row_blocks=1, reduce="none"), O, 1
    )


def test_mma_gemv_rule_names_the_field():
    err = MMA_GEMV.config_error
    assert "splits=3 is not one of" in err(
        mma(warps=4, splits=3, unroll=2, pipeline="batch", row_blocks=1, reduce="semaphore"), O, 1
    )
    assert "splits=32 does not divide the 16 32-wide K blocks" in err(
        mma(warps=4, splits=32, unroll=2, pipeline="batch", row_blocks=1, reduce="semaphore"),
        O._replace(k=512),
        1,
    )
    assert "row_blocks=4 does not divide" in err(
        mma(warps=4, splits=1, unroll=2, pipeline="batch", row_blocks=4, reduce="none"), O._replace(n=32), 1
    )
    assert "data registers" in err(
        mma(warps=4, splits=1, unroll=8, pipeline="double", row_blocks=1, reduce="none"), ROUTER, 32
    )
    assert (
        err(
            mma(warps=16, splits=8, unroll=1, pipeline="batch_l2", row_blocks=1, reduce="semaphore"),
            ROUTER,
            32,
        )
        is None
    )
    assert "reduce=cluster needs 2 <= splits <= 16" in err(
        mma(warps=16, splits=32, unroll=1, pipeline="batch", row_blocks=1, reduce="cluster"), ROUTER, 8
    )
    assert "none exactly when splits = 1" in err(
        mma(warps=16, splits=1, unroll=1, pipeline="batch", row_blocks=1, reduce="cluster"), ROUTER, 8
    )
    assert "none exactly when splits = 1" in err(
        mma(warps=16, splits=4, unroll=1, pipeline="batch", row_blocks=1, reduce="none"), ROUTER, 8
    )
    assert (
        err(mma(warps=16, splits=16, unroll=1, pipeline="batch", row_blocks=1, reduce="cluster"), ROUTER, 8)
        is None
    )
    assert "serves 1 <= m <= 32, not m=33" in err(PLAIN, O, 33)


def test_the_atomic_reduction_is_the_routers_and_needs_a_split():
    err = MMA_GEMV.config_error
    assert (
        err(
            mma(warps=16, splits=8, unroll=1, pipeline="double", row_blocks=1, reduce="atomic_out"),
            ROUTER,
            32,
        )
        is None
    )
    assert (
        err(
            mma(warps=16, splits=32, unroll=1, pipeline="batch", row_blocks=1, reduce="atomic_out"), ROUTER, 1
        )
        is None
    )  # past the 16 CTAs a cluster may hold
    assert "router (dual) only" in err(
        mma(warps=16, splits=8, unroll=1, pipeline="double", row_blocks=1, reduce="atomic_out"), O, 32
    )
    assert "reduce=atomic is not one of" in COMPRESSED_GEMV.config_error(
        CompressedGemvConfig(warps=4, splits=4, groups=1, pipeline="batch", row_blocks=1, reduce="atomic"),
        POOLER,
        8,
    )
    # 16 warps' tiles at row_blocks 4, NB 4 fill 128 KB: a cluster inbox of 15 more would not fit
    assert "shared memory" in tiles_smem_error(16, 16, 4, True, 32)
    assert tiles_smem_error(16, 16, 4, False, 32) is None


def test_tma_gemv_rule_names_the_field():
    err = TMA_GEMV.config_error
    q = PROBLEM.layers["qkv_gate"]
    assert "stages=5 is not one of" in err(
        TmaGemvConfig(splits=1, stages=5, tile="full", reduce="none"), O, 1
    )
    assert "splits=17 must be 1..16" in err(
        TmaGemvConfig(splits=17, stages=4, tile="full", reduce="semaphore"), O, 8
    )
    assert "divisible by 64" in err(
        TmaGemvConfig(splits=1, stages=4, tile="full", reduce="none"), O._replace(n=1000), 1
    )
    assert "shared memory" in err(
        TmaGemvConfig(splits=4, stages=12, tile="full", reduce="semaphore"), ROUTER, 32
    )  # 12 x 20 KB
    assert err(TmaGemvConfig(splits=4, stages=8, tile="full", reduce="semaphore"), ROUTER, 32) is None
    assert "workspace" in err(
        TmaGemvConfig(splits=64, stages=4, tile="full", reduce="semaphore"), PROBLEM.layers["unpooler"], 32
    )
    assert "reduce=cluster_gather needs 2 <= splits" in err(
        TmaGemvConfig(splits=32, stages=8, tile="full", reduce="cluster_gather"), q, 32
    )
    assert err(TmaGemvConfig(splits=16, stages=8, tile="full", reduce="cluster_scatter"), q, 32) is None
    assert err(TmaGemvConfig(splits=1, stages=12, tile="half", reduce="none"), q, 32) is None  # 12 x 16 KB
    assert "shared memory" in err(
        TmaGemvConfig(splits=1, stages=16, tile="half", reduce="none"), q, 32
    )  # 16 x 16 KB
    assert err(TmaGemvConfig(splits=1, stages=16, tile="half", reduce="none"), q, 16) is None  # 16 x 12 KB
    assert "splits must be 1" in err(
        TmaGemvConfig(splits=2, stages=8, tile="half", reduce="semaphore"), q, 16
    )
    assert "not the router" in err(TmaGemvConfig(splits=1, stages=8, tile="half", reduce="none"), ROUTER, 16)
    assert "divisible by 128" in err(
        TmaGemvConfig(splits=1, stages=8, tile="half", reduce="none"), q._replace(k=192), 16
    )


def test_compressed_gemv_rule_names_the_field():
    err = COMPRESSED_GEMV.config_error
    q = PROBLEM.layers["qkv_gate"]
    assert "never compressed" in err(
        CompressedGemvConfig(warps=4, splits=1, groups=1, pipeline="batch", row_blocks=1, reduce="none"),
        ROUTER,
        8,
    )
    assert "groups=3 is not one of" in err(
        CompressedGemvConfig(warps=4, splits=1, groups=3, pipeline="batch", row_blocks=1, reduce="none"), q, 8
    )
    assert "64-wide K groups" in err(
        CompressedGemvConfig(
            warps=4, splits=32, groups=1, pipeline="batch", row_blocks=1, reduce="semaphore"
        ),
        O,
        8,
    )
    assert "data registers" in err(
        CompressedGemvConfig(warps=4, splits=1, groups=4, pipeline="double", row_blocks=2, reduce="none"),
        q,
        32,
    )
    assert (
        err(
            CompressedGemvConfig(
                warps=16, splits=1, groups=2, pipeline="double", row_blocks=1, reduce="none"
            ),
            q,
            8,
        )
        is None
    )
    assert (
        err(
            CompressedGemvConfig(
                warps=4, splits=4, groups=1, pipeline="batch", row_blocks=1, reduce="cluster"
            ),
            q,
            32,
        )
        is None
    )


def test_launch_values_parse_positionally_or_by_name():
    from generator.judge.launches import parse_values

    cfg = parse_values(TMA_GEMV, ["1", "14", "half", "none"])
    assert cfg == TmaGemvConfig(splits=1, stages=14, tile="half", reduce="none")
    assert parse_values(TMA_GEMV, ["stages=14", "splits=1", "tile=half", "reduce=none"]) == cfg
    with pytest.raises(ValueError, match="stages must be an integer"):
        parse_values(TMA_GEMV, ["1", "many", "half", "none"])
    assert TMA_GEMV.describe(cfg) == "splits=1 stages=14 tile=half reduce=none"


def test_every_route_of_the_built_tables_has_its_kernel_and_fits_its_m():
    """For m = 1 .. plan_max_m on every layer, with and without the compressed engine: the route's config passes
    its rule at that m, and a CUDA route's kernel is in the list the build compiles."""
    t = load_tables(PROBLEM)
    kernels = set(variants(PROBLEM.layers.values(), t))
    seen = 0
    for layer, m, _, engine, cfg in routes(PROBLEM.layers.values(), t):
        assert engine.config_error(cfg, layer, m) is None, (layer.name, m, engine.name, cfg)
        variant = engine.variant(cfg, layer, m)
        assert variant is None or variant in kernels
        seen += 1
    assert seen == sum(len(skip_sets(layer, t)) for layer in PROBLEM.layers.values()) * plan_max_m(t)


SRC = REPO_ROOT / "kernels_src"
M_OF_NB = {1: 8, 2: 16, 4: 32}


def test_every_layers_row_groups_fit_the_semaphore_counters():
    """The semaphore reductions take one counter per 16-row group (engine.py SEMAPHORE_GROUPS, the first part of
    the one int32 array runtime.py allocates; mma_gemv.py asserts its ticket slots follow them, common.cuh that
    they end the array): every layer of the problem has no more row groups than that."""
    from kernels_src.engine import SEMAPHORE_GROUPS

    assert max(layer.n for layer in PROBLEM.layers.values()) // 16 <= SEMAPHORE_GROUPS


@needs_nvcc
def test_every_admitted_configs_shared_memory_holds_its_kernels_layout(host_program):
    """Each engine's rule sizes a launch's shared memory (smem_bytes, rendered into its launch-table case); each
    launcher static_asserts that its kernel's layout fits in it (ring, cluster inbox, warps' tiles, staged overflow).
    Here that check runs on every config the rules admit, and on a case one byte short, which it must refuse.
    """
    from host_program import LAYOUT_FITS, section

    cases = [line.split(" ", 2) for line in section(host_program, "fits")]  # fits, engine, its arguments
    assert {engine for _, engine, _ in cases} == set(LAYOUT_FITS) and len(cases) > 1000
    assert [fits for fits, _, _ in cases[:-1]] == ["1"] * (len(cases) - 1), [c for c in cases if c[0] != "1"][
        :3
    ]
    assert cases[-1][0] == "0"  # one byte short of the ring: refused


@needs_nvcc
def test_tma_cluster_owners_partition_the_consumer_threads(host_program):
    """tma_gemv.cuh's tma_owned_from / tma_owner, compiled: for every splits a cluster may have, the ranks' thread
    ranges tile 0..127, each rank owns at least one thread, tma_owner names the range a thread is in, and the largest
    share is the ceil(128 / S) threads tma_gemv.py's smem_bytes gives each rank's inbox."""
    from host_program import section

    lines = section(host_program, "owners")
    assert len(lines) == 15
    for line in lines:
        values = list(map(int, line.split()))
        s = values[0]
        starts, owners = values[1 : 2 + s], values[2 + s :]
        assert starts[0] == 0 and starts[-1] == 128 and len(owners) == 128
        shares = [b - a for a, b in zip(starts, starts[1:])]
        assert min(shares) >= 1
        assert all(starts[owners[t]] <= t < starts[owners[t] + 1] for t in range(128)), s
        scatter = TmaGemvConfig(splits=s, stages=4, tile="full", reduce="cluster_scatter")
        none = TmaGemvConfig(splits=1, stages=4, tile="full", reduce="none")
        assert smem_bytes(scatter, 1, False) - smem_bytes(none, 1, False) == (s - 1) * max(shares) * 4 * 4, s


@needs_nvcc
def test_the_overflow_tile_index_inverts_the_tile_map(host_program):
    """compressed_gemv.cuh's tile_index (where the overflow pass puts a weight) inverts tile_coords (where the
    epilogue reads it), for every NB: no index of the three tile maps comes back elsewhere."""
    from host_program import section

    assert section(host_program, "tile_index") == ["0"]


def test_wgmma_serialisation_is_read_from_ptxas_info():
    from generator.compile import serialized_wgmma

    report = (
        "ptxas info    : Used 101 registers\n"
        "ptxas info    : (C7515) Potential Performance Loss: wgmma.mma_async instructions are serialized due to non"
        " wgmma instructions defining accumulator registers of a wgmma between start and end of the pipeline stage"
        " in the function '_ZN3okc15tma_gemv_kernelILi4E'\n"
    )
    assert serialized_wgmma(report) == [
        (
            "C7515",
            "due to non wgmma instructions defining accumulator registers of a wgmma between start and end of the"
            " pipeline stage",
            "_ZN3okc15tma_gemv_kernelILi4E",
        )
    ]
    assert serialized_wgmma("ptxas info    : Used 101 registers\n") == []


def test_compile_fails_on_a_serialised_wgmma_or_a_spill(tmp_path):
    """`compile` reads ptxas's report: a clean kernel passes; a spill or a wgmma serialisation (reported only as
    info) fails with one line naming it. A stand-in nvcc prints the report."""
    clean = (
        "ptxas info    : Compiling entry function '_Z6kernelv' for 'sm_90a'\n"
        "ptxas info    : Function properties for _Z6kernelv\n"
        "    0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads\n"
        "ptxas info    : Used 90 registers, used 1 barriers, 16 bytes smem\n"
    )
    serialised = clean + (
        "ptxas info    : (C7513) Potential Performance Loss: wgmma.mma_async instructions are serialized due to"
        " non wgmma instructions defining input registers of a wgmma between start and end of the pipeline stage"
        " in the function '_Z6kernelv'\n"
    )
    spilled = clean.replace("0 bytes spill stores", "8 bytes spill stores")
    results = {}
    for name, report in (("clean", clean), ("serialised", serialised), ("spilled", spilled)):
        (tmp_path / f"{name}.txt").write_text(report)
        nvcc = tmp_path / f"nvcc_{name}"
        nvcc.write_text(f"#!/bin/sh\ncat {tmp_path / (name + '.txt')} >&2\n")
        nvcc.chmod(0o755)
        results[name] = CliRunner().invoke(main, ["compile", "--nvcc", str(nvcc)])
    assert results["clean"].exit_code == 0, results["clean"].output
    assert results["serialised"].exit_code == 1
    assert (
        "wgmmas serialised by ptxas (C7513: due to non wgmma instructions defining input"
        in results["serialised"].output
    )
    assert results["spilled"].exit_code == 1 and "spill registers" in results["spilled"].output


def test_a_missing_nvcc_is_one_line(tmp_path):
    result = CliRunner().invoke(main, ["compile", "--nvcc", str(tmp_path / "missing")])
    assert result.exit_code == 2 and result.output.strip().count("\n") == 0
    assert "no such compiler" in result.output


def test_compile_hands_nvcc_exactly_the_kernels_the_tables_reach(tmp_path, built):
    """`compile` gives nvcc what prepare() builds: the file's CUDA_SRC and LAUNCH_TABLE, the launch table of
    exactly the build's kernel list (one case each), for sm_90a, with ptxas's report; a stand-in nvcc keeps what it
    was given and reports one kernel per distinct instantiation. (The real compile, registers and 0 spills:
    `python -m generator compile`, CI's next step.)"""
    from generator.render import cpp_sources

    wanted = variants(PROBLEM.layers.values(), load_tables(PROBLEM))
    templates = {(v.engine, v.kernel) for v in wanted}  # cases differing in their launch arguments share one
    report = "".join(
        f"ptxas info    : Compiling entry function '_Z{i}k' for 'sm_90a'\n"
        f"ptxas info    : Function properties for _Z{i}k\n"
        "    0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads\n"
        "ptxas info    : Used 90 registers, used 1 barriers, 16 bytes smem\n"
        for i in range(len(templates))
    )
    (tmp_path / "report.txt").write_text(report)
    nvcc = tmp_path / "nvcc"
    nvcc.write_text(
        f'#!/bin/sh\necho "$@" > {tmp_path}/args\n'
        f'for a in "$@"; do case "$a" in *.cu) cp "$a" {tmp_path}/given.cu;; esac; done\n'
        f"cat {tmp_path}/report.txt >&2\n"
    )
    nvcc.chmod(0o755)
    result = CliRunner().invoke(main, ["compile", "--nvcc", str(nvcc)])
    assert result.exit_code == 0, result.output
    cpp = cpp_sources(built)
    assert (tmp_path / "given.cu").read_text() == cpp["CUDA_SRC"] + cpp["LAUNCH_TABLE"]
    args = (tmp_path / "args").read_text()
    assert "arch=compute_90a,code=sm_90a" in args and "-Xptxas -v" in args
    summary = (
        rf"^{len(templates)} kernels \(the distinct instantiations of the launch table's {len(wanted)} cases,"
    )
    assert re.search(summary + r".*\), max 90 registers, 0 spilling$", result.output, re.M), result.output


def test_column_blocks():
    assert [column_blocks(m) for m in (1, 8, 9, 16, 17, 32)] == [1, 1, 2, 2, 4, 4]
    assert Layer("unpooler", 8192, 4096, "bfloat16", 1024, 8).n_for(8) == 1024


def test_every_table_header_is_its_engines_field_declarations():
    """Each field's meaning and allowed values are written once, in its engine's FIELDS: the table headers are
    rendered from them (generator/tables.py, field_header_lines) and must say the same."""
    from generator.tables import field_header_lines, with_field_header

    for engine in ENGINES:
        text = (REPO_ROOT / "tables" / engine.table_file).read_text()
        assert (
            "\n".join(field_header_lines(engine)) + "\n" in text
        ), f"{engine.name}: run python -m generator headers"
        assert with_field_header(engine, text) == text
        assert engine.fields == engine.Config._fields


def test_a_field_with_a_default_may_be_left_out_of_a_table_entry():
    from kernels_src.engine import Engine, Field, config_type

    fields = (
        Field("splits", int, (1, 2), "CTAs"),
        Field("hint", str, ("off", "on"), "a hint", default="off"),
    )

    class Probe(Engine):
        name = "probe"
        FIELDS = fields
        Config = config_type("ProbeConfig", fields)

    probe = Probe()
    assert probe.make_config({"splits": 2}) == probe.Config(splits=2, hint="off")
    assert probe.make_config({"splits": 2, "hint": "on"}).hint == "on"
    with pytest.raises(ValueError, match="missing field 'splits'"):
        probe.make_config({"hint": "on"})
    from generator.tables import field_header_lines

    assert "default off" in "\n".join(field_header_lines(probe))
    assert probe.Config._field_defaults == {"hint": "off"}


def test_every_engine_list_comes_from_the_engines():
    """The help texts name every engine ENGINES lists (tma_gemm was once missing from sweep's), and
    runtime.py names none by hand."""
    text = " ".join(CliRunner().invoke(main, ["sweep", "--help"], terminal_width=1000).output.split())
    for engine in ENGINES:
        assert engine.name in text, engine.name
    runtime = (REPO_ROOT / "kernels_src" / "runtime.py").read_text()
    assert not [e.name for e in ENGINES if f'"{e.name}"' in runtime]


def test_headers_renders_a_stale_field_block_and_check_names_it(repo_copy):
    from generator.tables import field_header_lines

    path = repo_copy / "tables" / "tma_gemm.yaml"
    path.write_text(path.read_text().replace("consumer warpgroups per CTA", "warpgroups (an old word)"))
    stale = CliRunner().invoke(main, ["headers", "--check", "--root", str(repo_copy)])
    assert stale.exit_code == 1 and "tables/tma_gemm.yaml" in stale.output
    assert CliRunner().invoke(main, ["headers", "--root", str(repo_copy)]).exit_code == 0
    assert "\n".join(field_header_lines(BY_NAME["tma_gemm"])) in path.read_text()
    assert CliRunner().invoke(main, ["headers", "--check", "--root", str(repo_copy)]).exit_code == 0


def test_a_field_at_its_default_is_left_out_of_descriptions():
    from kernels_src.engine import Engine, Field, config_type

    fields = (
        Field("splits", int, (1, 2), "CTAs"),
        Field("hint", str, ("off", "on"), "a hint", default="off"),
    )

    class Probe(Engine):
        name = "probe"
        FIELDS = fields
        Config = config_type("ProbeConfig", fields)

    probe = Probe()
    assert probe.describe(probe.Config(splits=2)) == "splits=2"
    assert probe.describe(probe.Config(splits=2, hint="on")) == "splits=2 hint=on"


def test_the_output_atomic_reduction_keeps_tickets_for_every_split_count():
    """The semaphores hold a ticket and a flag per row group for each split count S >= 2 mma_gemv admits."""
    assert TICKET_SPLITS == len([s for s in MMA_GEMV.values["splits"] if s >= 2])


def test_every_engine_of_kernels_src_is_found_and_states_its_place():
    """generator/engines.py finds every engine a kernels_src module defines (through kernels_src/sources.yaml),
    each with a place in the routing order of its own; none registers itself by being imported."""
    import importlib
    import pkgutil

    import kernels_src

    names = [info.name for info in pkgutil.iter_modules(kernels_src.__path__)]
    modules = [importlib.import_module(f"kernels_src.{name}") for name in names]
    made = {value.name for module in modules for value in vars(module).values() if isinstance(value, Engine)}
    assert made == set(BY_NAME)
    assert len({engine.precedence for engine in ENGINES}) == len(ENGINES)
    assert "ENGINES" not in vars(importlib.import_module("kernels_src.engine"))
