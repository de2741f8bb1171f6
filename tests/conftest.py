"""Shared fixtures and the async test harness.

Async tests use anyio's pytest plugin (``@pytest.mark.anyio``) and run on
asyncio, asyncio + uvloop and trio unless a directory narrows
``anyio_backend`` (``tests/ops`` does, for its hypothesis tests).  Whatever
runs a test's event loops (anyio, ``asyncio.run`` in the test, another
thread), every test:

* runs asyncio in debug mode (``PYTHONASYNCIODEBUG``, set before any loop exists);
* fails on an error an event loop only logs: an unretrieved task exception,
  a failing callback, a task destroyed while pending;
* fails on a "coroutine was never awaited" warning (``filterwarnings = error``
  makes it an unraisable exception, which pytest reports as a failure);
* fails on a leaked runtime handle: the host runtime's live counters must
  return to their value before the test.
"""

from __future__ import annotations

import gc
import os

import pytest

import aioge
from aioge import _native
from tests.support.harness import ALL_BACKENDS, LIVE, live_handles, loop_errors

os.environ["PYTHONASYNCIODEBUG"] = "1"  # read by every loop at creation, uvloop's included


@pytest.fixture(params=ALL_BACKENDS)
def anyio_backend(request):
    return request.param


def pytest_collection_finish(session):
    # every later gc.collect() (the leak checks run three per async test) then
    # skips the objects of the collected suite; hypothesis first, as its entry
    # points (trio's) look for referrers, which freezing hides
    import hypothesis  # noqa: F401

    gc.collect()
    gc.freeze()


def pytest_runtest_setup(item):
    loop_errors.records.clear()
    # what earlier tests left alive (the last teardown's gc.collect() has just run) is long-lived:
    # moved out of the collector's generations, so this test's collections walk only what it makes
    # (with torch and hypothesis loaded, a full collection otherwise walks hundreds of thousands of
    # objects, three times a test)
    gc.freeze()


@pytest.hookimpl(wrapper=True)
def pytest_runtest_teardown(item, nextitem):
    yield  # after every fixture's teardown, so after the leak check's gc.collect()
    errors, loop_errors.records = loop_errors.records, []
    if errors:
        text = "\n".join(loop_errors.format(r) for r in errors)
        raise AssertionError(f"an event loop reported {len(errors)} error(s):\n{text}")


@pytest.fixture(autouse=True)
def no_leaked_handles():
    """Fail a test that leaves runtime handles behind."""
    if not _native.has_host_hooks:
        yield
        return
    before = live_handles()
    yield
    after = live_handles()
    leaked = {k: after[k] - before[k] for k in LIVE if after[k] != before[k]}
    assert not leaked, f"leaked runtime handles: {leaked}"


@pytest.fixture
async def dev():
    """An open device, closed (drained) after the test."""
    async with aioge.open_device(0) as d:
        yield d
    gc.collect()  # a task that failed unretrieved is often in a cycle: report it in this test


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
