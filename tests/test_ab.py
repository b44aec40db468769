"""`generator ab`: the interleaving order, the summary against the first launch, and the command's refusals in one
line on any machine (the timing itself needs the H200)."""

import os

import pytest
import torch
from click.testing import CliRunner

from generator.cli import main
from generator.judge.ab import AbRow, format_ab, parse_env_switch, round_orders, summarize
from generator.judge.launches import parse_launch
from generator.problem import load_problem
from standin import StandInModule

LAUNCH = "o:8:mma_gemv:4,1,1,batch,1,none"
SPEC = "o:8:mma_gemv:warps=4,splits=1,unroll=1,pipeline=batch,row_blocks=1,reduce=none"


def test_every_round_runs_every_launch_once_and_positions_rotate():
    orders = round_orders(3, 6)
    assert len(orders) == 6
    assert all(sorted(order) == [0, 1, 2] for order in orders)
    for position in range(3):  # over any 3 consecutive rounds, each launch takes each position once
        assert sorted(order[position] for order in orders[:3]) == [0, 1, 2]
        assert sorted(order[position] for order in orders[3:]) == [0, 1, 2]
    assert round_orders(1, 4) == [[0]] * 4
    assert round_orders(0, 3) == [[], [], []]


def test_the_summary_takes_medians_and_ratios_against_the_first_timed_launch():
    timed = [
        ("qkv_gate:32:tma:1,12,3", [15.3, 15.1, 15.2]),
        ("qkv_gate:32:tma:1,14,3", [14.9, 14.8, 15.4]),
        ("qkv_gate:32:tma:1,12,3", [15.0, 15.6, 15.3]),  # the same launch again: the noise, in the same run
    ]
    rows = summarize(timed)
    assert [r.spec for r in rows] == [spec for spec, _ in timed]
    assert rows[0] == AbRow("qkv_gate:32:tma:1,12,3", 15.2, 15.1, 15.3, 1.0)
    assert rows[1].median_us == 14.9 and rows[1].low_us == 14.8 and rows[1].high_us == 15.4
    assert rows[1].ratio == pytest.approx(14.9 / 15.2)
    assert rows[2].median_us == 15.3 and rows[2].ratio == pytest.approx(15.3 / 15.2)
    # a launch with no times (none ran) is left out, and ratios are against the first one that has them
    assert [r.ratio for r in summarize([("o:16:tma:1,8,0", []), ("o:16:tma:1,12,0", [9.7])])] == [1.0]
    assert summarize([("o:16:tma:1,8,0", [])]) == []


def test_under_an_env_switch_ratios_are_against_each_launchs_first_value():
    timed = [
        ("qkv_gate:32:tma:1,14,3 OKC_X=0", [15.0, 15.2]),
        ("qkv_gate:32:tma:1,14,3 OKC_X=1", [16.5, 16.5]),
        ("o:16:tma:1,8,0 OKC_X=0", [9.6, 9.6]),
        ("o:16:tma:1,8,0 OKC_X=1", [9.12, 9.12]),
    ]
    assert [r.ratio for r in summarize(timed, per_launch=True)] == pytest.approx(
        [1.0, 16.5 / 15.1, 1.0, 0.95]
    )
    assert [r.ratio for r in summarize(timed)] == pytest.approx([1.0, 16.5 / 15.1, 9.6 / 15.1, 9.12 / 15.1])
    rows = summarize(timed, per_launch=True)
    assert "against the same launch's first value" in format_ab(rows, 4, 100, per_launch=True)
    assert "same launch" not in format_ab(rows, 4, 100)


def test_an_env_switch_is_parsed_or_refused_in_one_line():
    assert parse_env_switch("OKC_TMA_PRODUCERS=1,2,s,1") == ("OKC_TMA_PRODUCERS", ("1", "2", "s", "1"))
    assert parse_env_switch("X=0") == ("X", ("0",))
    for bad, says in [
        ("OKC_TMA_ROLLED", "expected NAME=V1,V2"),
        ("1X=0,1", "expected NAME=V1,V2"),
        ("=0,1", "expected NAME=V1,V2"),
        ("X=0,,1", "an empty value"),
        ("X=", "an empty value"),
    ]:
        with pytest.raises(ValueError, match=says):
            parse_env_switch(bad)


def test_run_ab_puts_the_environment_back_as_it_was(monkeypatch):
    """run_ab's variants set the switch's variable; afterwards it is as before, set or not. (The check runs on the
    CPU stand-in; the timing primitives are replaced by stand-ins that only count.)"""
    import generator.judge.timing as timing
    from generator.judge.ab import run_ab

    monkeypatch.setattr(timing, "L2Flusher", lambda: None)
    monkeypatch.setattr(timing, "settle", lambda flush: None)
    monkeypatch.setattr(timing, "time_cold_us", lambda call, flush, reps: (call(), 1.0)[1])
    problem = load_problem().shrunk(8)
    launch = parse_launch(LAUNCH, problem)
    monkeypatch.setenv("OKC_AB_TEST", "before")
    timed, wrong = run_ab(
        StandInModule(problem),
        problem,
        [launch],
        2,
        1,
        env=("OKC_AB_TEST", ("during", "again")),
        device="cpu",
    )
    assert [label for label, _ in timed] == [
        f"{SPEC} OKC_AB_TEST=during",
        f"{SPEC} OKC_AB_TEST=again",
    ] and wrong == []
    assert os.environ["OKC_AB_TEST"] == "before"
    monkeypatch.delenv("OKC_AB_TEST")
    run_ab(StandInModule(problem), problem, [launch], 1, 1, env=("OKC_AB_TEST", ("during",)), device="cpu")
    assert "OKC_AB_TEST" not in os.environ


def test_the_table_names_each_launch_with_its_time_and_ratio():
    rows = [
        AbRow("o:16:tma:1,8,0", 9.6, 9.5, 9.7, 1.0),
        AbRow("o:16:gemv:8,1,4,0,2,0", 9.48, 9.4, 9.6, 0.9875),
    ]
    text = format_ab(rows, 6, 100)
    assert "o:16:tma:1,8,0" in text and "9.60" in text and "0.988" in text
    assert "median of 6 rounds, each the median of 100 cold replays" in text


@pytest.mark.parametrize(
    "args, says",
    [
        (["qkv_gate:32:tma_gemv:1,13,half,none"], "stages=13"),
        (["qkv_gate:32:tma_gemv:1,12,half,none", "--rounds", "0"], "--rounds and --reps must be at least 1"),
        (["qkv_gate:32:tma_gemv:1,12,half,none"], "ab needs a CUDA GPU"),
        (["qkv_gate:32:tma_gemv:1,12,half,none", "--env", "OKC_TMA_ROLLED"], "expected NAME=V1,V2"),
    ],
)
def test_the_command_refuses_in_one_line(monkeypatch, args, says):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    result = CliRunner().invoke(main, ["ab", *args])
    assert result.exit_code == 2
    assert says in result.output and len(result.output.strip().splitlines()) == 1


def test_cublas_is_a_launch_timed_beside_the_gemvs():
    """`layer:m:cublas` runs the file's fallback on the same x and weights, and is checked like the rest."""
    from generator.judge.ab import checked_calls

    problem = load_problem().shrunk(8)
    launches = [parse_launch(text, problem) for text in (LAUNCH, "o:8:cublas")]
    ok, wrong = checked_calls(StandInModule(problem), problem, launches, device="cpu")
    assert [spec for spec, _ in ok] == [SPEC, "o:8:cublas"] and wrong == []


@pytest.mark.parametrize(
    "flaw, says", [(None, None), ("off by one row", "the bound"), ("leaves a row unwritten", "NaN")]
)
def test_each_launch_is_checked_against_float64_before_it_is_timed(flaw, says):
    from generator.judge.ab import checked_calls

    problem = load_problem().shrunk(8)  # o: N = 1024, K = 128
    launch = parse_launch(LAUNCH, problem)
    ok, wrong = checked_calls(StandInModule(problem, flaw), problem, [launch], device="cpu")
    if says is None:
        assert [spec for spec, _ in ok] == [SPEC] and wrong == []
    else:
        assert ok == [] and len(wrong) == 1
        assert wrong[0].startswith(f"{SPEC}: wrong (") and says in wrong[0]


def test_under_an_env_switch_each_value_is_checked_with_the_variable_set(monkeypatch):
    """The stand-in goes wrong only while OKC_AB_FLAW=1, as a branch's kernel variant would: that value alone is
    reported, each label names its value, and each checked call sets the variable itself when run."""
    from generator.judge.ab import checked_calls

    monkeypatch.setenv("OKC_AB_FLAW", "0")  # the test's changes are undone after it
    problem = load_problem().shrunk(8)
    launch = parse_launch(LAUNCH, problem)
    switch = ("OKC_AB_FLAW", ("0", "1", "0"))
    ok, wrong = checked_calls(
        StandInModule(problem, "under OKC_AB_FLAW=1"), problem, [launch], device="cpu", env=switch
    )
    assert [label for label, _ in ok] == [f"{SPEC} OKC_AB_FLAW=0"] * 2
    assert len(wrong) == 1 and wrong[0].startswith(f"{SPEC} OKC_AB_FLAW=1: wrong (")
    os.environ["OKC_AB_FLAW"] = "1"
    ok[0][1]()
    assert os.environ["OKC_AB_FLAW"] == "0"


def test_time_wrong_times_a_wrong_variant_too_and_still_reports_it(monkeypatch):
    """A timing-only probe: with time_wrong the variant that fails the check is timed as well, its label marked,
    in its place among the others; it is still listed as wrong. Without it, it is left out (as above)."""
    from generator.judge.ab import checked_calls

    monkeypatch.setenv("OKC_AB_FLAW", "0")
    problem = load_problem().shrunk(8)
    launch = parse_launch(LAUNCH, problem)
    ok, wrong = checked_calls(
        StandInModule(problem, "under OKC_AB_FLAW=1"),
        problem,
        [launch],
        device="cpu",
        env=("OKC_AB_FLAW", ("0", "1")),
        time_wrong=True,
    )
    assert [label for label, _ in ok] == [f"{SPEC} OKC_AB_FLAW=0", f"{SPEC} OKC_AB_FLAW=1 (wrong)"]
    assert len(wrong) == 1 and wrong[0].startswith(f"{SPEC} OKC_AB_FLAW=1: wrong (")
    rows = summarize([(label, [1.0]) for label, _ in ok], per_launch=True)
    assert [row.ratio for row in rows] == [1.0, 1.0]  # the wrong row keeps its launch's baseline
