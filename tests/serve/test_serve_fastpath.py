"""The serving fast paths: a lone request run in its caller's task, the asyncio flags, the metrics
collector, the bare ASGI infer route and the protocol's float fast path -- each keeps the answers
and the guarantees of the general path (asyncio, uvloop and trio where no web server is involved)."""

from __future__ import annotations

import json

import anyio
import numpy as np
import pytest

import aioge
from aioge.serve import Batcher, DeadlineExceededError, load_model
from aioge.serve.protocol import TensorInfo, decode_request

pytestmark = pytest.mark.anyio

RNG = np.random.default_rng(3)
W = RNG.standard_normal((6, 5)).astype(np.float32)


def linear(n: int) -> aioge.Graph:
    g = aioge.Graph("linear")
    x = g.input("x", (n, 6), "float32")
    g.output(g.add_node("MatMul", [x, g.constant(W)], name="y"))
    return g


def rows(n: int, start: float = 0.0) -> np.ndarray:
    return (np.arange(n, dtype=np.float32)[:, None] + start) * np.ones((1, 6), np.float32)


class Recording:
    """A Runner around a real model that records, per batch, its bucket and the task that ran it;
    ``gate`` (when set up) holds every batch until opened."""

    def __init__(self, inner, gated: bool = False) -> None:
        self.inner = inner
        self.gate = anyio.Event() if gated else None
        self.batches: list[tuple[int, object]] = []
        self.started = 0

    name = property(lambda self: self.inner.name)
    inputs = property(lambda self: self.inner.inputs)
    outputs = property(lambda self: self.inner.outputs)
    max_batch_size = property(lambda self: self.inner.max_batch_size)
    max_inflight = property(lambda self: self.inner.max_inflight)

    def bucket(self, n: int) -> int:
        return self.inner.bucket(n)

    async def execute(self, feeds):
        self.started += 1
        self.batches.append((int(feeds["x"].shape[0]), anyio.get_current_task().id))
        if self.gate is not None:
            await self.gate.wait()
        return await self.inner.execute(feeds)


async def until(predicate) -> None:
    with anyio.fail_after(10):  # a bound on the wait, not a timing assertion
        while not predicate():
            await anyio.sleep(0.001)


@pytest.fixture
async def model(dev):
    async with await load_model(dev, linear, name="linear", max_batch_size=8, batch_sizes=(1, 2, 4, 8)) as m:
        yield m


async def test_a_lone_request_on_an_idle_batcher_runs_in_its_callers_task(model):
    rec = Recording(model)
    async with Batcher(rec, max_queue_delay=0) as b:
        out = await b.infer({"x": rows(2, 1.0)})
        me = anyio.get_current_task().id
    np.testing.assert_allclose(out["y"], rows(2, 1.0) @ W, rtol=1e-5, atol=1e-5)
    assert rec.batches == [(2, me)]  # no hop to a worker
    assert b.stats["ok"] == 1 and b.stats["batches"] == 1 and b.stats["batch_sizes"] == {2: 1}
    assert b.inflight == 0


async def test_requests_with_a_deadline_or_a_queue_delay_go_through_the_queue(model):
    rec = Recording(model)
    me = anyio.get_current_task().id
    async with Batcher(rec, max_queue_delay=0) as b:
        await b.infer({"x": rows(1)}, timeout=30.0)  # a deadline: run by a worker, which the waiter may leave
    async with Batcher(rec, max_queue_delay=0.001) as b:
        await b.infer({"x": rows(1)})  # waits for the batch to fill: a worker's
        await b.infer({"x": rows(8)})  # fills a batch by itself: nothing to wait for
    assert [rows_ for rows_, _ in rec.batches] == [1, 1, 8]
    assert [task == me for _, task in rec.batches] == [False, False, True]


async def test_callers_arriving_while_one_runs_alone_queue_and_batch(model):
    rec = Recording(model, gated=True)
    outs: dict[int, np.ndarray] = {}
    async with Batcher(rec, max_queue_delay=0, max_inflight=1) as b, anyio.create_task_group() as tg:

        async def call(i: int) -> None:
            outs[i] = (await b.infer({"x": rows(1, float(i))}))["y"]

        tg.start_soon(call, 0)
        await until(lambda: rec.started == 1)  # running alone, holding the only slot
        for i in range(1, 6):
            tg.start_soon(call, i)
        await until(lambda: b.queue_depth == 5)  # queued behind it, not each alone
        assert b.inflight == 1
        rec.gate.set()
    assert b.stats["batch_sizes"] == {1: 1, 5: 1} and [n for n, _ in rec.batches] == [1, 8]  # 5 rows run at 8
    for i, y in outs.items():
        np.testing.assert_allclose(y, rows(1, float(i)) @ W, rtol=1e-5, atol=1e-5)
    assert b.stats["peak_inflight"] == 1 and b.stats["ok"] == 6


async def test_cancelling_a_request_running_alone_frees_its_slot(model):
    rec = Recording(model, gated=True)
    async with Batcher(rec, max_queue_delay=0, max_inflight=1) as b:
        async with anyio.create_task_group() as tg:
            tg.start_soon(b.infer, {"x": rows(1)})
            await until(lambda: b.inflight == 1)
            tg.cancel_scope.cancel()
        assert b.inflight == 0 and b.stats["cancelled"] == 1
        rec.gate.set()
        out = await b.infer({"x": rows(3, 2.0)})
    np.testing.assert_allclose(out["y"], rows(3, 2.0) @ W, rtol=1e-5, atol=1e-5)
    assert b.stats["ok"] == 1


async def test_closing_waits_for_a_request_running_alone(model):
    rec = Recording(model, gated=True)
    got: dict = {}
    async with anyio.create_task_group() as tg:
        b = Batcher(rec, max_queue_delay=0)
        await b.__aenter__()

        async def call() -> None:
            got["y"] = (await b.infer({"x": rows(1, 4.0)}))["y"]

        async def open_later() -> None:
            await anyio.sleep(0.05)
            rec.gate.set()

        tg.start_soon(call)
        await until(lambda: b.inflight == 1)
        tg.start_soon(open_later)
        await b.__aexit__(None, None, None)
        assert "y" in got  # leaving waited for the batch run in the caller's task: nothing accepted is lost
    np.testing.assert_allclose(got["y"], rows(1, 4.0) @ W, rtol=1e-5, atol=1e-5)


async def test_a_deadline_still_fails_a_request_waiting_behind_one_running_alone(model):
    rec = Recording(model, gated=True)
    async with Batcher(rec, max_queue_delay=0, max_inflight=1) as b, anyio.create_task_group() as tg:
        tg.start_soon(b.infer, {"x": rows(1)})
        await until(lambda: b.inflight == 1)
        with pytest.raises(DeadlineExceededError, match="queued"):
            await b.infer({"x": rows(1, 5.0)}, timeout=0.02)
        assert b.queue_depth == 0
        rec.gate.set()
    assert [n for n, _ in rec.batches] == [1]  # the expired one never ran


async def test_callers_looping_on_an_idle_batcher_take_turns(model):
    """A lone request may run without yielding (a small model executes on the caller's thread); every
    few such runs yield, so callers looping on an idle batcher all make progress."""
    rec = Recording(model)
    order: list[int] = []
    async with Batcher(rec, max_queue_delay=0) as b, anyio.create_task_group() as tg:

        async def loop(i: int) -> None:
            for _ in range(40):
                out = await b.infer({"x": rows(1, float(i))})
                np.testing.assert_allclose(out["y"], rows(1, float(i)) @ W, rtol=1e-5, atol=1e-5)
                order.append(i)

        for i in range(4):
            tg.start_soon(loop, i)
    assert b.stats["ok"] == 160 and b.stats["rows"] == 160
    assert len(set(order[:64])) == 4  # each caller had turns early on (not one loop after another)


async def test_a_lone_callers_spaced_requests_do_not_yield(model):
    """Requests that arrive well after the previous batch ended (here: >= 200 us of busy waiting, no loop
    iteration between them) are not back-to-back: they run without a yield but every 16th.  The time
    since that batch is measured on time.perf_counter: uvloop's loop clock counts whole milliseconds
    (and stands still between loop iterations), so such requests all looked back-to-back there."""
    import time

    rec = Recording(model)
    async with Batcher(rec, max_queue_delay=0) as b:
        yields = 0
        checkpoint = b._sync.checkpoint

        async def counting() -> None:
            nonlocal yields
            yields += 1
            await checkpoint()

        b._sync.checkpoint = counting
        for i in range(32):
            t = time.perf_counter()
            while time.perf_counter() - t < 200e-6:  # a lower bound on the gap, not a timing assertion
                pass
            out = await b.infer({"x": rows(1, float(i))})
            np.testing.assert_allclose(out["y"], rows(1, float(i)) @ W, rtol=1e-5, atol=1e-5)
    assert yields == 2  # the 16th and the 32nd


# ---- metrics: a scrape-time collector ----
async def test_the_metrics_collector_counts_like_prometheus_histograms(model):
    prometheus_client = pytest.importorskip("prometheus_client")
    from aioge.serve.metrics import ServeMetrics

    registry = prometheus_client.CollectorRegistry()
    metrics = ServeMetrics(registry)
    with pytest.raises(ValueError, match="Duplicated"):  # one set of names per registry, as before
        ServeMetrics(registry)
    async with Batcher(model, max_queue_delay=0.002, observer=metrics) as b, anyio.create_task_group() as tg:
        for n in (1, 2, 3, 1, 1):
            tg.start_soon(b.infer, {"x": rows(n)})
    metrics.http("linear", 200)
    metrics.http("linear", 200)
    metrics.http("_unknown", 404)
    get = registry.get_sample_value
    hist = b.stats["batch_sizes"]
    assert get("aioge_serve_batch_size_count", {"model": "linear"}) == sum(hist.values())
    assert get("aioge_serve_batch_size_sum", {"model": "linear"}) == 8
    for le in (1, 2, 4, 8):
        want = sum(v for k, v in hist.items() if k <= le)
        assert get("aioge_serve_batch_size_bucket", {"model": "linear", "le": f"{float(le)}"}) == want
    assert get("aioge_serve_batch_size_bucket", {"model": "linear", "le": "+Inf"}) == sum(hist.values())
    assert get("aioge_serve_requests_total", {"model": "linear", "status": "ok"}) == 5
    assert get("aioge_serve_request_seconds_count", {"model": "linear"}) == 5
    assert get("aioge_serve_queue_seconds_count", {"model": "linear"}) == 5
    assert get("aioge_serve_http_requests_total", {"model": "linear", "code": "200"}) == 2
    assert get("aioge_serve_http_requests_total", {"model": "_unknown", "code": "404"}) == 1
    assert get("aioge_serve_padding_rows_total", {"model": "linear"}) == b.stats["padding_rows"]
    assert get("aioge_serve_queue_depth", {"model": "linear"}) == 0
    assert get("aioge_serve_inflight_batches", {"model": "linear"}) == 0
    text = metrics.expose().decode()
    assert "# TYPE aioge_serve_batch_size histogram" in text and "# TYPE aioge_serve_requests_total counter" in text


# ---- the protocol's float fast path ----
def test_json_floats_keep_the_general_paths_semantics():
    spec = {"x": TensorInfo("x", np.dtype(np.float32), (-1, 3))}
    h = {"x": TensorInfo("x", np.dtype(np.float16), (-1, 3))}
    d = {"x": TensorInfo("x", np.dtype(np.float64), (-1, 3))}

    def body(data, dt="FP32"):
        return json.dumps({"inputs": [{"name": "x", "shape": [1, 3], "datatype": dt, "data": data}]}).encode()

    a = decode_request(body([1.5, -2.25, 1e39]), None, spec, {}, 4).inputs["x"]
    assert a.dtype == np.float32 and a.shape == (1, 3) and a[0, 0] == 1.5 and np.isinf(a[0, 2])
    a = decode_request(body([0.1, 1e300, -3.0], "FP64"), None, d, {}, 4).inputs["x"]
    assert a.dtype == np.float64 and a[0, 0] == 0.1 and a[0, 1] == 1e300  # exact
    a = decode_request(body([[1.0, 70000.0, 2.5]], "FP16"), None, h, {}, 4).inputs["x"]  # nested, fp16's range
    assert a.dtype == np.float16 and np.isinf(a[0, 1]) and a[0, 2] == 2.5
    a = decode_request(body([1, 2, 3]), None, spec, {}, 4).inputs["x"]  # integers for a float input
    assert a.dtype == np.float32 and a.tolist() == [[1.0, 2.0, 3.0]]
    with pytest.raises(aioge.serve.InvalidInputError, match="4 elements"):
        decode_request(body([1.0, 2.0, 3.0, 4.0]), None, spec, {}, 4)
    for bad, msg in (([1.0, "2", 3.0], "strings"), ([1.0, None, 3.0], "nulls"), ([1.0, [2.0], 3.0], "regular")):
        with pytest.raises(aioge.serve.InvalidInputError, match=msg):  # flat floats first, then not
            decode_request(body(bad), None, spec, {}, 4)
    with pytest.raises(aioge.serve.InvalidInputError, match="booleans"):  # never read as 1.0 (Triton refuses them)
        decode_request(body([0.5, True, 2]), None, spec, {}, 4)
    a = decode_request(body([float("nan"), float("inf"), -float("inf")]), None, spec, {}, 4).inputs["x"]
    assert np.isnan(a[0, 0]) and a[0, 1] == np.inf and a[0, 2] == -np.inf
    bool_shape = {"inputs": [{"name": "x", "shape": [True, 3], "datatype": "FP32", "data": [1.0, 2.0, 3.0]}]}
    with pytest.raises(aioge.serve.InvalidInputError, match="'shape'"):
        decode_request(json.dumps(bool_shape).encode(), None, spec, {}, 4)


# ---- the bare ASGI infer route ----
@pytest.fixture
async def asgi(dev):
    """An httpx client calling the app in process (no socket), and its InferenceServer."""
    httpx = pytest.importorskip("httpx")
    pytest.importorskip("starlette")
    from aioge.serve.asgi import build_app
    from aioge.serve.server import InferenceServer, ModelSpec

    spec = ModelSpec(linear, max_batch_size=4, batch_sizes=(1, 4), max_queue_delay=0)
    async with InferenceServer({"linear": spec}, device=dev, max_body_bytes=4096) as server:
        app = build_app(server, own_lifespan=False)
        transport = httpx.ASGITransport(app=app, raise_app_exceptions=False)
        async with httpx.AsyncClient(transport=transport, base_url="http://test") as c:
            yield c, server


def v2(x: np.ndarray) -> dict:
    return {"id": "r1", "inputs": [{"name": "x", "shape": list(x.shape), "datatype": "FP32",
                                    "data": x.reshape(-1).tolist()}]}  # fmt: skip


@pytest.mark.parametrize("anyio_backend", ["asyncio"])
async def test_the_infer_route_answers_like_the_protocol_says(asgi):
    c, server = asgi
    x = rows(2, 1.0)
    for path in ("/v2/models/linear/infer", "/v2/models/linear/versions/1/infer"):
        r = await c.post(path, json=v2(x))
        assert r.status_code == 200 and r.headers["content-type"] == "application/json", r.text
        assert int(r.headers["content-length"]) == len(r.content)
        out = r.json()
        assert out["id"] == "r1" and out["model_name"] == "linear" and out["outputs"][0]["shape"] == [2, 5]
        np.testing.assert_allclose(np.reshape(out["outputs"][0]["data"], (2, 5)), x @ W, rtol=1e-5, atol=1e-5)
    # binary in and out: the header's length comes back as a response header
    head = json.dumps({"inputs": [{"name": "x", "shape": [1, 6], "datatype": "FP32",
                                   "parameters": {"binary_data_size": 24}}],
                       "parameters": {"binary_data_output": True}}).encode()  # fmt: skip
    r = await c.post("/v2/models/linear/infer", content=head + rows(1, 3.0).tobytes(),
                     headers={"Inference-Header-Content-Length": str(len(head))})  # fmt: skip
    assert r.status_code == 200 and r.headers["content-type"] == "application/octet-stream"
    hl = int(r.headers["inference-header-content-length"])
    y = np.frombuffer(r.content[hl:], np.float32).reshape(1, 5)
    np.testing.assert_allclose(y, rows(1, 3.0) @ W, rtol=1e-5, atol=1e-5)
    # protocol errors, in the protocol's form
    r = await c.post("/v2/models/nope/infer", json=v2(x))
    assert r.status_code == 404 and "unknown model 'nope'" in r.json()["error"]
    r = await c.post("/v2/models/linear/versions/2/infer", json=v2(x))
    assert r.status_code == 404 and "no version '2'" in r.json()["error"]
    r = await c.post("/v2/models/linear/infer", content=b"{not json")
    assert r.status_code == 400 and "not valid JSON" in r.json()["error"]
    r = await c.post("/v2/models/linear/infer", json=v2(rows(5)))
    assert r.status_code == 400 and "1 to 4" in r.json()["error"]
    r = await c.post("/v2/models/linear/infer", content=b"x" * 5000)  # over max_body_bytes
    assert r.status_code == 413 and "4096" in r.json()["error"]

    async def chunks():
        for _ in range(5):
            yield b" " * 1000

    r = await c.post("/v2/models/linear/infer", content=chunks())  # no Content-Length: counted as it comes
    assert r.status_code == 413
    r = await c.post("/v2/models/linear/infer", content=b"{}", headers={"Content-Encoding": "br"})
    assert r.status_code == 400 and "Content-Encoding" in r.json()["error"]
    m = server.metrics
    assert m is not None
    get = m.registry.get_sample_value
    assert get("aioge_serve_http_requests_total", {"model": "linear", "code": "200"}) == 3
    assert get("aioge_serve_http_requests_total", {"model": "linear", "code": "413"}) == 2
    assert get("aioge_serve_http_requests_total", {"model": "_unknown", "code": "404"}) == 1


@pytest.mark.parametrize("anyio_backend", ["asyncio"])
async def test_other_methods_and_near_miss_paths_go_to_starlette(asgi):
    c, _ = asgi
    r = await c.get("/v2/models/linear/infer")
    assert r.status_code == 405  # Starlette's router: the route exists for POST only
    for path in ("/v2/models//infer", "/v2/models/a/b/infer", "/v2/models/linear/versions//infer",
                 "/v2/models/linear/infer/x", "/v2/models/infer"):  # fmt: skip
        r = await c.post(path, json=v2(rows(1)))
        assert r.status_code in (404, 405), path
        assert "error" in r.json()
    assert (await c.get("/v2/models/linear")).json()["inputs"][0]["shape"] == [-1, 6]
    assert (await c.get("/v2/health/ready")).status_code == 200


def test_infer_target_parses_only_infer_paths():
    from aioge.serve.asgi import infer_target

    assert infer_target("/v2/models/m/infer") == ("m", None)
    assert infer_target("/v2/models/m.v2/versions/1/infer") == ("m.v2", "1")
    for bad in ("/v2/models//infer", "/v2/models/a/b/infer", "/v2/models/a/versions//infer", "/v2/models/a/infer/",
                "/v2/models/infer", "/v2/model/a/infer", "/v2/models/a/versions/1/x/infer"):  # fmt: skip
        assert infer_target(bad) is None, bad


@pytest.mark.parametrize("anyio_backend", ["asyncio"])
async def test_middleware_added_to_the_app_wraps_the_infer_route_too(dev):
    httpx = pytest.importorskip("httpx")
    from aioge.serve.asgi import build_app
    from aioge.serve.ray import ReplicaHeader
    from aioge.serve.server import InferenceServer, ModelSpec

    async with InferenceServer({"linear": ModelSpec(linear, batch_sizes=(1,), max_queue_delay=0)}, device=dev) as s:
        app = build_app(s, own_lifespan=False)
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://test") as c:
            assert "x-aioge-replica" not in (await c.post("/v2/models/linear/infer", json=v2(rows(1)))).headers
            app.add_middleware(ReplicaHeader, replica="r7")  # after requests ran: still applies
            for r in (await c.post("/v2/models/linear/infer", json=v2(rows(1)))), await c.get("/v2/health/live"):
                assert r.status_code == 200 and r.headers["x-aioge-replica"] == "r7"


@pytest.mark.parametrize("anyio_backend", ["asyncio"])
async def test_a_bug_in_the_handler_is_a_500_in_json(asgi, monkeypatch):
    c, server = asgi

    async def broken(*a, **k):
        raise RuntimeError("a bug")

    monkeypatch.setattr(server, "infer", broken)
    r = await c.post("/v2/models/linear/infer", json=v2(rows(1)))
    assert r.status_code == 500 and r.json() == {"error": "internal server error"}
