"""On a CUDA machine (the H200): the built file passes verify, and the GEMV matches float64 on every config the
tables use. Skipped without CUDA (CI has none); run with `PYTHONPATH=. python -m pytest tests/test_gpu.py`."""

import pytest
import torch

from generator import REPO_ROOT
from generator.judge.loader import load_submission
from generator.judge.reference import compare, reference
from generator.judge.verify import verify_distribution
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
    problem = load_problem()
    weights = make_weights(problem, "normal", 3, "cuda")
    state = submission.prepare({name: w.clone() for name, w in weights.items()})
    gen = torch.Generator(device="cuda").manual_seed(4)
    for (layer_name, m), cfg in submission.CTABLE.items():
        if cfg is None:
            continue
        layer = problem.layers[layer_name]
        n = layer.n_for(m)
        x = make_x(m, layer.k, gen, "cuda")
        out = submission._gemv(x, layer_name, n, cfg, state)
        ref, scale = reference(x, weights[layer_name], n)
        assert compare(out, ref, scale, fp32_out=layer.dual).ok, (layer_name, m, cfg)
