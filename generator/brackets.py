"""Each C++ source in kernels_src/ on its own: it has code, and it closes every bracket it opens. The sources are
concatenated into one translation unit, so nvcc blames a missing `}` or an emptied file on the first use of a name
in a later file; checked per file, the error names the file that broke."""

from __future__ import annotations

import re

# Comments, string and character literals (their brackets do not count), brackets, `;`, line ends, other code.
_TOKENS = re.compile(
    r"//[^\n]*|/\*.*?(?:\*/|\Z)|\"(?:\\.|[^\"\\\n])*\"|'(?:\\.|[^'\\\n])*'|[{}()\[\];\n]|[^\s{}()\[\];\"'/]+|/",
    re.S,
)
_CLOSES = {"}": "{", ")": "(", "]": "["}
_UNINDENTED = ("namespace", "extern")  # blocks whose contents clang-format does not indent


def empty_source(text: str) -> bool:
    """No code at all: only comments, blank lines and `#pragma once`."""
    code = re.sub(r"//[^\n]*|/\*.*?\*/", " ", text, flags=re.S)
    return not any(line.strip() and line.strip() != "#pragma once" for line in code.splitlines())


def bracket_problem(text: str) -> tuple[int, str] | None:
    """(line, what) for a source whose brackets do not balance on their own, else None. Which `{` was left open
    is read from the layout clang-format gives every source (.clang-format): the first `{` whose block runs into
    a statement at its own indentation, into a `}` indented for an outer block, or into the namespace's end;
    failing that, the innermost one still open at the end."""
    found = _walk(text)
    return found[0] if found[1] else None


def _walk(text: str) -> tuple[tuple[int, str] | None, bool]:
    """(the first problem seen, with the layout's help; whether the counts themselves are wrong)."""
    starts = [0] + [i + 1 for i, c in enumerate(text) if c == "\n"]
    line, stack = 1, []  # stack: (bracket, line, its statement's indentation, statement number, first word)
    statement = (0, 0, "", 0)  # indentation, number, first word, line
    pending = True  # the next token starts a statement
    first_seen: tuple[int, str] | None = None
    for token in _TOKENS.finditer(text):
        t = token.group()
        if t == "\n":
            if text[starts[line - 1] :].lstrip(" ").startswith("#"):
                pending = True  # a directive ends with its line
            line += 1
            continue
        if t.startswith(("//", "/*")):
            line += t.count("\n")
            continue
        if pending:
            statement, pending = (_indent(text, starts, line), statement[1] + 1, t, line), False
        seen = _opens_at_an_open_blocks_indentation(stack, statement, line) if t == "{" else None
        if t in "{([":
            stack.append((t, line, statement[0], statement[1], statement[2]))
        elif t in _CLOSES:
            if not stack:
                return (line, f"`{t}` closes nothing this file opened"), True
            opener, at, at_indent, _, at_word = stack.pop()
            if opener != _CLOSES[t]:
                return (at, f"the `{opener}` opened here is closed by `{t}` on line {line}"), True
            if t == "}":
                seen = _closes_an_outer_block(text, starts, token, line, at, at_indent, at_word)
        if t in ";{}":
            pending = True
        first_seen = first_seen or seen
    if stack:
        opener, at = stack[-1][:2]
        return first_seen or (at, f"the `{opener}` opened here is never closed in this file"), True
    return first_seen, False


def _indent(text: str, starts: list, line: int) -> int:
    start = starts[line - 1]
    end = text.find("\n", start)
    row = text[start : end if end >= 0 else len(text)]
    return len(row) - len(row.lstrip(" "))


def _opens_at_an_open_blocks_indentation(stack: list, statement: tuple, line: int) -> tuple[int, str] | None:
    """A `{` whose statement starts at the indentation of the innermost open block's own statement (not a
    namespace's, whose contents are not indented): that block's `{` was left open."""
    outer = next((entry for entry in reversed(stack) if entry[0] == "{"), None)
    if (
        outer is not None
        and outer[4] not in _UNINDENTED
        and outer[3] != statement[1]
        and statement[3] > outer[1]
        and outer[2] == statement[0]
    ):
        return (
            outer[1],
            f"the `{{` opened here is not closed before line {line} opens a block at its indentation",
        )
    return None


def _closes_an_outer_block(text, starts, token, line, at, at_indent, at_word) -> tuple[int, str] | None:
    """A `}` that closes the namespace (its `// namespace` comment) or sits indented for an outer block than
    the `{` it matched, opened at line `at`: that `{` was left open."""
    end = text.find("\n", token.end())
    rest = text[token.end() : end if end >= 0 else len(text)]
    line_start = token.start() == starts[line - 1] + _indent(text, starts, line)
    if at_word != "namespace" and "// namespace" in rest:
        return at, f"the `{{` opened here is not closed before line {line} closes the namespace"
    if line_start and at_indent != _indent(text, starts, line):
        return (
            at,
            f"the `{{` opened here is not closed (the `}}` on line {line} is indented for an outer one)",
        )
    return None
