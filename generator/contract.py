"""What dist/submission.py must be, checked on the rendered text (the build refuses anything else)."""

from __future__ import annotations

import ast

from generator.errors import BuildError

TAG_LINE = "# okc: problem=muse_bf16_proj"
# Calls that would read files, the environment or the network, or run code from strings, at run time.
FORBIDDEN_CALLS = {"open", "exec", "eval", "compile", "__import__", "input", "breakpoint"}
FORBIDDEN_ATTRIBUTES = {("torch", "load"), ("torch", "hub"), ("torch", "save")}
# Output: the file says one thing at run time, the line prepare() prints when a compressed engine refuses a
# layer's weights, and only from the one function of this name (kernels_src/runtime.py). Any other print, written
# to debug, would run in the judge's timed loop or at every build (the generator calls the engines' rules).
SAYS_ONE_LINE = "say_refusal"
OUTPUT_NAMES = {
    "print",
    "pprint",
    "help",
    "reveal_type",
}  # by name; also as an attribute (pprint.pprint, ...)
OUTPUT_ATTRIBUTES = OUTPUT_NAMES | {"stdout", "stderr", "__stdout__", "__stderr__", "logging", "_logging"}
OUTPUT_ATTRIBUTES |= {
    "warnings",
    "device_print",
    "static_print",
}  # warnings.warn, torch._logging, Triton's prints
# The only modules the submission may import, and how: checked on each kernels_src module as it is inlined
# (generator/sources.py) and again on the rendered file.
ALLOWED_IMPORTS = {
    "typing": None,  # any name
    "torch": None,
    "triton": None,
    "triton.language": None,
    "torch.utils.cpp_extension": {"load_inline"},
    "triton.tools.tensor_descriptor": {"TensorDescriptor"},
}


def contract_violations(text: str) -> list[tuple[int, str]]:
    """(line, problem) for everything in `text` that breaks the submission contract."""
    problems = []
    first = text.split("\n", 1)[0]
    if first != TAG_LINE:
        problems.append((1, f"first line must be exactly {TAG_LINE!r}, got {first!r}"))
    try:
        tree = ast.parse(text)
    except (SyntaxError, ValueError) as exc:  # ValueError: a NUL byte, before Python 3.12
        nul = text[: text.find("\0")].count("\n") + 1 if "\0" in text else 1
        message = exc.msg if isinstance(exc, SyntaxError) else str(exc)
        return problems + [(getattr(exc, "lineno", None) or nul, f"not valid Python: {message}")]
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name not in ALLOWED_IMPORTS or ALLOWED_IMPORTS[alias.name] is not None:
                    problems.append((node.lineno, f"import {alias.name} is not in the whitelist"))
        elif isinstance(node, ast.ImportFrom):
            allowed = ALLOWED_IMPORTS.get(node.module or "", False)
            names = {alias.name for alias in node.names}
            forbidden = {name for name in names if (node.module, name) in FORBIDDEN_ATTRIBUTES}
            if node.level or allowed is False or (allowed is not None and not names <= allowed) or forbidden:
                problems.append(
                    (node.lineno, f"from {node.module} import {sorted(names)} is not in the whitelist")
                )
    may_say = _may_say(tree)
    problems.extend(
        problem
        for node in ast.walk(tree)
        if not isinstance(node, (ast.Import, ast.ImportFrom))
        for problem in _forbidden_use(node, may_say)
    )
    return sorted(problems)


def _may_say(tree: ast.AST) -> set[int]:
    """ids of the nodes inside the top-level function SAYS_ONE_LINE, the one place output is allowed."""
    return {
        id(node)
        for function in getattr(tree, "body", ())
        if isinstance(function, ast.FunctionDef) and function.name == SAYS_ONE_LINE
        for node in ast.walk(function)
    }


def _forbidden_use(node: ast.AST, may_say: set[int]) -> list[tuple[int, str]]:
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in FORBIDDEN_CALLS:
        return [(node.lineno, f"call to {node.func.id}() is not allowed at run time")]
    if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name):
        if (node.value.id, node.attr) in FORBIDDEN_ATTRIBUTES:
            return [(node.lineno, f"{node.value.id}.{node.attr} is not allowed")]
    output = (isinstance(node, ast.Name) and node.id in OUTPUT_NAMES) or (
        isinstance(node, ast.Attribute) and node.attr in OUTPUT_ATTRIBUTES
    )
    if output and id(node) not in may_say:
        name = node.id if isinstance(node, ast.Name) else node.attr
        return [
            (
                node.lineno,
                f"{name}: no output at run time but the one line {SAYS_ONE_LINE}() prints (kernels_src/runtime.py)",
            )
        ]
    return []


def forbidden_uses(tree: ast.AST) -> list[tuple[int, str]]:
    """(line, problem) for each call, name or attribute the contract forbids in a parsed module (its imports are
    checked where they are hoisted): lets the build name a kernels_src module's own line."""
    may_say = _may_say(tree)
    return sorted(problem for node in ast.walk(tree) for problem in _forbidden_use(node, may_say))


def undefined_names(text: str, defined=()) -> list[tuple[int, str]]:
    """(line, message) for names pyflakes finds used but never defined (but those `defined` names)."""
    from pyflakes import checker, messages  # build-time only: not on the H200

    tree = ast.parse(text)
    found = checker.Checker(tree, filename="dist/submission.py", builtins=set(defined))
    bad = (messages.UndefinedName, messages.UndefinedLocal, messages.UndefinedExport)
    return sorted((m.lineno, m.message % m.message_args) for m in found.messages if isinstance(m, bad))


def check_contract(text: str, shown: str) -> None:
    problems = contract_violations(text)
    if problems:
        line, message = problems[0]
        raise BuildError(shown, line, message)
