"""The command group and what its commands share: one-line failures (exit 2), loading a built file, the problem."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import click

from generator import REPO_ROOT, __version__
from generator.errors import BuildError

DIST = REPO_ROOT / "dist" / "submission.py"


def existing(ctx, param, path: Path | None) -> Path | None:
    """A file a command reads must be there: checked with the arguments, before any GPU is asked for."""
    if path is not None and not os.path.lexists(path):
        fail(f"{path}: no such file")
    return path


FILE_ARGUMENT = click.argument(
    "file", type=click.Path(dir_okay=False, path_type=Path), default=DIST, callback=existing
)
# What the tuning and probing commands load unless given a file: the checkout's file with every engine
EVERY_ENGINE = REPO_ROOT / "build" / "every_engine.py"
EVERY_ENGINE_FILE_ARGUMENT = click.argument(
    "file", type=click.Path(dir_okay=False, path_type=Path), default=None, required=False, callback=existing
)
EVERY_ENGINE_HELP = "[default: the checkout's build with every engine, written to build/every_engine.py]"
DISTRIBUTIONS_OPTION = click.option(
    "--dist",
    "distributions",
    multiple=True,
    type=click.Choice(["normal", "heavy"]),  # generator/judge/weights.py
    help="Weight distribution(s) of the local judge [default: both].",
)


def _output_folder(ctx, param, path: Path | None) -> Path | None:
    """An output file's folder must exist: checked with the arguments, before any GPU is asked for."""
    if path is not None and not path.parent.is_dir():
        fail(f"{param.opts[0]} {path}: no folder {path.parent} to write it in")
    return path


def output_option(*names, **kwargs):
    """A file a command writes: its folder must exist (checked with the arguments)."""
    return click.option(
        *names, type=click.Path(dir_okay=False, path_type=Path), callback=_output_folder, **kwargs
    )


def fail(message: str, code: int = 2) -> None:
    """One line on stderr, then exit (2: bad input or a wrong call; 1: the thing checked is wrong)."""
    click.echo(f"error: {message}", err=True)
    sys.exit(code)


HELP_OPTIONS = ("-h", "--help")
# click >= 8.2 raises this (a UsageError whose message is the whole help) for a group called without a command
NO_ARGS_IS_HELP = getattr(click.exceptions, "NoArgsIsHelpError", ())


class Commands(click.Group):
    """The command group; it notes whether the subcommand was asked for its help, which needs no kernels_src."""

    def main(self, args=None, prog_name=None, complete_var=None, standalone_mode=True, **extra):
        """click's own, but a wrong call (unknown option, bad value, missing argument) is one line, exit 2."""
        if not standalone_mode:
            return super().main(args, prog_name, complete_var, standalone_mode, **extra)
        try:
            code = super().main(args, prog_name, complete_var, False, **extra)
        except NO_ARGS_IS_HELP as exc:  # no command at all: the group's help, as --help gives it
            click.echo(exc.ctx.get_help())
            sys.exit(0)
        except click.UsageError as exc:
            command = exc.ctx.command_path if exc.ctx is not None else "muse-proj"
            fail(f"{exc.format_message()} (see `{command} --help`)")
        except click.ClickException as exc:
            fail(exc.format_message(), exc.exit_code)
        except click.Abort:
            fail("aborted", 1)
        except Exception as exc:  # raised in code a user edits (an engine's rule, the candidates): its line
            where = edited_line(exc)
            if where is None:
                raise
            fail(f"{where}: {_what(exc)}")
        sys.exit(code if isinstance(code, int) else 0)

    def resolve_command(self, ctx, args):
        ctx.meta["help_asked"] = any(arg in HELP_OPTIONS for arg in args[1:])
        return super().resolve_command(ctx, args)


@click.group(cls=Commands, context_settings={"help_option_names": list(HELP_OPTIONS)})
@click.version_option(__version__, prog_name="muse-proj")
@click.pass_context
def main(ctx) -> None:
    """Build dist/submission.py from kernels_src/ and tables/, and check and tune it like the judge does."""
    if not ctx.meta.get("help_asked"):  # a broken module must not hide every command's help
        import_kernels()


def import_kernels() -> None:
    """Import kernels_src's engines (every command reads them), or say in one line which file is broken."""
    try:
        import generator.engines  # noqa: F401
    except Exception as exc:  # a syntax error, or an error while a kernels_src module runs its top level
        fail(f"{edited_line(exc) or 'kernels_src'}: {_what(exc)}")


# The Python a user edits beside the tables: the engines (their rules, layouts, launches) and the sweep's
# candidates. An exception raised in it is one line naming its file and line, not a traceback.
EDITED = ("kernels_src/", "generator/candidates.py")


def edited_line(exc: BaseException) -> str | None:
    """`file:line` where exc arose in an EDITED file (the innermost such frame; a SyntaxError's own line), else None."""
    import traceback

    from generator.errors import display_path

    places = [(frame.filename, frame.lineno) for frame in traceback.extract_tb(exc.__traceback__)]
    if isinstance(exc, SyntaxError) and exc.filename:
        places.append((exc.filename, exc.lineno))
    shown = [f"{display_path(Path(name), REPO_ROOT)}:{line}" for name, line in places]
    edited = [place for place in shown if place.startswith(EDITED)]
    return edited[-1] if edited else None


def _what(exc: BaseException) -> str:
    return f"invalid Python: {exc.msg}" if isinstance(exc, SyntaxError) else f"{type(exc).__name__}: {exc}"


def load_file(file: Path):
    """The submission module at `file`, loaded as the judge does, or a one-line failure."""
    from generator.judge.loader import SubmissionLoadError, load_submission, stale_build_lock

    try:
        module = load_submission(file)
    except SubmissionLoadError as exc:
        fail(str(exc))
    lock = stale_build_lock()
    if lock is not None:
        click.echo(
            f"warning: {lock} exists: torch waits for it before it builds or loads the CUDA extension; if no build"
            " is running, a killed one left it behind: delete it",
            err=True,
        )
    return module


def require_engines(module, file: Path) -> None:
    """A file this generator built has its engines and tables; anything else is refused in one line."""
    missing = [name for name in ("problem", "TABLES", "route") if not hasattr(module, name)]
    if missing:
        fail(f"{file}: has no {missing[0]} (not a file `python -m generator build` made?)")


def every_engine_file(file: Path | None) -> Path:
    """`file`, or (None) the checkout's file with every engine and what only the tools read (render_every_engine),
    written to build/every_engine.py: dist/submission.py holds only the engines its tables route."""
    if file is not None:
        return file
    from generator.build import write_atomic
    from generator.render import render_every_engine

    try:
        text = render_every_engine()
    except BuildError as exc:
        fail(str(exc))
    if not EVERY_ENGINE.is_file() or EVERY_ENGINE.read_text() != text:
        EVERY_ENGINE.parent.mkdir(exist_ok=True)
        write_atomic(EVERY_ENGINE, text)
    return EVERY_ENGINE


def require_tools(module, file: Path) -> None:
    """A file with what the tuning and probing commands read of it (what build_only marks: the engines' rules),
    or one line: a file built for the judge holds only what its run needs."""
    if not hasattr(module, "build_only"):
        fail(
            f"{file}: holds only what the judge's run needs (no engine rules, only the engines its tables route):"
            f" leave the file out to use the checkout's file with every engine ({display(EVERY_ENGINE)})"
        )


def display(path: Path) -> str:
    from generator.errors import display_path

    return display_path(path, REPO_ROOT)


def load_problem_or_fail(shrink: int = 1):
    """tables/problem.yaml; shrink > 1 divides every n and k (a quick CPU smoke run of a reference file)."""
    from generator.problem import load_problem

    try:
        problem = load_problem()
    except BuildError as exc:
        fail(str(exc))
    return problem if shrink == 1 else problem.shrunk(shrink)


def require_gpu(command: str) -> None:
    import torch

    if not torch.cuda.is_available():
        fail(f"{command} needs a CUDA GPU (run it on the H200: see README, On the H200)")


def parse_launches(texts, problem):
    """Each layer:m:engine:values checked like a table entry; the first bad one ends the command in one line."""
    from generator.judge.launches import parse_launch

    try:
        return [parse_launch(text, problem) for text in texts]
    except ValueError as exc:
        fail(str(exc))


def shape_filter(problem, layers, ms, default_ms):
    chosen = list(layers) or list(problem.layers)
    unknown = [name for name in chosen if name not in problem.layers]
    if unknown:
        fail(f"unknown layer(s) {unknown}; tables/problem.yaml has {list(problem.layers)}")
    return [(layer, m) for layer in chosen for m in (list(ms) or list(default_ms))]
