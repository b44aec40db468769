"""generator/sass.py and `compile --loops`: reading a consumer loop's cost out of cuobjdump's SASS."""

from click.testing import CliRunner

from generator.cli import main
from generator.sass import (
    Control,
    Loop,
    decode_control,
    scoreboard_waits,
    split_controlled,
    split_functions,
    steady_loop,
)

# The shape of cuobjdump -sass output: a function header, then one instruction per line with its byte address. The
# kernel has a steady loop (0x0040-0x0090: 6 instructions, 2 HGMMA), an mbarrier retry block at the end that
# branches back into it (larger: not the steady loop), a second function without any MMA, and a third whose retry
# block branches back to its loop's last MMA: a smaller body than the loop's, at more instructions per MMA.
SASS = """
\tcode for sm_90a
\t\tFunction : _Z6streamv
\t.headerflags\t@"EF_CUDA_TEXMODE_UNIFIED EF_CUDA_64BIT_ADDRESS EF_CUDA_SM90 EF_CUDA_VIRTUAL_SM(EF_CUDA_SM90)"
        /*0000*/                   LDC R1, c[0x0][0x28] ;                       /* 0x00000a00ff017b82 */
                                                                                 /* 0x000fe40000000800 */
        /*0010*/                   S2R R0, SR_TID.X ;                           /* 0x0000000000007919 */
        /*0020*/                   MOV R2, RZ ;                                 /* 0x000000ff00027202 */
        /*0030*/                   ISETP.NE.AND P0, PT, R0, RZ, PT ;            /* 0x000000ff0000720c */
        /*0040*/                   SYNCS.PHASECHK.TRANS64.TRYWAIT P1, [R3+URZ], R4 ;   /* 0x00000004030075a7 */
        /*0050*/              @!P1 BRA 0x00c0 ;                                 /* 0x0000000000189947 */
        /*0060*/                   R2UR UR5, R6 ;                               /* 0x00000000060572ca */
        /*0070*/                   HGMMA.64x16x16.F32.BF16 R32, gdesc[UR8], R32 ;  /* 0x00200000082079f0 */
        /*0080*/                   HGMMA.64x16x16.F32.BF16 R24, gdesc[UR16], R24, gsb0 ;  /* 0x0020000010 */
        /*0090*/               @P0 BRA 0x0040 ;                                 /* 0xfffffff000b02947 */
        /*00a0*/                   EXIT ;                                       /* 0x000000000000794d */
        /*00b0*/                   NOP ;                                        /* 0x0000000000007918 */
        /*00c0*/                   SYNCS.PHASECHK.TRANS64.TRYWAIT P1, [R3+URZ], R4 ;   /* 0x00000004030075a7 */
        /*00d0*/              @!P1 BRA 0x00c0 ;                                 /* 0x0000000000189947 */
        /*00e0*/                   BRA 0x0060 ;                                 /* 0x0000000000189947 */
\t\t..........


\t\tFunction : _Z4copyv
        /*0000*/                   LDC R1, c[0x0][0x28] ;                       /* 0x00000a00ff017b82 */
        /*0010*/                   BRA 0x0000 ;                                 /* 0x0000000000189947 */
\t\t..........


\t\tFunction : _Z8unrolledv
        /*0000*/                   SYNCS.PHASECHK.TRANS64.TRYWAIT P1, [R3+URZ], R4 ;   /* 0x00000004030075a7 */
        /*0010*/              @!P1 BRA 0x0080 ;                                 /* 0x0000000000189947 */
        /*0020*/                   HGMMA.64x16x16.F32.BF16 R32, gdesc[UR8], R32 ;  /* 0x00200000082079f0 */
        /*0030*/                   HGMMA.64x16x16.F32.BF16 R24, gdesc[UR16], R24 ;  /* 0x0020000010 */
        /*0040*/                   HGMMA.64x16x16.F32.BF16 R32, gdesc[UR8], R32 ;  /* 0x00200000082079f0 */
        /*0050*/                   HGMMA.64x16x16.F32.BF16 R24, gdesc[UR16], R24, gsb0 ;  /* 0x0020000010 */
        /*0060*/               @P0 BRA 0x0000 ;                                 /* 0xfffffff000b02947 */
        /*0070*/                   EXIT ;                                       /* 0x000000000000794d */
        /*0080*/                   SYNCS.PHASECHK.TRANS64.TRYWAIT P1, [R3+URZ], R4 ;   /* 0x00000004030075a7 */
        /*0090*/                   BRA 0x0050 ;                                 /* 0x0000000000189947 */
"""


def test_sass_is_split_per_function_with_addresses():
    functions = split_functions(SASS)
    assert list(functions) == ["_Z6streamv", "_Z4copyv", "_Z8unrolledv"]
    assert functions["_Z6streamv"][0] == (0, "LDC R1, c[0x0][0x28]")
    assert functions["_Z6streamv"][7] == (0x70, "HGMMA.64x16x16.F32.BF16 R32, gdesc[UR8], R32")
    assert len(functions["_Z6streamv"]) == 15 and len(functions["_Z4copyv"]) == 2


def test_the_steady_loop_is_the_smallest_loop_holding_an_mma():
    functions = split_functions(SASS)
    loop = steady_loop(functions["_Z6streamv"])
    assert loop == Loop(start=0x40, end=0x90, instructions=6, mma=2, r2ur=1)
    assert loop.per_mma == 3.0
    assert steady_loop(functions["_Z4copyv"]) is None  # a loop, but no MMA in it
    # The retry block's branch back to 0x50 spans 5 instructions and 1 MMA: smaller than the loop, but not it.
    assert steady_loop(functions["_Z8unrolledv"]) == Loop(start=0x0, end=0x60, instructions=7, mma=4, r2ur=0)


def stand_in_compile(tmp_path, function, sass):
    """`compile`'s arguments for a stand-in nvcc (a ptxas report of one kernel, `function`) and cuobjdump (`sass`)."""
    report = tmp_path / "report.txt"
    report.write_text(
        f"ptxas info    : Compiling entry function '{function}' for 'sm_90a'\n"
        f"ptxas info    : Function properties for {function}\n"
        "    0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads\n"
        "ptxas info    : Used 90 registers, used 1 barriers, 16 bytes smem\n"
    )
    nvcc = tmp_path / "nvcc"
    nvcc.write_text(f"#!/bin/sh\ncat {report} >&2\n")
    (tmp_path / "sass.txt").write_text(sass)
    cuobjdump = tmp_path / "cuobjdump"
    cuobjdump.write_text(f"#!/bin/sh\ncat {tmp_path / 'sass.txt'}\n")
    for tool in (nvcc, cuobjdump):
        tool.chmod(0o755)
    return ["compile", "--nvcc", str(nvcc), "--cuobjdump", str(cuobjdump)]


def test_compile_loops_prints_the_matching_kernels_loop(tmp_path):
    """`compile --loops` with a stand-in nvcc (its ptxas report) and cuobjdump (the SASS above)."""
    args = stand_in_compile(tmp_path, "_Z6streamv", SASS)
    result = CliRunner().invoke(main, [*args, "--loops", "stream"])
    assert result.exit_code == 0, result.output
    table = result.output.split("loop instrs")[-1].splitlines()  # the --loops table follows compile's own
    row = [line for line in table if line.rstrip().endswith("stream()")]
    assert row and row[0].split()[:4] == ["6", "2", "3.0", "1"], result.output
    missing = CliRunner().invoke(main, [*args, "--loops", "no_such_kernel"])
    assert missing.exit_code == 1 and "no kernel's name contains 'no_such_kernel'" in missing.output


def control_word(stall=1, write=7, read=7, wait=0):
    """The high 64-bit word cuobjdump prints for an instruction, holding only these scheduling bits."""
    return (stall | write << 5 | read << 8 | wait << 11) << 41


# Two instructions as cuobjdump printed them for the register-fed wgmma GEMV probe: an LDG that
# releases scoreboard 5 (and 3 once its address is read), and the WARPGROUP.ARRIVE before the wgmma that reads
# its registers, which waits on scoreboard 5.
REAL_LDG_HIGH, REAL_ARRIVE_HIGH = 0x000768000C5E9D00, 0x020FE20000000000


def test_scheduling_bits_decode():
    assert decode_control(REAL_LDG_HIGH) == Control(stall=4, write_barrier=5, read_barrier=3, wait_mask=0)
    assert decode_control(REAL_ARRIVE_HIGH).waits_on == (5,)
    assert decode_control(control_word(stall=9, write=2, wait=0b100101)) == Control(9, 2, None, 0b100101)
    assert decode_control(control_word(wait=0b100101)).waits_on == (0, 2, 5)


def waits_sass(rows):
    """A one-function cuobjdump text: (address, instruction, high word) rows, each on its two lines."""
    lines = ["\t\tFunction : _Z4waitv"]
    for address, text, high in rows:
        lines.append(f"        /*{address:04x}*/                   {text} ;   /* 0x0000000000000000 */")
        lines.append(f"                                                        /* 0x{high:016x} */")
    return "\n".join(lines) + "\n"


def test_scoreboard_waits_name_the_loads_each_mma_waits_for():
    rows = [
        (0x00, "LDG.E.128 R4, desc[UR4][R2.64]", control_word(write=2)),
        (0x10, "LDG.E.128 R8, desc[UR4][R2.64+0x200]", control_word(write=5)),
        (0x20, "LDG.E.128 R12, desc[UR4][R2.64+0x400]", control_word(write=5)),
        (0x30, "@!P0 LDG.E.128 R16, desc[UR4][R2.64+0x600]", control_word(write=5)),
        (0x40, "DEPBAR.LE SB0, 0x0", control_word()),
        (0x50, "WARPGROUP.ARRIVE", control_word(wait=0b000100)),  # SB2: the first load only
        (0x60, "HGMMA.64x8x16.F32.BF16 R24, R4, gdesc[UR8], R24, gsb0", control_word()),
        (0x70, "WARPGROUP.ARRIVE", control_word(wait=0b100000)),  # SB5: the other three
        (0x80, "HGMMA.64x8x16.F32.BF16 R24, R8, gdesc[UR8], R24, gsb0", control_word(wait=0b100000)),
    ]
    functions = split_controlled(waits_sass(rows))
    assert [address for address, _, _ in functions["_Z4waitv"]] == [row[0] for row in rows]
    lines = scoreboard_waits(functions["_Z4waitv"])
    assert lines[0].split() == ["0000", "1", "x", "LDG", "->", "SB2"]
    assert lines[1].split() == [
        "0010-0030",
        "3",
        "x",
        "LDG",
        "->",
        "SB5",
    ]  # a run: same opcode, same scoreboard
    assert lines[2].split()[1:] == ["DEPBAR.LE", "SB0,", "0x0"]
    assert "waits on SB2: 1 x LDG  | WARPGROUP.ARRIVE" in lines[3]
    assert "waits on SB5: 3 x LDG  | WARPGROUP.ARRIVE" in lines[4]
    # SB5 was just waited on: nothing is outstanding there for the HGMMA's own wait.
    assert "waits on SB5: nothing issued since" in lines[5] and len(lines) == 6


def test_compile_waits_prints_the_matching_kernel(tmp_path):
    rows = [
        (0x00, "LDG.E.128 R4, desc[UR4][R2.64]", control_word(write=5)),
        (0x10, "HMMA.16816.F32.BF16 R8, R4, R6, R8", control_word(wait=0b100000)),
    ]
    args = stand_in_compile(tmp_path, "_Z4waitv", waits_sass(rows))
    result = CliRunner().invoke(main, [*args, "--waits", "wait"])
    assert result.exit_code == 0, result.output
    assert "waits on SB5: 1 x LDG  | HMMA.16816.F32.BF16 R8, R4, R6, R8" in result.output
    missing = CliRunner().invoke(main, [*args, "--waits", "no_such_kernel"])
    assert missing.exit_code == 1 and "no kernel's name contains 'no_such_kernel'" in missing.output
