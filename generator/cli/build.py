"""Build and inspect: `build`, `dispatch`, `compile` (the local nvcc, no GPU)."""

from __future__ import annotations

import shutil
import sys
import time
from pathlib import Path

import click

from generator import REPO_ROOT
from generator.cli.app import DISTRIBUTIONS_OPTION, FILE_ARGUMENT, fail, load_file, main, require_engines
from generator.errors import BuildError


def _checked_root(ctx, param, root: Path) -> Path:
    if not root.is_dir():
        fail(f"--root {root}: no such folder" if not root.exists() else f"--root {root}: not a folder")
    if not any((root / folder).is_dir() for folder in ("templates", "kernels_src", "tables")):
        fail(
            f"--root {root}: holds none of templates/, kernels_src/, tables/ (not a checkout of this project)"
        )
    return root


ROOT_OPTION = click.option(
    "--root",
    type=click.Path(path_type=Path),
    default=REPO_ROOT,
    show_default=True,
    callback=_checked_root,
    help="The inputs to read: a folder holding templates/, kernels_src/ and tables/ (a scratch copy of this"
    " checkout's, say). Its kernels_src/*.py must be the ones this command imports (those of the checkout it runs"
    " in): for another checkout, run the command inside it.",
)


@main.command()
@click.option(
    "--check",
    is_flag=True,
    help="Write nothing; exit 1 with one line (the first line that differs) if the file, or a file the build derives"
    " (kernels_src/generated/constants.h, the tables' field lines, README.md's figures), differs from a fresh build.",
)
@click.option("--diff", is_flag=True, help="With --check: also print a summary of the differences.")
@ROOT_OPTION
@click.option(
    "--out",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    help="Output file [default: ROOT/dist/submission.py].",
)
@click.option(
    "--no-compilers",
    is_flag=True,
    help="Skip the syntax check (about 1.5 s) of CUDA_SRC by nvcc and of BINDING_SRC by the host compiler (c++,"
    " with Python's headers), which runs with whichever of the two is on PATH; the summary line says what it"
    " checked, and what it skipped and why.",
)
def build(check: bool, diff: bool, root: Path, out: Path | None, no_compilers: bool) -> None:
    """Render the template with the kernel sources and tables into one submission file, and keep the files it
    derives current (the constants header, the tables' field lines, README.md's figures); where nvcc or c++ is on
    PATH, check first that CUDA_SRC with its launch table (every kernel instantiated) and BINDING_SRC compile.
    """
    from generator.build import check_writable, derived_files, diff_summary, stale_line, write_all

    out = out or root / "dist" / "submission.py"
    try:
        _same_black(check, out)
        # 1. the files build keeps current, as the sources make them; 2. the file, once; 3. (below) both written
        derived = derived_files(root, main.commands)
        check_writable([item.path for item in derived] + [out], root)
        text = _checked_render(root, no_compilers)
    except BuildError as exc:
        fail(str(exc), exc.exit_code)
    checked = syntax_checked(_compilers(), no_compilers)
    if check:
        old = out.read_text(errors="replace") if out.is_file() else ""
        stale = ([stale_line(old, text, str(out))] if old != text else []) + [item.stale for item in derived]
        if stale:
            click.echo("error: " + stale[0] + _and_more(stale), err=True)
            if diff and old != text:
                click.echo(diff_summary(old, text, str(out)), err=True)
            sys.exit(1)
        click.echo(f"{out} and the files it derives are up to date; {checked}")
        return
    try:  # every file written atomically, dist/submission.py last
        write_all([(item.path, item.fresh) for item in derived] + [(out, text)], root)
    except BuildError as exc:
        fail(str(exc))
    rewrote = [item.stale.split(":", 1)[0] for item in derived]
    also = f" and {', '.join(rewrote)}" if rewrote else ""
    click.echo(f"wrote {out} ({len(text.splitlines())} lines){also}; {checked}")


def _same_black(check: bool, out: Path) -> None:
    """build --check with another black than the pinned one: no rebuild here could pass CI, so say so."""
    from generator.render import BLACK_VERSION, build_tool, formatted_by

    black = build_tool("black")
    if check and black.__version__ != BLACK_VERSION:
        old = out.read_text(errors="replace") if out.is_file() else ""
        raise BuildError(
            str(out),
            None,
            f"formatted by black {formatted_by(old) or '(not named in the file)'}, this machine has black"
            f" {black.__version__}: it formats the file differently, so no rebuild here would pass CI; pip install"
            f" 'black=={BLACK_VERSION}' (pyproject.toml's pin) and check again",
        )


def _compilers() -> tuple:
    from generator.compile import python_headers

    return shutil.which("nvcc"), shutil.which("c++") if python_headers() else None


def _checked_render(root: Path, no_compilers: bool) -> str:
    """The file the sources make, its C++ through the compilers on PATH (unless no_compilers): CUDA_SRC with
    LAUNCH_TABLE, and BINDING_SRC, as the file holds them."""
    from generator.compile import syntax_check
    from generator.render import cpp_sources, render_submission

    text = render_submission(root)
    compilers = _compilers()
    if not no_compilers and any(compilers):
        cpp = cpp_sources(text)
        error = syntax_check(cpp["CUDA_SRC"] + cpp["LAUNCH_TABLE"], cpp["BINDING_SRC"], *compilers)
        if error:
            raise BuildError(
                None, None, f"{error} (the check of CUDA_SRC and BINDING_SRC; --no-compilers skips it)"
            )
    return text


def syntax_checked(compilers: tuple, no_compilers: bool) -> str:
    """What the syntax check covered, for build's summary line: a part skipped says so and why, so that a build
    on a machine without nvcc does not read as a checked one."""
    if no_compilers:
        return "syntax check skipped (--no-compilers)"
    nvcc, cxx = compilers
    cuda = "CUDA_SRC by nvcc" if nvcc else "no nvcc on PATH"
    binding = (
        "BINDING_SRC by c++"
        if cxx
        else "no Python.h (python3-dev)" if shutil.which("c++") else "no c++ on PATH"
    )
    if nvcc and cxx:
        return f"syntax checked: {cuda}, {binding}"
    if not nvcc and not cxx:
        return f"syntax check skipped: {cuda}, {binding}"
    done, skipped, why = (cuda, "BINDING_SRC", binding) if nvcc else (binding, "CUDA_SRC", cuda)
    return f"syntax checked: {done}; skipped for {skipped}: {why}"


@main.command()
@FILE_ARGUMENT
def dispatch(file: Path) -> None:
    """Which engine and configuration serve every (layer, m) the judge sends, from FILE's own tables and router:
    the same lines as the file's docstring."""
    from generator.render import shape_lines

    module = load_file(file)
    require_engines(module, file)
    layers, tables = module.problem()
    click.echo(f"{'layer':<9} {'m':>4} {'n':>5}  {'engine':<15} config")
    for line in shape_lines(layers, tables, module.WARMUP_M, module.route):
        click.echo(line)


@main.command()
@ROOT_OPTION
@click.option(
    "--check",
    is_flag=True,
    help="Exit 1 naming the first stale line (a table's header, kernels_src/generated/constants.h, README.md);"
    " write nothing.",
)
def headers(root: Path, check: bool) -> None:
    """Render each table's field lines (tables/<engine>.yaml's header) from its engine's Field declarations, the
    constants the CUDA sources include (kernels_src/generated/constants.h, as `build` does), and README.md's figures
    the source decides (generator/readme.py): the engine table's serves and kernel cells, the launch table's size,
    the judge's m lists, the tag line."""
    from generator.build import derived_files, write_all

    try:
        stale = derived_files(Path(root), main.commands)
        if check and stale:
            fail(stale[0].stale + _and_more(stale), 1)
        if not check:
            write_all([(item.path, item.fresh) for item in stale], Path(root))
    except BuildError as exc:
        fail(str(exc), exc.exit_code)
    names = [item.stale.split(":", 1)[0] for item in stale]
    click.echo(f"{'stale' if check else 'rewrote'}: {', '.join(names) or 'none'}")


def _and_more(stale: list) -> str:
    more = len(stale) - 1
    return f" (and {more} more file{'s' if more > 1 else ''})" if more else ""


@main.command("compile")
@ROOT_OPTION
@click.option("--nvcc", default="nvcc", show_default=True, help="The CUDA compiler to run.")
@click.option(
    "--launch",
    "launches",
    multiple=True,
    metavar="LAUNCH",
    help="Also compile this launch's kernel (layer:m:engine:values, as `ab` takes it; repeatable): a config no"
    " table names yet.",
)
@click.option(
    "--loops",
    "loops_of",
    metavar="TEXT",
    help="Also disassemble (cuobjdump) and print the steady-state MMA loop of each kernel whose name contains "
    "TEXT (e.g. tma_kernel<4, 14): its instructions, MMAs and instructions per MMA, a GPU-free measure of "
    "a consumer loop's issue cost.",
)
@click.option(
    "--waits",
    "waits_of",
    metavar="TEXT",
    help="Also print, for each kernel whose name contains TEXT, its loads grouped by the scoreboard they release "
    "and what each tensor-core, barrier or fence instruction waits for (decoded from ptxas's scheduling bits): "
    "e.g. whether the first wgmma waits for one load or for all of them.",
)
@click.option(
    "--cuobjdump",
    "cuobjdump_path",
    help="The cuobjdump for --loops / --waits [default: PATH, nvcc's, triton's].",
)
def compile_cmd(root: Path, nvcc: str, launches, loops_of, waits_of, cuobjdump_path) -> None:
    """Compile the CUDA kernels the tables reach (plus --launch ones) with the local nvcc for sm_90a, exactly as
    prepare() builds them (the file's CUDA_SRC and LAUNCH_TABLE), after every engine's source through nvcc's front
    end (those no table routes too); report registers, spills and smem; fail on any spill or any kernel whose
    wgmma instructions ptxas had to serialise."""
    from generator.compile import compile_cuda, first_compile_error, sources_check
    from generator.sass import find_cuobjdump

    if shutil.which(nvcc) is None and not Path(nvcc).is_file():
        fail(f"{nvcc}: no such compiler (pass --nvcc PATH)")
    every, cuda, kernels = _cuda_to_compile(root, launches)
    cuobjdump = None
    if loops_of is not None or waits_of is not None:
        cuobjdump = cuobjdump_path or find_cuobjdump(nvcc)
        if cuobjdump is None:
            fail("--loops / --waits need cuobjdump: none on PATH, beside nvcc or in triton; pass --cuobjdump")
    if sys.stderr.isatty():  # progress on a terminal only: a failure stays one line in a log
        click.echo(f"compiling the launch table's {len(kernels)} cases with {nvcc} for sm_90a ...", err=True)
    start = time.perf_counter()
    try:
        error = sources_check(every, nvcc)
        if error:
            fail(f"{error} (every engine's source through nvcc, those no table routes too)")
        code, messages, found, sass = compile_cuda(cuda, nvcc=nvcc, cuobjdump=cuobjdump)
    except OSError as exc:
        fail(f"{nvcc}: {exc.strerror or exc}")
    seconds = time.perf_counter() - start
    if code != 0:
        fail(first_compile_error(messages, code))
    _print_resources(found, kernels, nvcc, seconds)
    if loops_of is not None:
        _print_loops(sass, loops_of)
    if waits_of is not None:
        _print_waits(sass, waits_of)
    _fail_on_spills_or_serialised(found, messages)


def _cuda_to_compile(root: Path, launches) -> tuple[str, str, list]:
    """(every engine's CUDA_SRC without a launch table; CUDA_SRC and LAUNCH_TABLE as the file holds them, for the
    tables' kernels and the --launch ones; those kernels), or one line: bad input, or a stale constants header.
    """
    from generator.build import stale_line
    from generator.engines import BY_NAME, ENGINES
    from generator.errors import display_path
    from generator.problem import load_problem
    from generator.render import cuda_for
    from generator.sources import CONSTANTS_HEADER, check_launchers, constants_header, load_sources
    from generator.tables import load_tables
    from kernels_src.registry import routes

    try:
        sources = load_sources(root)
        problem = load_problem(root)
        tables = load_tables(problem, root)
        check_launchers(sources, ENGINES, root)
    except BuildError as exc:
        fail(str(exc), exc.exit_code)
    header = root / "kernels_src" / CONSTANTS_HEADER
    held, fresh = header.read_text(errors="replace") if header.is_file() else "", constants_header()
    if held != fresh:  # nvcc reads the constants from the engines; an editor, and clangd, read this header
        fail(
            f"{stale_line(held, fresh, display_path(header, root))} (it holds the engines' constants for the editor)"
        )
    kernels = _kernels_to_compile(problem, tables, launches)
    routed = {engine for *_, engine, _ in routes(problem.layers.values(), tables)}
    shipped = sources.shipped(routed | {BY_NAME[kernel.engine] for kernel in kernels})
    head, rest, table = cuda_for(shipped, kernels, root)
    return sources.cuda, "\n" + head + rest + table, kernels  # CUDA_SRC opens with a newline


def _kernels_to_compile(problem, tables, launches) -> list:
    """The Variants prepare() would compile from the tables, then the --launch ones."""
    from generator.cli.app import parse_launches
    from generator.engines import BY_NAME
    from kernels_src.registry import variants

    kernels = variants(problem.layers.values(), tables)
    for launch in parse_launches(launches, problem):
        engine = BY_NAME[launch.engine]
        variant = engine.variant(engine.Config(*launch.config), problem.layers[launch.layer], launch.m)
        if variant is not None and variant not in kernels:
            kernels.append(variant)
    return kernels


def _print_resources(found, kernels, nvcc: str, seconds: float) -> None:
    """ptxas's figures per kernel, and the summary line."""
    click.echo(f"{'regs':>4} {'smem':>5} {'stack':>5} {'spill st/ld':>11}  kernel")
    for k in found:
        click.echo(
            f"{k.registers:>4} {k.smem_static:>5} {k.stack_frame:>5} {f'{k.spill_stores}/{k.spill_loads}':>11}  {k.name}"
        )
    spilled = [k for k in found if k.spills]
    click.echo(
        f"{len(found)} kernels (the distinct instantiations of the launch table's {len(kernels)} cases, compiled"
        f" with {nvcc} for sm_90a in {seconds:.0f} s), max"
        f" {max((k.registers for k in found), default=0)} registers, {len(spilled)} spilling"
    )
    if not found:
        fail("ptxas reported no kernels", 1)


def _fail_on_spills_or_serialised(found, messages: str) -> None:
    from generator.compile import demangle, serialized_wgmma

    spilled = [k for k in found if k.spills]
    if spilled:
        fail(f"{len(spilled)} kernel(s) spill registers: {spilled[0].name}", 1)
    serialized = serialized_wgmma(messages)
    if serialized:
        code, reason, mangled = serialized[0]
        fail(
            f"{len(serialized)} kernel(s) have their wgmmas serialised by ptxas ({code}: {reason}):"
            f" {demangle([mangled])[0]}",
            1,
        )


def _kernels_named(functions: dict, name_part: str) -> tuple[dict[str, str], list[str]]:
    """(mangled -> demangled name, the mangled names whose demangled name contains name_part, sorted by it); ends
    the command in one line when cuobjdump printed no function or none matches."""
    from generator.compile import demangle

    if not functions:
        fail("cuobjdump printed no functions", 1)
    names = dict(zip(functions, demangle(list(functions))))
    matching = sorted((mangled for mangled in functions if name_part in names[mangled]), key=names.get)
    if not matching:
        fail(f"no kernel's name contains {name_part!r}", 1)
    return names, matching


def _print_loops(sass: str, name_part: str) -> None:
    """compile --loops: each matching kernel's steady-state MMA loop (generator/sass.py)."""
    from generator.sass import split_functions, steady_loop

    functions = split_functions(sass)
    names, matching = _kernels_named(functions, name_part)
    click.echo(f"{'loop instrs':>11} {'MMAs':>5} {'per MMA':>7} {'R2UR':>5}  kernel")
    for mangled in matching:
        loop = steady_loop(functions[mangled])
        if loop is None:
            click.echo(f"{'-':>11} {'-':>5} {'-':>7} {'-':>5}  {names[mangled]} (no MMA loop)")
        else:
            click.echo(
                f"{loop.instructions:>11} {loop.mma:>5} {loop.per_mma:>7.1f} {loop.r2ur:>5}  {names[mangled]}"
            )


def _print_waits(sass: str, name_part: str) -> None:
    """compile --waits: each matching kernel's loads and what its tensor-core instructions wait for."""
    from generator.sass import scoreboard_waits, split_controlled

    functions = split_controlled(sass)
    names, matching = _kernels_named(functions, name_part)
    for mangled in matching:
        click.echo(
            f"\n{names[mangled]}  (address, then loads -> the scoreboard they release, or what it waits for)"
        )
        for line in scoreboard_waits(functions[mangled]):
            click.echo(line)


@main.command()
@DISTRIBUTIONS_OPTION
@click.option("--seed", default=0, show_default=True, help="Seed of the weights.")
@click.option(
    "--layers", "layers", multiple=True, help="Only these layers (repeatable; default: every bf16 layer)."
)
def compression(distributions, seed: int, layers) -> None:
    """What the 12-bit lossless format makes of each bf16 layer's weights (on this machine, no GPU): bits per
    weight (payload, headers, exception entries and offsets), the exception rate and the largest block's count,
    and whether prepare() would refuse the layer."""
    from tqdm import tqdm

    from generator.cli.app import load_problem_or_fail, shape_filter
    from generator.compression import format_report, report
    from generator.judge.weights import make_weights

    problem = load_problem_or_fail()
    names = [name for name, _ in shape_filter(problem, layers, [0], [0]) if not problem.layers[name].dual]
    for name in dict.fromkeys(layers):
        layer = problem.layers[name]
        if layer.dual:  # asked for by name: say why there is nothing to show
            bf16 = ", ".join(other for other, spec in problem.layers.items() if not spec.dual)
            fail(
                f"--layers {name}: {problem.file}:{problem.lines[name]} gives it {layer.dtype} weights, which the"
                f" 12-bit format never takes (their bf16 hi + lo split is already 32 bits); it serves the bf16"
                f" layers: {bf16}"
            )
    for distribution in distributions or ("normal", "heavy"):
        weights = make_weights(problem, distribution, seed, "cpu")
        rows = [
            report(weights[name], name) for name in tqdm(names, desc=distribution, unit="layer", disable=None)
        ]
        click.echo(f"{distribution} weights (seed {seed}):")
        click.echo(format_report(rows))
    click.echo("\n" + compression_legend())


def compression_legend() -> str:
    """What compression's columns are, with the format's figures from kernels_src/compress.py (which describes the
    format; tests/test_bad_input.py checks that every column format_report() prints is here)."""
    from kernels_src.compress import (
        ENTRY_BYTES,
        MAX_BITS_PER_WEIGHT,
        OFFSET_BYTES,
        PATCHES_PER_GROUP,
        TABLE_SIZE,
    )

    return f"""\
bits/w    bits per weight in all (bf16: 16): payload + headers + exc+off; at {MAX_BITS_PER_WEIGHT:g} or more compress()
          refuses the layer ("refused"), which then keeps its plain bf16 engines
payload   the 12-bit stream: each weight's lo byte and a 4-bit code into the matrix's table of {TABLE_SIZE} hi bytes
headers   each bucket's 16-byte header (a bucket: one 16-row block x one 64-wide K group), which patches its first
          {PATCHES_PER_GROUP} exceptions, and the {TABLE_SIZE}-byte table
exc+off   overflow entries ({ENTRY_BYTES} bytes each: the exceptions past a bucket's {PATCHES_PER_GROUP}) and one\
 {OFFSET_BYTES}-byte offset per bucket
exc rate  exceptions: weights whose hi byte is not in the table, of all weights
overflow  overflow entries in the matrix
max/blk   exceptions in the 16-row block that has the most (all its K groups)
ovf/blk   overflow entries in the 16-row block that has the most"""
