"""Tests that need a local tool (nvcc, ninja and a C++ compiler) skip without it on a developer's machine, and run
(and so fail) on CI, which sets CI=true and has them: a missing tool there must not turn a test into a silent skip.
"""

import os
import shutil

import pytest


def on_ci() -> bool:
    return os.environ.get("CI") == "true"


def needs(*tools):
    """A skipif marker for tests that run these tools: skip where one is missing, unless on CI."""
    missing = [tool for tool in tools if shutil.which(tool) is None]
    return pytest.mark.skipif(
        bool(missing) and not on_ci(), reason=f"needs {', '.join(missing)} (on CI it runs, and fails without)"
    )
