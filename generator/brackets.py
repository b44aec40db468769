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

    def indent(line: int) -> int:
        start = starts[line - 1]
        end = text.find("\n", start)
        row = text[start : end if end >= 0 else len(text)]
        return len(row) - len(row.lstrip(" "))

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
            statement, pending = (indent(line), statement[1] + 1, t, line), False
        seen = None
        if t == "{":
            outer = next((entry for entry in reversed(stack) if entry[0] == "{"), None)
            if (
                outer is not None
                and outer[4] not in _UNINDENTED
                and outer[3] != statement[1]
                and statement[3] > outer[1]
                and outer[2] == statement[0]
            ):
                seen = (
                    outer[1],
                    f"the `{{` opened here is not closed before line {line} opens a block at its indentation",
                )
        if t in "{([":
            stack.append((t, line, statement[0], statement[1], statement[2]))
        elif t in _CLOSES:
            if not stack:
                return (line, f"`{t}` closes nothing this file opened"), True
            opener, at, at_indent, _, at_word = stack.pop()
            if opener != _CLOSES[t]:
                return (at, f"the `{opener}` opened here is closed by `{t}` on line {line}"), True
            end = text.find("\n", token.end())
            rest = text[token.end() : end if end >= 0 else len(text)]
            line_start = token.start() == starts[line - 1] + indent(line)
            if t == "}" and at_word != "namespace" and "// namespace" in rest:
                seen = at, f"the `{{` opened here is not closed before line {line} closes the namespace"
            elif t == "}" and line_start and at_indent != indent(line):
                seen = (
                    at,
                    f"the `{{` opened here is not closed (the `}}` on line {line} is indented for an outer one)",
                )
        if t in ";{}":
            pending = True
        first_seen = first_seen or seen
    if stack:
        opener, at = stack[-1][:2]
        return first_seen or (at, f"the `{opener}` opened here is never closed in this file"), True
    return first_seen, False
