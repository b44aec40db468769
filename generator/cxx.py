"""The C++ the file ships, by definition: what each struct, member function, function, constant, type and
enumerator of a source defines and reads, which of them the launch table reaches, and the source without the
others. The build ships CUDA_SRC so (render.py): a helper only an unrouted engine calls stays out with its kernel.

Lexical, by name: a definition is reached when a reached one reads its name (every overload and specialisation
of that name with it), so two definitions of one name are kept together; a namespace-scope static_assert is the
source's own check and reads what it names wherever the file compiles. What nothing reached reads is dropped,
its lines and the comment lines right above it, and a #line directive keeps the lines after it where nvcc
places them."""

from __future__ import annotations

import bisect
import re
from dataclasses import dataclass

_COMMENT_OR_STRING = re.compile(r'//[^\n]*|/\*.*?\*/|"(?:\\.|[^"\\\n])*"' + r"|'(?:\\.|[^'\\\n])*'", re.S)
_TOKEN = re.compile(r"[A-Za-z_]\w*|\d[\w.']*|\S")
_IDENTIFIER = re.compile(r"[A-Za-z_]\w*")
_LINE = re.compile(r'^#line (\d+) "([^"]+)"$')
# Names that open a parenthesis ahead of what a declaration defines: attributes, and what a type may hold
_NOT_A_NAME = {
    "__launch_bounds__",
    "__align__",
    "alignas",
    "__attribute__",
    "decltype",
    "__declspec",
    "sizeof",
}
_TYPE_KEYS = ("struct", "class", "union")
_ACCESS = ("public", "private", "protected")
ASSERTION = "static_assert@"  # a namespace-scope static_assert's name, its line after it


@dataclass(frozen=True)
class Definition:
    name: str
    kind: str  # struct, method, enum, enumerator, function, constant, alias, assertion, macro
    first: int  # its first line (0-based), the comment lines right above it included
    last: int
    reads: frozenset  # the identifiers it reads (a member's: its struct's name too)
    whole_lines: bool  # nothing else shares its lines: it can be dropped line by line


class _Source:
    """A C++ text as code: comments, literals and preprocessor lines blanked (newlines kept), its tokens and the
    offset each line starts at."""

    def __init__(self, text: str):
        self.lines = text.split("\n")
        blank = _COMMENT_OR_STRING.sub(lambda m: re.sub(r"[^\n]", " ", m.group()), text)
        self.code = "\n".join(
            " " * len(line) if line.lstrip().startswith("#") else line for line in blank.split("\n")
        )
        self.starts = [0] + [m.end() for m in re.finditer("\n", self.code)]
        self.tokens = [(m.group(), m.start()) for m in _TOKEN.finditer(self.code)]

    def line(self, position: int) -> int:
        return bisect.bisect_right(self.starts, position) - 1

    def alone(self, tokens: list) -> bool:
        """Whether these tokens fill their lines (comments aside)."""
        first, last = self.line(tokens[0][1]), self.line(tokens[-1][1])
        end = self.starts[last + 1] - 1 if last + 1 < len(self.starts) else len(self.code)
        return (
            not self.code[self.starts[first] : tokens[0][1]].strip()
            and not self.code[tokens[-1][1] + 1 : end].strip()
        )

    def definition(self, name: str, kind: str, tokens: list, reads, whole: bool | None = None) -> Definition:
        first = self.line(tokens[0][1])
        while first and self.lines[first - 1].lstrip().startswith("//"):
            first -= 1
        whole = self.alone(tokens) if whole is None else whole
        return Definition(name, kind, first, self.line(tokens[-1][1]), frozenset(reads), whole)


def definitions(text: str) -> list[Definition]:
    """Every definition in `text` (a C++ source, or several behind #line directives) at namespace scope, each
    member function of its structs and each enumerator of its enums, and its #define macros."""
    source = _Source(text)
    found = []
    for declaration in _declarations(source.tokens, top=True):
        found += _defined(declaration, source)
    for number, line in enumerate(source.lines):
        match = re.match(r"\s*#\s*define\s+(\w+)(.*)", line)
        if match:
            reads = _IDENTIFIER.findall(match.group(2))
            found.append(Definition(match.group(1), "macro", number, number, frozenset(reads), True))
    return found


def _declarations(tokens: list, top: bool) -> list[list]:
    """The declarations of a scope's tokens, each a list of its tokens: at namespace scope (`top`) past the
    namespaces' and extern "C"'s braces, in a struct's body past its access specifiers."""
    out, declaration, index = [], [], 0
    while index < len(tokens):
        token = tokens[index][0]
        if not declaration and top and token == "namespace":
            while tokens[index][0] != "{":
                index += 1
            index += 1
            continue
        if not declaration and top and (token == "}" or token == "extern" and tokens[index + 1][0] == "{"):
            index += 1 if token == "}" else 2
            continue
        if not declaration and not top and token in _ACCESS and tokens[index + 1][0] == ":":
            index += 2
            continue
        declaration.append(tokens[index])
        index += 1
        if token == "{":
            index = _body(tokens, index, declaration)
            if _ends_at_brace(declaration) or index >= len(tokens) or tokens[index][0] != ";":
                out.append(declaration)
                declaration = []
        elif token == ";":
            out.append(declaration)
            declaration = []
    return out


def _body(tokens: list, index: int, declaration: list) -> int:
    """Append a braced body's tokens (its opening brace is in) to declaration; the index past its closing brace."""
    depth = 1
    while depth:
        declaration.append(tokens[index])
        depth += {"{": 1, "}": -1}.get(tokens[index][0], 0)
        index += 1
    return index


def _ends_at_brace(declaration: list) -> bool:
    """A function's body ends it; a type's or an initialiser's ends at the `;` after the brace."""
    words = [token for token, _ in _past_template_heads(declaration)]
    head = words[: words.index("{")]
    return not set(head) & {*_TYPE_KEYS, "enum", "="}


def _past_template_heads(declaration: list) -> list:
    out = list(declaration)
    while out and out[0][0] == "template":
        depth, index = 0, 1
        while index < len(out):
            depth += {"<": 1, ">": -1}.get(out[index][0], 0)
            index += 1
            if depth == 0:
                break
        out = out[index:]
    return out


def _names(tokens: list) -> set:
    return {token for token, _ in tokens if _IDENTIFIER.fullmatch(token)}


def _defined(declaration: list, source: _Source) -> list[Definition]:
    """The Definition(s) of one namespace-scope declaration."""
    words = [token for token, _ in _past_template_heads(declaration)]
    if not words or words[:2] == ["using", "namespace"]:
        return []
    if words[0] == "static_assert":
        line = source.line(declaration[0][1])
        return [source.definition(f"{ASSERTION}{line + 1}", "assertion", declaration, _names(declaration))]
    if words[0] == "using":
        return [source.definition(words[1], "alias", declaration, _names(declaration))]
    if words[0] == "enum":
        return _enum(declaration, words, source)
    key = next((word for word in words if word in _TYPE_KEYS), None)
    if key is not None and words.index(key) < _first(words, "(", "="):
        at = words.index(key) + 1
        if words[at] in _NOT_A_NAME:  # struct alignas(16) Name
            at = words.index(")", at) + 1
        return _struct(words[at], declaration, source)
    name = _function_name(words)
    if name is not None:
        return [source.definition(name, "function", declaration, _names(declaration))]
    return [
        source.definition(
            words[_first(words, "=", "[", "{", ";") - 1], "constant", declaration, _names(declaration)
        )
    ]


def _first(words: list, *wanted: str) -> int:
    return next((i for i, word in enumerate(words) if word in wanted), len(words))


def _function_name(words: list) -> str | None:
    """The name a function declaration defines (`name(`, `name<args>(` for an explicit specialisation), or None
    for a variable."""
    paren = next(
        (i for i, word in enumerate(words) if word == "(" and i and words[i - 1] not in _NOT_A_NAME), None
    )
    if paren is None or paren > _first(words, "="):
        return None
    at = paren - 1
    if words[at] == ">":
        depth = 0
        while True:
            depth += {">": 1, "<": -1}.get(words[at], 0)
            at -= 1
            if depth == 0:
                break
    return words[at]


def _struct(name: str, declaration: list, source: _Source) -> list[Definition]:
    """A struct, and each of its member functions and static members on its own: the struct reads its head and
    its data members (its layout), a member what it reads and its struct."""
    opening = next((i for i, (token, _) in enumerate(declaration) if token == "{"), None)
    if opening is None:  # a declaration alone
        return [source.definition(name, "struct", declaration, _names(declaration))]
    reads, members = _names(declaration[:opening]), []
    for member in _declarations(
        declaration[opening + 1 : -2 if declaration[-1][0] == ";" else -1], top=False
    ):
        words = [token for token, _ in _past_template_heads(member)]
        function = _function_name(words)
        static = "static" in words[: _first(words, "=", "{", "(")]
        if function not in (None, name) and "~" not in words or static and function is None:
            member_name = function or words[_first(words, "=", "[", "{", ";") - 1]
            members.append(
                source.definition(
                    member_name, "method" if function else "constant", member, _names(member) | {name}
                )
            )
        else:
            reads |= _names(member)
    return [source.definition(name, "struct", declaration, reads)] + members


def _enum(declaration: list, words: list, source: _Source) -> list[Definition]:
    """An enum and each enumerator (which reads its enum); one with its value written out and a line of its own
    can be dropped alone (its neighbours keep theirs)."""
    name = words[1] if words[1] not in ("class", "struct") else words[2]
    opening = [token for token, _ in declaration].index("{")
    found, item = [source.definition(name, "enum", declaration, set())], []
    for token in declaration[opening + 1 :]:
        if token[0] not in (",", "}", ";"):
            item.append(token)
            continue
        if item:
            whole = (
                len(item) > 1
                and item[1][0] == "="
                and source.alone(item + [token] if token[0] == "," else item)
            )
            found.append(source.definition(item[0][0], "enumerator", item, _names(item) | {name}, whole))
        item = []
    return found


def identifiers(text: str) -> set[str]:
    """Every identifier `text` reads as code."""
    return set(_IDENTIFIER.findall(_Source(text).code))


def reached(found: list[Definition], roots: set[str]) -> set[str]:
    """The names the roots and the static_asserts reach, through what each definition of a reached name reads."""
    by_name: dict[str, list[Definition]] = {}
    for definition in found:
        by_name.setdefault(definition.name, []).append(definition)
    seen: set[str] = set()
    todo = [name for name in by_name if name.startswith(ASSERTION)] + [
        name for name in roots if name in by_name
    ]
    while todo:
        name = todo.pop()
        if name not in seen:
            seen.add(name)
            todo += [read for definition in by_name[name] for read in definition.reads if read in by_name]
    return seen


def unreached(text: str, roots: set[str]) -> list[Definition]:
    """The definitions of `text` that nothing the roots reach reads, in source order (what a preprocessor
    conditional names counts as read: #if decides what compiles)."""
    conditions = re.findall(r"^\s*#\s*(?:if|ifdef|ifndef|elif)\b(.*)$", text, flags=re.M)
    found = definitions(text)
    keep = reached(found, roots | {name for line in conditions for name in _IDENTIFIER.findall(line)})
    return [definition for definition in found if definition.name not in keep]


def without_unreached(text: str, roots: set[str]) -> str:
    """`text` without the definitions nothing the roots reach reads (those that fill their lines), each gap
    followed by the #line directive that puts the next line where it stands in its file (a text before any #line
    directive, the generated constants, has no file to name: its lines just close up)."""
    lines = text.split("\n")
    dropped = set()
    for definition in unreached(text, roots):
        if definition.whole_lines:
            dropped.update(range(definition.first, definition.last + 1))
    for number in range(1, len(lines) - 1):  # a blank line between a gap and a blank line or a gap goes too
        if (
            not lines[number].strip()
            and number - 1 in dropped
            and not lines[number - 1 - _run(dropped, number - 1)].strip()
        ):
            dropped.add(number)
    out, place, gap = [], None, False
    for number, line in enumerate(lines):
        match = _LINE.match(line)
        if number in dropped:
            gap = True
        else:
            if gap and place is not None and not match:
                out.append(f'#line {place[0]} "{place[1]}"')
            out.append(line)
            gap = False
        place = (int(match.group(1)), match.group(2)) if match else place and (place[0] + 1, place[1])
    return "\n".join(out)


def _run(dropped: set, last: int) -> int:
    """How many dropped lines end at line `last`."""
    count = 0
    while last - count in dropped:
        count += 1
    return count
