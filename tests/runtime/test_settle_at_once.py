"""A launch that has already run when its launch call returns (the host runtime ran it inline on
the caller's thread, nothing pending before it) settles at once in ``Lane.submit_seq``: its
Completion is done when made, keeps nothing, and awaiting its output takes no poll.  Anything
else is unchanged: a failing inline launch still raises at the await and at the stream's next
``synchronize()``, once each, a launch behind pending work stays pending, ordering after another
stream still waits, and an observer still sees every launch finish."""

from __future__ import annotations

import numpy as np
import pytest

import aioge
from aioge import TensorSpec
from aioge.profiler import Profiler
from aioge.runtime import launch as launch_mod
from aioge.runtime.scheduler import Lane
from tests.runtime.test_fast_launch import gate, inject, open_gate

pytestmark = [
    pytest.mark.anyio,
    pytest.mark.skipif(not launch_mod._FAST, reason="prepared launches are the host runtime's"),
]


def no_polling(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Make every way of settling a pending launch from an await record that it was taken."""
    taken: list[str] = []

    def refuse(name: str):  # type: ignore[no-untyped-def]
        def call(self, *args, **kw):  # type: ignore[no-untyped-def]
            taken.append(name)
            raise AssertionError(f"Lane.{name} called for a launch that was done")

        return call

    for name in ("poll", "spin_until", "watch"):
        monkeypatch.setattr(Lane, name, refuse(name))
    return taken


async def test_an_awaited_inline_launch_is_done_without_polling(stream, monkeypatch) -> None:
    x = stream.upload(np.arange(16, dtype=np.float32))
    out = stream.empty(16)
    await stream.synchronize()
    (y,) = aioge.op("Add", [x, x], [out])  # prepared here (the Python transaction)
    await y
    lane = stream._lane
    taken = no_polling(monkeypatch)
    for _ in range(3):  # the C transaction, and the Python one through the same Lane.submit_seq
        (y,) = aioge.op("Add", [x, x], [out])
        comp = y.launch
        assert comp is not None and comp.done and comp.keep is None and not lane.pending
        assert await y is y
        comp = stream._enqueue.run_prepared("Add", [x, out], [out], None)
        assert comp.done and comp.keep is None and comp.exception() is None
        await comp
    assert taken == []
    monkeypatch.undo()
    stats = stream.stats
    assert stats["in_flight"] == 0 and stats["launched"] == stats["completed"]
    # the reader and writer notes name the settled launch: a later launch has nothing to wait for
    assert out._mem.writer is comp and out._mem.readers == {} and x._mem.readers == {lane: comp}
    np.testing.assert_array_equal(await out.numpy(), np.arange(16, dtype=np.float32) * 3)  # x + (x + x)


async def test_a_failing_inline_launch_raises_at_its_await_and_its_sync_once(stream) -> None:
    x = stream.upload(np.ones(8, np.float32))
    await stream.synchronize()
    await aioge.ops.neg(x)  # prepared: the next one is the C transaction's
    inject(stream, 1)
    bad = aioge.ops.neg(x)
    comp = bad.launch
    assert comp is not None and not comp.done and comp.keep is not None  # not settled at once
    with pytest.raises(aioge.AclError) as e:
        await bad
    assert e.value.code == 507015 and "injected" in str(e.value)
    with pytest.raises(aioge.AclError):  # the awaiting raised it once: it raises again, as any completion
        await comp
    with pytest.raises(aioge.AclError):  # the stream's synchronize reports it once
        await stream.synchronize()
    await stream.synchronize()
    assert stream.stats["failed"] == 1
    ok = aioge.ops.neg(x)  # the next inline launch settles at once again
    assert ok.launch is not None and ok.launch.done
    np.testing.assert_array_equal(await ok.numpy(), -np.ones(8, np.float32))


async def test_a_launch_behind_pending_work_stays_pending(stream) -> None:
    x = stream.upload(np.ones(8, np.float32))
    out = stream.empty(8)
    await aioge.op("Add", [x, x], [out])[0]
    g = gate(stream)
    try:
        (y,) = aioge.op("Add", [x, x], [out])
        comp = y.launch
        assert comp is not None and not comp.done and comp.keep == (x._mem, x._mem, out._mem)
        assert stream._lane.pending[-1] is comp
    finally:
        open_gate(g)
    await y
    assert comp.done and comp.keep is None
    np.testing.assert_array_equal(await y.numpy(), np.full(8, 2.0, np.float32))


async def test_ordering_after_a_pending_launch_of_another_stream_still_waits(dev) -> None:
    async with dev.open_stream() as a, dev.open_stream() as b:
        x = a.upload(np.full(8, 1.0, np.float32))
        out = b.empty(8)
        await a.synchronize()
        await aioge.op("Add", [x, x], [out], stream=b)[0]  # prepared; b idle
        g = gate(a)
        try:
            aioge.op("Fills", [a.empty(8)], [x], {"value": 5.0}, stream=a)  # held behind the gate
            (r,) = aioge.op("Add", [x, x], [out], stream=b)  # reads x: waits for a's write
            comp = r.launch
            assert comp is not None and not comp.done and not comp._ran_within(20)
        finally:
            open_gate(g)
        np.testing.assert_array_equal(await r.numpy(), np.full(8, 10.0, np.float32))
        assert comp.done and comp.exception() is None


async def test_an_observer_still_sees_inline_launches_finish(stream) -> None:
    x = stream.upload(np.ones(16, np.float32))
    out = stream.empty(16)
    await aioge.op("Add", [x, x], [out])[0]
    with Profiler() as prof:
        for _ in range(3):
            await aioge.op("Add", [x, x], [out])[0]
        await stream.synchronize()
    adds = [r for r in prof.completed() if r.name == "Add"]
    assert len(adds) == 3 and all(r.error == 0 for r in adds)
    (z,) = aioge.op("Add", [x, x], [TensorSpec((16,), "float32")])
    assert z.launch is not None and z.launch.done  # unobserved again: settled at once
    await z
