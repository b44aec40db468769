"""generator/sass.py and `compile --loops`: reading a consumer loop's cost out of cuobjdump's SASS."""

from click.testing import CliRunner

from generator.cli import main
from generator.sass import Loop, split_functions, steady_loop

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


def test_compile_loops_prints_the_matching_kernels_loop(tmp_path):
    """`compile --loops` with a stand-in nvcc (its ptxas report) and cuobjdump (the SASS above)."""
    report = tmp_path / "report.txt"
    report.write_text(
        "ptxas info    : Compiling entry function '_Z6streamv' for 'sm_90a'\n"
        "ptxas info    : Function properties for _Z6streamv\n"
        "    0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads\n"
        "ptxas info    : Used 90 registers, used 1 barriers, 16 bytes smem\n"
    )
    nvcc = tmp_path / "nvcc"
    nvcc.write_text(f"#!/bin/sh\ncat {report} >&2\n")
    (tmp_path / "sass.txt").write_text(SASS)
    cuobjdump = tmp_path / "cuobjdump"
    cuobjdump.write_text(f"#!/bin/sh\ncat {tmp_path / 'sass.txt'}\n")
    for tool in (nvcc, cuobjdump):
        tool.chmod(0o755)
    args = ["compile", "--nvcc", str(nvcc), "--cuobjdump", str(cuobjdump)]
    result = CliRunner().invoke(main, [*args, "--loops", "stream"])
    assert result.exit_code == 0, result.output
    table = result.output.split("loop instrs")[-1].splitlines()  # the --loops table follows compile's own
    row = [line for line in table if line.rstrip().endswith("stream()")]
    assert row and row[0].split()[:4] == ["6", "2", "3.0", "1"], result.output
    missing = CliRunner().invoke(main, [*args, "--loops", "no_such_kernel"])
    assert missing.exit_code == 1 and "no kernel's name contains 'no_such_kernel'" in missing.output
