"""Shared fixtures.

Async tests use anyio's pytest plugin (``@pytest.mark.anyio``) and run on
asyncio (debug mode), asyncio + uvloop and trio unless a module narrows
``anyio_backend``.  Every test fails on a leaked runtime handle: the host
runtime's live counters must return to their value before the test.
"""

from __future__ import annotations

import gc

import pytest

import aioge
from aioge import _native

ALL_BACKENDS = [
    pytest.param(("asyncio", {"debug": True}), id="asyncio"),
    pytest.param(("asyncio", {"debug": True, "use_uvloop": True}), id="uvloop"),
    pytest.param(("trio", {}), id="trio"),
]
ASYNCIO_ONLY = [pytest.param(("asyncio", {"debug": True}), id="asyncio")]


@pytest.fixture(params=ALL_BACKENDS)
def anyio_backend(request):
    return request.param


_LIVE = ("contexts", "streams", "events", "tensor_descs", "data_buffers", "attrs", "device_allocations",
         "host_allocations", "subscriptions", "graphs")  # fmt: skip


def live_handles() -> dict[str, int]:
    gc.collect()
    c = _native.counters()
    return {k: c[k] for k in _LIVE}


@pytest.fixture(autouse=True)
def no_leaked_handles():
    """Fail a test that leaves runtime handles behind."""
    if not _native.has_host_hooks:
        yield
        return
    before = live_handles()
    yield
    after = live_handles()
    leaked = {k: after[k] - before[k] for k in _LIVE if after[k] != before[k]}
    assert not leaked, f"leaked runtime handles: {leaked}"


@pytest.fixture
async def dev():
    """An open device; on asyncio, also fails the test on errors the loop only logs
    (an unretrieved task exception, a failing callback)."""
    import asyncio

    errors = []
    loop = asyncio._get_running_loop()  # None under trio
    if loop is not None:
        loop.set_exception_handler(lambda _loop, ctx: errors.append(ctx))
    async with aioge.open_device(0) as d:
        yield d
    if loop is not None:
        gc.collect()
        loop.set_exception_handler(None)
        assert not errors, f"the event loop reported: {errors}"


@pytest.fixture
async def stream(dev):
    async with dev.open_stream() as s:
        yield s


@pytest.fixture
async def compiled(dev):
    """``await compiled(graph, **options)``: ``dev.compile`` whose models are closed after the
    test (a model dropped open warns, like every handle owner)."""
    models = []

    async def compile_(graph, **options):
        model = await dev.compile(graph, **options)
        models.append(model)
        return model

    yield compile_
    for m in models:
        await m.aclose()
