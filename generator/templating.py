"""The build's Jinja templates (templates/): one environment, and a template's error as one line naming its own
line."""

from __future__ import annotations

import traceback
from pathlib import Path

import jinja2

from generator.errors import BuildError, display_path, read_text


def environment(root: Path) -> jinja2.Environment:
    return jinja2.Environment(
        loader=jinja2.FileSystemLoader(str(Path(root) / "templates")),
        undefined=jinja2.StrictUndefined,
        keep_trailing_newline=True,
        trim_blocks=True,
        lstrip_blocks=True,
        autoescape=False,
    )


def render_template(root: Path, name: str, context: dict) -> str:
    """templates/<name> under root rendered with context; a missing template or an error in it is a BuildError."""
    path = Path(root) / "templates" / name
    shown = display_path(path, Path(root))
    try:  # its bytes first: a folder, a link loop, a byte that is not UTF-8 or a NUL is its own line
        read_text(path, shown)
    except FileNotFoundError:
        raise BuildError(shown, None, "template not found") from None
    try:
        return environment(root).get_template(name).render(**context)
    except jinja2.TemplateNotFound:
        raise BuildError(shown, None, "template not found") from None
    except jinja2.TemplateSyntaxError as exc:
        raise BuildError(shown, exc.lineno, f"template syntax: {exc.message}") from None
    except jinja2.TemplateError as exc:  # a runtime error: its line sits in the traceback
        lines = [
            frame.lineno for frame in traceback.extract_tb(exc.__traceback__) if frame.filename.endswith(name)
        ]
        raise BuildError(shown, lines[-1] if lines else None, f"template: {exc}") from None
