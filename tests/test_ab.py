"""`generator ab`: the interleaving order, the summary against the first launch, and the command's refusals in one
line on any machine (the timing itself needs the H200)."""

import pytest
import torch
from click.testing import CliRunner

from generator.cli import main
from generator.judge.ab import AbRow, format_ab, round_orders, summarize


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
        (["qkv_gate:32:tma:1,13,3"], "STAGES=13"),
        (["qkv_gate:32:tma:1,12,3", "--rounds", "0"], "--rounds and --reps must be at least 1"),
        (["qkv_gate:32:tma:1,12,3"], "ab needs a CUDA GPU"),
    ],
)
def test_the_command_refuses_in_one_line(monkeypatch, args, says):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    result = CliRunner().invoke(main, ["ab", *args])
    assert result.exit_code == 2
    assert says in result.output and len(result.output.strip().splitlines()) == 1


class StandInModule:
    """What checked_calls uses of a submission, on the CPU: prepare(), the mma packing (identity here) and one
    engine, computing x . W^T in float32 and returning bf16, as the real GEMV does. `flaw`: how it goes wrong.
    """

    def __init__(self, flaw=None):
        self.flaw = flaw

    def prepare(self, weights):
        return {name: (w,) for name, w in weights.items()}

    def pack_mma_a(self, part):
        return part

    def _gemv(self, x, layer, n, cfg, state):
        w = state["packed:" + layer][0][:n]
        out = (x.float() @ w.float().t()).to(torch.bfloat16)
        if self.flaw == "off by one row":
            out[:, 1:] = out[:, :-1].clone()
        if self.flaw == "leaves a row unwritten":
            written = torch.empty_like(out)  # poisoned: NaN until written
            written[:, :-1] = out[:, :-1]
            out = written
        return out


@pytest.mark.parametrize(
    "flaw, says", [(None, None), ("off by one row", "the bound"), ("leaves a row unwritten", "NaN")]
)
def test_each_launch_is_checked_against_float64_before_it_is_timed(flaw, says):
    from generator.judge.ab import checked_calls
    from generator.judge.launches import parse_launch
    from generator.problem import load_problem

    problem = load_problem().shrunk(8)  # o: N = 1024, K = 128
    launch = parse_launch("o:8:gemv:4,1,1,0,1,0", problem)
    ok, wrong = checked_calls(StandInModule(flaw), problem, [launch], device="cpu")
    if says is None:
        assert [spec for spec, _ in ok] == ["o:8:gemv:4,1,1,0,1,0"] and wrong == []
    else:
        assert ok == [] and len(wrong) == 1
        assert wrong[0].startswith("o:8:gemv:4,1,1,0,1,0: wrong (") and says in wrong[0]
