"""The prepared launch of ``aioge.op`` as one C call (``aioge/_native/_launch.c``): it launches
exactly what the Python transaction would, leaves everything else to it, reads cffi pointers at
the addresses cffi gives them, and refuses a Completion class whose slots it does not know."""

from __future__ import annotations

import numpy as np
import pytest

import aioge
from aioge import TensorSpec
from aioge._native import _launch, acl, ffi
from aioge.runtime import _trace
from aioge.runtime import launch as launch_mod
from aioge.runtime.scheduler import POLL_EVERY, Completion, Lane
from aioge.runtime.stream import DeviceMemory, Enqueue, Tensor
from tests.runtime.test_fast_launch import gate, open_gate

pytestmark = [
    pytest.mark.anyio,
    pytest.mark.skipif(not launch_mod._FAST, reason="prepared launches are the host runtime's"),
]


def test_cdata_addresses_are_cffis() -> None:
    p = ffi.new("int64_t[4]")
    q = ffi.new("void **")
    q[0] = ffi.cast("void *", 0x1234560)
    for c in (p, q, q[0], ffi.cast("void *", 8), ffi.NULL):
        assert acl.cdata_address(c) == int(ffi.cast("uintptr_t", c))
    with pytest.raises(TypeError, match="not a cffi pointer"):
        acl.cdata_address(12)


def test_init_refuses_a_completion_of_other_slots() -> None:
    class Other:
        __slots__ = ("_done", "lane")

    addr = int(ffi.cast("uintptr_t", ffi.addressof(acl.lib, "aiogeHostLaunchExecute")))
    with pytest.raises(TypeError, match="slots"):
        _launch.init(
            addr, ffi.CData, acl.raise_for, Tensor, DeviceMemory, Other, POLL_EVERY, _trace, Enqueue, addr, Lane
        )
    with pytest.raises(TypeError, match="not a __slots__ member"):
        _launch.init(
            addr, ffi.CData, acl.raise_for, Other, DeviceMemory, Completion, POLL_EVERY, _trace, Enqueue, addr, Lane
        )
    with pytest.raises(ValueError, match="NULL"):
        _launch.init(
            0, ffi.CData, acl.raise_for, Tensor, DeviceMemory, Completion, POLL_EVERY, _trace, Enqueue, addr, Lane
        )
    # the failed calls left the bound state alone: launches still run through C
    assert acl.cdata_address(ffi.cast("void *", 16)) == 16


async def test_the_c_call_launches_only_what_needs_nothing_else(stream) -> None:
    enq = stream._enqueue
    x = stream.upload(np.arange(8, dtype=np.float32))
    out = stream.empty(8)
    await stream.synchronize()
    # not prepared yet: nothing launched, the Python transaction prepares it
    launched = stream.stats["launched"]
    assert acl.launch_plain(enq, "Add", [x, x], [out], None, None) is None
    assert stream.stats["launched"] == launched
    comp = enq.run_prepared("Add", [x, x], [out], None)
    # the stream idle, a launch this small ran inline: settled when it was made, keeping nothing
    assert isinstance(comp, Completion) and comp.done and comp.keep is None
    g = gate(stream)  # behind a held task: pending, keeping what it reads and writes
    comp = acl.launch_plain(enq, "Add", [x, x], [out], None, "named")
    assert type(comp) is Completion and comp.what == "Add" and comp.name == "named" and not comp.done
    assert comp.keep == (x._mem, x._mem, out._mem) and comp.lane is stream._lane and comp.event is None
    assert out._mem.writer is comp and x._mem.readers == {stream._lane: comp} and not out._mem.readers
    assert comp.seq == stream.stats["launched"] and comp.tseq > 0 and repr(comp)
    open_gate(g)
    np.testing.assert_array_equal(await out.numpy(), np.arange(8, dtype=np.float32) * 2)
    assert comp.done and comp.exception() is None and comp.deps is None and comp.device_ms is None
    # attrs go through the cache's attr handles, the same prepared launch key as Python's
    (y,) = aioge.op("Fills", [x], [TensorSpec((8,), "float32")], {"value": 3.0})
    assert acl.launch_plain(enq, "Fills", [x], [y], {"value": 3.0}, None) is not None
    np.testing.assert_array_equal(await y.numpy(), np.full(8, 3.0, np.float32))
    # not exactly the runtime's types, or a closed tensor: the Python transaction's
    assert acl.launch_plain(enq, "Add", [x, 1.0], [out], None, None) is None
    z = stream.upload(np.ones(8, np.float32))
    await z
    z.close()
    assert acl.launch_plain(enq, "Add", [x, z], [out], None, None) is None


async def test_a_pending_launch_of_another_stream_is_left_to_order(dev) -> None:
    async with dev.open_stream() as a, dev.open_stream() as b:
        x = a.upload(np.ones(8, np.float32))
        out = b.empty(8)
        await a.synchronize()
        await b.synchronize()
        b._enqueue.run_prepared("Add", [x, x], [out], None)  # prepared
        await b.synchronize()
        a._enqueue.run_prepared("Add", [x, x], [x], None)  # x written on a, pending perhaps
        w = x._mem.writer
        if w is not None and not w.done:
            assert acl.launch_plain(b._enqueue, "Add", [x, x], [out], None, None) is None
        (r,) = aioge.op("Add", [x, x], [out], stream=b)  # ordered after a's write
        np.testing.assert_array_equal(await r.numpy(), np.full(8, 4.0, np.float32))


async def test_a_refused_prepared_launch_raises_and_the_stream_stays_usable(stream) -> None:
    y = stream.upload(np.ones((2, 2), np.float32))
    await y
    launched = stream.stats["launched"]
    for _ in range(2):  # the first time through Python (prepared), then refused by the C call's launch
        with pytest.raises(aioge.InvalidParamError, match="in place"):
            stream._enqueue.run_prepared("MatMul", [y, y, None], [y], None)
    assert ("MatMul", stream.device.context.cache.no_attr) == next(reversed(stream.device.context.cache.prepared))[:2]
    assert not stream._enqueue.lock.locked() and stream.stats["launched"] == launched
    (z,) = aioge.op("Add", [y, y], [TensorSpec((2, 2), "float32")])
    np.testing.assert_array_equal(await z.numpy(), np.full((2, 2), 2.0, np.float32))
    await stream.synchronize()
