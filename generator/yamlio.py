"""YAML loading that remembers where each value came from, so table errors can name file and line."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from generator.errors import BuildError, read_text


@dataclass(frozen=True)
class Located:
    """A YAML value and the 1-based line it starts on."""

    value: Any
    line: int
    file: str

    def fail(self, message: str) -> BuildError:
        return BuildError(self.file, self.line, message)


def _plain(node: yaml.Node) -> Any:
    return yaml.constructor.SafeConstructor().construct_object(node, deep=True)


# What a table may hold: mappings, lists, strings, numbers, booleans and null (no !!binary, dates, sets, objects).
PLAIN_TAGS = {f"tag:yaml.org,2002:{name}" for name in ("map", "seq", "str", "int", "float", "bool", "null")}


def _locate(node: yaml.Node, file: str) -> Located:
    line = node.start_mark.line + 1
    if node.tag not in PLAIN_TAGS:
        shown = node.tag.replace("tag:yaml.org,2002:", "!!")
        raise BuildError(
            file, line, f"a {shown} value is not allowed here (plain mappings, lists and scalars only)"
        )
    if isinstance(node, yaml.MappingNode):
        out: dict[Any, tuple[Located, Located]] = {}
        for key_node, value_node in node.value:
            key = _locate(key_node, file)
            if not isinstance(key.value, (str, int, float, bool)) and key.value is not None:
                raise key.fail("a mapping key must be a plain scalar")
            if key.value in out:
                raise key.fail(f"duplicate key {key.value!r}")
            out[key.value] = (key, _locate(value_node, file))
        return Located(out, line, file)
    if isinstance(node, yaml.SequenceNode):
        return Located([_locate(item, file) for item in node.value], line, file)
    return Located(_plain(node), line, file)


def load_located(path: Path, shown_as: str) -> Located:
    """Parse a YAML file into Located values (mappings become {key: (Located key, Located value)}).

    Malformed YAML and a missing file become a BuildError naming `shown_as` and the line."""
    try:
        text = read_text(Path(path), shown_as)
    except FileNotFoundError:
        raise BuildError(shown_as, None, "file not found") from None
    try:
        node = yaml.compose(text, Loader=yaml.SafeLoader)
        if node is None:
            raise BuildError(shown_as, 1, "empty YAML document")
        return _locate(node, shown_as)
    except yaml.MarkedYAMLError as exc:  # malformed, or a value the safe loader does not build (a !!tag)
        raise BuildError(shown_as, *_yaml_error(exc)) from None
    except yaml.reader.ReaderError as exc:  # a character YAML does not allow (a NUL, a control character)
        line = text[: exc.position].count("\n") + 1
        code = exc.character if isinstance(exc.character, int) else ord(str(exc.character)[:1] or "\0")
        raise BuildError(shown_as, line, f"malformed YAML: character U+{code:04X} is not allowed") from None
    except yaml.YAMLError as exc:
        raise BuildError(shown_as, None, f"malformed YAML: {str(exc).splitlines()[0]}") from None


def _yaml_error(exc: yaml.MarkedYAMLError) -> tuple[int | None, str]:
    """(line, message) of a YAML error, on the line a reader has to fix: an unclosed or broken flow collection
    ([...] or {...}) is reported where it starts, which the parser names as its context, not where it noticed (the
    next line); anything else where the parser stopped."""
    if exc.context and "flow" in exc.context and exc.context_mark is not None:
        problem_line = exc.problem_mark.line + 1 if exc.problem_mark is not None else None
        where = f" on line {problem_line}" if problem_line is not None else ""
        return exc.context_mark.line + 1, (
            f"malformed YAML: the {exc.context[len('while parsing a '):]} that starts here is not closed properly"
            f" ({exc.problem}{where})"
        )
    mark = exc.problem_mark or exc.context_mark
    return (mark.line + 1 if mark is not None else None), f"malformed YAML: {exc.problem or exc.context}"


def plain(value: Located) -> Any:
    """Strip locations: back to ordinary Python values."""
    v = value.value
    if isinstance(v, dict):
        return {k: plain(val) for k, (_, val) in v.items()}
    if isinstance(v, list):
        return [plain(item) for item in v]
    return v


def expect_mapping(value: Located, what: str) -> dict:
    if not isinstance(value.value, dict):
        raise value.fail(f"{what} must be a mapping")
    return value.value


def require_keys(mapping: Located, what: str, required: set[str], optional: set[str] = frozenset()) -> dict:
    items = expect_mapping(mapping, what)
    for key, (key_loc, _) in items.items():
        if key not in required | optional:
            raise key_loc.fail(
                f"unknown key {key!r} in {what} (expected one of {sorted(required | optional)})"
            )
    missing = required - items.keys()
    if missing:
        raise mapping.fail(f"{what} lacks {sorted(missing)}")
    return {k: v for k, (_, v) in items.items()}
