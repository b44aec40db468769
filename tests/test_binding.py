"""The Python-facing shim (kernels_src/binding.cpp), built on the CPU exactly as prepare() builds it (pybind11 alone,
no torch headers) beside a stub launch table: plans keep their fixed part, a call adds its own, and a refusal comes
back as one line of text that Python raises, never as a C++ exception (one of those ended the process on the H200
image)."""

import shutil
import time

import pytest

from tools import on_ci

from generator import REPO_ROOT
from generator.judge.loader import load_submission

# The launch table (the file's LAUNCH_TABLE), stubbed: it reports what each kernel was handed.
STUB_TABLE = r"""
#include <cstdio>
const char* okc_launch(int kernel, const okc::Call& c) {
    static char text[256];
    if (kernel == 7) return nullptr;  // launched
    std::snprintf(text, sizeof text, "kernel %d: M=%d N=%d K=%d op0=%lld s2=%lld stream=%lld", kernel, c.M, c.N, c.K,
                  (long long)c.operand[0], c.scalar[2], (long long)c.stream);
    return text;
}
"""


@pytest.fixture(scope="module")
def built():
    if shutil.which("ninja") is None or shutil.which("c++") is None:
        if on_ci():
            pytest.fail("CI needs ninja and a C++ compiler (the test extras install ninja)")
        pytest.skip("needs ninja and a C++ compiler")
    from torch.utils.cpp_extension import load_inline

    module = load_submission(REPO_ROOT / "dist" / "submission.py")
    start = time.perf_counter()
    binding = load_inline(
        name="okc_binding_cpu_test",
        cpp_sources=[module.BINDING_SRC, STUB_TABLE],
        functions=["plan", "run"],
        extra_cflags=["-O1"],
        with_pytorch_error_handling=False,
        no_implicit_headers=True,
        verbose=False,
    )
    return module, binding, time.perf_counter() - start


def test_a_plan_keeps_its_fixed_part_and_a_call_adds_its_own(built):
    _, binding, _ = built
    first = binding.plan(3, 2304, 8192, (111,), (0, 0, 42), 0, 0)
    second = binding.plan(7, 256, 8192, (), (), 0, 0)
    assert binding.plan(7, 256, 8192, (1, 2, 3, 4, 5), (), 0, 0) == -1  # past the call layout's operands
    assert second == first + 1
    assert binding.run(first, 0, 0, 5, 99) == "kernel 3: M=5 N=2304 K=8192 op0=111 s2=42 stream=99"
    assert binding.run(second, 0, 0, 1, 0) == ""  # launched
    assert binding.run(second + 10, 0, 0, 1, 0) == "run: no such plan"


def test_the_binding_builds_without_torch_headers_in_seconds(built):
    module, _, seconds = built
    assert (
        "torch/extension.h" not in module.BINDING_SRC
        and "#include <pybind11/pybind11.h>" in module.BINDING_SRC
    )
    assert seconds < 60  # with torch/extension.h this one file took ~36 s on the 2-core CPU machine


def test_a_refusal_is_raised_as_one_line(built, monkeypatch):
    module, binding, _ = built
    monkeypatch.setattr(module, "_raw_stream", lambda index: 77)  # no CUDA stream on this machine
    state = module.Prepared(1)
    variant = module.Variant.of("mma_gemv", dict(NB=1), warps=4)
    state.kernels = {variant.case: (binding, 0)}
    state.parts, state.operands = {"o": ()}, {"o": {}}
    state.buffers = {name: _Tensor() for name in ("workspace", "semaphores", "counters", "accumulator")}
    layer = module.Layer("o", 8192, 1024, "bfloat16")
    ctx = module.PlanContext(state, layer)
    ctx.fallback = lambda m: None
    call = ctx.cuda_plan(variant, layer, 1, (_Tensor(),))
    with pytest.raises(
        RuntimeError,
        match=r"^mma_gemv \(NB=1 warps=4\) at m=1: kernel 0: M=1 N=8192 K=1024 op0=4096 s2=0 stream=77$",
    ):
        call(_Tensor(bf16=True))


class _Tensor:
    """Just what cuda_plan reads of a tensor, on a machine without CUDA."""

    def __init__(self, bf16=False):
        import torch

        self.dtype = torch.bfloat16 if bf16 else torch.float32
        self.shape = (1, 1024)
        self.device = torch.device("cpu")

    def data_ptr(self):
        return 4096

    def is_contiguous(self):
        return True


def test_a_plan_holds_what_its_pointers_point_at(built):
    """The kernels get raw pointers: a plan must keep its operands and the shared buffers alive by itself, or a
    caller that keeps plans and drops the state (ab did) launches into freed memory (an illegal address on the
    H200 once the flush buffer was allocated)."""
    import gc
    import weakref

    module, binding, _ = built
    operand = _Tensor()
    buffers = {name: _Tensor() for name in ("workspace", "semaphores", "counters", "accumulator")}
    state = module.Prepared(1)
    variant = module.Variant.of("mma_gemv", dict(NB=1), warps=4)
    state.kernels = {variant.case: (binding, 0)}
    state.parts, state.operands, state.buffers = {"o": ()}, {"o": {}}, buffers
    layer = module.Layer("o", 8192, 1024, "bfloat16")
    ctx = module.PlanContext(state, layer)
    ctx.fallback = lambda m: None
    call = ctx.cuda_plan(variant, layer, 1, (operand,))
    watched = [weakref.ref(operand)] + [weakref.ref(b) for b in buffers.values()]
    del operand, buffers, state, ctx
    gc.collect()
    assert all(ref() is not None for ref in watched)
    del call
    gc.collect()
    assert all(ref() is None for ref in watched)
