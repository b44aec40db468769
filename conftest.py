"""The suite runs from any folder of the checkout: `python -m pytest -q` from tables/ (say) runs tests/, as it does
from the root (pyproject.toml's testpaths), rather than collecting nothing."""

from pathlib import Path

import pytest


@pytest.hookimpl(tryfirst=True)
def pytest_configure(config):
    here = Path(config.invocation_params.dir)
    root = Path(config.rootpath)
    if (
        config.args_source == pytest.Config.ArgsSource.INVOCATION_DIR
        and here != root
        and root in here.parents
    ):
        if not any(here.rglob("test_*.py")):
            config.args[:] = [str(root / path) for path in config.getini("testpaths")]
