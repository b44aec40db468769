"""The intake probe's cases and table (CPU): every case fits the probe kernel's limits, the table shows each."""

from generator.probes import intake

SMEM_LIMIT = 226 * 1024  # kernels_src/common.cuh kSmemOptInLimit, which tma_intake_launch checks


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


def test_the_table_has_a_row_per_case():
    rows = [intake.Row(case, 40.0, 5.3, 1.2, 2.5, 43.0, 132) for case in intake.cases()[:3]]
    lines = intake.table(rows).splitlines()
    assert len(lines) == 2 + len(rows)
    assert all(line.count("|") == lines[0].count("|") for line in lines)
    assert "| 40.0 | 5.28 |" in lines[2] or "| 40.0 | 5.30 |" in lines[2]
