"""The probes on the CPU: their cases fit their kernels, their tables show each row, their CUDA compiles, and their
analyses read known stamps right."""

import shutil
import subprocess

import pytest

from generator import REPO_ROOT
from generator import probes
from generator.probes import gemm, intake, slot_stamps, tail
from generator.problem import load_problem
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
    """intake.build()'s CUDA (probes.cuda_source of tma_intake.cu, which includes the kernels' headers and the
    generated constants) compiles for sm_90a: a constant moved out of the headers cannot break the probe."""
    source = tmp_path / "probe.cu"
    source.write_text(probes.cuda_source(intake.SOURCE))
    cmd = ["nvcc", "-std=c++17", "-gencode=arch=compute_90a,code=sm_90a", f"-I{probes.KERNELS_SRC}", "-c"]
    done = subprocess.run(
        [*cmd, str(source), "-o", str(tmp_path / "probe.o")], capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr[-2000:]


# ---- probe-slots: clock stamps patched into tma_kernel (generator/probes/slot_stamps.py)


def test_the_stamps_patch_the_kernel_and_the_built_file_once_each():
    for path in (REPO_ROOT / "kernels_src" / "tma_gemv.cuh", REPO_ROOT / "dist" / "submission.py"):
        text = path.read_text()
        patched = slot_stamps.patch(text, str(path))
        assert patched.count("clock64()") == text.count("clock64()") + 10, path
        assert patched.count("%%globaltimer") == text.count("%%globaltimer") + 2, path


def test_a_kernel_that_moved_under_the_probe_is_one_line():
    text = (REPO_ROOT / "kernels_src" / "tma_gemv.cuh").read_text()
    moved = text.replace("bars.acquire(s, round & 1, kStage)", "bars.acquire(s, round & 1 ^ 1, kStage)")
    with pytest.raises(
        slot_stamps.ProbeError, match=r"^tma_gemv\.cuh: the probe's anchor 3 .* 0 times"
    ) as err:
        slot_stamps.patch(moved, "tma_gemv.cuh")
    assert "\n" not in str(err.value)


def test_the_probe_takes_only_launches_it_can_stamp():
    assert len(slot_stamps.parse_launches(slot_stamps.DEFAULT_LAUNCHES)) == len(slot_stamps.DEFAULT_LAUNCHES)
    for spec, why in (
        ("pooler:128:tma_gemm:1,2,6,semaphore", "workspace the stamps use"),
        ("o:128:cublas", "not cublas"),
        ("o:128:splitk_gemm:64,64,128,1,4,4,tma,none", "not splitk_gemm"),
        ("o:x:tma_gemm:1,1,6,none", "m must be an integer"),
        ("o:128:tma_gemm:1,16,4,atomic", f"2048 CTAs, over the {slot_stamps.MAX_CTAS}"),
        ("pooler:128:tma_gemm:1,1,6,none", "128 slots a CTA, over the 126"),
    ):
        with pytest.raises(slot_stamps.ProbeError, match=why):
            slot_stamps.parse_launches([spec])


def _stamped_cta(slots=10, period=400, wait=100, lead=1500, entry=1000, ghz=2.0, after=3000):
    """One CTA's stamp rows as the patched kernel writes them, in SM cycles: slot i's wait starts at
    entry + 2000 + i * period."""
    rows = [[0] * slot_stamps.FIELDS for _ in range(slot_stamps.SLOT_ROWS)]
    for i in range(slots):
        c0 = entry + 2000 + i * period
        c1, c2, c3, c4 = c0 + wait, c0 + wait + 60, c0 + wait + 66, c0 + wait + 120
        p2 = c0 - lead
        rows[i] = [c0, c1, c2, c3, c4, p2 - 200, p2 - 150, p2]
    last = rows[slots - 1][4]
    exit_ = last + after
    rows[slot_stamps.EXIT_ROW][:4] = [entry, exit_, 5000, 5000 + round((exit_ - entry) / ghz)]
    empty = [[0] * slot_stamps.FIELDS for _ in range(slot_stamps.SLOT_ROWS)]
    return [rows, empty, empty, empty]


def test_slot_stamps_analysis_on_known_stamps():
    figures = slot_stamps.analyse([[_stamped_cta(), _stamped_cta(after=7000)]])
    assert figures["sm_ghz"] == pytest.approx(2.0, rel=1e-3)
    assert figures["ctas"] == 2  # CTAs a run
    assert figures["period"] == 200.0 and figures["wait"] == 50.0  # ns at 2 GHz
    assert figures["issue"] == 30.0 and figures["wgmma_wait"] == 3.0
    assert figures["empty_wait"] == 25.0 and figures["produce"] == 75.0 and figures["lead"] == 750.0
    assert figures["land"] is None  # no wait over 200 cycles
    assert figures["to_first_wait"] == 1.0 and figures["loop"] == (9 * 400 + 220) / 2000
    assert figures["after_last"] == 2.5 and figures["after_last_max"] == 3.5
    assert figures["waited_share"] == 0.0
    waited = slot_stamps.analyse([[_stamped_cta(wait=900)]])
    assert waited["land"] == (900 + 1500) / 2 and waited["waited_share"] == 1.0
    lines = slot_stamps.table([slot_stamps.Row("o:128:tma_gemm:...", figures)]).splitlines()
    assert len(lines) == 3 and all(line.count("|") == lines[0].count("|") for line in lines)


@needs("nvcc")
def test_the_stamped_kernel_compiles_without_spills(tmp_path):
    """The patched tma_gemv.cuh, in a scratch copy of the inputs, compiled as `compile` does for the probe's
    default launches: ptxas takes each stamped kernel with no spill."""
    from generator.compile import compile_cuda
    from generator.engines import BY_NAME
    from generator.launch_table import launch_table
    from generator.sources import load_sources

    for folder in ("templates", "kernels_src", "tables"):
        shutil.copytree(REPO_ROOT / folder, tmp_path / folder, ignore=shutil.ignore_patterns("__pycache__"))
    cuh = tmp_path / "kernels_src" / "tma_gemv.cuh"
    cuh.write_text(slot_stamps.patch(cuh.read_text()))
    layers = load_problem().layers
    kernels = []
    for launch in slot_stamps.parse_launches(slot_stamps.DEFAULT_LAUNCHES):
        engine = BY_NAME[launch.engine]
        kernels.append(engine.variant(engine.Config(*launch.config), layers[launch.layer], launch.m))
    code, messages, found, _ = compile_cuda(
        load_sources(tmp_path).cuda + launch_table(list(dict.fromkeys(kernels)))
    )
    assert code == 0, messages[-2000:]
    assert found and [k.name for k in found if k.spills] == [], messages[-2000:]


def _gemm_stamps(entry: int, spans: list[int], reached: int = 6) -> list:
    """One CTA's stamps ([consumer warpgroup][phase] ns): both warpgroups' phases from `entry`, `spans` apart,
    those from `reached` on left 0 (never got there)."""
    phases = [entry]
    for span in spans:
        phases.append(phases[-1] + span)
    row = [p if i < reached else 0 for i, p in enumerate(phases)] + [0, 0]
    return [row, row]


def test_gemm_timeline_on_known_stamps():
    """Spans between consecutive phases, the median and the slowest CTA, entries after the grid's first, the
    intake over the median mainloop; a CTA whose stamps stop short is left out."""
    launch = [
        _gemm_stamps(1000, [2000, 8000, 500, 300, 1000]),
        _gemm_stamps(1400, [2200, 10000, 500, 100, 1200]),
        _gemm_stamps(1200, [2100, 9000, 500, 200, 1100]),
        _gemm_stamps(900, [1, 1, 1, 1, 1], reached=3),
    ]
    row = gemm.timeline("128x2304x8192", "128,128,5,108", [launch, launch], copies_per_cta=9000.0 * 70)
    assert row.launches == 2
    assert row.entry_us == (0.2, 0.4)
    assert row.spans_us["fill"] == (2.1, 2.2) and row.spans_us["mainloops"] == (9.0, 10.0)
    assert row.spans_us["wait"] == (0.2, 0.3) and row.spans_us["reduce"] == (1.1, 1.2)
    assert row.intake_gbs == pytest.approx(70.0)
    assert row.span_us == pytest.approx((1400 + 2200 + 10000 + 500 + 100 + 1200 - 1000) / 1000)
    lines = gemm.phase_table([row]).splitlines()
    assert len(lines) == 3 and all(line.count("|") == lines[0].count("|") for line in lines)


def test_a_phase_row_reads_each_launchs_stamps_past_the_partials(monkeypatch):
    """_phase_row on the CPU: the stamps are read from past the config's partials after each launch (cleared
    before it), and the intake counts the config's weight and x copies per CTA."""
    import torch
    from types import SimpleNamespace

    from kernels_src import persistent_gemm as engine

    monkeypatch.setattr(torch.cuda, "synchronize", lambda: None)
    config = (128, 128, 5, 4)
    module = SimpleNamespace(
        GemmConfig=engine.GemmConfig,
        GEMM_SLOT_K=engine.GEMM_SLOT_K,
        persistent_workspace_floats=engine.persistent_workspace_floats,
        persistent_tiles=engine.persistent_tiles,
    )
    offset = engine.persistent_workspace_floats(engine.GemmConfig(*config))
    workspace = torch.full((offset + gemm.stamp_floats(config[3]),), 7.0)
    cta = _gemm_stamps(1000, [2000, 8000, 500, 300, 1000])
    launched = []

    def call():
        stamps = workspace[offset:].view(torch.int64)
        launched.append(int(stamps.abs().sum()))  # cleared before each launch
        stamps.copy_(torch.tensor([cta] * config[3]).flatten())

    row = gemm.GemmRow("128x2304x8192", "128,128,5,4", 1e-3, 20.0, 15.0, 19.0, 14.0)
    got = gemm._phase_row(module, row, config, call, workspace, lambda: None, launches=3)
    assert launched == [0, 0, 0] and (workspace[:offset] == 7.0).all()
    copies = 18 * 128 * (128 + 128) * 64 * 2 / 4  # 18 tiles x 128 k-blocks of 32 KB over 4 CTAs
    assert got == gemm.timeline(row.shape, row.config, [[cta] * config[3]] * 3, copies)
    assert got.intake_gbs == pytest.approx(copies / 8000)


@needs("nvcc")
def test_the_gemm_stamps_and_first_gap_compile_in_only_for_the_probe():
    """persistent_gemm built as the probe builds it reads the global timer (stamps) or the SM clock (the producer's
    first gap, --define), with no spill; the shipped build (both macros undefined) has no trace of either."""
    from generator.compile import compile_cuda
    from generator.sources import load_sources
    from kernels_src.engine import Layer
    from kernels_src.persistent_gemm import PERSISTENT_GEMM, GemmConfig
    from generator.launch_table import launch_table
    from generator.sass import find_cuobjdump

    cuobjdump = find_cuobjdump()
    assert cuobjdump, "no cuobjdump beside nvcc or in triton"
    layer = Layer("probe", 2304, 8192, "bfloat16")
    kernels = [PERSISTENT_GEMM.variant(GemmConfig(128, 128, 5, 108), layer, 128)]
    source = load_sources(REPO_ROOT).cuda + launch_table(kernels)
    gap = gemm.parse_define("OKC_GEMM_FIRST_GAP=600")
    for head, timer, clock in ((gemm.STAMPS_ON, True, False), ("", False, False), (gap, False, True)):
        code, messages, found, sass = compile_cuda(head + source, cuobjdump=cuobjdump)
        assert code == 0 and found and not [k.name for k in found if k.spills], messages[-2000:]
        assert ("GLOBALTIMER" in sass, "SR_CLOCK" in sass) == (timer, clock), head


@pytest.mark.parametrize("text", ["OKC_GEMM_FIRST_GAP", "600=OKC", "OKC_GEMM_FIRST_GAP= "])
def test_a_bad_gemm_define_is_one_line(text):
    with pytest.raises(gemm.ProbeError, match="expected NAME=VALUE"):
        gemm.parse_define(text)


# ---- probe-tail: persistent_gemm's split-K tail apart from the GEMM (generator/probes/tail.py, splitk_tail.cu)


def test_every_tail_case_fits_the_probe_kernel():
    """Each default case is a tile shape the probe is built for, a one-wave grid, and the problem's layer."""
    layers = load_problem().layers
    for case in tail.DEFAULT_CASES:
        assert (case.rows, case.tokens) in tail.SHAPES and 2 <= case.splits and case.ctas <= tail.SMS, case
        layer = layers[case.name.split(",")[0].split(" ")[0]]
        assert (case.n, case.m) == (layer.n, int(case.name.split("m=")[1])), case
        assert tail.parse_case(f"{case.rows},{case.tokens},{case.m},{case.n},{case.splits}")[1:] == case[1:]


@pytest.mark.parametrize(
    "text, why",
    [
        ("128,192,128,2304,6", "rows x tokens"),
        ("128,128,128,2300,6", "multiple of rows"),
        ("128,128,128,2304,1", "splits >= 2"),
        ("128,128,128,2304,8", "<= 132"),
        ("128,128,2304", "expected rows,tokens,m,n,splits"),
    ],
)
def test_a_bad_tail_case_is_one_line(text, why):
    with pytest.raises(tail.ProbeError, match=why):
        tail.parse_case(text)


def test_the_tail_sums_are_each_participants_values_added():
    """expected_sums against the kernel's value rule (splitk_tail.cu's tail_value) summed element by element."""
    case = tail.Case("small", 128, 64, 5, 256, 3)
    got = tail.expected_sums(case)
    for token in (0, 4):
        for row in (0, 77, 255):
            want = sum((row * 3 + token * 5 + p * 7) % 9 - 4 for p in range(case.splits))
            assert got[token, row].item() == want
    assert got.abs().max().item() <= 4 * case.splits  # small integers: every sum exact in bf16


def test_the_tail_table_has_a_row_per_design():
    case = tail.DEFAULT_CASES[0]
    rows = [tail.Row(case, design, 0, 11.0, 6.5, 3.0, 0.5, 2.4, 6.8) for design in tail.DESIGNS]
    lines = tail.table(rows).splitlines()
    assert len(lines) == 2 + len(tail.DESIGNS) and all(l.count("|") == lines[0].count("|") for l in lines)
    assert "| 22 | 1.04 |" in lines[2]  # 64 KB in 3.0 us a CTA; 108 x 64 KB over the 6.8 us span


@needs("nvcc")
def test_the_tail_probe_compiles(tmp_path):
    """tail.build()'s CUDA (splitk_tail.cu on persistent_gemm.cuh) compiles for sm_90a, every design at every tile
    shape (to PTX, unoptimised: 0.7 s against 2.9; a change to the kernel's tail functions cannot break the probe
    unseen)."""
    source = tmp_path / "tail.cu"
    source.write_text(probes.cuda_source(tail.SOURCE))
    cmd = [
        "nvcc",
        "-std=c++17",
        "-gencode=arch=compute_90a,code=compute_90a",
        f"-I{probes.KERNELS_SRC}",
        "-ptx",
        "-Xcicc",
        "-O0",
    ]
    done = subprocess.run(
        [*cmd, str(source), "-o", str(tmp_path / "tail.ptx")], capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert (tmp_path / "tail.ptx").read_text().count(".entry") == len(tail.SHAPES) * len(tail.DESIGNS)
