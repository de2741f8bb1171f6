"""aioge.serve.Batcher on real compiled models: rows, batching, padding, deadlines, cancellation,
queue limits, bad requests, failures, shutdown (asyncio, uvloop and trio)."""

from __future__ import annotations

import anyio
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import aioge
from aioge.serve import (
    Batcher,
    BucketedModel,
    DeadlineExceededError,
    InvalidInputError,
    QueueFullError,
    Runner,
    load_model,
)

pytestmark = pytest.mark.anyio

RNG = np.random.default_rng(0)
W = RNG.standard_normal((6, 5)).astype(np.float32)
B = RNG.standard_normal(5).astype(np.float32)


def linear(n: int) -> aioge.Graph:
    """y = x @ W + B for a batch of n rows (a builder: one graph per bucket)."""
    g = aioge.Graph("linear")
    x = g.input("x", (n, 6), "float32")
    g.output(g.add_node("Gemm", [x, g.constant(W), g.constant(B)], name="y"))
    return g


def ref(x: np.ndarray) -> np.ndarray:
    return x @ W + B


def rows(n: int, start: float = 0.0) -> np.ndarray:
    """n rows whose values identify them (row i holds start + i)."""
    return (np.arange(n, dtype=np.float32)[:, None] + start) * np.ones((1, 6), np.float32)


def seen(batches: list[np.ndarray]) -> set[float]:
    """The row ids that reached the model."""
    return {float(v) for b in batches for v in b[:, 0]}


class Gated:
    """A Runner around a real model whose batches wait for ``open()``; records each batch's rows."""

    def __init__(self, inner: BucketedModel) -> None:
        self.inner = inner
        self.gate = anyio.Event()
        self.batches: list[np.ndarray] = []
        self.fail: Exception | None = None

    name = property(lambda self: self.inner.name)
    inputs = property(lambda self: self.inner.inputs)
    outputs = property(lambda self: self.inner.outputs)
    max_batch_size = property(lambda self: self.inner.max_batch_size)
    max_inflight = property(lambda self: self.inner.max_inflight)

    def bucket(self, n: int) -> int:
        return self.inner.bucket(n)

    def open(self) -> None:
        self.gate.set()

    async def execute(self, feeds):
        self.batches.append(np.array(feeds["x"]))
        await self.gate.wait()
        if self.fail is not None:
            err, self.fail = self.fail, None
            raise err
        return await self.inner.execute(feeds)


async def until(predicate) -> None:
    with anyio.fail_after(10):  # a bound on the wait, not a timing assertion
        while not predicate():
            await anyio.sleep(0.001)


@pytest.fixture
async def model(dev):
    async with await load_model(dev, linear, name="linear", max_batch_size=8, batch_sizes=(1, 2, 4, 8)) as m:
        yield m


async def test_concurrent_callers_get_exactly_their_rows_in_real_batches(model):
    assert isinstance(model, Runner)
    sizes = [int(n) for n in np.random.default_rng(1).integers(1, 4, 120)]
    xs = [rows(n, 100.0 * i) for i, n in enumerate(sizes)]
    results: list = [None] * len(xs)
    async with Batcher(model, max_queue_delay=0.005) as b:

        async def call(i: int) -> None:
            results[i] = await b.infer({"x": xs[i]})

        async with anyio.create_task_group() as tg:
            for i in range(len(xs)):
                tg.start_soon(call, i)
        stats = b.stats
    for x, out in zip(xs, results):
        assert list(out) == ["y"] and out["y"].shape == (len(x), 5)
        np.testing.assert_allclose(out["y"], ref(x), rtol=1e-5, atol=1e-4)
    assert stats["ok"] == len(xs) and stats["rows"] == sum(sizes)
    hist = stats["batch_sizes"]
    assert sum(k * v for k, v in hist.items()) == sum(sizes)
    assert stats["batches"] < len(xs) and max(hist) > 3  # batches really formed
    assert max(hist) <= 8  # never above max_batch_size; requests are never split


@settings(max_examples=6, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(sizes=st.lists(st.integers(1, 8), min_size=1, max_size=20), delay=st.sampled_from([0.0, 0.002]),
       inflight=st.integers(1, 3))  # fmt: skip
async def test_any_arrival_pattern_matches_numpy(dev, sizes, delay, inflight):
    xs = [rows(n, 10.0 * i) for i, n in enumerate(sizes)]
    outs: dict[int, np.ndarray] = {}
    async with await load_model(dev, linear, max_batch_size=8, batch_sizes=(3, 8), lazy=True) as m:
        async with Batcher(m, max_queue_delay=delay, max_inflight=inflight) as b:

            async def call(i: int) -> None:
                await anyio.sleep(0.0005 * (i % 3))  # staggered arrivals
                outs[i] = (await b.infer({"x": xs[i]}))["y"]

            async with anyio.create_task_group() as tg:
                for i in range(len(xs)):
                    tg.start_soon(call, i)
        assert sorted(m.compiled) in ([3], [8], [3, 8])  # lazily compiled buckets
    for i, x in enumerate(xs):
        np.testing.assert_allclose(outs[i], ref(x), rtol=1e-5, atol=1e-4)
    assert b.stats["peak_inflight"] <= inflight


async def test_padding_to_the_bucket_is_invisible(model):
    g = Gated(model)
    g.open()
    async with Batcher(g, max_queue_delay=0) as b:
        out = await b.infer({"x": rows(3, 7.0)})
    assert out["y"].shape == (3, 5)
    np.testing.assert_allclose(out["y"], ref(rows(3, 7.0)), rtol=1e-5, atol=1e-4)
    (batch,) = g.batches
    assert batch.shape == (4, 6) and np.array_equal(batch[3], batch[2])  # padded with its last row
    assert b.stats["padding_rows"] == 1 and b.stats["batch_sizes"] == {3: 1}


async def test_a_deadline_that_passes_while_queued_fails_and_never_executes(model):
    g = Gated(model)
    async with Batcher(g, max_queue_delay=0, max_inflight=1) as b, anyio.create_task_group() as tg:
        first: dict = {}

        async def hold() -> None:
            first["y"] = (await b.infer({"x": rows(1, 1.0)}))["y"]

        tg.start_soon(hold)
        await until(lambda: b.inflight == 1)
        with pytest.raises(DeadlineExceededError, match="queued"):
            await b.infer({"x": rows(2, 50.0)}, timeout=0.05)
        assert b.queue_depth == 0
        g.open()
        late = await b.infer({"x": rows(1, 9.0)})
    assert seen(g.batches) == {1.0, 9.0}  # 50 and 51 never reached the model
    np.testing.assert_allclose(first["y"], ref(rows(1, 1.0)), rtol=1e-5, atol=1e-4)
    np.testing.assert_allclose(late["y"], ref(rows(1, 9.0)), rtol=1e-5, atol=1e-4)
    assert b.stats["deadline"] == 1


async def test_a_default_timeout_applies_while_queued_and_while_running(model):
    g = Gated(model)
    async with Batcher(g, max_queue_delay=0, max_inflight=1, timeout=0.02) as b:

        async def first() -> None:
            with pytest.raises(DeadlineExceededError, match="running"):  # held by the gate past its deadline
                await b.infer({"x": rows(1, 1.0)})

        async with anyio.create_task_group() as tg:
            tg.start_soon(first)
            await until(lambda: b.inflight == 1)
            with pytest.raises(DeadlineExceededError, match="queued"):
                await b.infer({"x": rows(1, 2.0)})
        g.open()
        out = await b.infer({"x": rows(1, 3.0)}, timeout=30.0)  # a request's own timeout wins
    np.testing.assert_allclose(out["y"], ref(rows(1, 3.0)), rtol=1e-5, atol=1e-4)
    assert seen(g.batches) == {1.0, 3.0}
    assert b.stats["deadline"] == 2


async def test_cancelling_a_queued_request_removes_it(model):
    g = Gated(model)
    async with Batcher(g, max_queue_delay=0, max_inflight=1) as b, anyio.create_task_group() as tg:
        tg.start_soon(b.infer, {"x": rows(1, 1.0)})
        await until(lambda: b.inflight == 1)
        with anyio.CancelScope() as scope:
            tg.start_soon(b.infer, {"x": rows(1, 66.0)})  # in tg: not under scope

            async def doomed() -> None:
                await b.infer({"x": rows(3, 77.0)})

            async with anyio.create_task_group() as inner:
                inner.start_soon(doomed)
                await until(lambda: b.queue_depth == 2)
                scope.cancel()
        assert b.queue_depth == 1  # left the queue at once
        g.open()
    assert seen(g.batches) == {1.0, 66.0}
    assert b.stats["cancelled"] == 1


async def test_cancelling_a_running_request_drops_only_its_rows(model):
    g = Gated(model)
    got: dict = {}
    scope = anyio.CancelScope()
    async with Batcher(g, max_queue_delay=5.0, max_batch_size=3) as b, anyio.create_task_group() as tg:

        async def a() -> None:
            with scope:
                await b.infer({"x": rows(1, 1.0)})

        async def c() -> None:
            got["y"] = (await b.infer({"x": rows(2, 2.0)}))["y"]

        tg.start_soon(a)
        await until(lambda: b.queue_depth == 1)
        tg.start_soon(c)  # fills the batch: it leaves at once
        await until(lambda: b.inflight == 1)
        scope.cancel()
        await until(lambda: b.stats["cancelled"] == 1)
        g.open()
    np.testing.assert_allclose(got["y"], ref(rows(2, 2.0)), rtol=1e-5, atol=1e-4)
    assert b.stats["batches"] == 1 and b.stats["cancelled"] == 1 and b.stats["ok"] == 1


async def test_a_full_queue_refuses_at_once(model):
    g = Gated(model)
    async with Batcher(g, max_queue_delay=0, max_inflight=1, max_queue_size=2) as b, \
            anyio.create_task_group() as tg:  # fmt: skip
        for i in range(3):
            tg.start_soon(b.infer, {"x": rows(1, float(i))})
            await until(lambda i=i: b.inflight + b.queue_depth == i + 1)
        with pytest.raises(QueueFullError, match="max_queue_size 2") as e:
            await b.infer({"x": rows(1, 99.0)})
        assert e.value.retry_after > 0
        g.open()
    assert seen(g.batches) == {0.0, 1.0, 2.0}
    assert b.stats["queue_full"] == 1 and b.stats["ok"] == 3


BAD = [
    ({"x": rows(1).astype(np.float64)}, "dtype float64"),
    ({"x": np.zeros((2, 7), np.float32)}, "shape \\[2, 7\\]"),
    ({"x": np.zeros(6, np.float32)}, "shape \\[6\\]"),
    ({"x": rows(1), "z": rows(1)}, "unknown inputs \\['z'\\]"),
    ({}, "missing inputs \\['x'\\]"),
    ({"x": rows(9)}, "9 rows"),
    ({"x": np.zeros((0, 6), np.float32)}, "0 rows"),
    ({"x": [[0.0] * 6]}, "numpy array"),
]


async def test_bad_requests_are_refused_alone_and_never_poison_the_batch(model):
    good = [rows(2, 10.0 * i) for i in range(4)]  # 8 rows: exactly one full batch
    outs: dict[int, np.ndarray] = {}
    async with Batcher(model, max_queue_delay=10.0) as b, anyio.create_task_group() as tg:

        async def call(i: int) -> None:
            outs[i] = (await b.infer({"x": good[i]}))["y"]

        for i in range(4):
            tg.start_soon(call, i)
            await until(lambda i=i: b.stats["requests"] == 3 * i + 1)  # queued (the 4th fills the batch)
            for feeds, msg in BAD[2 * i : 2 * i + 2]:  # bad ones in between, in the same batch window
                with pytest.raises(InvalidInputError, match=msg):
                    await b.infer(feeds)
        with pytest.raises(InvalidInputError, match="mapping"):
            await b.infer([("x", rows(1))])
    for i, x in enumerate(good):
        np.testing.assert_allclose(outs[i], ref(x), rtol=1e-5, atol=1e-4)
    assert b.stats["batches"] == 1 and b.stats["batch_sizes"] == {8: 1} and b.stats["invalid"] == 9


async def test_a_failed_batch_fails_its_requests_and_the_next_batch_runs(model):
    g = Gated(model)
    g.fail = RuntimeError("device on fire")
    g.open()
    async with Batcher(g, max_queue_delay=0) as b:
        with pytest.raises(RuntimeError, match="device on fire"):
            await b.infer({"x": rows(1)})
        out = await b.infer({"x": rows(2, 4.0)})
    np.testing.assert_allclose(out["y"], ref(rows(2, 4.0)), rtol=1e-5, atol=1e-4)
    assert b.stats["errors"] == 1 and b.stats["ok"] == 1


async def test_shutdown_with_requests_queued_loses_none(model):
    xs = [rows(1, float(i)) for i in range(5)]
    outs: dict[int, np.ndarray] = {}
    async with anyio.create_task_group() as tg:
        async with Batcher(model, max_queue_delay=10.0) as b:

            async def call(i: int) -> None:
                outs[i] = (await b.infer({"x": xs[i]}))["y"]

            for i in range(5):
                tg.start_soon(call, i)
            await until(lambda: b.queue_depth == 5)  # a partial batch, 10 s from leaving by itself
        # leaving the batcher sent it at once and waited for it
    assert len(outs) == 5 and b.stats["batches"] == 1
    for i, x in enumerate(xs):
        np.testing.assert_allclose(outs[i], ref(x), rtol=1e-5, atol=1e-4)
    with pytest.raises(aioge.ClosedResourceError):
        await b.infer({"x": xs[0]})


async def test_compiled_models_with_and_without_a_batch_dimension(dev, compiled):
    m4 = await compiled(linear(4))
    async with Batcher(m4, max_queue_delay=0) as b:
        assert b.max_batch_size == 4
        out = await b.infer({"x": rows(1, 3.0)})
        np.testing.assert_allclose(out["y"], ref(rows(1, 3.0)), rtol=1e-5, atol=1e-4)
    async with Batcher(m4, max_batch_size=0) as b:  # the model's own shapes, one request at a time
        out = await b.infer({"x": rows(4, 5.0)})
        np.testing.assert_allclose(out["y"], ref(rows(4, 5.0)), rtol=1e-5, atol=1e-4)
        with pytest.raises(InvalidInputError, match="shape \\[1, 6\\]"):
            await b.infer({"x": rows(1)})
    with pytest.raises(ValueError, match="max_batch_size 5"):
        Batcher(m4, max_batch_size=5)
    with pytest.raises(aioge.ClosedResourceError):
        await Batcher(m4).infer({"x": rows(1)})  # never entered


async def test_the_metrics_observer_sees_every_batch_and_request(model):
    prometheus_client = pytest.importorskip("prometheus_client")
    from aioge.serve.metrics import ServeMetrics

    metrics = ServeMetrics(prometheus_client.CollectorRegistry())
    async with Batcher(model, max_queue_delay=0.005, observer=metrics) as b, anyio.create_task_group() as tg:
        for i in range(20):
            tg.start_soon(b.infer, {"x": rows(1, float(i))})
    get = metrics.registry.get_sample_value
    assert get("aioge_serve_requests_total", {"model": "linear", "status": "ok"}) == 20
    assert get("aioge_serve_batch_size_count", {"model": "linear"}) == b.stats["batches"]
    assert get("aioge_serve_batch_size_sum", {"model": "linear"}) == 20
    assert get("aioge_serve_queue_depth", {"model": "linear"}) == 0
    assert get("aioge_serve_request_seconds_count", {"model": "linear"}) == 20
    assert b"aioge_serve_compute_seconds_bucket" in metrics.expose()


async def test_a_sequence_model_batches_only_requests_of_one_length(dev):
    """x[N, S, 8] with S symbolic: queued requests of lengths 3 and 5 leave as one batch per length;
    a wrong fixed dim is refused before it is queued."""
    from tests.serve import serve_models as M

    proto = M.sequence()
    w = next(t for t in proto.graph.initializer if t.name == "w")
    wt = np.frombuffer(w.raw_data, np.float32).reshape(8, 4)
    runner = await load_model(dev, proto, batch_sizes=(1, 2, 4))
    try:
        assert runner.inputs["x"].shape == (-1, -1, 8) and runner.outputs["y"].shape == (-1, -1, 4)
        g = Gated(runner)
        xs = [RNG.standard_normal((1, s, 8)).astype(np.float32) for s in (7, 3, 5, 3, 5)]
        outs: dict[int, np.ndarray] = {}
        async with Batcher(g, max_queue_delay=0, max_inflight=1) as b:
            with pytest.raises(InvalidInputError, match="shape"):
                await b.infer({"x": np.zeros((1, 3, 7), np.float32)})

            async def one(i: int) -> None:
                outs[i] = (await b.infer({"x": xs[i]}))["y"]

            async with anyio.create_task_group() as tg:
                tg.start_soon(one, 0)
                await until(lambda: b.inflight == 1)
                for i in range(1, 5):
                    tg.start_soon(one, i)
                await until(lambda: b.queue_depth == 4)
                g.open()
        assert g.batches[0].shape == (1, 7, 8)  # (trio starts tasks in no particular order)
        assert sorted(a.shape for a in g.batches[1:]) == [(2, 3, 8), (2, 5, 8)]
        for i, x in enumerate(xs):
            np.testing.assert_allclose(outs[i], np.maximum(x @ wt, 0), rtol=1e-5, atol=1e-5)
        assert runner.plans["plans"] == 3
    finally:
        await runner.aclose()


WS = RNG.standard_normal((8, 4)).astype(np.float32)


def sequence_graph(lead: int | str = "N") -> aioge.Graph:
    """y = relu(x @ WS) for x[lead, S, 8], S symbolic (an in-process graph, no ONNX)."""
    g = aioge.Graph("seq")
    x = g.input("x", (lead, "S", 8), "float32")
    g.output(g.add_node("Relu", [g.add_node("MatMul", [x, g.constant(WS)])], name="y"))
    return g


async def test_graphs_and_builders_with_symbolic_dims_are_sequence_models(dev):
    """A Graph with symbolic dims, and a builder whose graph has them (built once), load as DynamicModels
    that batch on the symbolic leading dim, as an ONNX model with the same dims does."""
    from aioge.serve import DynamicModel, ModelLoadError

    calls: list[int] = []

    def builder(b: int) -> aioge.Graph:
        calls.append(b)
        return sequence_graph()

    for source in (sequence_graph(), builder):
        runner = await load_model(dev, source, name="seq", batch_sizes=(1, 2), max_plans=5)
        try:
            assert isinstance(runner, DynamicModel) and runner.max_batch_size == 2
            assert runner.inputs["x"].shape == (-1, -1, 8) and runner.outputs["y"].shape == (-1, -1, 4)
            async with Batcher(runner, max_queue_delay=0) as b:
                for rows_, length in ((1, 3), (2, 9), (1, 20)):
                    x = RNG.standard_normal((rows_, length, 8)).astype(np.float32)
                    y = (await b.infer({"x": x}))["y"]
                    np.testing.assert_allclose(y, np.maximum(x @ WS, 0), rtol=1e-5, atol=1e-5)
            assert (runner.plans["plans"], runner.plans["max_plans"]) == (3, 5)
        finally:
            await runner.aclose()
    assert calls == [1]  # the builder's graph serves every batch size

    with pytest.raises(ModelLoadError, match="fixed batch dim: name the batch dim"):
        await load_model(dev, lambda b: sequence_graph(b), name="pinned", batch_sizes=(1, 2))
    runner = await load_model(dev, lambda b: sequence_graph(b), max_batch_size=0)  # served without batching
    try:
        assert isinstance(runner, DynamicModel) and runner.max_batch_size == 0
        assert runner.inputs["x"].shape == (1, -1, 8)
        x = RNG.standard_normal((1, 6, 8)).astype(np.float32)
        np.testing.assert_allclose((await runner.execute({"x": x}))["y"], np.maximum(x @ WS, 0), rtol=1e-5, atol=1e-5)
    finally:
        await runner.aclose()


async def test_the_server_serves_a_graph_with_symbolic_dims(dev):
    """Over the v2 handlers: the Graph's requests at two lengths answer, metadata shows -1, /stats has the plans."""
    import json

    from aioge.serve import InferenceServer, ModelSpec

    async with InferenceServer({"seq": ModelSpec(sequence_graph(), batch_sizes=(1, 2), max_plans=4)},
                               device=dev, metrics=False) as server:  # fmt: skip
        meta = json.loads(server.model_metadata("seq").body)
        assert meta["inputs"][0]["shape"] == [-1, -1, 8] and meta["max_batch_size"] == 2
        for length in (5, 11):
            x = RNG.standard_normal((2, length, 8)).astype(np.float32)
            body = json.dumps({"inputs": [{"name": "x", "shape": list(x.shape), "datatype": "FP32",
                                           "data": x.ravel().tolist()}]}).encode()  # fmt: skip
            r = await server.infer("seq", body, {})
            assert r.status == 200, r.body
            (out,) = json.loads(r.body)["outputs"]
            y = np.asarray(out["data"], np.float32).reshape(out["shape"])
            np.testing.assert_allclose(y, np.maximum(x @ WS, 0), rtol=1e-5, atol=1e-5)
        stats = json.loads(server.statistics("seq").body)["model_stats"][0]
        assert (stats["aioge_plans"]["plans"], stats["aioge_plans"]["max_plans"]) == (2, 4)
