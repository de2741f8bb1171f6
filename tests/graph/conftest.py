"""Graph-engine tests are pure Python: no runtime handles to check.

The repository-wide ``no_leaked_handles`` autouse fixture runs two full GC
passes per test; the graph suite has hundreds of small tests and never opens
a device, so it is overridden with a no-op here.  Its helper modules
(``models``, ``onnx_util``, ``cann_emulator``) are imported as ``tests.graph.<name>``.
"""

from __future__ import annotations

import os

import pytest


@pytest.fixture(autouse=True)
def no_leaked_handles():
    yield


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Tests marked ``slow`` here run only when asked: ``-m slow`` or ``AIOGE_RUN_SLOW=1``."""
    if "slow" in (config.getoption("-m") or "") or os.environ.get("AIOGE_RUN_SLOW") == "1":
        return
    here = os.path.dirname(__file__)
    skip = pytest.mark.skip(reason="slow: run with -m slow or AIOGE_RUN_SLOW=1")
    for item in items:
        if item.get_closest_marker("slow") and str(item.fspath).startswith(here):
            item.add_marker(skip)
