"""Routing decisions, the GEMV's admissible configurations (Python and CUDA agree), and the nvcc build."""

import itertools
import shutil
import subprocess

import pytest
from click.testing import CliRunner

from generator import REPO_ROOT
from generator.cli import main
from kernels_src import dispatch

CTABLE = {("o", 1): (8, 1, 2, 1, 2, 0), ("o", 8): None, ("o", 16): (4, 1, 2, 0, 1, 0)}
DEFAULTS = {"plain": (4, 1, 2, 0, 1, 0), "dual": None}


@pytest.mark.parametrize(
    "layer, m, dual, expected",
    [
        ("o", 1, False, ("gemv", (8, 1, 2, 1, 2, 0))),
        ("o", 5, False, ("cublas", None)),  # borrows ("o", 8), which is None
        ("o", 9, False, ("gemv", (4, 1, 2, 0, 1, 0))),  # borrows ("o", 16)
        ("o", 32, False, ("gemv", (4, 1, 2, 0, 1, 0))),  # no row: the plain default
        ("router", 8, True, ("cublas", None)),  # dual default is None
        ("o", 33, False, ("cublas", None)),
        ("o", 256, False, ("cublas", None)),
    ],
)
def test_route(layer, m, dual, expected):
    assert dispatch.route(layer, m, dual, CTABLE, DEFAULTS) == expected


TTABLE = {("o", 32): (1, 8, 0), ("o", 16): None, ("router", 8): (16, 6, 1)}


@pytest.mark.parametrize(
    "layer, m, dual, expected",
    [
        ("o", 32, False, ("tma", (1, 8, 0))),
        ("o", 17, False, ("tma", (1, 8, 0))),  # borrows ("o", 32)
        ("o", 16, False, ("gemv", (4, 1, 2, 0, 1, 0))),  # None in TTABLE: CTABLE decides
        ("o", 1, False, ("gemv", (8, 1, 2, 1, 2, 0))),  # no TTABLE row for its class
        (
            "router",
            5,
            True,
            ("tma", (16, 6, 1)),
        ),  # a TTABLE entry beats CTABLE's dual default (None = cuBLAS)
        ("o", 64, False, ("cublas", None)),
    ],
)
def test_route_with_ttable(layer, m, dual, expected):
    assert dispatch.route(layer, m, dual, CTABLE, DEFAULTS, TTABLE) == expected


def test_tma_config_errors_name_the_field():
    assert "expected 3 integers" in dispatch.tma_config_error((1, 8), 1, False, 1024, 1024)
    assert "STAGES=5" in dispatch.tma_config_error((1, 5, 0), 1, False, 1024, 1024)
    assert "C=2" in dispatch.tma_config_error((1, 4, 2), 1, False, 1024, 1024)
    assert "S=17 must be 1..16" in dispatch.tma_config_error((17, 4, 0), 1, False, 8192, 1024)
    assert "divisible by 64" in dispatch.tma_config_error((1, 4, 0), 1, False, 1000, 1024)
    assert "shared memory" in dispatch.tma_config_error((4, 12, 0), 32, True, 256, 8192)  # 12 x 20 KB
    assert dispatch.tma_config_error((4, 8, 0), 32, True, 256, 8192) is None
    assert "workspace" in dispatch.tma_config_error((64, 4, 0), 32, False, 8192, 4096)
    assert dispatch.tma_config_error((3, 8, 0), 32, False, 2304, 8192) is None
    assert "cluster" in dispatch.tma_config_error((1, 8, 1), 32, False, 2304, 8192)  # nothing to reduce
    assert "cluster" in dispatch.tma_config_error((32, 8, 1), 32, False, 2304, 8192)  # past 16 CTAs
    assert dispatch.tma_config_error((16, 8, 1), 32, False, 2304, 8192) is None
    assert dispatch.tma_config_error((16, 8, 2), 32, False, 2304, 8192) is None
    # C = 3, half tiles: unsplit, plain weights, K in 128s, two x boxes per slot in the shared memory count
    assert dispatch.tma_config_error((1, 12, 3), 32, False, 2304, 8192) is None  # 12 x 16 KB
    assert "shared memory" in dispatch.tma_config_error((1, 16, 3), 32, False, 2304, 8192)  # 16 x 16 KB
    assert dispatch.tma_config_error((1, 16, 3), 16, False, 2304, 8192) is None  # 16 x 12 KB
    assert "S must be 1" in dispatch.tma_config_error((2, 8, 3), 16, False, 2304, 8192)
    assert "not the router" in dispatch.tma_config_error((1, 8, 3), 16, True, 256, 8192)
    assert "divisible by 128" in dispatch.tma_config_error((1, 8, 3), 16, False, 2304, 192)
    assert "C=2" in dispatch.tma_config_error((1, 8, 2), 32, False, 2304, 8192)
    assert "C=3" in dispatch.tma_config_error((3, 8, 3), 32, False, 2304, 8192)
    assert "C=4 is not one of" in dispatch.tma_config_error((1, 8, 4), 16, False, 2304, 8192)


def test_column_blocks():
    assert [dispatch.column_blocks(m) for m in (1, 8, 9, 16, 17, 32)] == [1, 1, 2, 2, 4, 4]


def test_config_errors_name_the_field():
    assert "S=3" in dispatch.gemv_config_error((4, 3, 2, 0, 1, 0), 1, False, 1024, 1024)
    assert "does not divide" in dispatch.gemv_config_error((4, 32, 2, 0, 1, 0), 1, False, 1024, 512)
    assert "R=4 does not divide" in dispatch.gemv_config_error((4, 1, 2, 0, 4, 0), 1, False, 32, 1024)
    assert "data registers" in dispatch.gemv_config_error((4, 1, 8, 1, 1, 0), 32, True, 256, 8192)
    assert dispatch.gemv_config_error((16, 8, 1, 2, 1, 0), 32, True, 256, 8192) is None
    assert "cluster" in dispatch.gemv_config_error((16, 32, 1, 0, 1, 1), 8, True, 256, 8192)
    assert "cluster" in dispatch.gemv_config_error((16, 1, 1, 0, 1, 1), 8, True, 256, 8192)
    assert dispatch.gemv_config_error((16, 16, 1, 0, 1, 1), 8, True, 256, 8192) is None


def _host_program_output(tmp_path, name, source, gencode=()):
    """stdout of a host-only C++ program (`source`, which includes the kernels' headers) built with nvcc and run:
    how these tests read the CUDA side's own arithmetic. gencode: for a source that brings kernels with it (they
    are compiled, never launched)."""
    program = tmp_path / f"{name}.cu"
    program.write_text(source)
    subprocess.run(["nvcc", "-std=c++17", *gencode, str(program), "-o", str(tmp_path / name)], check=True)
    return subprocess.run([str(tmp_path / name)], capture_output=True, text=True, check=True).stdout


def _cpp_rule_table(tmp_path):
    """gemv_fits() as the CUDA header computes it, for every (U, NB, R, P, dual), via a host-only program."""
    out = _host_program_output(
        tmp_path,
        "rule",
        f'#include "{REPO_ROOT}/kernels_src/gemv.cuh"\n#include <cstdio>\n'
        "int main() { for (int u : {1, 2, 4, 8}) for (int nb : {1, 2, 4}) for (int r : {1, 2, 4})"
        f" for (int p = 0; p < {len(dispatch.GEMV_P)}; ++p) for (int d = 0; d < 2; ++d)"
        ' printf("%d %d %d %d %d %d\\n", u, nb, r, p, d, (int)okc::gemv_fits(u, nb, r, p, d)); }\n',
    )
    return {tuple(map(int, line.split()[:5])): bool(int(line.split()[5])) for line in out.splitlines()}


@pytest.mark.nvcc
@pytest.mark.skipif(shutil.which("nvcc") is None, reason="needs nvcc")
def test_python_and_cuda_agree_on_which_configs_exist(tmp_path):
    cpp = _cpp_rule_table(tmp_path)
    m_of_nb = {1: 8, 2: 16, 4: 32}
    for u, nb, r, p, d in itertools.product((1, 2, 4, 8), (1, 2, 4), (1, 2, 4), dispatch.GEMV_P, (0, 1)):
        error = dispatch.gemv_config_error((4, 1, u, p, r, 0), m_of_nb[nb], bool(d), 4096, 8192)
        assert (error is None) == cpp[(u, nb, r, p, d)], (u, nb, r, p, d, error)


@pytest.mark.nvcc
@pytest.mark.skipif(shutil.which("nvcc") is None, reason="needs nvcc")
def test_wgmma_serialisation_is_read_from_ptxas_info():
    from generator.compile import serialized_wgmma

    report = (
        "ptxas info    : Used 101 registers\n"
        "ptxas info    : (C7515) Potential Performance Loss: wgmma.mma_async instructions are serialized due to non"
        " wgmma instructions defining accumulator registers of a wgmma between start and end of the pipeline stage"
        " in the function '_ZN3okc15tma_gemv_kernelILi4E'\n"
    )
    found = serialized_wgmma(report)
    assert found == [
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
    from click.testing import CliRunner

    from generator.cli import main

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


def test_cuda_compiles_for_sm90a_without_spills():
    result = CliRunner().invoke(main, ["compile"])
    assert result.exit_code == 0, result.output
    assert "0 spilling" in result.output


@pytest.mark.nvcc
@pytest.mark.skipif(shutil.which("nvcc") is None, reason="needs nvcc")
def test_the_atomic_splits_tickets_fit_the_semaphore_array_runtime_allocates(tmp_path):
    """C = 2 keeps its tickets and flags past C = 0's counters in the one semaphore array runtime.py allocates:
    the CUDA layout (common.cuh) and the Python sizes must agree, and the regions must not overlap."""
    import re

    out = _host_program_output(
        tmp_path,
        "tickets",
        f'#include "{REPO_ROOT}/kernels_src/common.cuh"\n#include <cstdio>\n'
        'int main() { printf("%d %d %d %d %d\\n", okc::kTicketAt, okc::kTicketGroups, okc::kTicketSplits,'
        " okc::kFlagAt, okc::kSemaphoreInts); }\n",
    )
    ticket_at, groups, splits, flag_at, total = map(int, out.split())
    runtime_src = (REPO_ROOT / "kernels_src" / "runtime.py").read_text()
    semaphores = int(re.search(r"^SEMAPHORES = (\d+)", runtime_src, re.M).group(1))
    assert semaphores == total
    assert groups == dispatch.GEMV_TICKET_GROUPS
    # one ticket and one flag per row group and power-of-two S in 2..32
    assert splits == len([s for s in dispatch.GEMV_S if s >= 2]) == 5
    assert flag_at == ticket_at + splits * groups and total == flag_at + splits * groups
    # C = 0's counters (one per row group of any engine: at most N / 16 of the plain GEMV) end before them
    from generator.problem import load_problem

    assert max(layer.n for layer in load_problem().layers.values()) // 16 <= ticket_at


def _cpp_tma_fits(tmp_path):
    """tma_fits() as the CUDA header computes it, for every NB, dual and ring depth the header compiles in
    (TmaRingDepths), via a host-only program."""
    out = _host_program_output(
        tmp_path,
        "tma_rule",
        f'#include "{REPO_ROOT}/kernels_src/tma_gemv.cuh"\n#include <cstdio>\n'
        "int main() { for (int nb : {1, 2, 4}) for (int st : okc::TmaRingDepths::values) for (int d = 0; d < 2; ++d)"
        ' printf("%d %d %d %d %d\\n", nb, st, d, (int)okc::tma_fits(nb, st, d), okc::tma_smem_bytes(nb, st, d)); }\n',
    )
    return {tuple(map(int, line.split()[:3])): tuple(map(int, line.split()[3:])) for line in out.splitlines()}


@pytest.mark.nvcc
@pytest.mark.skipif(shutil.which("nvcc") is None, reason="needs nvcc")
def test_python_and_cuda_agree_on_the_tma_ring(tmp_path):
    cpp = _cpp_tma_fits(tmp_path)
    m_of_nb = {1: 8, 2: 16, 4: 32}
    assert sorted({stages for _, stages, _ in cpp}) == sorted(dispatch.TMA_STAGES)  # one list of ring depths
    assert len(cpp) == 3 * len(dispatch.TMA_STAGES) * 2
    for (nb, stages, dual), (fits, smem) in cpp.items():
        assert dispatch.tma_smem_bytes(nb, stages, bool(dual)) == smem
        error = dispatch.tma_config_error((1, stages, 0), m_of_nb[nb], bool(dual), 256, 8192)
        assert (error is None) == bool(fits), (nb, stages, dual, error)


@pytest.mark.nvcc
@pytest.mark.skipif(shutil.which("nvcc") is None, reason="needs nvcc")
def test_the_tma_launcher_refuses_other_ring_depths_naming_its_own(tmp_path):
    """The launcher's config check (what binding.cpp asks before a launch), built with its kernels for sm_90a and
    run on the host: a depth outside TmaRingDepths is refused in one line that lists the depths; one inside is
    not."""
    out = _host_program_output(
        tmp_path,
        "stages_refusal",
        f'#include "{REPO_ROOT}/kernels_src/tma_launch.cu"\n#include <cstdio>\n'
        "int main() { for (int stages : {3, 14}) {"
        " const char* refusal = okc_tma_config_error(4, stages, false, 1, 3);"
        ' printf("%s\\n", refusal ? refusal : "accepted"); } }\n',
        gencode=("-gencode=arch=compute_90a,code=sm_90a",),
    )
    assert out.splitlines() == [
        "STAGES must be one of " + ", ".join(map(str, dispatch.TMA_STAGES)),
        "accepted",
    ]


def _cpp_smem_rules(tmp_path):
    """The CUDA headers' shared-memory arithmetic for C = 1 (the cluster inbox) at S = 2, 8, 16: gemv_smem_bytes
    for every (NW, R, NB), tma_smem_bytes + tma_inbox_bytes for every (NB, STAGES, dual, C = 1, 2), and the limit.
    """
    out = _host_program_output(
        tmp_path,
        "smem_rule",
        f'#include "{REPO_ROOT}/kernels_src/gemv.cuh"\n#include "{REPO_ROOT}/kernels_src/tma_gemv.cuh"\n'
        "#include <cstdio>\nint main() {\n"
        ' printf("limit %d\\n", (int)okc::kSmemOptInLimit);\n'
        " for (int s : {2, 3, 8, 16}) for (int nb : {1, 2, 4}) {\n"
        "  for (int nw : {1, 2, 4, 8, 16}) for (int r : {1, 2, 4})\n"
        '   printf("gemv %d %d %d %d %d\\n", s, nb, nw, r, (int)okc::gemv_smem_bytes(nw, r, nb, s - 1));\n'
        "  for (int st : {2, 4, 6, 8, 12, 14, 16}) for (int d = 0; d < 2; ++d) for (int c = 1; c <= 2; ++c)\n"
        '   printf("tma %d %d %d %d %d %d\\n", s, nb, st, d, c, okc::tma_smem_bytes(nb, st, d) + okc::tma_inbox_bytes(nb, s, c));\n'
        " }\n}\n",
    )
    rows = [line.split() for line in out.splitlines()]
    limit = next(int(row[1]) for row in rows if row[0] == "limit")
    return limit, [(row[0], tuple(map(int, row[1:]))) for row in rows if row[0] != "limit"]


@pytest.mark.nvcc
@pytest.mark.skipif(shutil.which("nvcc") is None, reason="needs nvcc")
def test_python_and_cuda_agree_on_the_cluster_inbox(tmp_path):
    """C = 1 puts S - 1 partial tiles in rank 0's shared memory: a config is refused in Python exactly when the
    CUDA side's bytes exceed its limit, so the sweep never times a launch the launcher would refuse."""
    limit, rows = _cpp_smem_rules(tmp_path)
    assert limit == dispatch.SMEM_LIMIT
    m_of_nb = {1: 8, 2: 16, 4: 32}
    refused = 0
    for kind, values in rows:
        if kind == "gemv" and values[0] not in dispatch.GEMV_S:
            continue  # S = 3 is there for the TMA GEMV's uneven shares; the register GEMVs take no such S
        if kind == "gemv":
            s, nb, nw, r, smem = values
            error = dispatch.gemv_config_error((nw, s, 1, 0, r, 1), m_of_nb[nb], False, 4096, 8192)
            zerror = dispatch.zgemv_config_error((nw, s, 1, 0, r, 1), m_of_nb[nb], False, 4096, 8192)
            assert (error is None) == (smem <= limit), (values, error)
            if (
                zerror is None or "data registers" not in zerror
            ):  # its register rule binds first at R = 4, NB = 4
                assert (zerror is None) == (smem <= limit), (values, zerror)
        else:
            s, nb, stages, dual, c, smem = values
            assert dispatch.tma_smem_bytes(nb, stages, bool(dual), s, c) == smem
            error = dispatch.tma_config_error((s, stages, c), m_of_nb[nb], bool(dual), 256, 8192)
            assert (error is None) == (smem <= limit), (values, error)
        refused += smem > limit
    assert refused > 0  # the limit binds somewhere, or this test would prove nothing


@pytest.mark.nvcc
@pytest.mark.skipif(shutil.which("nvcc") is None, reason="needs nvcc")
def test_tma_cluster_owners_partition_the_consumer_threads(tmp_path):
    """tma_gemv.cuh's own tma_owned_from / tma_owner, compiled: for every S a cluster may have, the ranks' thread
    ranges tile 0..127 without gaps, each rank owns at least one thread, tma_owner names the range a thread is
    in, and the largest share fits the inbox tma_inbox_bytes sizes (ceil(128 / S) threads)."""
    out = _host_program_output(
        tmp_path,
        "owners",
        f'#include "{REPO_ROOT}/kernels_src/tma_gemv.cuh"\n#include <cstdio>\nint main() {{\n'
        " for (int s = 2; s <= 16; ++s) {\n"
        '  printf("s %d %d", s, okc::tma_inbox_bytes(1, s, 2));\n'
        '  for (int r = 0; r <= s; ++r) printf(" %d", okc::tma_owned_from(r, s));\n'
        '  for (int t = 0; t < 128; ++t) printf(" %d", okc::tma_owner(t, s));\n'
        '  printf("\\n");\n }\n}\n',
    )
    lines = out.splitlines()
    assert len(lines) == 15
    for line in lines:
        values = list(map(int, line.split()[1:]))
        s, inbox_bytes = values[0], values[1]
        starts, owners = values[2 : 3 + s], values[3 + s :]
        assert starts[0] == 0 and starts[-1] == 128 and len(owners) == 128
        shares = [b - a for a, b in zip(starts, starts[1:])]
        assert min(shares) >= 1
        assert all(starts[owners[t]] <= t < starts[owners[t] + 1] for t in range(128)), s
        assert inbox_bytes == (s - 1) * max(shares) * 4 * 4, s  # NB = 1: 4 floats per thread


def test_zgemv_config_errors_name_the_field():
    assert "expected 6 integers" in dispatch.zgemv_config_error((4, 1, 1, 0), 1, False, 2304, 8192)
    assert "never compressed" in dispatch.zgemv_config_error((4, 1, 1, 0, 1, 0), 8, True, 256, 8192)
    assert "UG=3" in dispatch.zgemv_config_error((4, 1, 3, 0, 1, 0), 8, False, 2304, 8192)
    assert "P=2" in dispatch.zgemv_config_error((4, 1, 1, 2, 1, 0), 8, False, 2304, 8192)
    assert "64-wide K groups" in dispatch.zgemv_config_error((4, 32, 1, 0, 1, 0), 8, False, 2304, 1024)
    assert "R=4 does not divide" in dispatch.zgemv_config_error((4, 1, 1, 0, 4, 0), 8, False, 2320, 8192)
    assert "cluster" in dispatch.zgemv_config_error((4, 1, 1, 0, 1, 1), 8, False, 2304, 8192)
    assert "data registers" in dispatch.zgemv_config_error((4, 1, 4, 1, 2, 0), 32, False, 2304, 8192)
    assert dispatch.zgemv_config_error((16, 1, 2, 1, 1, 0), 8, False, 2304, 8192) is None
    assert dispatch.zgemv_config_error((4, 4, 1, 0, 1, 1), 32, False, 2304, 8192) is None


ZTABLE = {("pooler", 8): (8, 1, 2, 0, 1, 0), ("pooler", 32): None}


@pytest.mark.parametrize(
    "layer, m, expected",
    [
        ("pooler", 8, ("z", (8, 1, 2, 0, 1, 0))),
        ("pooler", 5, ("z", (8, 1, 2, 0, 1, 0))),  # borrows ("pooler", 8)
        ("pooler", 32, ("tma", (3, 8, 0))),  # None in ZTABLE: TTABLE decides
        ("o", 32, ("tma", (1, 8, 0))),
        ("pooler", 64, ("cublas", None)),
    ],
)
def test_ztable_comes_first(layer, m, expected):
    ttable = {("pooler", 32): (3, 8, 0), ("o", 32): (1, 8, 0)}
    assert dispatch.route(layer, m, False, CTABLE, DEFAULTS, ttable, ZTABLE) == expected


def test_a_layer_compress_refused_takes_the_route_without_ztable(monkeypatch):
    from generator.judge.loader import load_submission

    module = load_submission(REPO_ROOT / "dist" / "submission.py")
    monkeypatch.setattr(module, "ZTABLE", {("qkv_gate", 8): (8, 1, 2, 0, 1, 0)})
    assert module._engine("qkv_gate", 8)[0] == "z"  # the tables alone
    assert module._engine("qkv_gate", 8, {"z:qkv_gate": {}})[0] == "z"  # compressed in prepare()
    assert module._engine("qkv_gate", 8, {}) == module.route(
        "qkv_gate", 8, False, module.CTABLE, module.CTABLE_DEFAULTS, module.TTABLE
    )  # refused in prepare(): CTABLE / TTABLE serve it


def test_prepare_packs_the_tma_operands_the_routes_read(monkeypatch):
    """prepare() packs 64-row tiles for a layer whose TTABLE routes use C = 0..2, half tiles for C = 3, both when
    its rows mix them, and none where no route is the TMA GEMV."""
    from generator.judge.loader import load_submission

    module = load_submission(REPO_ROOT / "dist" / "submission.py")
    ttable = {
        ("pooler", 16): (1, 12, 3),
        ("pooler", 32): (3, 8, 1),
        ("qkv_gate", 32): (3, 8, 2),
        ("o", 32): (1, 6, 3),
    }
    for layer in ("qkv_gate", "o", "pooler", "unpooler"):
        for m in (1, 8, 16):
            ttable.setdefault((layer, m), None)
    monkeypatch.setattr(module, "TTABLE", ttable)
    monkeypatch.setattr(module, "ZTABLE", {})
    assert module._tma_operands("pooler", {}) == ["halftiles:", "tiles:"]
    assert module._tma_operands("qkv_gate", {}) == ["tiles:"]
    assert module._tma_operands("o", {}) == ["halftiles:"]
    assert module._tma_operands("unpooler", {}) == []
    assert module._tma_operands("router", {}) == []


@pytest.mark.nvcc
@pytest.mark.skipif(shutil.which("nvcc") is None, reason="needs nvcc")
def test_python_and_cuda_agree_on_the_compressed_gemv(tmp_path):
    """zgemv_fits() against dispatch's rule, and the exception pass's tile index against the epilogue's map."""
    lines = _host_program_output(
        tmp_path,
        "zrule",
        f'#include "{REPO_ROOT}/kernels_src/zgemv.cuh"\n#include <cstdio>\n'
        "template <int NB> int bad_indices() { int bad = 0; for (int idx = 0; idx < 4 * NB * 4 * 32; ++idx) {"
        " int r = 0, i = 0, t = 0; okc::tile_coords<NB>(idx, r, i, t); bad += okc::ztile_index<NB>(r, i, t) != idx; }"
        " return bad; }\n"
        'int main() { printf("bad %d\\n", bad_indices<1>() + bad_indices<2>() + bad_indices<4>());'
        " for (int u : {1, 2, 4}) for (int nb : {1, 2, 4}) for (int r : {1, 2, 4}) for (int p = 0; p < 2; ++p)"
        ' printf("%d %d %d %d %d\\n", u, nb, r, p, (int)okc::zgemv_fits(u, nb, r, p)); }\n',
    ).splitlines()
    assert lines[0] == "bad 0"
    m_of_nb = {1: 8, 2: 16, 4: 32}
    for line in lines[1:]:
        ug, nb, r, p, fits = map(int, line.split())
        error = dispatch.zgemv_config_error((4, 1, ug, p, r, 0), m_of_nb[nb], False, 4096, 8192)
        assert (error is None) == bool(fits), (ug, nb, r, p, error)


def test_the_atomic_split_is_the_routers_and_needs_a_split():
    """C = 2 adds fp32 partials into the output: the router (dual) only, S >= 2, any S (no cluster to fit), never
    for the compressed GEMV; its shared memory holds no inbox."""
    assert dispatch.gemv_config_error((16, 8, 1, 1, 1, 2), 32, True, 256, 8192) is None
    # S = 32: past the 16 CTAs a cluster may hold
    assert dispatch.gemv_config_error((16, 32, 1, 0, 1, 2), 1, True, 256, 8192) is None
    assert "router (dual) only" in dispatch.gemv_config_error((16, 8, 1, 1, 1, 2), 32, False, 256, 8192)
    assert "power of two in 2..32" in dispatch.gemv_config_error((16, 1, 1, 1, 1, 2), 32, True, 256, 8192)
    assert "not one of (0, 1)" in dispatch.zgemv_config_error((4, 4, 1, 0, 1, 2), 8, False, 4096, 8192)
    # 16 warps' tiles at R = 4, NB = 4 fill 128 KB: a cluster inbox of 15 more would not fit, the adds need none
    assert "cluster inbox" in dispatch._tiles_smem_error((16, 16, 1, 0, 4, 1), 32)
    assert dispatch._tiles_smem_error((16, 16, 1, 0, 4, 2), 32) is None


@pytest.mark.nvcc
@pytest.mark.skipif(shutil.which("nvcc") is None, reason="needs nvcc")
def test_python_and_cuda_agree_on_the_overflow_pass_shared_memory(tmp_path):
    """dispatch.zgemv_overflow_smem (which zgemv_config_error counts for every config) against zgemv.cuh's
    zgemv_overflow_bytes, which the launcher adds for a matrix with overflow entries; and it stays bounded: 2 KB a
    warp plus the CTA's bucket offsets, whatever the number of exceptions."""
    lines = _host_program_output(
        tmp_path,
        "zovf",
        f'#include "{REPO_ROOT}/kernels_src/zgemv.cuh"\n#include <cstdio>\n'
        "int main() { for (int nw : {1, 2, 4, 8, 16}) for (int r : {1, 2, 4}) for (int g : {1, 2, 16, 64, 128})"
        ' printf("%d %d %d %zu %zu\\n", nw, r, g, okc::zgemv_overflow_bytes(nw, r, g),'
        " okc::zgemv_smem_bytes(nw, r, 2, g, 3) - okc::zgemv_smem_bytes(nw, r, 2, 0, 3)); }\n",
    ).splitlines()
    assert len(lines) == 75
    for line in lines:
        nw, r, g, cuda_bytes, added = map(int, line.split())
        assert cuda_bytes == added == dispatch.zgemv_overflow_smem(nw, r, g), line
    assert dispatch.zgemv_overflow_smem(16, 4, 128) <= 16 * 2048 + 4 * 129 * 4 + 16
