"""Compiled graphs on the device: sunk and per-op execution, concurrency,
errors, the GE-style Session."""

from __future__ import annotations

import numpy as np
import pytest

import aioge
from aioge import _native
from aioge.graph import Graph, run_reference

pytestmark = pytest.mark.anyio


def mlp(batch: int = 4, d_in: int = 8, hidden: int = 16, d_out: int = 4, seed: int = 0) -> Graph:
    rng = np.random.default_rng(seed)
    g = Graph("mlp")
    x = g.input("x", (batch, d_in), "float32")
    w1 = g.constant(rng.standard_normal((d_in, hidden)).astype(np.float32), "w1")
    b1 = g.constant(rng.standard_normal((hidden,)).astype(np.float32), "b1")
    h = g.add_node("Relu", [g.add_node("Add", [g.add_node("MatMul", [x, w1]), b1])])
    w2 = g.constant(rng.standard_normal((hidden, d_out)).astype(np.float32), "w2")
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
            w = g.constant(rng.standard_normal((n, n)).astype(np.float32) / n, f"w{k}{i}")
            h = g.add_node("Tanh" if i % 2 else "Relu", [g.add_node("MatMul", [h, w])])
        outs.append(h)
    g.output(g.add_node("Add", outs))
    return g


def ew_chain() -> Graph:
    g = Graph("ew")
    x = g.input("x", (3, 5), "float32")
    y = g.input("y", (5,), "float32")
    t = g.add_node("Mul", [x, y])
    t = g.add_node("Add", [t, g.constant(np.float32(0.5), "half")])
    t = g.add_node("Sigmoid", [g.add_node("Tanh", [t])])
    g.output(g.add_node("Max", [t, g.constant(np.full((5,), 0.55, np.float32), "floor")]))
    return g


@pytest.mark.parametrize("mode", ["sunk", "per_op"])
async def test_mlp_matches_the_reference(dev, mode):
    g = mlp()
    model = await dev.compile(g, mode=mode)
    assert model.mode == mode
    x = np.random.default_rng(5).standard_normal((4, 8)).astype(np.float32)
    out = await model.execute({"x": x})
    ref = run_reference(g, {"x": x})
    (name,) = model.outputs
    np.testing.assert_allclose(out[name], ref[name], rtol=1e-5, atol=1e-5)


async def test_sunk_graph_is_one_task_per_segment(dev):
    model = await dev.compile(mlp())
    x = np.ones((4, 8), np.float32)
    await model.execute({"x": x})
    before = _native.counters()["tasks_executed"]
    await model.execute({"x": x})
    tasks = _native.counters()["tasks_executed"] - before
    # one upload, one graph task, one download
    assert tasks == 2 + len(model._build.segments)


@pytest.mark.parametrize("optimize", [0, 1, 2])
async def test_fused_and_unfused_agree(dev, optimize):
    g = ew_chain()
    model = await dev.compile(g, optimize=optimize)
    rng = np.random.default_rng(2)
    feeds = {"x": rng.standard_normal((3, 5)).astype(np.float32), "y": rng.standard_normal(5).astype(np.float32)}
    out = await model.execute(feeds)
    ref = run_reference(g, feeds)
    for k in model.outputs:
        np.testing.assert_allclose(out[k], ref[k], rtol=1e-5, atol=1e-6)
    if optimize == 2:
        assert any(op.op_type == "_FusedElementwise" for op in model._build.ops)


async def test_branches_on_two_streams_match(dev):
    g = branches()
    sunk = await dev.compile(g, max_streams=2)
    per_op = await dev.compile(g, mode="per_op")
    x = np.random.default_rng(3).standard_normal((64, 64)).astype(np.float32)
    a = await sunk.execute({"x": x})
    b = await per_op.execute({"x": x})
    ref = run_reference(g, {"x": x})
    for k in ref:
        np.testing.assert_allclose(a[k], ref[k], rtol=1e-4, atol=1e-5)
        np.testing.assert_allclose(b[k], ref[k], rtol=1e-4, atol=1e-5)
    assert sunk.plan.num_streams == 2 and len(sunk._build.segments) >= 2


async def test_many_concurrent_executions_are_exact(dev):
    import anyio

    g = branches(32)
    model = await dev.compile(g)
    rng = np.random.default_rng(4)
    xs = [rng.standard_normal((32, 32)).astype(np.float32) for _ in range(24)]
    refs = [run_reference(g, {"x": x}) for x in xs]
    got: dict[int, dict] = {}

    async def client(i: int) -> None:
        got[i] = await model.execute({"x": xs[i]})

    async with anyio.create_task_group() as tg:
        for i in range(len(xs)):
            tg.start_soon(client, i)
    for i, ref in enumerate(refs):
        for k in ref:
            np.testing.assert_allclose(got[i][k], ref[k], rtol=1e-4, atol=1e-5)


async def test_concurrent_first_compiles_share_one(dev):
    import anyio

    g = mlp()
    models = []

    async def c() -> None:
        models.append(await dev.compile(g))

    async with anyio.create_task_group() as tg:
        for _ in range(5):
            tg.start_soon(c)
    assert len(models) == 5 and all(m is models[0] for m in models)


async def test_bad_feeds_are_refused_before_anything_runs(dev):
    model = await dev.compile(mlp())
    with pytest.raises(ValueError, match="missing inputs"):
        await model.execute({})
    with pytest.raises(ValueError, match="shape"):
        await model.execute({"x": np.ones((4, 9), np.float32)})
    with pytest.raises(TypeError, match="dtype"):
        await model.execute({"x": np.ones((4, 8), np.float64)})
    out = await model.execute({"x": np.ones((4, 8), np.float32)})
    assert len(out) == 1


async def test_device_tensors_in_and_out(dev):
    model = await dev.compile(mlp())
    s = dev.default_stream
    x = np.random.default_rng(0).standard_normal((4, 8)).astype(np.float32)
    outs = await model.execute({"x": s.upload(x)}, as_tensors=True)
    (t,) = outs.values()
    assert isinstance(t, aioge.Tensor) and t.is_ready()
    np.testing.assert_allclose(await t.numpy(), run_reference(model.graph, {"x": x})[t and next(iter(outs))],
                               rtol=1e-5, atol=1e-5)  # fmt: skip


async def test_device_failure_names_the_graph_and_stream_stays_usable(dev):
    model = await dev.compile(mlp())
    s = dev.default_stream
    x = np.ones((4, 8), np.float32)
    await model.execute({"x": x})
    with s._lock:
        s._enter()
        _native.lib.aiogeHostInjectFailure(s._handle, 2, 507015)  # the upload and the graph task
    with pytest.raises(aioge.AclError) as ei:
        await model.execute({"x": x})
    assert ei.value.code == 507015
    with pytest.raises(aioge.AclError):
        await s.synchronize()
    out = await model.execute({"x": x})
    assert np.isfinite(next(iter(out.values()))).all()


async def test_model_lifecycle(dev):
    model = await dev.compile(mlp())
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


async def test_cancelled_compile_returns_at_once_and_its_model_is_not_lost(dev, monkeypatch):
    import threading
    import time

    import anyio

    import aioge.model

    release = threading.Event()
    calls = []
    real = aioge.model.compile_graph

    def held(*args, **kwargs):  # a compile that takes as long as the test wants
        calls.append(1)
        assert release.wait(20)
        return real(*args, **kwargs)

    monkeypatch.setattr(aioge.model, "compile_graph", held)
    g = mlp()
    t0 = time.perf_counter()
    with anyio.move_on_after(0.05):
        await dev.compile(g)
    assert time.perf_counter() - t0 < 1  # at once, the compile still running
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
    (job,) = dev._compiling.values()
    release.set()
    await job.wait()
    assert dev._models == {model}
    # the device drains a compile in flight (close() from sync code refuses)
    release.clear()
    with anyio.move_on_after(0.05):
        await dev.compile(g, optimize=0)
    with pytest.raises(aioge.BusyResourceError, match="compile in flight"):
        dev.close()
    async with anyio.create_task_group() as tg:
        tg.start_soon(anyio.to_thread.run_sync, lambda: time.sleep(0.05) or release.set())
        await dev.aclose()
    assert dev.closed and not dev._compiling and not dev._models
