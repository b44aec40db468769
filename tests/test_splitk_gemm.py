"""The Triton split-K GEMM (kernels_src/splitk_gemm.py): float64 reference, masking, both epilogues' clean state,
the config rule, and (on the H200) real layer sizes and CUDA-graph replays.

How the kernel runs on a CPU: Triton's interpreter. triton.jit reads TRITON_INTERPRET when a kernel is
decorated, i.e. when the module defining it is executed, not when triton is imported. So this file sets
TRITON_INTERPRET=1 and executes a private copy of the module ("splitk_gemm_interpreted"), whatever imported
triton or kernels_src.splitk_gemm earlier, then puts the variable back as it found it, so that test files
collected after this one still get compiled kernels. A second private copy, executed with the variable unset,
holds the real JITFunction: compiled here for sm_90a (Triton's bundled ptxas, no GPU needed) and launched by
the GPU test. The GPU test is skipped without CUDA, and also when TRITON_INTERPRET was set for the whole run.

Three interpreter problems the tests work around:
* Triton itself is imported (normally) before the variable is set, so its library's @triton.jit functions
  (tl.zeros, tl.cdiv, ...) stay compiled for everyone else; an interpreted kernel cannot call them, so the
  kernel uses only core builtins (tl.full for zeros). A kernel edit that calls one fails here at once.
* Triton 3.6's interpreter computes tl.dot on bf16 operands wrongly (values near 1e10; fp32 operands are
  right), so the launcher passes UPCAST=True when x is not on CUDA and the kernel converts both tiles to fp32
  (exact) before tl.dot; test_interpreter_bf16_dot_is_why_upcast_exists shows the bug is still there.
* The interpreter holds scalars as 1-element numpy arrays and converts them with int(), which numpy >= 2.4
  refuses for arrays of ndim 1, so a loop over a runtime bound (range(first, last), tl.range(0, splits))
  fails; `_interpreter_scalar_index` patches that conversion for this file's tests only (when needed).
"""

import importlib.util
import os
import re
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest
import torch
import triton  # before TRITON_INTERPRET is set: see _load_private_copy
import triton.experimental.gluon  # what Triton's launcher imports lazily at its first call
import triton.language as tl
from triton.runtime.interpreter import InterpretedFunction
from triton.runtime.jit import JITFunction

from generator.judge.reference import compare, reference
from generator.judge.weights import make_weight, make_x
from kernels_src.engine import Layer
from kernels_src.packing import split_hi_lo

_SOURCE = Path(__file__).resolve().parents[1] / "kernels_src" / "splitk_gemm.py"
_INTERPRET_AT_START = os.environ.get("TRITON_INTERPRET", "") not in ("", "0")


def _load_private_copy(name, interpret):
    """Execute kernels_src/splitk_gemm.py as module `name` with TRITON_INTERPRET set (or unset) meanwhile.

    Triton itself is imported above, with the variable as the run has it: imported under TRITON_INTERPRET=1,
    its own library (tl.cdiv, tl.zeros_like, ...) would turn into interpreted functions for the whole
    process and break every compiled kernel after this file (and Triton's lazy gluon import at the first
    launch asserts on exactly that mix)."""
    before = os.environ.get("TRITON_INTERPRET")
    if interpret:
        os.environ["TRITON_INTERPRET"] = "1"
    else:
        os.environ.pop("TRITON_INTERPRET", None)
    try:
        spec = importlib.util.spec_from_file_location(name, _SOURCE)
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        spec.loader.exec_module(module)
    finally:
        if before is None:
            os.environ.pop("TRITON_INTERPRET", None)
        else:
            os.environ["TRITON_INTERPRET"] = before
    return module


sk = _load_private_copy("splitk_gemm_interpreted", interpret=True)  # CPU tests
compiled = _load_private_copy("splitk_gemm_compiled", interpret=False)  # sm_90a compile + GPU tests
Cfg = sk.SplitKGemmConfig
N, K = 128, 256  # the CPU tests' layer: 2 or 1 row tiles, 4 to 8 K steps


@pytest.fixture(autouse=True, scope="module")
def _interpreter_scalar_index():
    from triton.runtime import interpreter

    try:
        int(np.zeros(1))
        needed = False
    except TypeError:
        needed = True
    if not needed:
        yield
        return
    original = interpreter._patch_lang_tensor

    def patched(tensor, scope):
        original(tensor, scope)
        scope.set_attr(tensor, "__index__", lambda self: int(self.handle.data.item()))

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(interpreter, "_patch_lang_tensor", patched)
        yield


def test_only_the_private_copy_is_interpreted():
    """This file leaves Triton's own library compiled (its jit functions such as tl.zeros stay JITFunctions)
    and TRITON_INTERPRET as it found it; only the kernel of the interpreted copy runs on the CPU."""
    assert isinstance(sk._splitk_gemm_kernel, InterpretedFunction)
    assert isinstance(compiled._splitk_gemm_kernel, JITFunction)
    assert triton.experimental.gluon is not None
    if not _INTERPRET_AT_START:
        assert isinstance(tl.zeros, JITFunction) and not isinstance(tl.zeros, InterpretedFunction)
        assert os.environ.get("TRITON_INTERPRET", "") in ("", "0")


@pytest.fixture(scope="module")
def state():
    """One set of buffers for every launch, as in a prepared submission: the workspace poisoned with NaN (a
    partial read before it is written shows), counters and accumulator zeroed once and never again."""
    return SimpleNamespace(
        workspace=torch.full((sk.WORKSPACE_FLOATS,), float("nan")),
        counters=torch.zeros(sk.COUNTERS, dtype=torch.int32),
        accumulator=torch.zeros(sk.ACCUMULATOR_FLOATS),
    )


def _nan_rows(w, extra=64):
    """w with `extra` NaN rows appended: the kernel must read only the first n rows (the unpooler's prefix)."""
    return torch.cat([w, torch.full((extra, w.shape[1]), float("nan"), dtype=w.dtype)]).contiguous()


def _dense_weight(gen):
    w = make_weight(N, K, "bfloat16", "normal", gen, "cpu")
    return w, (_nan_rows(w),)


def _dual_weights(gen):
    w = make_weight(N, K, "float32", "normal", gen, "cpu")
    hi, lo = split_hi_lo(w)
    return w, (_nan_rows(hi), _nan_rows(lo))


def config_error(module, cfg, m, n, k, dual):
    """module's rule (SPLITK_GEMM.config_error) for an (m, n, k) launch; dual: the router's two weights."""
    if isinstance(cfg, tuple) and getattr(cfg, "_fields", None) == module.SplitKGemmConfig._fields:
        cfg = module.SplitKGemmConfig(*cfg)  # a config of the other private copy
    return module.SPLITK_GEMM.config_error(
        cfg, Layer("splitk_gemm", n, k, "float32" if dual else "bfloat16"), m
    )


def _launch(module, cfg, x, weights, n, state):
    """One call into a NaN-poisoned output that has block_m spare rows after m: those must stay NaN (never
    written), [:m, :n] must hold no NaN, and the counters and the accumulator must be all zero afterwards."""
    m, k = x.shape
    dual = len(weights) == 2
    assert config_error(module, cfg, m, n, k, dual) is None, cfg
    poisoned = torch.full(
        (m + cfg.block_m, n), float("nan"), dtype=torch.float32 if dual else torch.bfloat16, device=x.device
    )
    out = poisoned[:m]
    descriptors = module.weight_descriptors(weights, cfg)
    module.launch_splitk_gemm(
        x, weights, out, state.workspace, state.counters, state.accumulator, cfg, descriptors
    )
    if x.device.type == "cuda":
        torch.cuda.synchronize()
    assert torch.isnan(poisoned[m:]).all(), f"{cfg}: rows past m={m} written"
    assert not torch.isnan(out).any(), f"{cfg}: {int(torch.isnan(out).sum())} NaN left in [:{m}, :{n}]"
    assert int(state.counters.abs().sum()) == 0, f"{cfg}: counters left non-zero"
    assert float(state.accumulator.abs().sum()) == 0.0, f"{cfg}: accumulator left non-zero"
    return out


def _check(out, x, w, n, dual, label):
    """The judge's bounds (generator/judge/reference.py) against float64 (dual: the fp32 weight)."""
    ref, scale = reference(x, w, n)
    result = compare(out, ref, scale, fp32_out=dual)
    assert result.ok, f"{label}: {result.problem}"


def _check_dual(out, x, weights, n, label):
    """Dual, tighter: x . (hi + lo)^T to 2^-18 S, what fp32 accumulation of both halves reaches on K = 256
    (a dropped lo half misses it by far)."""
    hi, lo = (part[:n].double() for part in weights)
    exact = x.double() @ (hi + lo).t()
    scale = x.double().abs() @ (hi.abs() + lo.abs()).t()
    worst = float(((out.double() - exact).abs() / scale).max())
    assert worst <= 2.0**-18, f"{label}: {worst:.3g} S from x . (hi + lo)^T"


# Dense configs of the CPU tests, one per epilogue: uneven splits (8 K steps in 5, 4 in 3), two 64-row chunks
# in the semaphore sum (block_n 128, EPILOGUE_N 64) and a last group of splits 4..7 with 5..7 masked off.
DENSE = {
    "none": lambda loads: Cfg(
        block_n=64, block_m=32, block_k=64, splits=1, warps=4, stages=2, loads=loads, reduce="none"
    ),
    "semaphore": lambda loads: Cfg(
        block_n=128, block_m=64, block_k=32, splits=5, warps=4, stages=2, loads=loads, reduce="semaphore"
    ),
    "atomic": lambda loads: Cfg(
        block_n=64, block_m=16, block_k=128, splits=2, warps=4, stages=2, loads=loads, reduce="atomic"
    ),  # TMA atomics take block_k 128
}
DUAL = {
    "none": lambda loads: Cfg(
        block_n=64, block_m=64, block_k=128, splits=1, warps=4, stages=2, loads=loads, reduce="none"
    ),
    "semaphore": lambda loads: Cfg(
        block_n=64, block_m=32, block_k=32, splits=8, warps=4, stages=3, loads=loads, reduce="semaphore"
    ),  # splits = K / block_k
    "atomic": lambda loads: Cfg(
        block_n=64, block_m=64, block_k=128, splits=2, warps=4, stages=2, loads=loads, reduce="atomic"
    ),
}


@pytest.mark.parametrize("reduce", sk.SPLITK_REDUCTIONS)
@pytest.mark.parametrize("loads", sk.LOADS)
@pytest.mark.parametrize("m", (33, 100, 129, 255))
def test_dense_matches_float64(m, loads, reduce, state):
    gen = torch.Generator().manual_seed(1000 + m)
    w, weights = _dense_weight(gen)
    x = make_x(m, K, gen, "cpu")
    cfg = DENSE[reduce](loads)
    out = _launch(sk, cfg, x, weights, N, state)
    _check(out, x, w, N, False, f"{cfg} m={m}")


@pytest.mark.parametrize("reduce", sk.SPLITK_REDUCTIONS)
@pytest.mark.parametrize("loads", sk.LOADS)
@pytest.mark.parametrize("m", (33, 129))
def test_dual_matches_float64_in_fp32(m, loads, reduce, state):
    gen = torch.Generator().manual_seed(2000 + m)
    w, weights = _dual_weights(gen)
    x = make_x(m, K, gen, "cpu")
    cfg = DUAL[reduce](loads)
    out = _launch(sk, cfg, x, weights, N, state)
    assert out.dtype == torch.float32
    _check(out, x, w, N, True, f"{cfg} m={m}")
    _check_dual(out, x, weights, N, f"{cfg} m={m}")


def test_dual_check_catches_a_dropped_lo_half():
    """The dual bounds are tight enough to see a router that ignores lo (bf16 precision)."""
    gen = torch.Generator().manual_seed(7)
    w, (hi, lo) = _dual_weights(gen)
    x = make_x(100, K, gen, "cpu")
    hi_only = (x.double() @ hi[:N].double().t()).float()
    ref, scale = reference(x, w, N)
    assert not compare(hi_only, ref, scale, fp32_out=True).ok
    with pytest.raises(AssertionError):
        _check_dual(hi_only, x, (hi, lo), N, "hi only")


@pytest.mark.parametrize("loads", sk.LOADS)
@pytest.mark.parametrize(
    "cfg, dual",
    [
        (
            Cfg(
                block_n=64,
                block_m=32,
                block_k=32,
                splits=8,
                warps=4,
                stages=2,
                loads="tma",
                reduce="semaphore",
            ),
            False,
        ),
        (
            Cfg(
                block_n=64, block_m=64, block_k=128, splits=2, warps=4, stages=2, loads="tma", reduce="atomic"
            ),
            False,
        ),
        (
            Cfg(
                block_n=64, block_m=16, block_k=128, splits=2, warps=4, stages=2, loads="tma", reduce="atomic"
            ),
            True,
        ),
    ],
    ids=["semaphore", "atomic", "atomic-dual"],
)
def test_repeated_calls_share_counters_and_accumulator(cfg, dual, loads, state):
    """Three calls on the same counters / accumulator / workspace with fresh x each: each right, each leaving
    counters and accumulator zero (checked in _launch), as CUDA-graph replays need."""
    cfg = cfg._replace(loads=loads)
    gen = torch.Generator().manual_seed(3000)
    w, weights = _dual_weights(gen) if dual else _dense_weight(gen)
    for call in range(3):
        x = make_x(100, K, gen, "cpu")
        out = _launch(sk, cfg, x, weights, N, state)
        _check(out, x, w, N, dual, f"{cfg} call {call + 1}")


def test_interpreter_bf16_dot_is_why_upcast_exists():
    """Without UPCAST the interpreter's bf16 tl.dot is far off: the reason for the constexpr. If this starts
    failing, Triton fixed it and UPCAST could go."""
    from triton.tools.tensor_descriptor import TensorDescriptor

    gen = torch.Generator().manual_seed(5)
    _, weights = _dense_weight(gen)
    x = make_x(64, K, gen, "cpu")
    cfg = Cfg(block_n=64, block_m=64, block_k=64, splits=1, warps=4, stages=1, loads="tma", reduce="none")
    out = torch.full((64, N), float("nan"), dtype=torch.bfloat16)
    meta = sk.splitk_constexprs(cfg, False, False)  # UPCAST off, as on CUDA
    sk._splitk_gemm_kernel[(N // 64, 1, 1)](
        TensorDescriptor.from_tensor(x, [64, 64]),
        *sk.weight_descriptors(weights, cfg) * 2,
        out,
        torch.zeros(1),
        torch.zeros(1, dtype=torch.int32),
        64,
        N,
        K,
        1,
        **meta,
        num_warps=4,
        num_stages=1,
    )
    ref = x.double() @ weights[0][:N].double().t()
    assert not torch.allclose(out.double(), ref, rtol=0.1, atol=1.0)


# ---------------------------------------------------------------------------------------------- the rule


@pytest.mark.parametrize(
    "cfg, m, n, k, dual, field",
    [
        ((64, 64, 64, 1, 4, 2, "tma"), 64, 128, 256, False, "cfg"),
        ("64, 64", 64, 128, 256, False, "cfg"),
        (
            Cfg(
                block_n=64.0, block_m=64, block_k=64, splits=1, warps=4, stages=2, loads="tma", reduce="none"
            ),
            64,
            128,
            256,
            False,
            "block_n",
        ),
        (
            Cfg(
                block_n=64, block_m=True, block_k=64, splits=1, warps=4, stages=2, loads="tma", reduce="none"
            ),
            64,
            128,
            256,
            False,
            "block_m",
        ),
        (
            Cfg(block_n=64, block_m=64, block_k=64, splits=1, warps=4, stages=2, loads=b"tma", reduce="none"),
            64,
            128,
            256,
            False,
            "loads",
        ),
        (
            Cfg(block_n=48, block_m=64, block_k=64, splits=1, warps=4, stages=2, loads="tma", reduce="none"),
            64,
            96,
            256,
            False,
            "block_n",
        ),
        (
            Cfg(block_n=64, block_m=48, block_k=64, splits=1, warps=4, stages=2, loads="tma", reduce="none"),
            64,
            128,
            256,
            False,
            "block_m",
        ),
        (
            Cfg(block_n=64, block_m=64, block_k=16, splits=1, warps=4, stages=2, loads="tma", reduce="none"),
            64,
            128,
            256,
            False,
            "block_k",
        ),
        (
            Cfg(block_n=64, block_m=64, block_k=64, splits=1, warps=2, stages=2, loads="tma", reduce="none"),
            64,
            128,
            256,
            False,
            "warps",
        ),
        (
            Cfg(block_n=64, block_m=64, block_k=64, splits=1, warps=4, stages=0, loads="tma", reduce="none"),
            64,
            128,
            256,
            False,
            "stages",
        ),
        (
            Cfg(block_n=64, block_m=64, block_k=64, splits=1, warps=4, stages=9, loads="tma", reduce="none"),
            64,
            128,
            256,
            False,
            "stages",
        ),
        (
            Cfg(
                block_n=64,
                block_m=64,
                block_k=64,
                splits=1,
                warps=4,
                stages=2,
                loads="cp.async",
                reduce="none",
            ),
            64,
            128,
            256,
            False,
            "loads",
        ),
        (
            Cfg(
                block_n=64, block_m=64, block_k=64, splits=2, warps=4, stages=2, loads="tma", reduce="cluster"
            ),
            64,
            128,
            256,
            False,
            "reduce",
        ),
        (
            Cfg(block_n=128, block_m=64, block_k=64, splits=1, warps=4, stages=2, loads="tma", reduce="none"),
            64,
            192,
            256,
            False,
            "block_n",
        ),
        (
            Cfg(block_n=64, block_m=64, block_k=128, splits=1, warps=4, stages=2, loads="tma", reduce="none"),
            64,
            128,
            320,
            False,
            "block_k",
        ),
        (
            Cfg(block_n=64, block_m=64, block_k=64, splits=0, warps=4, stages=2, loads="tma", reduce="none"),
            64,
            128,
            256,
            False,
            "splits",
        ),
        (
            Cfg(
                block_n=64,
                block_m=64,
                block_k=64,
                splits=5,
                warps=4,
                stages=2,
                loads="tma",
                reduce="semaphore",
            ),
            64,
            128,
            256,
            False,
            "splits",
        ),
        (
            Cfg(block_n=64, block_m=64, block_k=64, splits=2, warps=4, stages=2, loads="tma", reduce="none"),
            64,
            128,
            256,
            False,
            "reduce",
        ),
        (
            Cfg(
                block_n=64, block_m=64, block_k=128, splits=1, warps=4, stages=2, loads="tma", reduce="atomic"
            ),
            64,
            128,
            256,
            False,
            "reduce",
        ),
        (
            Cfg(
                block_n=64, block_m=64, block_k=64, splits=2, warps=4, stages=2, loads="tma", reduce="atomic"
            ),
            64,
            128,
            256,
            False,
            "reduce",
        ),  # wrong on the H200
        (
            Cfg(
                block_n=64,
                block_m=64,
                block_k=64,
                splits=1,
                warps=4,
                stages=2,
                loads="pointers",
                reduce="semaphore",
            ),
            64,
            128,
            256,
            False,
            "reduce",
        ),
        (
            Cfg(block_n=64, block_m=64, block_k=64, splits=1, warps=4, stages=2, loads="tma", reduce="none"),
            2**19,
            8192,
            8192,
            False,
            "m",
        ),
        (
            Cfg(block_n=64, block_m=64, block_k=64, splits=1, warps=4, stages=2, loads="tma", reduce="none"),
            64,
            2**18,
            8192,
            False,
            "n",
        ),
        (
            Cfg(
                block_n=128, block_m=256, block_k=64, splits=1, warps=4, stages=2, loads="tma", reduce="none"
            ),
            256,
            2304,
            8192,
            False,
            "block_n",
        ),
        (
            Cfg(
                block_n=128,
                block_m=128,
                block_k=128,
                splits=4,
                warps=4,
                stages=2,
                loads="tma",
                reduce="atomic",
            ),
            128,
            256,
            8192,
            True,
            "reduce",
        ),
        (
            Cfg(
                block_n=128,
                block_m=128,
                block_k=64,
                splits=4,
                warps=4,
                stages=2,
                loads="pointers",
                reduce="atomic",
            ),
            128,
            2304,
            8192,
            False,
            "reduce",
        ),
        (
            Cfg(
                block_n=64,
                block_m=64,
                block_k=128,
                splits=16,
                warps=4,
                stages=5,
                loads="tma",
                reduce="atomic",
            ),
            128,
            256,
            8192,
            True,
            "stages",
        ),
        (
            Cfg(
                block_n=64,
                block_m=128,
                block_k=64,
                splits=4,
                warps=8,
                stages=7,
                loads="tma",
                reduce="semaphore",
            ),
            128,
            256,
            8192,
            True,
            "stages",
        ),  # the 8-warp 4 KB
        (
            Cfg(
                block_n=256, block_m=128, block_k=128, splits=1, warps=8, stages=3, loads="tma", reduce="none"
            ),
            128,
            4096,
            8192,
            False,
            "stages",
        ),
        (
            Cfg(
                block_n=64,
                block_m=16,
                block_k=64,
                splits=2,
                warps=4,
                stages=2,
                loads="tma",
                reduce="semaphore",
            ),
            1040,
            4096,
            1024,
            False,
            "reduce",
        ),  # counters
        (
            Cfg(
                block_n=64,
                block_m=64,
                block_k=64,
                splits=5,
                warps=4,
                stages=2,
                loads="tma",
                reduce="semaphore",
            ),
            256,
            8192,
            1024,
            False,
            "reduce",
        ),  # workspace
        (
            Cfg(
                block_n=64, block_m=64, block_k=128, splits=2, warps=4, stages=2, loads="tma", reduce="atomic"
            ),
            512,
            8192,
            1024,
            False,
            "reduce",
        ),  # accumulator
    ],
)
def test_rule_refuses_naming_the_field(cfg, m, n, k, dual, field):
    error = config_error(sk, cfg, m, n, k, dual)
    assert error is not None, (cfg, m, n, k, dual)
    assert "\n" not in error
    assert error.startswith(field + "=") or error.startswith(field + ":"), error


# Configs on the real layers (n, k): the first probe's winners (docs/splitk-gemm.md) and what the GPU test runs.
LAYERS = {"qkv_gate": (2304, 8192), "o": (8192, 1024), "pooler": (4096, 8192), "unpooler": (8192, 4096)}
ROUTER = (256, 8192)
REAL = [
    (
        "router",
        128,
        Cfg(block_n=64, block_m=64, block_k=128, splits=16, warps=4, stages=4, loads="tma", reduce="atomic"),
    ),
    (
        "router",
        128,
        Cfg(
            block_n=64, block_m=64, block_k=128, splits=16, warps=4, stages=4, loads="tma", reduce="semaphore"
        ),
    ),
    (
        "router",
        256,
        Cfg(block_n=64, block_m=64, block_k=128, splits=16, warps=4, stages=3, loads="tma", reduce="atomic"),
    ),
    (
        "router",
        33,
        Cfg(
            block_n=64,
            block_m=64,
            block_k=128,
            splits=8,
            warps=4,
            stages=4,
            loads="pointers",
            reduce="atomic",
        ),
    ),
    (
        "router",
        255,
        Cfg(block_n=64, block_m=64, block_k=128, splits=1, warps=4, stages=4, loads="tma", reduce="none"),
    ),
    (
        "qkv_gate",
        128,
        Cfg(
            block_n=128, block_m=128, block_k=64, splits=4, warps=4, stages=6, loads="tma", reduce="semaphore"
        ),
    ),
    (
        "qkv_gate",
        128,
        Cfg(block_n=128, block_m=128, block_k=128, splits=4, warps=8, stages=3, loads="tma", reduce="atomic"),
    ),
    (
        "qkv_gate",
        33,
        Cfg(
            block_n=128,
            block_m=64,
            block_k=64,
            splits=3,
            warps=4,
            stages=4,
            loads="pointers",
            reduce="semaphore",
        ),
    ),
    (
        "qkv_gate",
        255,
        Cfg(block_n=64, block_m=128, block_k=64, splits=1, warps=4, stages=4, loads="tma", reduce="none"),
    ),
    (
        "pooler",
        128,
        Cfg(block_n=64, block_m=128, block_k=128, splits=2, warps=4, stages=4, loads="tma", reduce="atomic"),
    ),
    (
        "o",
        128,
        Cfg(
            block_n=64, block_m=128, block_k=64, splits=2, warps=8, stages=4, loads="tma", reduce="semaphore"
        ),
    ),
    (
        "o",
        256,
        Cfg(block_n=128, block_m=128, block_k=64, splits=1, warps=4, stages=4, loads="tma", reduce="none"),
    ),
    (
        "unpooler",
        256,
        Cfg(
            block_n=128, block_m=128, block_k=64, splits=4, warps=8, stages=4, loads="tma", reduce="semaphore"
        ),
    ),
]


def _shape(layer):
    return ROUTER if layer == "router" else LAYERS[layer]


def test_rule_admits_every_config_the_tests_run():
    for build in list(DENSE.values()) + list(DUAL.values()):
        for loads in sk.LOADS:
            for m in (33, 64, 100, 129, 255):
                assert config_error(sk, build(loads), m, N, K, build in DUAL.values()) is None
    for layer, m, cfg in REAL:
        n, k = _shape(layer)
        assert config_error(sk, cfg, m, n, k, layer == "router") is None, (layer, m, cfg)
    # the largest semaphore / atomic footprints that fit (unpooler at m = 256), and the 4-warp twin of a
    # refused 8-warp dual config
    assert (
        config_error(
            sk,
            Cfg(
                block_n=64,
                block_m=128,
                block_k=64,
                splits=4,
                warps=4,
                stages=7,
                loads="tma",
                reduce="semaphore",
            ),
            128,
            256,
            8192,
            True,
        )
        is None
    )
    assert (
        config_error(
            sk,
            Cfg(
                block_n=64,
                block_m=64,
                block_k=64,
                splits=4,
                warps=4,
                stages=2,
                loads="tma",
                reduce="semaphore",
            ),
            256,
            8192,
            4096,
            False,
        )
        is None
    )
    assert (
        config_error(
            sk,
            Cfg(
                block_n=64, block_m=64, block_k=128, splits=4, warps=4, stages=2, loads="tma", reduce="atomic"
            ),
            256,
            8192,
            4096,
            False,
        )
        is None
    )


def test_m_and_splits_are_not_specialised():
    """m = 33 and m = 64 (and every split count) share one compiled kernel; N and K keep Triton's
    divisibility-by-16 key, which every admitted shape has."""
    params = {p.name: p for p in compiled._splitk_gemm_kernel.params}
    assert params["M"].do_not_specialize and params["splits"].do_not_specialize
    assert not params["N"].is_constexpr and not params["K"].is_constexpr
    constexprs = {name for name, p in params.items() if p.is_constexpr}
    assert constexprs == set(
        sk.splitk_constexprs(
            Cfg(block_n=64, block_m=64, block_k=64, splits=1, warps=4, stages=2, loads="tma", reduce="none"),
            False,
            False,
        )
    )


# ------------------------------------------------------------------------------ sm_90a compile, no GPU


def _ptxas():
    try:
        from triton.backends.nvidia.compiler import get_ptxas

        path = get_ptxas(90).path
    except Exception:  # no NVIDIA backend or no ptxas in this triton
        return None
    return path if path and Path(path).exists() else None


def _compile_sm90(cfg, dual):
    """Compile the real kernel for sm_90a with the argument types and divisibility the launcher's calls give."""
    import triton
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource

    kernel = compiled._splitk_gemm_kernel
    tma = cfg.loads == "tma"
    weight = f"tensordesc<bf16[{cfg.block_n}, {cfg.block_k}]>" if tma else "*bf16"
    types = {
        "x": f"tensordesc<bf16[{cfg.block_m}, {cfg.block_k}]>" if tma else "*bf16",
        "w": weight,
        "w2": weight,
        "out": "*fp32" if dual else "*bf16",
        "partials": "*fp32",
        "counters": "*i32",
        "M": "i32",
        "N": "i32",
        "K": "i32",
        "splits": "i32",
    }
    meta = compiled.splitk_constexprs(cfg, dual, False)
    names = kernel.arg_names
    signature = {name: types.get(name, "constexpr") for name in names}
    aligned = ["out", "partials", "counters", "N", "K"] + ([] if tma else ["x", "w", "w2"])
    source = ASTSource(
        fn=kernel,
        signature=signature,
        constexprs={(names.index(name),): value for name, value in meta.items()},
        attrs={(names.index(name),): [["tt.divisibility", 16]] for name in aligned},
    )
    options = {"num_warps": cfg.warps, "num_stages": cfg.stages}
    return triton.compile(source, target=GPUTarget("cuda", 90, 32), options=options)


@pytest.mark.skipif(_ptxas() is None, reason="needs Triton's NVIDIA backend with ptxas")
@pytest.mark.skipif(
    _INTERPRET_AT_START, reason="TRITON_INTERPRET is set for the whole run: Triton's library interprets"
)
@pytest.mark.parametrize(
    "layer, m, cfg",
    [REAL[0], REAL[1], REAL[3], REAL[5], REAL[6], REAL[7]],
)
def test_compiles_for_sm90a_with_wgmma_no_spills_and_ordered_tickets(layer, m, cfg, tmp_path):
    dual = layer == "router"
    kernel = _compile_sm90(cfg, dual)
    ptx = kernel.asm["ptx"]
    assert "wgmma.mma_async" in ptx, "no wgmma: Triton fell back to mma.sync"
    assert kernel.metadata.shared <= compiled.splitk_smem_bytes(cfg, dual) <= compiled.SMEM_PER_BLOCK
    (tmp_path / "k.ptx").write_text(ptx)
    report = subprocess.run(
        [_ptxas(), "-arch=sm_90a", "-v", str(tmp_path / "k.ptx"), "-o", str(tmp_path / "k.cubin")],
        capture_output=True,
        text=True,
        check=True,
    ).stderr
    spills = [int(v) for v in re.findall(r"(\d+) bytes spill stores", report)]
    assert spills and max(spills) == 0, report
    if cfg.reduce != "none":
        # the ticket: bar.sync, then one acq_rel gpu-scope add (one thread), broadcast behind another bar.sync;
        # the last arriver's reads bypass L1
        lines = [line.strip() for line in ptx.splitlines()]
        lines = [line for line in lines if line and not line.startswith(("//", ".loc"))]
        ticket = next(i for i, line in enumerate(lines) if "atom.global.gpu.acq_rel.add.u32" in line)
        before = [line for line in lines[ticket - 12 : ticket] if line.startswith("bar.sync")]
        after = [line for line in lines[ticket : ticket + 12] if line.startswith("bar.sync")]
        assert before and after, lines[ticket - 8 : ticket + 8]
        assert "ld.global.cg" in ptx
        if cfg.reduce == "atomic":
            assert "atom.global.gpu.relaxed.add" in ptx


# ------------------------------------------------------------------------------------------ on the H200

GPU_CASES = [case for case in REAL if case[0] in ("qkv_gate", "router")]


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
@pytest.mark.skipif(
    _INTERPRET_AT_START, reason="TRITON_INTERPRET is set for the whole run: kernels interpret"
)
def test_gpu_real_layers_and_cuda_graph_replays():
    """qkv_gate and the router (dual) at real sizes, both weight distributions, several configs: float64
    reference, NaN-poisoned outputs, the semaphore's sum bit-identical over two launches (real arrival
    orders), then CUDA-graph capture and 3 replays with fresh x, each checked and each leaving the counters
    and the accumulator zero."""
    device = "cuda"
    gen = torch.Generator(device=device).manual_seed(17)
    buffers = SimpleNamespace(
        workspace=torch.full((compiled.WORKSPACE_FLOATS,), float("nan"), device=device),
        counters=torch.zeros(compiled.COUNTERS, dtype=torch.int32, device=device),
        accumulator=torch.zeros(compiled.ACCUMULATOR_FLOATS, device=device),
    )
    for distribution in ("normal", "heavy"):
        weights = {}
        for layer in ("qkv_gate", "router"):
            n, k = _shape(layer)
            w = make_weight(n, k, "float32" if layer == "router" else "bfloat16", distribution, gen, device)
            weights[layer] = (w, split_hi_lo(w) if layer == "router" else (w,))
        for layer, m, cfg in GPU_CASES:
            n, k = _shape(layer)
            dual = layer == "router"
            w, parts = weights[layer]
            label = f"{layer} m={m} {distribution} {cfg}"
            x = make_x(m, k, gen, device)
            out = _launch(compiled, cfg, x, parts, n, buffers)
            _check(out, x, w, n, dual, label)
            if cfg.reduce == "semaphore":  # summed in split order whichever program arrives last: same bits
                assert torch.equal(
                    _launch(compiled, cfg, x, parts, n, buffers), out
                ), f"{label}: not deterministic"
            # capture (warm: compiled above), then replay with fresh x copied into the captured input
            static_x = make_x(m, k, gen, device)
            out = torch.full(
                (m, n), float("nan"), dtype=torch.float32 if dual else torch.bfloat16, device=device
            )
            descriptors = compiled.weight_descriptors(parts, cfg)
            args = (buffers.workspace, buffers.counters, buffers.accumulator, cfg, descriptors)
            side = torch.cuda.Stream()
            side.wait_stream(torch.cuda.current_stream())
            with torch.cuda.stream(side):
                compiled.launch_splitk_gemm(static_x, parts, out, *args)
            torch.cuda.current_stream().wait_stream(side)
            graph = torch.cuda.CUDAGraph()
            with torch.cuda.graph(graph):
                compiled.launch_splitk_gemm(static_x, parts, out, *args)
            for replay in range(3):
                fresh = make_x(m, k, gen, device)
                static_x.copy_(fresh)
                out.fill_(float("nan"))
                graph.replay()
                torch.cuda.synchronize()
                assert not torch.isnan(out).any(), f"{label} replay {replay + 1}: NaN left"
                _check(out, fresh, w, n, dual, f"{label} replay {replay + 1}")
                assert int(buffers.counters.abs().sum()) == 0, f"{label} replay {replay + 1}: counters"
                assert (
                    float(buffers.accumulator.abs().sum()) == 0.0
                ), f"{label} replay {replay + 1}: accumulator"


def test_the_bound_launch_passes_what_triton_s_launcher_takes(monkeypatch):
    """BoundSplitKLaunch (CPU, stand-ins for Triton's compiled kernel and driver): the C launcher gets the grid,
    the stream, the function and Triton 3.6's base arguments, then every kernel argument in signature order with
    each tensor descriptor expanded by Triton's own make_tensordesc_arg; x's map is encoded once per (address, M)
    and again for another M at the same address; a launcher of another layout is refused (None)."""
    from triton.backends.nvidia import driver as nvidia_driver

    from kernels_src import splitk_gemm as sg

    encoded = []

    def expand(desc, meta):  # stands for make_tensordesc_arg: a map, then the shape and the strides
        encoded.append(tuple(desc.shape))
        return [f"map{meta}:{tuple(desc.shape)}", *desc.shape, *desc.strides]

    calls = []

    def c_launch(*args):
        calls.append(args)

    def wrapped(*args):  # Triton's wrapper: its closure holds the C launcher
        return launcher(*args)

    launcher = c_launch
    cfg = sg.SplitKGemmConfig(
        block_n=64, block_m=64, block_k=128, splits=4, warps=4, stages=4, loads="tma", reduce="atomic"
    )
    constexprs = sg.splitk_constexprs(cfg, True, False)
    names = ["x", "w", "w2", "out", "partials", "counters", "M", "N", "K", "splits", *constexprs]
    compiled = SimpleNamespace(
        run=SimpleNamespace(
            launch=wrapped,
            launch_cooperative_grid=False,
            launch_pdl=False,
            global_scratch_size=0,
            profile_scratch_size=0,
        ),
        metadata=SimpleNamespace(tensordesc_meta=["mx", "mw", "mw2"]),
        src=SimpleNamespace(fn=SimpleNamespace(arg_names=names)),
        packed_metadata="packed",
        function="function",
    )
    monkeypatch.setattr(nvidia_driver, "make_tensordesc_arg", expand)
    monkeypatch.setattr(nvidia_driver, "_BASE_ARGS_FORMAT", "iiiKKppOOOOOO")
    monkeypatch.setattr(
        triton.runtime, "driver", SimpleNamespace(active=SimpleNamespace(get_current_stream=id))
    )
    n, k = 256, 8192
    w = [torch.zeros(n, k, dtype=torch.bfloat16) for _ in range(2)]
    descriptors = sg.weight_descriptors(tuple(w), cfg)
    workspace, accumulator = torch.zeros(16), torch.zeros(16)
    counters = torch.zeros(16, dtype=torch.int32)
    bound = sg.BoundSplitKLaunch.bind(
        compiled, True, n, k, workspace, counters, accumulator, cfg, descriptors
    )
    assert bound is not None
    x = torch.zeros(100, k, dtype=torch.bfloat16)
    out = torch.zeros(100, n)
    bound(x, out)
    bound(x, out)
    bound(x[:40], out[:40])
    w_args = [f"mapmw:{(n, k)}", n, k, k, 1, f"mapmw2:{(n, k)}", n, k, k, 1]
    for args, m in zip(calls, (100, 100, 40)):
        assert list(args) == [
            n // 64, 4, -(-m // 64), id(None), "function",  # grid, stream (device None on the CPU), function
            False, False, None, None, "packed", None, None, None,  # the base arguments after them
            f"mapmx:{(m, k)}", m, k, k, 1, *w_args,  # x, w, w2 expanded
            out.data_ptr(), accumulator.data_ptr(), counters.data_ptr(), m, n, k, 4, *constexprs.values(),
        ]  # fmt: skip
    assert encoded == [(n, k), (n, k), (100, k), (40, k)]  # the weights once, x once per (address, M)
    monkeypatch.setattr(nvidia_driver, "_BASE_ARGS_FORMAT", "iiiKKpOOOOOO")
    assert (
        sg.BoundSplitKLaunch.bind(compiled, True, n, k, workspace, counters, accumulator, cfg, descriptors)
        is None
    )
