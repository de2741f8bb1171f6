"""Operator-library tests.

Tests with fixed cases run on every backend (asyncio, uvloop, trio).  The
hypothesis tests, hundreds of examples whose subject is the kernels rather
than the event loop, run on asyncio and trio only (not uvloop, another
asyncio loop), which keeps them to half a minute per backend.  Its helpers are
imported as ``tests.ops.<name>``.
"""

from __future__ import annotations

import pytest

from tests.support.harness import ALL_BACKENDS

NO_UVLOOP = [p for p in ALL_BACKENDS if p.id != "uvloop"]


@pytest.fixture
def anyio_backend(request):
    return request.param


def pytest_generate_tests(metafunc):
    if "anyio_backend" in metafunc.fixturenames:
        hypothesis = hasattr(metafunc.function, "hypothesis")
        metafunc.parametrize("anyio_backend", NO_UVLOOP if hypothesis else ALL_BACKENDS, indirect=True)
