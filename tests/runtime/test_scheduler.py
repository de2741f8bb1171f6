"""The scheduler contract: per-launch awaitables, errors, cancellation,
timeouts, cross-stream order, backpressure, shutdown, threads -- on asyncio,
uvloop and trio."""

from __future__ import annotations

import asyncio
import random
import threading

import anyio
import anyio.lowlevel
import numpy as np
import pytest

import aioge
from aioge import _native
from aioge._native import ffi, lib
from aioge.runtime import scheduler
from aioge.runtime.scheduler import SLICE_MS

pytestmark = pytest.mark.anyio


@pytest.fixture(params=[False, True], ids=["default_driver", "lane_thread"])
def lane_thread(request):
    return request.param


def gate(s, timeout_ms=20_000) -> int:
    g = ffi.new("uint64_t *")
    with s._enqueue:  # the stream's lock, open, context bound
        _native.check(lib.aiogeHostLaunchGate(s._handle, timeout_ms, g), "gate")
    return g[0]


def open_gate(g: int) -> None:
    _native.check(lib.aiogeHostOpenGate(g), "open gate")


def inject(s, count=1, code=507015) -> None:
    with s._enqueue:  # the stream's lock, open, context bound
        _native.check(lib.aiogeHostInjectFailure(s._handle, count, code), "inject")


def delay(s, us: int) -> None:
    with s._enqueue:  # the stream's lock, open, context bound
        _native.check(lib.aiogeHostLaunchDelay(s._handle, us), "delay")


async def test_each_launch_resolves_on_its_own_in_order(stream):
    g = gate(stream)
    x = stream.upload(np.ones(8, np.float32))
    ys = [aioge.ops.add(x, float(i)) for i in range(5)]
    assert not any(y.is_ready() for y in ys)
    open_gate(g)
    await ys[2]
    assert ys[0].is_ready() and ys[1].is_ready() and ys[2].is_ready()
    for i, y in enumerate(ys):
        np.testing.assert_array_equal(await y.numpy(), np.full(8, 1 + i, np.float32))
    st = stream.stats
    assert st["launched"] == st["completed"] + st["in_flight"] and st["failed"] == 0


async def test_error_reaches_exactly_the_failing_launch(stream):
    x = stream.upload(np.ones(4, np.float32))
    await x
    before = aioge.ops.add(x, x)
    inject(stream, 1, 507015)
    bad = aioge.ops.mul(x, x)
    after = aioge.ops.sub(x, x)
    with pytest.raises(aioge.errors.AicoreExceptionError) as ei:
        await bad
    assert ei.value.op == "Mul" and "injected failure" in ei.value.message
    np.testing.assert_array_equal(await before.numpy(), np.full(4, 2, np.float32))
    np.testing.assert_array_equal(await after.numpy(), np.zeros(4, np.float32))
    with pytest.raises(aioge.errors.AicoreExceptionError):  # the stream's next synchronize reports it too
        await stream.synchronize()
    await stream.synchronize()  # once
    assert stream.stats["failed"] == 1
    np.testing.assert_array_equal(await aioge.ops.add(x, 1.0).numpy(), np.full(4, 2, np.float32))


async def test_concurrent_requests_get_their_own_errors(stream):
    x = stream.upload(np.arange(4, dtype=np.float32))
    await x
    results: dict[int, object] = {}

    async def request(i: int) -> None:
        if i == 3:
            inject(stream, 1, 507015)
        y = aioge.ops.add(x, float(i))
        await anyio.lowlevel.checkpoint()
        try:
            results[i] = await y.numpy()
        except aioge.AclError as e:
            results[i] = e

    async with anyio.create_task_group() as tg:
        for i in range(8):
            tg.start_soon(request, i)
    for i in range(8):
        if i == 3:
            assert isinstance(results[i], aioge.errors.AicoreExceptionError)
        else:
            np.testing.assert_array_equal(results[i], np.arange(4, dtype=np.float32) + i)
    with pytest.raises(aioge.AclError):
        await stream.synchronize()


async def test_cancellation_storm(stream):
    rng = random.Random(7)
    one = stream.upload(np.ones(256, np.float32))
    expected = {}
    tensors = {}
    cancelled = 0

    async def consumer(i: int, t: aioge.Tensor, cancel_after: float | None) -> None:
        nonlocal cancelled
        with anyio.move_on_after(cancel_after if cancel_after is not None else 30) as scope:
            out = await t.numpy()
            np.testing.assert_array_equal(out, expected[i])
        if scope.cancelled_caught:
            cancelled += 1

    g = gate(stream)
    async with anyio.create_task_group() as tg:
        for i in range(300):
            if i == 150:
                open_gate(g)  # half are cancelled while queued behind the gate, half while running
            host = np.full(256, i, np.float32)  # dropped right after the launch
            t = aioge.ops.add(stream.upload(host), one)
            expected[i] = np.full(256, i + 1, np.float32)
            del host
            if rng.random() < 0.1:
                delay(stream, 200)
            tensors[i] = t
            tg.start_soon(consumer, i, t, 0 if rng.random() < 0.4 else None)
            if i % 50 == 0:
                await anyio.lowlevel.checkpoint()
    assert cancelled > 20
    # every result survives, cancelled awaits included
    for i in rng.sample(range(300), 40):
        np.testing.assert_array_equal(await tensors[i].numpy(), expected[i])
    await stream.synchronize()
    assert stream.in_flight == 0


async def test_cancelled_wait_keeps_buffers_alive_until_the_launch_ran(stream):
    g = gate(stream)
    src = np.arange(1 << 16, dtype=np.float32)
    t = stream.upload(src)
    y = aioge.ops.add(t, 1.0)
    del t, src
    with anyio.move_on_after(0.01):
        await y.numpy()
    before = _native.counters()["device_allocations"]
    assert before >= 2  # the upload's block is still held by the queued launches
    open_gate(g)
    np.testing.assert_array_equal(await y.numpy(), np.arange(1 << 16, dtype=np.float32) + 1)


@pytest.mark.parametrize("anyio_backend", ["asyncio"])  # trio's lane thread may settle the hit before it spins
async def test_a_kind_of_launch_that_outlasts_the_spin_stops_spinning(stream, monkeypatch):
    # an await on a launch near the head of its stream polls briefly before suspending; a kind of
    # launch that keeps outlasting that spin spins again only after 1, 3, 7... awaits skipped it,
    # a hit forgets its misses, and other kinds keep their spin
    monkeypatch.setattr(scheduler, "AWAIT_SPIN_S", 20e-6)
    lane = stream._lane
    polls = [0]
    real_poll = scheduler.Lane.poll

    def counting_poll(self: scheduler.Lane) -> int:
        if self is lane:
            polls[0] += 1
        return real_poll(self)

    monkeypatch.setattr(scheduler.Lane, "poll", counting_poll)
    x = stream.upload(np.ones(8, np.float32))
    await x
    spun: list[bool] = []

    async def launch_and_await(op, want: float, gated: bool) -> None:
        g = gate(stream) if gated else None
        y = op(x, 1.0)
        if g is None:
            assert y.launch._ran_within(20_000)  # ran on the worker, not yet settled: the spin's first poll takes it
        before = polls[0]

        async def opener() -> None:  # runs once the awaiting task suspended (or finished)
            spun.append(polls[0] > before)
            if g is not None:
                open_gate(g)

        async with anyio.create_task_group() as tg:
            tg.start_soon(opener)
            await y
        np.testing.assert_array_equal(await y.numpy(), np.full(8, want, np.float32))

    for i in range(16):
        await launch_and_await(aioge.ops.add, 2, gated=i != 14)
    assert [i for i, s in enumerate(spun) if s] == [0, 2, 6, 14, 15]
    del spun[:]
    await launch_and_await(aioge.ops.mul, 1, gated=True)  # another kind: its own first spin
    await launch_and_await(aioge.ops.add, 2, gated=True)  # Add missed once more at 15: this one skips
    assert spun == [True, False]


async def test_a_burst_of_completions_costs_one_wake_up(stream, lane_thread):
    lane = stream._lane
    if lane_thread:  # trio always uses the lane thread; asyncio, the notify fd unless told not to
        lane._fd_ok = False
    x = stream.upload(np.ones(16, np.float32))
    await x
    g = gate(stream)
    ys = [aioge.ops.add(x, float(i)) for i in range(100)]
    async with anyio.create_task_group() as tg:
        for y in ys:
            tg.start_soon(y.ready)
        while lane.waited < len(ys):
            await anyio.sleep(0.001)
        before = dict(stream.stats)
        # the drivers are held off (the lock; the loop is blocked too) until every
        # launch has run, so the 100 completions arrive together
        with lane.lock:
            open_gate(g)
            assert ys[-1].launch is not None and ys[-1].launch._ran_within(20_000)
    after = stream.stats
    assert after["completed"] - before["completed"] == len(ys)
    assert after["wakeups"] - before["wakeups"] == 1


async def test_timeouts_on_a_long_queue(stream):
    g = gate(stream)
    x = stream.upload(np.ones(4, np.float32))
    t = 0.2
    ticks = 0

    async def heartbeat() -> None:
        nonlocal ticks
        while True:
            await anyio.sleep(0.01)
            ticks += 1

    async def times_out(wait) -> None:
        """TimeoutError no earlier than t by the loop's clock, which deadlines use (less 1 ms:
        uvloop's ticks in ms), within one slice of it plus generous slack for a busy machine;
        the loop keeps running meanwhile."""
        ticks0, t0 = ticks, anyio.current_time()
        with pytest.raises(TimeoutError):
            await wait()
        waited = anyio.current_time() - t0
        assert t - 1e-3 <= waited < t + SLICE_MS / 1000 + 1.0
        assert ticks - ticks0 >= 3

    async def under_fail_after() -> None:
        with anyio.fail_after(t):
            await x

    async def under_asyncio_timeout() -> None:
        async with asyncio.timeout(t):
            await x

    async with anyio.create_task_group() as tg:
        tg.start_soon(heartbeat)
        await times_out(lambda: stream.synchronize(timeout=t))
        await times_out(lambda: x.numpy(timeout=t))
        await times_out(under_fail_after)
        if asyncio._get_running_loop() is not None:  # asyncio and uvloop
            await times_out(under_asyncio_timeout)
        tg.cancel_scope.cancel()
    ev = stream.record_event()
    with pytest.raises(TimeoutError):
        await ev.wait(timeout=0.02)
    assert not ev.query()
    open_gate(g)
    await ev.wait(timeout=10)
    assert ev.query() and ev.done
    np.testing.assert_array_equal(await x.numpy(timeout=10), np.ones(4, np.float32))
    await stream.synchronize(timeout=10)
    ev.close()


async def test_device_synchronize_has_one_deadline_for_all_streams(dev):
    streams = [dev.open_stream() for _ in range(4)]
    gates = [gate(s) for s in streams]
    xs = [s.upload(np.ones(4, np.float32)) for s in streams]
    t = 0.6
    t0 = anyio.current_time()
    with pytest.raises(TimeoutError):
        await dev.synchronize(timeout=t)
    # one timeout per stream in turn would take 4 t
    assert t - 1e-3 <= anyio.current_time() - t0 < t + SLICE_MS / 1000 + 1.0
    for g in gates:
        open_gate(g)
    await dev.synchronize(timeout=10)
    assert all(x.is_ready() for x in xs)
    for s in streams:
        await s.aclose()


async def test_the_loop_is_never_blocked_while_waiting(stream):
    # no tick count per wall-clock time (a loaded machine gives fewer): the loop must
    # go on running other tasks while a download waits behind a closed gate
    g = gate(stream)
    try:
        x = stream.upload(np.ones(4, np.float32))
        got: list[np.ndarray] = []

        async def download() -> None:
            got.append(await x.numpy())

        async with anyio.create_task_group() as tg:
            tg.start_soon(download)
            with anyio.fail_after(15):  # well before the gate's own timeout
                for _ in range(20):
                    await anyio.sleep(0.001)
            assert not got  # still held by the gate, and the loop ran on meanwhile
            open_gate(g)
            g = 0
        np.testing.assert_array_equal(got[0], np.ones(4, np.float32))
    finally:
        if g:
            open_gate(g)


async def test_cross_stream_auto_wait_under_load(dev):
    async with dev.open_stream() as a, dev.open_stream() as b:
        base = a.upload(np.zeros(1024, np.float32))
        outs = []
        for i in range(40):
            if i % 7 == 0:
                delay(a, 500)
            produced = aioge.ops.add(base, float(i))  # on a
            consumed = aioge.op("Mul", [produced, produced], [aioge.TensorSpec((1024,))], stream=b)[0]
            outs.append((i, consumed))
        for i, c in outs:
            assert c.stream is b
            np.testing.assert_array_equal(await c.numpy(), np.full(1024, i * i, np.float32))
        # write-after-read: a overwrites a tensor b is still reading
        g = gate(b)
        src = a.upload(np.full(8, 3, np.float32))
        await src
        read = aioge.op("Add", [src, src], [aioge.TensorSpec((8,))], stream=b)[0]
        aioge.op("Sub", [src, src], [src], stream=a)  # must wait for b's read
        open_gate(g)
        np.testing.assert_array_equal(await read.numpy(), np.full(8, 6, np.float32))
        np.testing.assert_array_equal(await src.numpy(), np.zeros(8, np.float32))


async def test_events_across_streams_and_timing(dev):
    async with dev.open_stream() as a, dev.open_stream() as b:
        start = a.record_event(timing=True)
        delay(a, 20_000)
        end = a.record_event(timing=True)
        b.wait_event(end)
        y = b.upload(np.ones(2, np.float32))
        await y
        assert end.done  # b could only run after a reached end
        assert 15 <= end.elapsed_ms(start) < 2000
        start.close()
        end.close()


async def test_backpressure_drain(dev):
    async with dev.open_stream(high_water=4) as s:
        g = gate(s)
        x = s.upload(np.ones(4, np.float32))
        for _ in range(10):
            x = aioge.ops.add(x, 1.0)
        assert s.in_flight == 11
        with pytest.raises(TimeoutError):
            with anyio.fail_after(0.05):
                await s.drain()
        open_gate(g)
        with anyio.fail_after(10):
            await s.drain()
        assert s.in_flight <= 4
        np.testing.assert_array_equal(await x.numpy(), np.full(4, 11, np.float32))


async def test_shutdown_with_pending_work(dev):
    s = dev.open_stream()
    g = gate(s)
    x = s.upload(np.ones(4, np.float32))
    with pytest.raises(aioge.BusyResourceError):
        s.close()
    with pytest.raises(aioge.BusyResourceError):
        dev.close()

    async def opener() -> None:
        await anyio.sleep(0.05)
        open_gate(g)

    async with anyio.create_task_group() as tg:
        tg.start_soon(opener)
        await s.aclose()  # drains
    assert s.closed and x.is_ready()


async def test_device_aclose_drains_every_stream():
    d = aioge.open_device(0)
    s1, s2 = d.open_stream(), d.open_stream()
    g = gate(s1)
    y = aioge.ops.add(s1.upload(np.ones(4, np.float32)), 1.0)
    z = s2.upload(np.ones(4, np.float32))

    async def opener() -> None:
        await anyio.sleep(0.05)
        open_gate(g)

    async with anyio.create_task_group() as tg:
        tg.start_soon(opener)
        await d.aclose()
    assert d.closed and s1.closed and s2.closed and y.is_ready() and z.is_ready()


async def test_launches_from_several_threads_on_one_stream(stream):
    x = stream.upload(np.zeros(64, np.float32))
    one = stream.upload(np.ones(64, np.float32))
    await x

    def worker() -> None:
        for _ in range(100):
            aioge.op("Add", [x, one], [x])

    ts = [threading.Thread(target=worker) for _ in range(4)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    np.testing.assert_array_equal(await x.numpy(), np.full(64, 400, np.float32))


def test_several_threads_each_with_their_own_loop():
    import asyncio

    results = {}

    def run(i: int) -> None:
        async def main() -> None:
            async with aioge.open_device(0) as d, d.open_stream() as s:
                x = s.upload(np.full(16, i, np.float32))
                for _ in range(50):
                    x = aioge.ops.add(x, 1.0)
                results[i] = await x.numpy()

        asyncio.run(main())

    ts = [threading.Thread(target=run, args=(i,)) for i in range(3)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    for i in range(3):
        np.testing.assert_array_equal(results[i], np.full(16, i + 50, np.float32))


def test_one_stream_awaited_from_two_loops():
    import asyncio

    dev = aioge.open_device(0)
    try:
        s = dev.open_stream()
        x = s.upload(np.ones(8, np.float32))
        out = {}

        def other_loop() -> None:
            async def main() -> None:
                out["other"] = await aioge.ops.add(x, 1.0).numpy()

            asyncio.run(main())

        async def main() -> None:
            t = threading.Thread(target=other_loop)
            t.start()
            out["main"] = await aioge.ops.add(x, 2.0).numpy()
            while t.is_alive():
                await asyncio.sleep(0.01)
            await s.aclose()

        asyncio.run(main())
        np.testing.assert_array_equal(out["other"], np.full(8, 2, np.float32))
        np.testing.assert_array_equal(out["main"], np.full(8, 3, np.float32))
    finally:
        dev.close()


async def test_completion_of_a_closed_loop_is_skipped(dev):
    import asyncio

    s = dev.open_stream()
    g = gate(s)
    x = s.upload(np.ones(4, np.float32))

    def short_lived() -> None:
        async def main() -> None:
            with anyio.move_on_after(0.01):
                await x  # registers a waiter on this loop, then the loop closes

        asyncio.run(main())

    t = threading.Thread(target=short_lived)
    t.start()
    t.join()
    open_gate(g)
    await s.aclose()  # completing a launch whose waiter's loop is closed is harmless
    assert x.is_ready()


async def test_timing_streams_measure_device_time(dev):
    async with dev.open_stream(timing=True) as s:
        x = s.upload(np.ones(4, np.float32))
        delay(s, 10_000)
        y = aioge.ops.add(x, x)
        await y
        assert y.launch is not None and y.launch.device_ms is not None
        assert 0 <= y.launch.device_ms < 1000
        assert x.launch.device_ms is not None
        # the delay ran between the two launches, so it is in neither launch
        assert s.stats["device_ms"] < 1000
    async with dev.open_stream() as plain:
        z = plain.upload(np.ones(4, np.float32))
        await z
        assert z.launch.device_ms is None and plain.stats["device_ms"] == 0.0


async def test_timeouts_raise_the_documented_class_saying_what_and_how_long(dev):
    """StreamSyncTimeoutError / EventSyncTimeoutError (TimeoutErrors), not a bare one."""
    async with dev.open_stream() as s:
        g = gate(s)
        try:
            x = s.upload(np.ones(4, np.float32))
            ev = s.record_event()
            cases = [
                (lambda: s.synchronize(timeout=0.02), aioge.StreamSyncTimeoutError, r"synchronize\(\) of Stream"),
                (lambda: x.numpy(timeout=0.02), aioge.StreamSyncTimeoutError, r"numpy\(\) of a tensor \(4,\)"),
                (lambda: ev.wait(timeout=0.02), aioge.errors.EventSyncTimeoutError, r"wait\(\) of an event"),
                (lambda: dev.synchronize(timeout=0.02), aioge.StreamSyncTimeoutError, r"synchronize\(\) of Device 0"),
            ]
            for call, cls, what in cases:
                with pytest.raises(cls, match=what + r".*did not complete within 0.02 s") as ei:
                    await call()
                assert isinstance(ei.value, TimeoutError) and ei.value.code in (507046, 507047)
        finally:
            open_gate(g)
        np.testing.assert_array_equal(await x.numpy(timeout=30), np.ones(4, np.float32))
        ev.close()
