"""Compiled graphs on the device: sunk and per-op execution, concurrency,
errors, the GE-style Session."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import aioge
import aioge.runtime.device
import aioge.runtime.graphs.compile
import aioge.runtime.graphs.executable
from aioge import _native
from aioge.graph import Graph, run_reference
from tests.support.harness import ALL_BACKENDS

pytestmark = pytest.mark.anyio


def mlp(batch: int = 4, d_in: int = 8, hidden: int = 16, d_out: int = 4, seed: int = 0) -> Graph:
    rng = np.random.default_rng(seed)
    g = Graph("mlp")
    x = g.input("x", (batch, d_in), "float32")
    w1 = g.constant("w1", rng.standard_normal((d_in, hidden)).astype(np.float32))
    b1 = g.constant("b1", rng.standard_normal((hidden,)).astype(np.float32))
    h = g.add_node("Relu", [g.add_node("Add", [g.add_node("MatMul", [x, w1]), b1])])
    w2 = g.constant("w2", rng.standard_normal((hidden, d_out)).astype(np.float32))
    g.output(g.add_node("MatMul", [h, w2]))
    return g


def branches(n: int = 64) -> Graph:
    """Two independent chains joined at the end: the planner can give them two streams."""
    rng = np.random.default_rng(1)
    g = Graph("branches")
    x = g.input("x", (n, n), "float32")
    outs = []
    for k in range(2):
        h = x
        for i in range(3):
            w = g.constant(f"w{k}{i}", rng.standard_normal((n, n)).astype(np.float32) / n)
            h = g.add_node("Tanh" if i % 2 else "Relu", [g.add_node("MatMul", [h, w])])
        outs.append(h)
    g.output(g.add_node("Add", outs))
    return g


def ew_chain() -> Graph:
    g = Graph("ew")
    x = g.input("x", (3, 5), "float32")
    y = g.input("y", (5,), "float32")
    t = g.add_node("Mul", [x, y])
    t = g.add_node("Add", [t, g.constant("half", np.float32(0.5))])
    t = g.add_node("Sigmoid", [g.add_node("Tanh", [t])])
    g.output(g.add_node("Max", [t, g.constant("floor", np.full((5,), 0.55, np.float32))]))
    return g


@pytest.mark.parametrize("mode", ["sunk", "per_op"])
async def test_mlp_matches_the_reference(dev, compiled, mode):
    g = mlp()
    model = await compiled(g, mode=mode)
    assert model.mode == mode
    x = np.random.default_rng(5).standard_normal((4, 8)).astype(np.float32)
    out = await model.execute({"x": x})
    ref = run_reference(g, {"x": x})
    (name,) = model.outputs
    np.testing.assert_allclose(out[name], ref[name], rtol=1e-5, atol=1e-5)


async def test_sunk_graph_is_one_task_per_segment(dev, compiled):
    model = await compiled(mlp())
    x = np.ones((4, 8), np.float32)
    await model.execute({"x": x})
    before = _native.counters()["tasks_executed"]
    await model.execute({"x": x})
    tasks = _native.counters()["tasks_executed"] - before
    # host memory in and out, one segment: ONE task, the copies in and out inside it
    assert tasks == 1 == len(model._build.segments)
    # device tensors in and out: the graph task of each segment and nothing else
    t = dev.default_stream.upload(x)
    await model.execute({"x": t}, as_tensors=True)
    before = _native.counters()["tasks_executed"]
    out = await model.execute({"x": t}, as_tensors=True)
    assert _native.counters()["tasks_executed"] - before == len(model._build.segments)
    ref = await model.execute({"x": x})
    (name,) = model.outputs
    np.testing.assert_array_equal(await out[name].numpy(), ref[name])


@pytest.mark.parametrize("optimize", [0, 1, 2])
async def test_fused_and_unfused_agree(dev, compiled, optimize):
    g = ew_chain()
    model = await compiled(g, optimize=optimize)
    rng = np.random.default_rng(2)
    feeds = {"x": rng.standard_normal((3, 5)).astype(np.float32), "y": rng.standard_normal(5).astype(np.float32)}
    out = await model.execute(feeds)
    ref = run_reference(g, feeds)
    for k in model.outputs:
        np.testing.assert_allclose(out[k], ref[k], rtol=1e-5, atol=1e-6)
    if optimize == 2:
        assert any(op.op_type == "_FusedElementwise" for op in model._build.ops)


async def test_branches_on_two_streams_match(dev, compiled):
    g = branches()
    sunk = await compiled(g, max_streams=2)
    per_op = await compiled(g, mode="per_op")
    x = np.random.default_rng(3).standard_normal((64, 64)).astype(np.float32)
    a = await sunk.execute({"x": x})
    b = await per_op.execute({"x": x})
    ref = run_reference(g, {"x": x})
    for k in ref:
        np.testing.assert_allclose(a[k], ref[k], rtol=1e-4, atol=1e-5)
        np.testing.assert_allclose(b[k], ref[k], rtol=1e-4, atol=1e-5)
    assert sunk.plan.num_streams == 2 and len(sunk._build.segments) >= 2


async def serial_runs(model, feeds: list[dict]) -> list[dict]:
    return [await model.execute(f) for f in feeds]


def assert_same(got: list[dict], want: list[dict]) -> None:
    """Bit-exact: the host kernels are deterministic for a given shape."""
    assert len(got) == len(want)
    for g, w in zip(got, want):
        assert set(g) == set(w)
        for k in w:
            np.testing.assert_array_equal(g[k], w[k])


async def test_many_concurrent_executions_are_exact(dev, compiled):
    import anyio

    g = branches(64)
    model = await compiled(g, max_streams=2)
    assert model.plan.num_streams == 2
    rng = np.random.default_rng(4)
    feeds = [{"x": rng.standard_normal((64, 64)).astype(np.float32)} for _ in range(24)]
    serial = await serial_runs(model, feeds)
    for f, out in zip(feeds, serial):  # and the serial runs are right
        for k, ref in run_reference(g, f).items():
            np.testing.assert_allclose(out[k], ref, rtol=1e-4, atol=1e-5)
    got: list[dict] = [{} for _ in feeds]

    async def client(i: int) -> None:
        got[i] = await model.execute(feeds[i])

    async with anyio.create_task_group() as tg:
        for i in range(len(feeds)):
            tg.start_soon(client, i)
    assert_same(got, serial)


def gate(s: aioge.Stream, timeout_ms: int = 20_000) -> int:
    """Block ``s`` on the device until ``open_gate``: launches queue behind it."""
    g = _native.ffi.new("uint64_t *")
    with s._enqueue:  # the stream's lock, open, context bound
        _native.check(_native.lib.aiogeHostLaunchGate(s._handle, timeout_ms, g), "gate")
    return int(g[0])


def open_gate(g: int) -> None:
    """Idempotent (a gate that opened is no longer pending)."""
    if _native.lib.aiogeHostOpenGate(g):
        _native.recent_error()


@pytest.mark.parametrize("anyio_backend", ALL_BACKENDS)
@pytest.mark.parametrize("mode", ["sunk", "per_op"])
async def test_backpressure_bounds_executions_and_arenas(dev, compiled, mode):
    import anyio

    assert (await compiled(branches(64), mode=mode, max_inflight=3)).max_inflight == 3
    with pytest.raises(ValueError, match="max_inflight"):
        await dev.compile(branches(64), mode=mode, max_inflight=0)
    model = await compiled(branches(64), mode=mode)
    assert model.max_inflight == aioge.runtime.graphs.executable.MAX_INFLIGHT
    model.max_inflight = 4
    with pytest.raises(ValueError):
        model.max_inflight = 0
    rng = np.random.default_rng(7)
    feeds = [{"x": rng.standard_normal((64, 64)).astype(np.float32)} for _ in range(64)]
    serial = await serial_runs(model, feeds)
    got: list[dict] = [{} for _ in feeds]
    seen = []

    async def client(i: int) -> None:
        got[i] = await model.execute(feeds[i])
        seen.append(model.stats["in_flight"])

    g = gate(dev.default_stream)  # nothing completes until every client has tried to start
    try:
        async with anyio.create_task_group() as tg:
            for i in range(len(feeds)):
                tg.start_soon(client, i)
            await anyio.sleep(0.05)
            assert model.stats["in_flight"] == 4 and not seen  # four launched, sixty waiting
            open_gate(g)
    finally:
        open_gate(g)
    assert_same(got, serial)
    st = model.stats
    assert st["peak"] == 4 and max(seen) <= 4
    # one per execution in flight, and (sunk) the synchronous path's own, which the serial runs used
    assert st["arenas"] <= 4 + (model._now is not None) if mode == "sunk" else st["arenas"] == 0
    assert st["in_flight"] == 0


async def test_cancelled_waiters_give_their_room_back(dev, compiled):
    import anyio

    model = await compiled(branches(64))
    model.max_inflight = 1
    x = np.ones((64, 64), np.float32)
    (want,) = (await model.execute({"x": x})).values()
    g = gate(dev.default_stream)
    try:
        outs, _ = model.launch([dev.default_stream.upload(x)])  # holds the only slot until it ran
        with anyio.move_on_after(0.02) as scope:
            await model.execute({"x": x})  # waits for room, cancelled: takes nothing
        assert scope.cancelled_caught and model.stats["in_flight"] == 1
    finally:
        open_gate(g)
    (got,) = (await model.execute({"x": x})).values()
    np.testing.assert_array_equal(got, want)
    np.testing.assert_array_equal(await next(iter(outs.values())).numpy(), want)
    # the launch's arena (the last execution reused it), and the synchronous path's own if any
    assert model.stats["in_flight"] == 0 and model.stats["arenas"] == 1 + (model._now is not None)


async def test_alike_operands_share_one_desc(dev, monkeypatch):
    """The load hands the runtime one tensor desc per distinct (dtype, shape, format) of the nodes'
    operands, not one per operand, by value: the runtime makes them for the call, so the model holds
    none; its outputs are the reference's."""
    import gc

    from aioge._layout import data_format
    from aioge._native import acl

    tables: list[int] = []
    by_value = acl.graph_add_nodes_by_value

    def record(*args: Any) -> None:
        tables.append(len(args[6][0]))  # the descs of the batch
        by_value(*args)

    monkeypatch.setattr(acl, "graph_add_nodes_by_value", record)
    g = branches(32)
    x = np.random.default_rng(3).standard_normal((32, 32)).astype(np.float32)
    ref = next(iter(run_reference(g, {"x": x}).values()))
    gc.collect()
    before = _native.counters()["tensor_descs"]
    model = aioge.runtime.graphs.compile.compile_graph(dev, g, optimize=0, mode="sunk")
    try:
        operands = [kind for op in model._build.ops for kind, _, _ in (*op.inputs, *op.outputs)
                    if not isinstance(kind, np.ndarray)]  # fmt: skip
        consts = [kind for op in model._build.ops for kind, _, _ in op.inputs if isinstance(kind, np.ndarray)]
        kinds = {None if k is None else (k[0], k[1], data_format(op_type, len(k[1])))
                 for op in model._build.ops for k in [kind for kind, _, _ in (*op.inputs, *op.outputs)]
                 if not isinstance(k, np.ndarray) for op_type in [op.op_type]}  # fmt: skip
        assert len(operands) >= 20 and len(kinds) < len(operands) // 4
        assert tables == [len(kinds) + len(consts)]
        assert _native.counters()["tensor_descs"] == before
        (got,) = (await model.execute({"x": x})).values()
        np.testing.assert_allclose(got, ref, rtol=1e-4, atol=1e-5)
    finally:
        await model.aclose()
    gc.collect()
    assert _native.counters()["tensor_descs"] == before


async def test_dropped_model_warns_and_releases_everything(dev):
    import gc

    import anyio

    def live() -> tuple[int, int, int, int]:
        gc.collect()
        c = _native.counters()
        return c["graphs"], c["streams"], c["tensor_descs"], len(dev.context.memory)

    g = branches(64)
    x = np.random.default_rng(2).standard_normal((64, 64)).astype(np.float32)
    ref = next(iter(run_reference(g, {"x": x}).values()))
    s = dev.default_stream
    xd = s.upload(x)
    await xd
    before = live()
    # compiled inline: after dev.compile() anyio's idle worker thread keeps the
    # last result (the model) referenced until it runs another job
    model = aioge.runtime.graphs.compile.compile_graph(dev, g, max_streams=2)
    outs, _ = model.launch([xd])  # still in flight when the model goes
    assert live()[0] == before[0] + 1 and model.stats["aux_streams"] == 1
    with pytest.warns(ResourceWarning, match="unclosed CompiledGraph 'branches'"):
        del model
        gc.collect()
    (y,) = outs.values()
    np.testing.assert_allclose(await y.numpy(), ref, rtol=1e-4, atol=1e-5)  # the execution finished intact
    del outs, y
    with anyio.fail_after(10):
        while live() != before:  # a busy aux stream is destroyed by a thread once it drained
            await anyio.sleep(0.01)


async def test_concurrent_first_compiles_share_one(dev, compiled):
    import anyio

    g = mlp()
    models = []

    async def c() -> None:
        models.append(await compiled(g))

    async with anyio.create_task_group() as tg:
        for _ in range(5):
            tg.start_soon(c)
    assert len(models) == 5 and all(m is models[0] for m in models)


async def test_bad_feeds_are_refused_before_anything_runs(dev, compiled):
    model = await compiled(mlp())
    with pytest.raises(ValueError, match="missing inputs"):
        await model.execute({})
    with pytest.raises(ValueError, match="shape"):
        await model.execute({"x": np.ones((4, 9), np.float32)})
    with pytest.raises(TypeError, match="dtype"):
        await model.execute({"x": np.ones((4, 8), np.float64)})
    out = await model.execute({"x": np.ones((4, 8), np.float32)})
    assert len(out) == 1


async def test_device_tensors_in_and_out(dev, compiled):
    model = await compiled(mlp())
    s = dev.default_stream
    x = np.random.default_rng(0).standard_normal((4, 8)).astype(np.float32)
    outs = await model.execute({"x": s.upload(x)}, as_tensors=True)
    (t,) = outs.values()
    assert isinstance(t, aioge.Tensor) and t.is_ready()
    np.testing.assert_allclose(await t.numpy(), run_reference(model.graph, {"x": x})[t and next(iter(outs))],
                               rtol=1e-5, atol=1e-5)  # fmt: skip


def lookup() -> Graph:
    g = Graph("lookup")
    ids = g.input("ids", (3,), "int64")
    emb = g.constant("emb", np.arange(15, dtype=np.float32).reshape(5, 3))
    g.output(g.add_node("Relu", [g.add_node("Gather", [emb, ids], {"axis": 0}, name="embed")], name="act"))
    return g


async def test_device_failure_names_the_graph_and_stream_stays_usable(dev, compiled):
    model = await compiled(lookup())
    s = dev.default_stream
    good = {"ids": np.array([4, 0, 2])}
    want = await model.execute(good)
    # a node that fails on the device: the error names the graph, the node and its op
    with pytest.raises(aioge.errors.AicoreExceptionError) as ei:
        await model.execute({"ids": np.array([0, 7, 2])})
    assert ei.value.code == 507015
    msg = str(ei.value)
    assert "lookup" in msg and "'embed' (GatherV2)" in msg and "index 7" in msg, msg
    with pytest.raises(aioge.AclError, match="'embed'"):
        await s.synchronize()  # reported once more by the stream, as ACL does
    assert_same([await model.execute(good)], [want])
    # the upload and the graph's task fail (injected): the first failure is raised, naming the graph
    # (from host memory a one-segment graph is one task, copies inside: that task is the first)
    one_task = model._io_at is not None
    with s._enqueue:  # the stream's lock, open, context bound
        _native.lib.aiogeHostInjectFailure(s._handle, 1 if one_task else 2, 507015)
    with pytest.raises(aioge.AclError) as ei:
        await model.execute(good)
    first = "lookup: execution from host memory" if one_task else "lookup: input 'ids' (upload)"
    assert ei.value.code == 507015 and ei.value.op == first, str(ei.value)
    with pytest.raises(aioge.AclError):
        await s.synchronize()
    assert_same([await model.execute(good)], [want])


async def test_model_lifecycle(dev, compiled):
    model = await compiled(mlp())
    await model.aclose()
    await model.aclose()
    with pytest.raises(aioge.ClosedResourceError):
        await model.execute({"x": np.ones((4, 8), np.float32)})


async def test_session_mirrors_ge(dev):
    sess = aioge.Session(dev)
    g = mlp()
    sess.add_graph(1, g)
    with pytest.raises(aioge.SessionError, match="already added"):
        sess.add_graph(1, g)
    with pytest.raises(aioge.SessionError, match="compiled"):
        sess.load_graph(1, {}, dev.default_stream)
    await sess.compile_graph(1)
    async with dev.open_stream() as s:
        with pytest.raises(aioge.SessionError, match="loaded"):
            sess.execute_graph_with_stream_async(1, s, [np.ones((4, 8), np.float32)])
        with pytest.raises(aioge.SessionError, match="accepts only"):
            sess.load_graph(1, {"ge.other": "1"}, s)
        sess.load_graph(1, {"ge.exec.hostInputIndexes": "0"}, s)
        with pytest.raises(aioge.SessionError, match="second LoadGraph"):
            sess.load_graph(1, {}, s)
        x = np.random.default_rng(1).standard_normal((4, 8)).astype(np.float32)
        (y,) = sess.execute_graph_with_stream_async(1, s, [x])  # host input by index
        await s.synchronize()
        ref = next(iter(run_reference(g, {"x": x}).values()))
        np.testing.assert_allclose(await y.numpy(), ref, rtol=1e-5, atol=1e-5)
        # user-provided outputs
        out = s.empty(y.shape)
        (y2,) = sess.execute_graph_with_stream_async(1, s, [x], [out])
        assert y2 is out
        np.testing.assert_allclose(await out.numpy(), ref, rtol=1e-5, atol=1e-5)
        await s.synchronize()
    sess.remove_graph(1)
    with pytest.raises(aioge.SessionError):
        sess.remove_graph(1)
    sess.close()


async def test_session_graph_options_reach_the_compile(dev):
    sess = aioge.Session(dev)
    with pytest.raises(aioge.SessionError, match="AddGraph accepts only"):
        sess.add_graph(1, branches(64), {"ge.exec.unknownOption": "1"})
    with pytest.raises(aioge.SessionError, match=r"aioge\.optimize"):
        sess.add_graph(1, branches(64), {"aioge.optimize": "7"})
    with pytest.raises(aioge.SessionError, match="enableSingleStream"):
        sess.add_graph(1, branches(64), {"ge.enableSingleStream": "yes"})
    sess.add_graph(1, branches(64), {"aioge.maxStreams": "2"})
    sess.add_graph(2, branches(64), {"aioge.maxStreams": "2", "ge.enableSingleStream": "true"})
    sess.add_graph(3, ew_chain(), {"aioge.optimize": "0", "aioge.mode": "per_op"})
    sess.add_graph(4, branches(64), {"aioge.maxStreams": "1"})
    sess.add_graph(5, branches(64))
    for i in (1, 2, 3, 4, 5):
        await sess.compile_graph(i)
    models = {i: sess._graphs[i].model for i in (1, 2, 3, 4, 5)}
    assert models[1].plan.num_streams == 2 and models[2].plan.num_streams == 1
    assert models[3].mode == "per_op" and not any("Fused" in op.op_type for op in models[3]._build.ops)
    assert models[4].plan.num_streams == 1
    # the host runtime's default
    assert models[5].plan.num_streams == aioge.runtime.graphs.compile.default_max_streams() == 1
    sess.close()
    assert all(m.closed for m in models.values())


def affine() -> Graph:
    """``x @ w``: ``w`` is an input that never changes (a frozen input in GE's terms)."""
    g = Graph("affine")
    x = g.input("x", (4, 8), "float32")
    w = g.input("w", (8, 3), "float32")
    g.output(g.add_node("MatMul", [x, w]))
    return g


async def test_session_frozen_inputs_and_the_loaded_stream(dev):
    rng = np.random.default_rng(9)
    xs = [rng.standard_normal((4, 8)).astype(np.float32) for _ in range(3)]
    w = rng.standard_normal((8, 3)).astype(np.float32)
    async with aioge.Session(dev) as sess, dev.open_stream() as s:
        sess.add_graph(1, affine())
        await sess.compile_graph(1)
        with pytest.raises(aioge.SessionError, match="both a host input and frozen"):
            sess.load_graph(1, {"ge.exec.hostInputIndexes": "1", "ge.exec.frozenInputIndexes": "1"}, s)
        with pytest.raises(aioge.SessionError, match="out of range"):
            sess.load_graph(1, {"ge.exec.frozenInputIndexes": "2"}, s)
        sess.load_graph(1, {"ge.exec.hostInputIndexes": "0", "ge.exec.frozenInputIndexes": "1"}, s)
        wd = s.upload(w)
        with pytest.raises(aioge.SessionError, match="frozen input 1 must be a device Tensor"):
            sess.execute_graph_with_stream_async(1, None, [xs[0], None])  # nothing to reuse yet
        with pytest.raises(aioge.SessionError, match="hostInputIndexes: pass a host array"):
            sess.execute_graph_with_stream_async(1, None, [s.upload(xs[0]), wd])  # a Tensor at a host index
        default = dev.default_stream.stats["launched"]
        (y0,) = sess.execute_graph_with_stream_async(1, None, [xs[0], wd])  # None: the stream of LoadGraph
        (y1,) = sess.execute_graph_with_stream_async(1, None, [xs[1], None])  # the frozen w is reused
        (y2,) = sess.execute_graph_with_stream_async(1, s, [xs[2], wd])  # or passed again, the same tensor
        with pytest.raises(aioge.SessionError, match="frozen"):
            sess.execute_graph_with_stream_async(1, s, [xs[2], s.upload(w)])  # another tensor is refused
        assert y0.stream is s and y1.stream is s
        await s.synchronize()
        assert dev.default_stream.stats["launched"] == default  # nothing ran on the device's stream
        for x, y in zip(xs, (y0, y1, y2)):
            np.testing.assert_allclose(await y.numpy(), x @ w, rtol=1e-5, atol=1e-5)


async def test_cancelled_compile_returns_at_once_and_its_model_is_not_lost(dev, monkeypatch):
    import threading
    import time

    import anyio

    import aioge.runtime.graphs.executable

    release = threading.Event()
    calls = []
    real = aioge.runtime.graphs.compile.compile_graph

    def held(*args, **kwargs):  # a compile that takes as long as the test wants
        calls.append(1)
        assert release.wait(20)
        return real(*args, **kwargs)

    monkeypatch.setattr(aioge.runtime.graphs.compile, "compile_graph", held)
    monkeypatch.setattr(aioge.runtime.graphs.compile, "INLINE_NODES", -1)  # on a worker: the loop goes on meanwhile
    g = mlp()
    with anyio.move_on_after(0.05):
        await dev.compile(g)
    assert any(not j.done for j in dev.context.compiles.values())  # returned while the compile is held
    # a caller that stays gets the result of the compile still running, shared
    got = []

    async def caller() -> None:
        got.append(await dev.compile(g))

    async with anyio.create_task_group() as tg:
        tg.start_soon(caller)
        with anyio.move_on_after(0.05):
            await dev.compile(g)
        release.set()
    (model,) = got
    assert len(calls) == 1 and not model.closed
    x = np.ones((4, 8), np.float32)
    (out,), (ref,) = (await model.execute({"x": x})).values(), run_reference(g, {"x": x}).values()
    np.testing.assert_allclose(out, ref, rtol=1e-5, atol=1e-5)
    # nobody left to take it: the model is closed when the compile ends
    release.clear()
    with anyio.move_on_after(0.05):
        await dev.compile(g, optimize=1)
    (job,) = dev.context.compiles.values()
    release.set()
    await job.wait()
    assert set(dev.context.models) == {model}
    # the device drains a compile in flight (close() from sync code refuses)
    release.clear()
    with anyio.move_on_after(0.05):
        await dev.compile(g, optimize=0)
    with pytest.raises(aioge.BusyResourceError, match="compile in flight"):
        dev.close()
    async with anyio.create_task_group() as tg:
        tg.start_soon(anyio.to_thread.run_sync, lambda: time.sleep(0.05) or release.set())
        await dev.aclose()
    assert dev.closed and not dev.context.compiles and not dev.context.models


def gather_chain() -> Graph:
    """MatMul -> Gather(idx) -> Relu: the Gather, not the final node, can fail on the device."""
    g = Graph("gather_chain")
    x = g.input("x", (4, 3), "float32")
    idx = g.input("idx", (2,), "int64")
    h = g.add_node("MatMul", [x, g.constant("w", np.eye(3, dtype=np.float32) * 2)], name="mm")
    g.output(g.add_node("Relu", [g.add_node("Gather", [h, idx], {"axis": 0}, name="pick")], name="act"))
    return g


def inject(s: aioge.Stream, count: int = 1, code: int = 507015) -> None:
    """The next ``count`` tasks of ``s`` fail on the device with ``code``."""
    with s._enqueue:  # the stream's lock, open, context bound
        _native.check(_native.lib.aiogeHostInjectFailure(s._handle, count, code), "inject")


@pytest.mark.abi
@pytest.mark.parametrize("as_tensors", [False, True], ids=["numpy", "tensors"])
@pytest.mark.parametrize("mode", ["sunk", "per_op"])
async def test_every_execution_raises_its_own_failure(dev, compiled, mode, as_tensors):
    """A failed copy-in or node is raised by that execute(), never its outputs."""
    model = await compiled(gather_chain(), mode=mode)
    s = dev.default_stream
    x = np.arange(12, dtype=np.float32).reshape(4, 3) - 5
    good = {"x": x, "idx": np.array([3, 1])}

    async def run(feeds):
        out = await model.execute(feeds, as_tensors=as_tensors)
        return {k: await v.numpy() for k, v in out.items()} if as_tensors else out

    want = await run(good)
    np.testing.assert_array_equal(want["act"], np.maximum(2 * x[[3, 1]], 0))
    # the input's upload fails: the graph would compute from a stale buffer
    inject(s, 1)
    with pytest.raises(aioge.errors.AicoreExceptionError, match="injected") as ei:
        await run({"x": x + 100, "idx": good["idx"]})
    one_task = model._io_at is not None and not as_tensors  # host memory in and out: copies inside the task
    first = "execution from host memory" if one_task else "input 'x' (upload)"
    assert ei.value.op == f"gather_chain: {first}"
    with pytest.raises(aioge.errors.AicoreExceptionError):
        await s.synchronize()  # and, as ACL does, once more by the stream
    assert_same([await run(good)], [want])  # the stream stays usable
    # a non-final node fails (an index out of range): the nodes after it ran on garbage
    with pytest.raises(aioge.errors.AicoreExceptionError, match="out of range") as ei:
        await run({"x": x, "idx": np.array([0, 99])})
    assert "pick" in str(ei.value) and "gather_chain" in str(ei.value), str(ei.value)
    with pytest.raises(aioge.errors.AicoreExceptionError):
        await s.synchronize()
    assert_same([await run(good)], [want])


async def test_likely_mistakes_get_errors_saying_what_was_expected(dev, compiled, tmp_path):
    """A wrong feed or a wrong compile argument gets an error saying what was expected."""
    onnx = pytest.importorskip("onnx")
    model = await compiled(mlp())
    x = np.ones((4, 8), np.float32)
    for wrong in ([x], (x,), 3):  # one array by itself is the input of a one-input model
        with pytest.raises(aioge.FeedError, match=r"execute\(\) takes a dict of input name -> .* \(inputs: 'x'\)"):
            await model.execute(wrong)
    with pytest.raises(TypeError, match=r"compile\(\) takes an aioge\.Graph or an ONNX model"):
        await dev.compile(42)
    # an ONNX model is compiled from its path, bytes or ModelProto directly
    from tests.graph import models as M

    proto = M.attention(small=True)
    path = tmp_path / "m.onnx"
    onnx.save_model(proto, str(path))
    feeds = M.sample_inputs(proto)
    outs = []
    for source in (str(path), path, proto.SerializeToString(), proto):
        outs.append(await (await compiled(source)).execute(feeds))
    for out in outs[1:]:
        assert_same([out], outs[:1])


async def test_a_compile_started_but_not_awaited_is_named(dev):
    """A forgotten ``await`` on Session.compile_graph is said as such."""
    import warnings

    sess = aioge.Session(dev)
    sess.add_graph(1, mlp())
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # "coroutine ... was never awaited", the mistake itself
        sess.compile_graph(1)
        import gc

        gc.collect()
    for call in (lambda: sess.load_graph(1, {}, dev.default_stream),
                 lambda: sess.execute_graph_with_stream_async(1, None, [np.ones((4, 8), np.float32)])):  # fmt: skip
        with pytest.raises(aioge.SessionError, match=r"compile_graph\(\) was called but has not finished: it must be "
                                                     r"awaited \(`await session.compile_graph\(1\)`\)"):  # fmt: skip
            call()
    await sess.compile_graph(1)
    sess.load_graph(1, {}, dev.default_stream)
    sess.close()


async def test_execute_timeout_is_the_documented_class(dev, compiled):
    """An execute() that times out raises StreamSyncTimeoutError, naming the model and the timeout."""
    model = await compiled(mlp())
    g = gate(dev.default_stream)
    try:
        with pytest.raises(aioge.StreamSyncTimeoutError, match=r"execute\(\) of CompiledGraph 'mlp'.*within 0.05 s"):
            await model.execute({"x": np.ones((4, 8), np.float32)}, timeout=0.05)
    finally:
        open_gate(g)


async def test_one_task_executions_keep_stream_order_and_their_own_results(dev, compiled):
    """A small execution from host memory may run on the caller's thread when its stream is idle
    (AIOGE_HOST_INLINE_BYTES): behind a held stream it must queue instead, and executions in flight
    together, inline or queued, each get their own outputs."""
    import anyio

    model = await compiled(ew_chain())
    rng = np.random.default_rng(11)
    feeds = [{"x": rng.standard_normal((3, 5)).astype(np.float32), "y": rng.standard_normal(5).astype(np.float32)}
             for _ in range(12)]  # fmt: skip
    want = [run_reference(ew_chain(), f) for f in feeds]
    (name,) = model.outputs
    async with dev.open_stream() as s:
        g = _native.ffi.new("uint64_t *")
        with s._enqueue:  # the stream's lock, open, context bound
            _native.check(_native.lib.aiogeHostLaunchGate(s._handle, 20_000, g), "gate")
        got: dict[int, np.ndarray] = {}

        async def one(i: int) -> None:
            got[i] = (await model.execute(feeds[i], stream=s))[name]

        async with anyio.create_task_group() as tg:
            for i in range(4):
                tg.start_soon(one, i)
            await anyio.sleep(0.05)
            assert not got  # held behind the gate: none ran inline past it
            _native.lib.aiogeHostOpenGate(int(g[0]))
        async with anyio.create_task_group() as tg:  # an idle stream: inline and queued ones mixed
            for i in range(4, 12):
                tg.start_soon(one, i)
    for i, w in enumerate(want):
        np.testing.assert_allclose(got[i], w[name], rtol=1e-6, atol=1e-6)
