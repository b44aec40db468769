"""The torch-facing shim (kernels_src/binding.cpp), built for the CPU with stub launchers: a refused call comes back
as one line of text that Python raises, never as a C++ exception (one of those ended the process on the H200 image).
"""

import shutil

import pytest
import torch

from generator import REPO_ROOT
from generator.judge.loader import load_submission

# The launchers binding.cpp declares, stubbed: the checks under test run before any of them is reached.
STUB_LAUNCHERS = r"""
const char* okc_launch_gemv(const void*, const void*, const void*, void*, float*, int*, int, int, int, int, int,
                            int, int, int, int, int, bool, long long) { return "stub launcher reached"; }
int okc_ticket_groups() { return 256; }
int okc_semaphore_ints() { return 6656; }
const char* okc_launch_tma_gemv(const void*, const void*, const void*, void*, float*, int*, int, int, int, int, int,
                                int, int, bool, long long) { return "stub launcher reached"; }
const char* okc_tma_config_error(int, int, bool, int, int) { return nullptr; }
const char* okc_launch_zgemv(const void*, const void*, const void*, const void*, const int*, void*, float*, int*, int,
                             int, int, int, int, int, int, int, int, int, int, int, int, int, bool, long long) {
    return "stub launcher reached";
}
// load_inline joins the C++ sources into one file, so this sees binding.cpp's file-local message builder.
std::string format_probe(int64_t n, bool b) {
    return cat("n=", n, " b=", b, " sizes=", at::IntArrayRef({2, 8192}), " ", std::string("end"), " ", nullptr);
}
"""


@pytest.fixture(scope="module")
def binding(tmp_path_factory):
    if shutil.which("ninja") is None or shutil.which("c++") is None:
        pytest.skip("needs ninja and a C++ compiler")
    from torch.utils.cpp_extension import load_inline

    build = tmp_path_factory.mktemp("binding_build")
    source = (REPO_ROOT / "kernels_src" / "binding.cpp").read_text()
    return load_inline(
        name="okc_binding_cpu_test",
        cpp_sources=[source, STUB_LAUNCHERS],
        functions=["gemv", "tma_gemv", "zgemv", "format_probe"],
        build_directory=str(build),
        verbose=False,
    )


def _operands(m=1, n=256, k=8192):
    x = torch.zeros(m, k, dtype=torch.bfloat16)
    w = torch.zeros(n * k, dtype=torch.bfloat16)
    out = torch.empty(m, n, dtype=torch.bfloat16)
    ws = torch.empty(1024, dtype=torch.float32)
    sem = torch.zeros(64, dtype=torch.int32)
    return x, w, out, ws, sem


def test_refusals_are_returned_not_thrown(binding):
    x, w, out, ws, sem = _operands()
    got = binding.gemv(x, w, w, out, ws, sem, 256, 8192, 4, 1, 1, 1, 1, 0, False, 0, 0)
    assert got == "gemv: x must be a CUDA tensor"
    got = binding.tma_gemv(x, w, w, out, ws, sem, 256, 8192, 1, 1, 8, 0, False, 0)
    assert got == "tma_gemv: x must be a CUDA tensor"
    exceptions, starts = torch.zeros(16, 1, 2, dtype=torch.int32), torch.zeros(16, 17, dtype=torch.int32)
    patches = torch.zeros(16, 8192 // 64, 4, dtype=torch.int32)
    zs = torch.zeros(256 * 8192 * 12 // 8, dtype=torch.uint8)
    got = binding.zgemv(
        x, zs, patches, exceptions, starts, out, ws, sem, 256, 8192, 4, 1, 1, 1, 1, False, 0, 0, 0, 0, 0, 0
    )
    assert got == "zgemv: x must be a CUDA tensor"


def test_refusal_text_formats_numbers_without_streams(binding):
    # the refusals that carry numbers (the ones that crashed on the H200 when built through std::ostream)
    assert binding.format_probe(-42, True) == "n=-42 b=1 sizes=[2, 8192] end "


def test_runtime_raises_the_refusal_as_one_line(binding):
    mod = load_submission(REPO_ROOT / "dist" / "submission.py")
    mod._EXTENSION = binding  # the shipped _launch, on the CPU-built shim
    x, w, out, ws, sem = _operands()
    with pytest.raises(RuntimeError, match=r"^gemv: x must be a CUDA tensor$"):
        mod._launch("gemv", x, w, w, out, ws, sem, 256, 8192, 4, 1, 1, 1, 1, 0, False, 0, 0)
