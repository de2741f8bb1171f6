"""The synchronous path of small executions from host memory (``aiogeGraphExecuteHostNow``).

A graph that fits ``AIOGE_HOST_INLINE_BYTES`` runs on the caller's thread when
its stream is idle: one C call, no event, no completion.  Everything the
general path guarantees must still hold: results, errors (typed, naming the
graph, reported by the stream's next ``synchronize()`` too), feeds checked,
order behind queued work, fresh outputs per call, concurrency across threads.
"""

from __future__ import annotations

import asyncio
import threading

import numpy as np
import pytest

import aioge
from aioge import _native
from aioge.graph import Graph, run_reference
from tests.runtime.test_executable import ew_chain, gate, inject, open_gate

pytestmark = pytest.mark.anyio


def launched(s: aioge.Stream) -> int:
    return s._lane.launched


async def until_now(model, feeds, s: aioge.Stream, tries: int = 50) -> None:
    """Execute until one run takes the synchronous path.  The runtime judges a graph by the CPU
    time of its runs, and a first run's page faults (fresh arena and output pages, slow on a
    busy VM) may count against it once; the next cheap run brings it back."""
    for _ in range(tries):
        before = launched(s)
        await model.execute(feeds)
        if launched(s) == before:
            return
    raise AssertionError(f"no execution of {model!r} ran now in {tries} tries")


async def test_a_small_execution_runs_now_without_a_completion(dev, compiled):
    model = await compiled(ew_chain())
    assert model._now is not None
    s = dev.default_stream
    await s.synchronize()  # the weights' uploads
    feeds = {"x": np.arange(15, dtype=np.float32).reshape(3, 5) / 7, "y": np.linspace(-1, 1, 5, dtype=np.float32)}
    want = run_reference(ew_chain(), feeds)
    first = launched(s)
    await until_now(model, feeds, s)
    # its own arena counts, also when every run took this path and none leased one from the pool
    assert model.stats["arenas"] == 1 + (launched(s) > first)
    before, tasks = launched(s), _native.counters()["tasks_executed"]
    outs = [await model.execute(feeds) for _ in range(5)]
    assert launched(s) == before  # no event recorded, nothing for the lane to complete
    assert _native.counters()["tasks_executed"] == tasks + 5  # and yet the runtime ran each one
    (name,) = model.outputs
    for o in outs:
        np.testing.assert_allclose(o[name], want[name], rtol=1e-6, atol=1e-6)
    assert len({id(o[name]) for o in outs}) == 5  # every call gets arrays of its own
    assert model.stats["peak"] == 0  # a synchronous run holds no max_inflight slot


async def test_a_failure_is_typed_names_the_graph_and_reaches_synchronize(dev, compiled):
    model = await compiled(ew_chain())
    s = dev.default_stream
    await s.synchronize()
    feeds = {"x": np.ones((3, 5), np.float32), "y": np.ones(5, np.float32)}
    want = await model.execute(feeds)
    await until_now(model, feeds, s)
    inject(s, 1)
    before = launched(s)
    with pytest.raises(aioge.errors.AicoreExceptionError, match="injected") as ei:
        await model.execute(feeds)
    assert launched(s) == before  # it failed on the synchronous path
    assert ei.value.op == "ew: execution from host memory"
    with pytest.raises(aioge.errors.AicoreExceptionError, match="injected"):
        await s.synchronize()  # reported once more by the stream, as every failed launch is
    await s.synchronize()  # and only once
    got = await model.execute(feeds)  # the stream stays usable; the next launch is not blamed
    (name,) = model.outputs
    np.testing.assert_array_equal(got[name], want[name])
    (y,) = aioge.op("Add", [s.upload(np.ones(3, np.float32))] * 2, [aioge.TensorSpec((3,))], stream=s)
    np.testing.assert_array_equal(await y.numpy(), np.full(3, 2, np.float32))


async def test_bad_feeds_get_the_general_paths_errors(dev, compiled):
    model = await compiled(ew_chain())
    x, y = np.ones((3, 5), np.float32), np.ones(5, np.float32)
    with pytest.raises(ValueError, match=r"missing inputs \['y'\]"):
        await model.execute({"x": x})
    with pytest.raises(ValueError, match=r"unknown inputs \['z'\]"):
        await model.execute({"x": x, "y": y, "z": y})
    with pytest.raises(ValueError, match=r"input 'x' has shape \(5, 3\)"):
        await model.execute({"x": x.T.copy(), "y": y})
    with pytest.raises(TypeError, match="input 'y' has dtype float64"):
        await model.execute({"x": x, "y": y.astype(np.float64)})
    with pytest.raises(TypeError, match="takes a dict"):
        await model.execute([x, y])  # type: ignore[arg-type]


async def test_inputs_the_fast_path_cannot_take_still_give_the_right_result(dev, compiled):
    """Non-contiguous arrays, read-only arrays and device tensors go the general way, with the same result."""
    model = await compiled(ew_chain())
    rng = np.random.default_rng(3)
    big = rng.standard_normal((5, 6)).astype(np.float32)
    x = big.T[:5, :3].T  # (3, 5), not C-contiguous
    assert not x.flags.c_contiguous
    y = rng.standard_normal(5).astype(np.float32)
    want = run_reference(ew_chain(), {"x": np.ascontiguousarray(x), "y": y})
    (name,) = model.outputs
    ro = np.ascontiguousarray(x)
    ro.flags.writeable = False
    for feeds in ({"x": x, "y": y}, {"x": ro, "y": y}, {"x": dev.default_stream.upload(x), "y": y}):
        got = await model.execute(feeds)  # type: ignore[arg-type]
        np.testing.assert_allclose(got[name], want[name], rtol=1e-6, atol=1e-6)


async def test_behind_queued_work_it_waits_its_turn(dev, compiled):
    import anyio

    model = await compiled(ew_chain())
    s = dev.default_stream
    await s.synchronize()
    feeds = {"x": np.full((3, 5), 0.25, np.float32), "y": np.ones(5, np.float32)}
    want = run_reference(ew_chain(), feeds)
    got: list[dict[str, np.ndarray]] = []

    async def one() -> None:
        got.append(await model.execute(feeds))

    g = gate(s)
    try:
        before = launched(s)
        async with anyio.create_task_group() as tg:
            tg.start_soon(one)
            await anyio.sleep(0.05)
            assert not got  # queued behind the gate, not run past it
            assert launched(s) == before + 1
            open_gate(g)
    finally:
        open_gate(g)
    (name,) = model.outputs
    np.testing.assert_allclose(got[0][name], want[name], rtol=1e-6, atol=1e-6)


async def test_threads_with_loops_of_their_own_share_one_model(dev, compiled):
    """Two threads race for the synchronous path; the loser takes the general one. Bit-exact results."""
    model = await compiled(ew_chain())
    await dev.default_stream.synchronize()
    rng = np.random.default_rng(5)
    feeds = [{"x": rng.standard_normal((3, 5)).astype(np.float32), "y": rng.standard_normal(5).astype(np.float32)}
             for _ in range(40)]  # fmt: skip
    serial = [await model.execute(f) for f in feeds]
    got: dict[int, list[dict[str, np.ndarray]]] = {}
    errors: list[BaseException] = []

    def worker(k: int) -> None:
        async def main() -> list[dict[str, np.ndarray]]:
            return [await model.execute(f) for f in feeds for _ in range(3)][::3]

        try:
            got[k] = asyncio.run(main())
        except BaseException as e:  # reported below
            errors.append(e)

    threads = [threading.Thread(target=worker, args=(k,)) for k in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert not errors, errors
    (name,) = model.outputs
    for k in range(3):
        for a, b in zip(got[k], serial, strict=True):
            np.testing.assert_array_equal(a[name], b[name])


async def test_a_closed_model_or_stream_is_refused(dev, compiled):
    model = await compiled(ew_chain())
    feeds = {"x": np.ones((3, 5), np.float32), "y": np.ones(5, np.float32)}
    async with dev.open_stream() as s:
        await model.execute(feeds, stream=s)
    with pytest.raises(aioge.ClosedResourceError):
        await model.execute(feeds, stream=s)
    await model.aclose()
    with pytest.raises(aioge.ClosedResourceError):
        await model.execute(feeds)


async def test_the_runtime_decides_by_measured_cpu_time(dev, compiled):
    """Before its first run a graph is judged by size (AIOGE_HOST_INLINE_BYTES); afterwards by the
    CPU time its runs took (AIOGE_HOST_INLINE_US): a cheap graph over the size runs now once
    measured, a costly one never does."""
    s = dev.default_stream
    g = Graph("wide")
    x = g.input("x", (64, 512), "float32")  # 128 KiB in, 128 KiB out: over the 64 KiB default
    g.output(g.add_node("Relu", [x]))
    wide = await compiled(g)
    a = np.random.default_rng(0).standard_normal((64, 512)).astype(np.float32)
    await s.synchronize()
    before = launched(s)
    np.testing.assert_array_equal((await wide.execute({"x": a}))[wide.graph.outputs[0]], np.maximum(a, 0))
    assert launched(s) == before + 1  # unmeasured and big: the stream's worker ran it
    await s.synchronize()
    await until_now(wide, {"x": a}, s)  # measured cheap (a Relu): now it runs on the caller's thread
    before = launched(s)
    for _ in range(3):
        np.testing.assert_array_equal((await wide.execute({"x": a}))[wide.graph.outputs[0]], np.maximum(a, 0))
    assert launched(s) == before

    g = Graph("heavy")
    x = g.input("x", (384, 384), "float32")
    h = x
    for i in range(4):  # 4 x 113 MFLOP: milliseconds, far over 200 us
        h = g.add_node("MatMul", [h, g.constant(f"w{i}", np.eye(384, dtype=np.float32))])
    g.output(h)
    heavy = await compiled(g)
    b = np.random.default_rng(1).standard_normal((384, 384)).astype(np.float32)
    await s.synchronize()
    before = launched(s)
    for _ in range(3):
        np.testing.assert_allclose((await heavy.execute({"x": b}))[heavy.graph.outputs[0]], b, rtol=1e-6)
    assert launched(s) == before + 3  # each on the worker


async def test_a_costly_graph_asks_to_run_now_ever_more_rarely(dev, compiled, monkeypatch):
    """Asking whether a graph may run now costs its outputs' allocation and a C call: a graph
    measured too costly asks again only after 1, 3, 7, 15 ... executions that took the general
    path, each of them one task on the stream's worker with its own correct outputs."""
    from aioge.runtime.graphs import executable

    asked: list[int] = []
    real = executable._execute_now

    def counting(*args):
        asked.append(executed)
        return real(*args)

    monkeypatch.setattr(executable, "_execute_now", counting)
    g = Graph("heavy2")
    x = g.input("x", (384, 384), "float32")
    h = g.add_node("MatMul", [x, g.constant("w0", np.eye(384, dtype=np.float32))])
    g.output(g.add_node("MatMul", [h, g.constant("w1", 2 * np.eye(384, dtype=np.float32))]))  # 2 x 113 MFLOP
    heavy = await compiled(g)
    s = dev.default_stream
    rng = np.random.default_rng(2)
    await s.synchronize()
    before = launched(s)
    executed = 0
    while executed < 20:  # unmeasured and over AIOGE_HOST_INLINE_BYTES, then measured far over AIOGE_HOST_INLINE_US
        b = rng.standard_normal((384, 384)).astype(np.float32)
        np.testing.assert_allclose((await heavy.execute({"x": b}))[heavy.graph.outputs[0]], 2 * b, rtol=1e-6)
        executed += 1
    assert launched(s) == before + 20  # each on the worker
    assert asked == [0, 2, 6, 14]


async def test_observers_see_the_route_production_takes(dev, compiled):
    """A profiled (or metered) execution takes the route an unobserved one takes -- here the
    synchronous one: no launch, the runtime ran it -- and the observers still get it whole: the
    profiler one graph launch with its nodes timed and the execution, the metrics its count."""
    from aioge import metrics

    model = await compiled(ew_chain())
    s = dev.default_stream
    await s.synchronize()
    feeds = {"x": np.arange(15, dtype=np.float32).reshape(3, 5) / 7, "y": np.linspace(-1, 1, 5, dtype=np.float32)}
    (name,) = model.outputs
    plain = (await model.execute(feeds))[name]
    await until_now(model, feeds, s)
    was = metrics.enabled()
    metrics.enable()
    try:
        runs = metrics.snapshot()["executions"].get("ew", 0)
        async with aioge.profile() as prof:
            for _ in range(20):  # a first run's page faults may once send it to the stream
                before = launched(s)
                got = (await model.execute(feeds))[name]
                if launched(s) == before:
                    break
            else:
                raise AssertionError("no profiled execution ran now: observing changed the route")
        np.testing.assert_array_equal(got, plain)
        assert metrics.snapshot()["executions"]["ew"] > runs
    finally:
        if not was:
            metrics.disable()
    (rec,) = [r for r in prof.completed() if r.execution is not None and r.end_ns is not None][-1:]
    ex = prof.executions[rec.execution]
    assert rec.kind == "graph" and rec.name == "ew[0]" and ex.join == rec.index and ex.latency_ms is not None
    assert rec.nodes and [n.op_type for n in rec.nodes] == [op.op_type for op in model._build.ops]
    assert all(rec.start_ns <= n.start_ns <= n.end_ns <= rec.end_ns for n in rec.nodes)


async def test_a_profiled_execution_from_host_memory_is_one_timed_task(dev, compiled, monkeypatch):
    """Too costly to run now, it is one task from host memory -- profiled or not -- and the
    profiler gets that task's node times."""
    monkeypatch.setenv("AIOGE_HOST_INLINE_BYTES", "0")  # read when the model loads: never run now
    model = await compiled(ew_chain())
    s = dev.default_stream
    await s.synchronize()
    feeds = {"x": np.ones((3, 5), np.float32), "y": np.zeros(5, np.float32)}
    (name,) = model.outputs
    before = launched(s)
    plain = (await model.execute(feeds))[name]
    one = launched(s) - before
    assert one == 1  # copies in, the segment and copies out: one task
    async with aioge.profile() as prof:
        before = launched(s)
        got = (await model.execute(feeds))[name]
        assert launched(s) - before == one  # the same route
    np.testing.assert_array_equal(got, plain)
    (rec,) = [r for r in prof.completed() if r.kind == "graph"]
    assert rec.execution is not None and prof.executions[rec.execution].join == rec.index
    assert rec.nodes and len(rec.nodes) == len(model._build.ops)
