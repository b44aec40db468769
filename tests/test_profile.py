"""`generator profile`: launch specs checked like table entries, the ncu command lines, and the two readings of
ncu's exports (details page, SASS source page), on excerpts of a real report (the TMA GEMV on qkv_gate m = 1,
bf16 tiles and an experimental compressed-tile variant). A stand-in ncu runs the command end to end."""

from pathlib import Path

import pytest
from click.testing import CliRunner

from generator.cli import main
from generator.judge.launches import Launch, parse_launch
from generator.judge.profile import hot_instructions, kernel_summaries, ncu_commands, sass_tables
from generator.problem import load_problem
from kernels_src.compressed_gemv import CompressedGemvConfig
from kernels_src.mma_gemv import MmaGemvConfig
from kernels_src.splitk_gemm import SplitKGemmConfig

FIXTURES = Path(__file__).parent / "fixtures"


@pytest.fixture(scope="module")
def problem():
    return load_problem()


def test_launch_specs_parse_for_every_engine(problem):
    tma = parse_launch("qkv_gate:32:tma_gemv:3,8,full,cluster_scatter", problem)
    assert tma == Launch("qkv_gate", 32, "tma_gemv", (3, 8, "full", "cluster_scatter"))
    assert tma.spec == "qkv_gate:32:tma_gemv:splits=3,stages=8,tile=full,reduce=cluster_scatter"
    assert parse_launch(tma.spec, problem) == tma  # the named form parses back
    z = parse_launch("pooler:1:compressed_gemv:8,1,4,batch,1,none", problem)
    assert z.config == CompressedGemvConfig(
        warps=8, splits=1, groups=4, pipeline="batch", row_blocks=1, reduce="none"
    )
    mma = parse_launch(
        "router:32:mma_gemv:warps=16,splits=4,unroll=1,pipeline=batch,row_blocks=1,reduce=cluster", problem
    )
    assert mma.config == MmaGemvConfig(
        warps=16, splits=4, unroll=1, pipeline="batch", row_blocks=1, reduce="cluster"
    )
    splitk = parse_launch("router:128:splitk_gemm:64,64,128,16,4,3,tma,atomic", problem)
    assert splitk.config == SplitKGemmConfig(
        block_n=64, block_m=64, block_k=128, splits=16, warps=4, stages=3, loads="tma", reduce="atomic"
    )
    # cuBLAS, the fallback a null entry runs: no config, at any m (a GEMV's m range does not apply)
    cublas = parse_launch("o:32:cublas", problem)
    assert cublas == Launch("o", 32, "cublas", ()) and cublas.spec == "o:32:cublas"
    assert parse_launch("pooler:256:cublas", problem).m == 256


@pytest.mark.parametrize(
    "text, says",
    [
        ("qkv_gate:32", "expected layer:m:engine:values"),
        ("attn:32:tma_gemv:3,8,full,semaphore", "unknown layer 'attn'"),
        ("qkv_gate:32:cuda:1", "unknown engine 'cuda'"),
        ("qkv_gate:32:cublas:1", "the cublas engine has 0 fields, got more values"),
        ("qkv_gate:0:cublas", "serves 1 <= m, not m=0"),
        ("qkv_gate:32:tma_gemv:", "missing field 'splits'"),
        ("qkv_gate:x:tma_gemv:3,8,full,semaphore", "m must be an integer"),
        ("qkv_gate:32:tma_gemv:3,8", "missing field 'tile'"),
        ("qkv_gate:32:tma_gemv:3,5,full,semaphore", "stages=5"),
        ("qkv_gate:32:tma_gemv:3,eight,full,semaphore", "stages must be an integer"),
        ("qkv_gate:32:tma_gemv:3,8,full,semaphore,x=1", "unknown field 'x'"),
        ("router:32:compressed_gemv:8,1,4,batch,1,none", "router"),
    ],
)
def test_bad_launch_specs_say_what_is_wrong_in_one_line(problem, text, says):
    with pytest.raises(ValueError) as refused:
        parse_launch(text, problem)
    assert says in str(refused.value) and "\n" not in str(refused.value)


def test_ncu_commands_profile_only_the_marked_launches_and_export_both_pages(problem):
    launches = [
        parse_launch("o:1:mma_gemv:8,1,1,batch,1,none", problem),
        parse_launch("qkv_gate:32:tma_gemv:3,8,full,cluster_scatter", problem),
    ]
    run, details, source = ncu_commands(
        "ncu", Path("out/profile"), "python3", Path("dist/submission.py"), launches, "full"
    )
    assert (
        run[:1] == ["ncu"]
        and "--profile-from-start" in run
        and run[run.index("--profile-from-start") + 1] == "off"
    )
    assert run[run.index("--clock-control") + 1] == "none"  # leave the clocks alone
    assert run[run.index("-o") + 1] == "out/profile"
    assert run[-6:] == [
        "python3",
        "-m",
        "generator.judge.profile",
        "dist/submission.py",
        *(l.spec for l in launches),
    ]
    assert details == ["ncu", "-i", "out/profile.ncu-rep", "--page", "details"]
    assert source[:5] == ["ncu", "-i", "out/profile.ncu-rep", "--page", "source"] and "sass" in source


def test_kernel_summaries_read_time_dram_issue_rate_and_registers():
    kernels = kernel_summaries((FIXTURES / "ncu_details.txt").read_text())
    assert [(k["grid"], k["block"]) for k in kernels] == [("36x1x1", "160x1x1"), ("36x1x1", "320x1x1")]
    assert kernels[0]["kernel"].startswith("void tma_gemv_kernel<1, 8, 0, 0,")
    assert [k["duration_us"] for k in kernels] == [21.63, 43.20]
    assert [k["dram_pct"] for k in kernels] == [37.67, 13.71]
    assert [k["ipc_active"] for k in kernels] == [1.48, 2.04]
    assert [k["registers"] for k in kernels] == [86, 89]


def test_kernel_summaries_convert_duration_units():
    details = (
        "  void k() (1, 1, 1)x(32, 1, 1), Context 1, Stream 7, Device 0, CC 9.0\n"
        "    Duration                    msecond         1.50\n"
        "  void k2() (2, 1, 1)x(64, 1, 1), Context 1, Stream 7, Device 0, CC 9.0\n"
        "    Duration                    nsecond          900\n"
        "  void k3() (2, 1, 1)x(64, 1, 1), Context 1, Stream 7, Device 0, CC 9.0\n"
        "    Duration                    fortnight          1\n"
    )
    assert [k.get("duration_us") for k in kernel_summaries(details)] == [1500.0, 0.9, None]


def test_sass_tables_keep_what_ran_once_per_kernel_with_its_stalls():
    tables = sass_tables((FIXTURES / "ncu_source.csv").read_text())
    assert len(tables) == 2  # the export repeats the first kernel's block: listed once
    (bf16_name, bf16_rows), (z_name, z_rows) = tables
    assert "(bool)0, (bool)0" in bf16_name and "(bool)0, (bool)1" in z_name
    assert all(r["executed"] > 0 for r in bf16_rows + z_rows)  # the instructions that never ran are left out
    hot = hot_instructions(z_rows, 1)[0]  # the consumers waiting on `full`
    assert hot["sass"].strip().startswith("@!P2") and "BRA" in hot["sass"]
    assert hot["samples"] == 241 and hot["stalls"][0] == ("long_sb", 240)


def _stand_in_ncu(tmp_path: Path) -> Path:
    """An `ncu` that profiles nothing and exports the fixtures: the command's plumbing without a GPU."""
    ncu = tmp_path / "ncu"
    ncu.write_text(
        "#!/bin/sh\n"
        'case "$*" in\n'
        f'  *"--page details"*) cat {FIXTURES / "ncu_details.txt"} ;;\n'
        f'  *"--page source"*) cat {FIXTURES / "ncu_source.csv"} ;;\n'
        '  *) echo "==PROF== profiled" ;;\n'
        "esac\n"
    )
    ncu.chmod(0o755)
    return ncu


def test_profile_command_writes_the_exports_and_prints_the_summaries(tmp_path):
    out = tmp_path / "profile"
    result = CliRunner().invoke(
        main,
        [
            "profile",
            "qkv_gate:1:tma_gemv:1,8,full,none",
            "--ncu",
            str(_stand_in_ncu(tmp_path)),
            "--out",
            str(out),
        ],
    )
    assert result.exit_code == 0, result.output
    assert {p.name for p in out.iterdir()} >= {"details.txt", "source.csv", "sass.txt"}
    assert "36x1x1 x 320x1x1: duration_us 43.2 dram_pct 13.71 ipc_active 2.04 registers 89" in result.output
    assert "long_sb:240" in result.output
    assert (out / "sass.txt").read_text().count("\n## ") == 2


def test_profile_command_fails_in_one_line(tmp_path):
    bad = CliRunner().invoke(
        main, ["profile", "qkv_gate:32:tma_gemv:3,5,full,semaphore", "--ncu", str(_stand_in_ncu(tmp_path))]
    )
    assert bad.exit_code == 2 and "stages=5" in bad.output
    missing = CliRunner().invoke(
        main, ["profile", "qkv_gate:32:tma_gemv:3,8,full,semaphore", "--ncu", str(tmp_path / "no_ncu")]
    )
    assert missing.exit_code == 2 and "is not on PATH" in missing.output
    failing = tmp_path / "ncu_fails"
    failing.write_text("#!/bin/sh\necho '==ERROR== Failed to initialize the profiler' >&2\nexit 1\n")
    failing.chmod(0o755)
    broke = CliRunner().invoke(
        main,
        ["profile", "qkv_gate:32:tma_gemv:3,8,full,semaphore", "--ncu", str(failing), "--out", str(tmp_path)],
    )
    assert broke.exit_code == 2 and "Failed to initialize the profiler" in broke.output
    assert len(broke.output.strip().splitlines()) == 1
