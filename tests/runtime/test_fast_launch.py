"""The host runtime's launch fast path: prepared launches (one C call
per launch) completed by stream sequence numbers instead of an event each.

The semantics are those of every launch -- each failure reaches its own
awaiters as a typed error, cross-stream ordering, the op cache's accounting,
observers see every launch -- and the C entry points refuse bad input with a
code, never a crash or a hang.
"""

from __future__ import annotations

import numpy as np
import pytest

import aioge
from aioge import TensorSpec, _native
from aioge._native import ffi, lib
from aioge.profiler import Profiler
from aioge.runtime import launch as launch_mod
from tests.support.rawacl import raw_runtime

pytestmark = [
    pytest.mark.anyio,
    pytest.mark.skipif(not launch_mod._FAST, reason="prepared launches are the host runtime's"),
]


@pytest.fixture
def rt():
    with raw_runtime() as r:
        yield r


def gate(s: aioge.Stream, timeout_ms: int = 20_000) -> int:
    g = ffi.new("uint64_t *")
    with s._enqueue:
        _native.check(lib.aiogeHostLaunchGate(s._handle, timeout_ms, g), "gate")
    return int(g[0])


def open_gate(g: int) -> None:
    if lib.aiogeHostOpenGate(g):
        _native.recent_error()


def inject(s: aioge.Stream, count: int = 1, code: int = 507015) -> None:
    with s._enqueue:
        _native.check(lib.aiogeHostInjectFailure(s._handle, count, code), "inject")


async def test_a_launch_is_one_prepared_call_completed_by_its_sequence_number(stream):
    x = stream.upload(np.arange(16, dtype=np.float32))
    out = stream.empty(16)
    before = len(stream.device.context.cache.prepared)
    comps = []
    for _ in range(3):
        (y,) = aioge.op("Add", [x, x], [out])
        comps.append(y.launch)
    assert len(stream.device.context.cache.prepared) == before + 1  # prepared once, reused
    assert all(c is not None and c.event is None and c.tseq > 0 for c in comps)
    assert [c.tseq for c in comps] == sorted(c.tseq for c in comps)
    np.testing.assert_array_equal(await out.numpy(), np.arange(16, dtype=np.float32) * 2)
    assert all(c.done and c.exception() is None for c in comps)


async def test_each_failure_reaches_only_its_own_launch(stream):
    x = stream.upload(np.ones(8, np.float32))
    await x
    g = gate(stream)
    ok1 = aioge.ops.relu(x)
    inject(stream, 1)
    bad = aioge.ops.neg(x)
    ok2 = aioge.ops.relu(x)
    open_gate(g)
    await ok1
    with pytest.raises(aioge.AclError) as e:
        await bad
    assert e.value.code == 507015 and "injected" in str(e.value)
    await ok2
    np.testing.assert_array_equal(await ok2.numpy(), np.ones(8, np.float32))
    with pytest.raises(aioge.AclError):  # the stream's synchronize reports it once
        await stream.synchronize()
    await stream.synchronize()
    assert stream.stats["failed"] == 1


async def test_refused_launch_raises_at_once_and_enqueues_nothing(stream):
    x = stream.upload(np.ones(3, np.float32))
    launched = stream.stats["launched"]
    with pytest.raises(aioge.OpInputMismatchError):
        aioge.op("Add", [x, stream.upload(np.ones(4, np.float32))], [TensorSpec((3,), "float32")])
    assert stream.stats["launched"] == launched + 1  # the second upload only
    # an op the runtime cannot run in place: refused by the runtime's own check
    y = stream.upload(np.ones((2, 2), np.float32))
    with pytest.raises(aioge.InvalidParamError, match="in place"):
        aioge.op("MatMul", [y, y, None], [y])
    await stream.synchronize()


async def test_cross_stream_order_waits_for_the_producer_sequence_number(dev):
    async with dev.open_stream() as a, dev.open_stream() as b:
        x = a.upload(np.full(8, 1.0, np.float32))
        await x
        g = gate(a)
        aioge.op("Fills", [a.empty(8)], [x], {"value": 5.0}, stream=a)  # held behind the gate
        (r,) = aioge.op("Identity", [x], [TensorSpec((8,), "float32")], stream=b)  # RAW on b
        assert r.launch is not None and not r.launch._ran_within(20)
        aioge.op("Fills", [b.empty(8)], [x], {"value": 7.0}, stream=b)  # WAW after the read, same stream
        open_gate(g)
        np.testing.assert_array_equal(await r.numpy(), np.full(8, 5.0, np.float32))
        np.testing.assert_array_equal(await x.numpy(), np.full(8, 7.0, np.float32))


def test_destroying_a_stream_does_not_wait_for_a_stream_that_waits_on_it(rt):
    """A queued wait of stream b on stream a does not hold a's destruction until b gets there."""
    a, b = ffi.new("aclrtStream *"), ffi.new("aclrtStream *")
    assert lib.aclrtCreateStream(a) == 0 and lib.aclrtCreateStream(b) == 0
    ga, gb = ffi.new("uint64_t *"), ffi.new("uint64_t *")
    assert lib.aiogeHostLaunchGate(b[0], 20_000, gb) == 0
    assert lib.aiogeHostLaunchGate(a[0], 20_000, ga) == 0
    seq = lib.aiogeHostStreamSubmitted(a[0])
    assert seq >= 1 and lib.aiogeHostStreamProgress(a[0], ffi.NULL) < seq
    assert lib.aiogeHostStreamWaitSeq(b[0], a[0], seq) == 0
    assert lib.aiogeHostOpenGate(ga[0]) == 0
    assert lib.aiogeHostStreamWaitCompleted(a[0], seq, 20_000) == 0
    assert lib.aclrtDestroyStream(a[0]) == 0  # b is still gated, its wait not yet run
    assert lib.aiogeHostOpenGate(gb[0]) == 0
    assert lib.aclrtSynchronizeStream(b[0]) == 0
    assert lib.aclrtDestroyStream(b[0]) == 0


def test_sequence_number_hooks_refuse_bad_input(rt):
    s = ffi.new("aclrtStream *")
    assert lib.aclrtCreateStream(s) == 0
    try:
        assert lib.aiogeHostStreamProgress(ffi.NULL, ffi.NULL) == 0
        assert lib.aiogeHostStreamWaitCompleted(ffi.NULL, 1, 0) != 0
        assert lib.aiogeHostStreamWaitCompleted(s[0], 1, -2) != 0
        assert lib.aiogeHostStreamWaitSeq(s[0], s[0], 1) != 0  # a stream cannot wait for itself
        assert lib.aiogeHostStreamWaitSeq(s[0], ffi.NULL, 1) != 0
        assert lib.aiogeHostStreamLogFailures(ffi.NULL, 1) != 0
        seq, code = ffi.new("uint64_t *"), ffi.new("aclError *")
        assert lib.aiogeHostStreamTakeFailure(s[0], seq, code, ffi.NULL, 0) == 0  # nothing kept
        # an unreached number times out with the stream timeout code
        assert lib.aiogeHostStreamWaitCompleted(s[0], 10**9, 1) == 507046
        assert lib.aiogeHostLaunchExecute(ffi.NULL, ffi.NULL, ffi.NULL, s[0]) < 0
        bogus = ffi.cast("aiogeLaunch *", 0x1000)
        assert lib.aiogeHostLaunchExecute(bogus, ffi.NULL, ffi.NULL, s[0]) < 0
        assert lib.aiogeHostLaunchDestroy(bogus) != 0
    finally:
        _native.recent_error()
        assert lib.aclrtDestroyStream(s[0]) == 0


def test_prepare_refuses_const_inputs_and_execute_checks_pointers(rt):
    d = lib.aclCreateTensorDesc(0, 1, ffi.new("int64_t[]", [4]), 2)
    c = lib.aclCreateTensorDesc(0, 1, ffi.new("int64_t[]", [4]), 2)
    val = np.ones(4, np.float32)
    assert lib.aclSetTensorConst(c, ffi.from_buffer(val), val.nbytes) == 0
    p = ffi.new("aiogeLaunch **")
    s = ffi.new("aclrtStream *")
    assert lib.aclrtCreateStream(s) == 0
    try:
        refused = lib.aiogeHostLaunchPrepare(p, b"Add", 2, ffi.new("aclTensorDesc *[]", [d, c]), 1,
                                             ffi.new("aclTensorDesc *[]", [d]))  # fmt: skip
        assert refused == lib.ACL_ERROR_API_NOT_SUPPORT
        assert lib.aiogeHostLaunchPrepare(p, b"Add", 2, ffi.new("aclTensorDesc *[]", [d, d]), 1,
                                          ffi.new("aclTensorDesc *[]", [d])) == 0  # fmt: skip
        host = np.zeros(12, np.float32)
        ptrs = ffi.new("void *[]", [ffi.from_buffer(host)] * 3)
        assert -lib.aiogeHostLaunchExecute(p[0], ptrs, ffi.NULL, s[0]) == 100000  # host memory is refused
        assert "not device memory" in _native.recent_error()
        dev = ffi.new("void **")
        assert lib.aclrtMalloc(dev, 16, 0) == 0
        ptrs = ffi.new("void *[]", [dev[0]] * 3)
        assert lib.aiogeHostLaunchExecute(p[0], ptrs, ffi.NULL, s[0]) >= 1  # in place: Add may
        assert lib.aclrtSynchronizeStream(s[0]) == 0
        assert lib.aclrtFree(dev[0]) == 0
        assert lib.aiogeHostLaunchDestroy(p[0]) == 0
        assert lib.aiogeHostLaunchDestroy(p[0]) != 0  # not live any more
    finally:
        _native.recent_error()
        lib.aclDestroyTensorDesc(d)
        lib.aclDestroyTensorDesc(c)
        assert lib.aclrtDestroyStream(s[0]) == 0


async def test_an_observer_still_sees_every_launch(stream):
    x = stream.upload(np.ones(16, np.float32))
    out = stream.empty(16)
    await x
    with Profiler() as prof:
        for _ in range(5):
            aioge.op("Add", [x, x], [out])
        await stream.synchronize()
    adds = [r for r in prof.launches if r.name == "Add"]
    assert len(adds) == 5 and all(r.error == 0 for r in adds)
    assert [r.index for r in prof.completed() if r.name == "Add"] == [r.index for r in adds]


async def test_many_pipelined_launches_then_one_await(stream):
    x = stream.upload(np.ones(16, np.float32))
    out = stream.empty(16)
    for _ in range(3000):  # more than the lane's inline poll threshold
        aioge.op("Add", [x, x], [out])
    await out
    assert stream.in_flight == 0 or stream.stats["completed"] >= 3000
    await stream.synchronize()
    assert stream.in_flight == 0


async def test_an_observed_launch_takes_the_same_prepared_call(stream):
    """Profiled (and so timed) or not, a launch of device tensors is the one prepared C call: the
    observer gets an event-completed launch with its operands and device time around that call."""
    x = stream.upload(np.arange(24, dtype=np.float32).reshape(4, 6))
    cache = stream.device.context.cache
    async with aioge.profile() as prof:
        before = len(cache.prepared)
        (y,) = aioge.op("Mul", [x, x], [TensorSpec((4, 6))])
        assert len(cache.prepared) == before + 1  # prepared: the route an unobserved launch takes
        comp = y.launch
        assert comp is not None and comp.event is not None and comp.start is not None  # timed by events
        np.testing.assert_array_equal(await y.numpy(), np.arange(24, dtype=np.float32).reshape(4, 6) ** 2)
    (rec,) = [r for r in prof.completed() if r.name == "Mul"]
    assert rec.kind == "kernel" and rec.inputs == [((4, 6), "float32")] * 2 and rec.outputs == [((4, 6), "float32")]
    assert rec.device_ms is not None and rec.device_ms >= 0
    (z,) = aioge.op("Mul", [x, x], [TensorSpec((4, 6))])  # unobserved: the same prepared launch, no event
    assert len(cache.prepared) == before + 1 and z.launch is not None and z.launch.event is None
    await z


async def test_an_observed_launch_that_fails_gives_its_start_event_back(stream):
    x = stream.upload(np.ones(4, np.float32))
    async with aioge.profile():
        with pytest.raises(aioge.AclError):
            aioge.op("Add", [x, x], [TensorSpec((5,))])  # refused at once: shapes do not broadcast
        (y,) = aioge.op("Add", [x, x], [TensorSpec((4,))])  # the transaction is whole again
        np.testing.assert_array_equal(await y.numpy(), np.full(4, 2, np.float32))
