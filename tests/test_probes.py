"""The intake probe's cases and table (CPU): every case fits the probe kernel's limits, the table shows each."""

import subprocess

from generator.probes import intake
from kernels_src.engine import SMEM_LIMIT  # kSmemOptInLimit, which tma_intake_launch checks
from tools import needs


def test_every_case_fits_the_probe_kernel():
    cases = intake.cases()
    assert len(cases) == len(set(cases)), "a case is listed twice"
    for case in cases:
        ring = case.rings * case.slots * (case.distinct + case.shared + 16)
        assert ring * case.ctas_per_sm <= SMEM_LIMIT, case
        assert case.slots % case.lanes == 0 and 1 <= case.rings <= 4, case
        assert (case.distinct + case.shared) % 16 == 0 and case.copy % 16 == 0, case
        # the x box reads the [shared / 128, 8192] bf16 matrix the shared region holds (2 MB: 16 KB boxes)
        assert not case.shared_box or case.shared * 8192 * 2 // 128 == intake.SHARED_REGION, case
        assert not case.shared_box or (case.distinct % 1024 == 0 and case.shared % 1024 == 0), case
        if not case.cold and case.distinct:  # warm rows: every ring's region together stays in L2
            assert intake.WARM_REGION * 132 <= 50 * 2**20, case
            assert (intake.WARM_REGION // (case.rings * case.ctas_per_sm)) % case.distinct == 0, case


def test_the_table_has_a_row_per_case():
    rows = [intake.Row(case, 40.0, 5.3, 1.2, 2.5, 43.0, 132) for case in intake.cases()[:3]]
    lines = intake.table(rows).splitlines()
    assert len(lines) == 2 + len(rows)
    assert all(line.count("|") == lines[0].count("|") for line in lines)
    assert "| 40.0 | 5.28 |" in lines[2] or "| 40.0 | 5.30 |" in lines[2]


@needs("nvcc")
def test_the_probe_kernel_compiles_as_the_probe_builds_it(tmp_path):
    """intake.build()'s CUDA (intake.cuda_source: the engines' generated constants, then tma_intake.cu, which
    includes the kernels' headers) compiles for sm_90a: a constant moved out of the headers cannot break the
    probe unseen."""
    source = tmp_path / "probe.cu"
    source.write_text(intake.cuda_source())
    cmd = ["nvcc", "-std=c++17", "-gencode=arch=compute_90a,code=sm_90a", f"-I{intake.KERNELS_SRC}", "-c"]
    done = subprocess.run(
        [*cmd, str(source), "-o", str(tmp_path / "probe.o")], capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr[-2000:]
