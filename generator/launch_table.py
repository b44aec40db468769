"""The launch table: the C++ that instantiates each kernel a build compiles, a case of its launcher's arguments by
name, from the kernels' Variants (templates/launch_table.cu.j2). The build renders the tables' one into the file
(LAUNCH_TABLE); the tools that launch configs no table names (sweep, ab, profile, the probes) render one for them
and build it beside the file's own (runtime.build_extension)."""

from __future__ import annotations

import hashlib
from pathlib import Path

from generator import REPO_ROOT
from generator.engines import BY_NAME
from generator.sources import declared_constants
from generator.templating import render_template
from kernels_src.engine import CudaCode, CudaEnum, CudaType

TEMPLATE = "launch_table.cu.j2"
EXTENSION_NAME = "okc_muse_proj"  # an extension's name: this, then a digest of its C++


def members(args) -> list[str]:
    """A case's member declarations, one per C++ type in the order the types first appear: `using name = T;` for
    a type argument, `static constexpr T a = .., b = ..;` for flags, mode codes (their enumerators) and numbers.
    The arguments are this checkout's engines' (another module's mode codes are not its enums')."""
    types, constants = [], {}
    for name, value in args:
        if isinstance(value, bool):
            constants.setdefault("bool", []).append(f"{name} = {'true' if value else 'false'}")
        elif isinstance(value, CudaCode):
            enum = _enum_of(value)
            constants.setdefault(enum.name, []).append(f"{name} = {enum.enumerator(value)}")
        elif isinstance(value, CudaType):
            types.append(f"using {name} = {value};")
        elif type(value) is int:
            constants.setdefault("int", []).append(f"{name} = {value}")
        else:
            raise TypeError(f"{name}={value!r}: not a launch argument of this checkout's engines")
    return types + [f"static constexpr {ctype} {', '.join(items)};" for ctype, items in constants.items()]


def _enum_of(code: CudaCode) -> CudaEnum:
    """The declared enum that holds this very code (generator/sources.py, declared_constants)."""
    return next(
        item
        for item in declared_constants()
        if isinstance(item, CudaEnum) and any(held is code for held in item.codes)
    )


def launch_table(kernels, root: Path = REPO_ROOT, launchers: bool = True) -> str:
    """The launch table of these Variants, in order (a submission file's own or the tools' module's); without
    `launchers`, only its cases (what a test of the launchers' compile-time checks instantiates)."""
    cases = [{"launcher": BY_NAME[v.engine].launcher, "members": members(v.args)} for v in kernels]
    return render_template(root, TEMPLATE, {"cases": cases, "launchers": launchers})


def extension_name(cuda_src: str, table: str) -> str:
    """The name of the extension of this C++: EXTENSION_NAME and a digest of it, so that torch's cache and a
    process hold one build per kernel set."""
    return f"{EXTENSION_NAME}_{hashlib.sha256((cuda_src + table).encode()).hexdigest()[:12]}"


def extension_of(module, kernels):
    """A loaded file's extension for these Variants (kernels no table of it names): its CUDA_SRC, their launch
    table, named for both (the tools: sweep, ab, profile, the probes)."""
    table = launch_table(kernels)
    return module.build_extension(extension_name(module.CUDA_SRC, table), table)
