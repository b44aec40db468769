"""The local judge's verify must pass a correct submission and catch each kind of broken one, naming the shape.
On CPU the submissions are plain torch; CUDA-graph replay is emulated (a second call on the same input)."""

from pathlib import Path

import pytest
import torch
from click.testing import CliRunner

from generator import REPO_ROOT
from generator.cli import main
from generator.judge.loader import SubmissionLoadError, load_submission
from generator.judge.reference import compare, reference
from generator.judge.verify import verify_distribution
from generator.problem import load_problem

REFERENCE = Path(__file__).parent / "fixtures" / "reference_submission.py"
DENSE_RETURN = "    out.copy_((x.float() @ w.float().t()).to(torch.bfloat16))\n    return out\n"

# kind -> (replacement of the reference's text, the shape and message verify must report)
BREAKAGES = {
    "wrong dtype": (
        (DENSE_RETURN, "    return x.float() @ w.float().t()\n"),
        ("qkv_gate", 1, "dtype torch.float32, expected torch.bfloat16"),
    ),
    "wrong values on one shape": (
        (
            DENSE_RETURN,
            DENSE_RETURN.replace(
                "    return out",
                "    return out * 1.02 if (data['config']['layer']," " x.shape[0]) == ('o', 9) else out",
            ),
        ),
        ("o", 9, "eager: error"),
    ),
    "bf16-only router": (
        ("        return x.float() @ w.t()", "        return x.float() @ w.to(torch.bfloat16).float().t()"),
        ("router", 1, "error"),
    ),
    "state that breaks on replay": (
        (
            "    return {name: w.contiguous() for name, w in weights.items()}",
            "    state = {name: w.contiguous() for name, w in weights.items()}\n"
            "    state['calls'] = torch.zeros((), device=weights['o'].device)\n    return state",
        ),
        # a device-side counter that nobody resets: right on the first call of a shape, wrong after
        ("qkv_gate", 1, "graph replay 1"),
    ),
    "untouched output element": (
        (
            DENSE_RETURN,
            "    out[:, :-1] = (x.float() @ w[:-1].float().t()).to(torch.bfloat16)\n    return out\n",
        ),
        ("qkv_gate", 1, "NaN / unwritten"),
    ),
}
REPLAY_COUNTER = (
    "    if w.dtype == torch.float32:",
    "    state['calls'].add_(1)\n"
    "    if data['config']['layer'] == 'qkv_gate' and data['x'].shape[0] == 1:\n"
    "        x = x * (state['calls'] < 2)\n"
    "    if w.dtype == torch.float32:",
)


@pytest.fixture(scope="module")
def small_problem():
    """The real problem with every n and k divided by 32: same layers, m's and unpooler rule, CPU-sized."""
    return load_problem().shrunk(32)


def broken_submission(tmp_path, kind) -> Path:
    (old, new), _ = BREAKAGES[kind]
    text = REFERENCE.read_text()
    assert old in text, kind
    text = text.replace(old, new)
    if kind == "state that breaks on replay":
        text = text.replace(*REPLAY_COUNTER)
    path = tmp_path / f"broken_{kind.replace(' ', '_')}.py"
    path.write_text(text)
    return path


def test_reference_submission_passes_everywhere(small_problem):
    module = load_submission(REFERENCE)
    for distribution in ("normal", "heavy"):
        results, _, error = verify_distribution(module, small_problem, distribution, 0, "cpu")
        assert not error
        assert len(results) == 5 * 10
        assert all(r.ok for r in results), [r.problem for r in results if not r.ok]
        assert all(len(r.graph) == 2 for r in results)


@pytest.mark.parametrize("kind", sorted(BREAKAGES))
def test_each_breakage_is_caught_and_named(tmp_path, small_problem, kind):
    module = load_submission(broken_submission(tmp_path, kind), module_name=f"broken_{hash(kind)}")
    results, _, error = verify_distribution(module, small_problem, "normal", 0, "cpu")
    layer, m, message = BREAKAGES[kind][1]
    failed = {(r.layer, r.m): r.problem for r in results if not r.ok}
    assert (layer, m) in failed, failed
    assert message in failed[(layer, m)], failed[(layer, m)]
    if kind == "wrong values on one shape":
        assert list(failed) == [("o", 9)]


def test_cli_verify_exit_codes(tmp_path):
    runner = CliRunner()
    good = runner.invoke(
        main, ["verify", str(REFERENCE), "--device", "cpu", "--shrink", "32", "--dist", "normal"]
    )
    assert good.exit_code == 0, good.output
    assert "50 passed, 0 failed" in good.output
    bad_file = broken_submission(tmp_path, "wrong values on one shape")
    bad = runner.invoke(
        main, ["verify", str(bad_file), "--device", "cpu", "--shrink", "32", "--dist", "normal"]
    )
    assert bad.exit_code == 1
    assert "FAIL normal o m=9" in bad.output


def test_loader_refuses_files_the_judge_could_not_run(tmp_path):
    no_tag = tmp_path / "no_tag.py"
    no_tag.write_text("def prepare(w): pass\ndef kernel_fn(d, s): pass\n")
    with pytest.raises(SubmissionLoadError, match="first line"):
        load_submission(no_tag)
    project_import = tmp_path / "project_import.py"
    project_import.write_text(
        REFERENCE.read_text().replace("import torch\n", "import torch\nimport generator\n")
    )
    with pytest.raises(SubmissionLoadError, match="whitelist"):
        load_submission(project_import)


def test_tolerances_separate_hi_lo_from_bf16():
    gen = torch.Generator().manual_seed(0)
    x = torch.randn(8, 2048, generator=gen).to(torch.bfloat16)
    w = torch.randn(64, 2048, generator=gen) / 45
    ref, scale = reference(x, w, 64)
    hi = w.to(torch.bfloat16)
    lo = (w - hi.float()).to(torch.bfloat16)
    hi_lo = x.float() @ hi.float().t() + x.float() @ lo.float().t()
    assert compare(hi_lo, ref, scale, fp32_out=True).ok
    assert not compare(x.float() @ hi.float().t(), ref, scale, fp32_out=True).ok


def test_a_leftover_jit_build_lock_is_reported(tmp_path, monkeypatch):
    """A build lock left by a killed process would make every later load wait forever: the CLI says so first."""
    from generator.judge.loader import stale_build_lock
    from generator.launch_table import EXTENSION_NAME

    monkeypatch.setenv("TORCH_EXTENSIONS_DIR", str(tmp_path))
    assert stale_build_lock() is None
    lock = tmp_path / f"{EXTENSION_NAME}_1f2e3d" / "lock"
    lock.parent.mkdir(parents=True, exist_ok=True)
    lock.write_text("")
    assert stale_build_lock() == lock
    result = CliRunner().invoke(main, ["dispatch", str(REPO_ROOT / "dist" / "submission.py")])
    assert result.exit_code == 0
    assert f"warning: {lock} exists" in result.output + (
        result.stderr if result.stderr_bytes is not None else ""
    )


def test_verify_without_a_gpu_refuses_in_one_line(monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    result = CliRunner().invoke(main, ["verify", str(REPO_ROOT / "dist" / "submission.py")])
    assert result.exit_code == 2 and len(result.output.strip().splitlines()) == 1
    assert "verify needs a CUDA GPU" in result.output
    explicit = CliRunner().invoke(main, ["verify", "--device", "cuda"])
    assert explicit.exit_code == 2 and "no CUDA GPU here" in explicit.output


def test_the_built_file_runs_on_the_cpu_through_its_cublas_fallback(small_problem):
    """Without a GPU, prepare() plans every shape on the fallback (no extension is built) and kernel_fn still
    answers right: the plumbing from the tables to the plans is checked on any machine."""
    module = load_submission(REPO_ROOT / "dist" / "submission.py")
    module.LAYERS = {  # the file's problem, shrunk like small_problem's weights
        name: {k: v for k, v in layer._asdict().items() if k != "name" and v is not None}
        for name, layer in small_problem.layers.items()
    }
    results, _, error = verify_distribution(module, small_problem, "normal", 0, "cpu", graphs=False)
    assert not error, error
    assert results and all(r.ok for r in results), [r.problem for r in results if not r.ok]


def test_the_report_says_what_its_numbers_are():
    from generator.judge.reference import DENSE_RTOL, DENSE_STOL, ROUTER_STOL
    from generator.judge.verify import LEGEND, ShapeResult, format_report

    assert (DENSE_RTOL, DENSE_STOL, ROUTER_STOL) == (2.0**-7, 2.0**-14, 2.0**-15)
    assert "bound = 2^-7 |ref| + 2^-14 S on the bf16 layers, 2^-15 S on the router" in LEGEND
    report = format_report([ShapeResult("normal", "o", 1, 8192)], ["normal"]).splitlines()
    assert " ".join(" ".join(report[3:-2]).split()) == LEGEND and report[-1].startswith("0 passed, 1 failed")
