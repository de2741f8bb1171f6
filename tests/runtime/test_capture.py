"""Stream capture from Python: ``with stream.capture() as graph`` records, ``await graph.replay()`` runs."""

from __future__ import annotations

import anyio
import numpy as np
import pytest

import aioge
from aioge import _native

pytestmark = pytest.mark.anyio
#: no hooks used: also run against a library with only the ACL symbols, as a real Ascend (test_abi_mode)
ASCEND = pytest.mark.ascend


def _mlp(x, w1, b1, w2):
    return aioge.ops.matmul(aioge.ops.relu(aioge.ops.add(aioge.ops.matmul(x, w1), b1)), w2)


async def test_replay_equals_eager_for_an_op_sequence(stream):
    rng = np.random.default_rng(0)
    xs = rng.standard_normal((4, 8, 16), dtype=np.float32)
    w1, b1, w2 = (rng.standard_normal(s, dtype=np.float32) for s in ((16, 32), (32,), (32, 4)))
    dw1, db1, dw2 = stream.upload(w1), stream.upload(b1), stream.upload(w2)
    x = stream.upload(xs[0])
    eager = await _mlp(x, dw1, db1, dw2).numpy()
    tasks = _native.counters()["tasks_executed"]
    with stream.capture() as graph:
        y = _mlp(x, dw1, db1, dw2)
        e = aioge.ops.mul(aioge.ops.add(y, y), y)  # an elementwise chain on top
    assert _native.counters()["tasks_executed"] == tasks  # recorded, not run
    assert graph.launches == 6 and graph.replays == 0
    with pytest.raises(aioge.StreamCaptureError, match="replayed"):
        await y.numpy()  # never replayed yet: its launch has not run
    await graph.replay()
    np.testing.assert_allclose(await y.numpy(), eager, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(await e.numpy(), 2 * eager * eager, rtol=1e-4, atol=1e-4)
    for k in range(1, 4):  # replay after input updates
        stream.copy_into(x, xs[k])
        await graph.replay()
        ref = np.maximum(xs[k] @ w1 + b1, 0) @ w2
        np.testing.assert_allclose(await y.numpy(), ref, rtol=1e-4, atol=1e-4)
    assert graph.replays == 4
    graph.close()
    graph.close()  # idempotent
    with pytest.raises(aioge.ClosedResourceError):
        graph.launch()


@ASCEND
async def test_many_replays_in_flight_and_concurrent_streams(dev):
    async with dev.open_stream() as s1, dev.open_stream() as s2:
        acc = s1.zeros((64,))
        one = s1.upload(np.ones(64, np.float32))
        await s1.synchronize()
        with s1.capture() as graph:
            aioge.op("Add", [acc, one], [acc], stream=s1)  # acc += 1, in place
        comps = []
        for _ in range(20):
            comps.append(graph.launch(s1))
            comps.append(graph.launch(s2))  # ordered after s1's replays by the buffers they share
        for c in comps:
            await c
        np.testing.assert_array_equal(await acc.numpy(), np.full(64, 40, np.float32))
        async with graph:  # the Resource lifecycle: closed on exit
            await graph.replay(s2)
        assert graph.closed
        np.testing.assert_array_equal(await acc.numpy(stream=s2), np.full(64, 41, np.float32))


@ASCEND
async def test_async_with_and_launch_returns_an_awaitable_completion(stream):
    x = stream.upload(np.arange(8, dtype=np.float32))
    async with stream.capture() as graph:
        y = aioge.ops.relu(aioge.ops.add(x, x))
    comp = graph.launch()
    assert isinstance(comp, aioge.Completion)
    await comp
    np.testing.assert_array_equal(await y.numpy(), 2 * np.arange(8, dtype=np.float32))
    graph.close()


@ASCEND
async def test_a_failing_launch_fails_its_replay_and_names_it(stream):
    data = stream.upload(np.arange(4, dtype=np.float32))
    idx = stream.upload(np.array([3, 2, 1, 0], np.int64))
    with stream.capture() as graph:
        (out,) = aioge.op("GatherElements", [data, idx], [aioge.TensorSpec((4,), "float32")], stream=stream)
    await graph.replay()
    np.testing.assert_array_equal(await out.numpy(), [3, 2, 1, 0])
    stream.copy_into(idx, np.array([0, 7, 0, 0], np.int64))
    with pytest.raises(aioge.AclError) as ei:
        await graph.replay()
    assert "GatherElements" in ei.value.message and "task 1 of 1 failed" in ei.value.message
    with pytest.raises(aioge.AclError):
        await stream.synchronize()  # the stream reports it too, once
    stream.copy_into(idx, np.array([1, 1, 1, 1], np.int64))
    await graph.replay()  # the graph stays replayable
    np.testing.assert_array_equal(await out.numpy(), [1, 1, 1, 1])
    graph.close()


@ASCEND
async def test_waiting_inside_a_capture_is_refused_and_the_capture_goes_on(stream):
    x = stream.upload(np.ones(4, np.float32))
    await stream.synchronize()
    with stream.capture() as graph:
        y = aioge.ops.add(x, x)
        for call in (stream.synchronize(), y.numpy()):
            with pytest.raises(aioge.StreamCaptureError, match="capturing"):
                await call
        with pytest.raises(aioge.StreamCaptureError, match="replayed"):
            await y  # its launch was captured
        with pytest.raises(aioge.StreamCaptureError):
            stream.record_event()
        z = aioge.ops.add(y, y)
    await graph.replay()
    np.testing.assert_array_equal(await z.numpy(), np.full(4, 4, np.float32))
    graph.close()


async def test_a_dependency_on_another_streams_pending_work_is_refused(dev):
    async with dev.open_stream() as s1, dev.open_stream() as s2:
        gate = _gate(s2)
        try:
            x = s2.upload(np.ones(4, np.float32))  # pending behind the gate
            with s1.capture() as graph:
                with pytest.raises(aioge.StreamCaptureError, match="outside it"):
                    aioge.op("Add", [x, x], [aioge.TensorSpec((4,))], stream=s1)
            graph.close()
        finally:
            _native.check(_native.lib.aiogeHostOpenGate(gate), "gate")
        await s2.synchronize()
        with s1.capture() as graph:  # done now: nothing to wait for
            (y,) = aioge.op("Add", [x, x], [aioge.TensorSpec((4,))], stream=s1)
            y = y.reshape(2, 2)
        await graph.replay()
        np.testing.assert_array_equal(await y.numpy(), np.full((2, 2), 2, np.float32))
        graph.close()


def _gate(stream):
    g = _native.ffi.new("uint64_t *")
    with stream._lock:
        stream._enter()
        _native.check(_native.lib.aiogeHostLaunchGate(stream._handle, 10_000, g), "gate")
    return g[0]


@ASCEND
async def test_unreplayable_work_invalidates_the_capture(stream):
    t = stream.zeros((4,))
    await stream.synchronize()
    with pytest.raises(aioge.CaptureInvalidatedError, match="invalidated"):
        with stream.capture():
            with pytest.raises(aioge.StreamCaptureError, match="cannot record"):
                stream.copy_into(t, np.ones(4, np.float32))  # pageable host memory
    stream.copy_into(t, np.ones(4, np.float32))  # the stream goes on
    np.testing.assert_array_equal(await t.numpy(), np.ones(4, np.float32))


@ASCEND
async def test_an_exception_in_the_block_closes_the_graph(stream):
    x = stream.upload(np.ones(4, np.float32))
    with pytest.raises(ZeroDivisionError):
        with stream.capture() as graph:
            aioge.ops.add(x, x)
            1 / 0  # noqa: B018
    assert graph.closed
    await stream.synchronize()  # not capturing any more


@ASCEND
async def test_capture_misuse(stream, dev):
    with pytest.raises(ValueError, match="capture mode"):
        stream.capture("sometimes")
    with stream.capture("relaxed") as graph:
        with pytest.raises(aioge.StreamCaptureError, match="already capturing"):
            stream.capture().__enter__()
        with pytest.raises(aioge.StreamCaptureError, match="still in progress"):
            graph.launch()
    graph.close()
    async with dev.open_stream() as other:
        with other.capture("global") as g2:
            pass
        await g2.replay()  # an empty capture replays as nothing
        g2.close()


async def test_cancelling_an_awaited_replay_keeps_the_graph_alive(stream):
    x = stream.upload(np.ones(1 << 16, np.float32))
    with stream.capture() as graph:
        y = x
        for _ in range(20):
            y = aioge.ops.add(y, x)
    with anyio.move_on_after(0):
        await graph.replay()
    graph.close()  # a replay may still be queued: it keeps what it uses
    await stream.synchronize()
    np.testing.assert_array_equal(await y.numpy(), np.full(1 << 16, 21, np.float32))
