"""The bad-descriptor tables run on asyncio only (their subject is the runtime's checks, not
the event loop), one device and stream per module, with the leak check per module."""

from __future__ import annotations

import asyncio

import pytest

import aioge
from tests.support.harness import live_handles


@pytest.fixture(scope="module")
def anyio_backend():
    return ("asyncio", {"debug": True})


@pytest.fixture(scope="module", autouse=True)
def no_leaked_handles():
    """Checked per module here: the shared device below caches descs, attrs,
    events and memory blocks from case to case until it closes."""
    before = live_handles()
    yield
    after = live_handles()
    assert after == before, f"leaked runtime handles: {after} != {before}"


@pytest.fixture(scope="module")
async def shared_stream():
    """One device and stream for the whole table (opening one per case would
    dominate its time); fails on errors the loop only logs, like ``dev``."""
    loop, errors = asyncio.get_running_loop(), []
    loop.set_exception_handler(lambda _loop, ctx: errors.append(ctx))
    async with aioge.open_device(0) as dev, dev.open_stream() as s:
        yield s
    loop.set_exception_handler(None)
    assert not errors, f"the event loop reported: {errors}"
