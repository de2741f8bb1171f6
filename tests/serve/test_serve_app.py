"""``aioge.serve.app(...)`` with models passed in code, run by uvicorn inside the test's own event loop."""

from __future__ import annotations

import socket

import anyio
import httpx
import numpy as np
import pytest

import aioge
import aioge.metrics
import aioge.serve

prometheus_client = pytest.importorskip("prometheus_client")
uvicorn = pytest.importorskip("uvicorn")

pytestmark = pytest.mark.anyio

W = np.arange(12, dtype=np.float32).reshape(4, 3) / 10


def scale(n: int) -> aioge.Graph:
    g = aioge.Graph("scale")
    x = g.input("x", (n, 4), "float32")
    g.output(g.add_node("MatMul", [x, g.constant(W)], name="y"))
    return g


def fixed() -> aioge.Graph:
    g = aioge.Graph("negate")
    x = g.input("v", (3,), "int32")
    g.output(g.add_node("Neg", [x], name="w"))
    return g


@pytest.mark.parametrize("anyio_backend", ["asyncio"])  # uvicorn runs on asyncio
async def test_models_in_code_behind_uvicorn(dev, compiled):
    registry = prometheus_client.CollectorRegistry()
    runtime = prometheus_client.Gauge("runtime_thing", "a collector of the runtime's", registry=registry)
    runtime.set(7)
    square = await compiled(scale(2))  # a compiled model: borrowed, its own batch size
    app = aioge.serve.app(
        {"scale": aioge.serve.ModelSpec(scale, max_batch_size=4, batch_sizes=(2, 4), max_queue_delay=0.001),
         "negate": aioge.serve.ModelSpec(fixed(), max_batch_size=0),
         "square": square},
        device=dev, registry=registry, runtime_metrics=True)  # fmt: skip
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning", lifespan="on"))
    async with anyio.create_task_group() as tg:
        tg.start_soon(server.serve)
        with anyio.fail_after(60):
            while not server.started:
                await anyio.sleep(0.01)
        async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}") as c:
            meta = (await c.get("/v2/models/negate")).json()
            assert meta["inputs"] == [{"name": "v", "datatype": "INT32", "shape": [3]}]
            assert (await c.get("/v2/models/square")).json()["inputs"][0]["shape"] == [-1, 4]
            x = np.arange(12, dtype=np.float32).reshape(3, 4)
            r = await c.post("/v2/models/scale/infer", json={"inputs": [
                {"name": "x", "shape": [3, 4], "datatype": "FP32", "data": x.tolist()}]})  # fmt: skip
            assert r.status_code == 200, r.text
            y = np.asarray(r.json()["outputs"][0]["data"], np.float32).reshape(3, 3)
            np.testing.assert_allclose(y, x @ W, rtol=1e-6)
            r = await c.post("/v2/models/scale/infer", json={"inputs": [
                {"name": "x", "shape": [5, 4], "datatype": "FP32", "data": [0.0] * 20}]})  # fmt: skip
            assert r.status_code == 400 and "1 to 4" in r.json()["error"]
            r = await c.post("/v2/models/negate/infer", json={"inputs": [
                {"name": "v", "shape": [3], "datatype": "INT32", "data": [1, -2, 3]}]})  # fmt: skip
            assert r.json()["outputs"][0]["data"] == [-1, 2, -3]
            r = await c.post("/v2/models/square/infer", json={"inputs": [
                {"name": "x", "shape": [1, 4], "datatype": "FP32", "data": [1, 1, 1, 1]}]})  # fmt: skip
            np.testing.assert_allclose(r.json()["outputs"][0]["data"], W.sum(0), rtol=1e-6)
            text = (await c.get("/metrics")).text
            assert "runtime_thing 7.0" in text  # one /metrics for the server's and other collectors
            assert "aioge_launches_total" in text and 'aioge_executions_total{model=' in text  # the runtime's
            assert 'aioge_serve_requests_total{model="scale",status="ok"} 1.0' in text
            assert 'aioge_serve_padding_rows_total{model="scale"} 1.0' in text  # 3 rows ran at batch size 4
        server.should_exit = True
    assert not square.closed  # borrowed: the app closed only what it compiled
    assert not dev.closed
    aioge.metrics.disable()  # the runtime's per-launch hooks are process-wide
