"""aioge.serve.ray: a local Ray instance, two replicas, requests over HTTP through Ray's proxy."""

from __future__ import annotations

import os
import socket

import anyio
import httpx
import numpy as np
import onnxruntime as ort
import pytest

from tests.serve import serve_models as M

ray = pytest.importorskip("ray")
serve = pytest.importorskip("ray.serve")

pytestmark = pytest.mark.anyio


@pytest.fixture(scope="module")
def ray_http_port():
    saved = {k: os.environ.pop(k, None) for k in ("PYTHONASYNCIODEBUG",)}  # replicas run like a user's
    os.environ["RAY_USAGE_STATS_ENABLED"] = "0"
    try:
        ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False, configure_logging=False)
    finally:
        for k, v in saved.items():
            if v is not None:
                os.environ[k] = v
    try:
        # the port is picked once Ray's own processes have bound theirs (ray.init binds many ephemeral
        # ports), and picked again if something took it before Serve's proxy bound it
        for attempt in range(3):
            with socket.socket() as s:
                s.bind(("127.0.0.1", 0))
                port = s.getsockname()[1]
            try:
                serve.start(http_options={"host": "127.0.0.1", "port": port})
                break
            except Exception as e:
                if "Failed to bind" not in str(e) or attempt == 2:
                    raise
                serve.shutdown()
        yield port
    finally:
        serve.shutdown()
        ray.shutdown()


@pytest.mark.parametrize("anyio_backend", ["asyncio"])
async def test_two_replicas_answer_v2_requests(ray_http_port, tmp_path):
    import aioge.serve.ray

    proto = M.mlp()
    path = M.save(proto, tmp_path / "mlp.onnx")
    app = aioge.serve.ray.deployment({"mlp": path}, num_replicas=2, ray_actor_options={"num_cpus": 0.5},
                                     batch_sizes=(1, 4, 8), max_batch_size=8)  # fmt: skip
    serve.run(app, name="aioge", route_prefix="/")
    sess = ort.InferenceSession(proto.SerializeToString(), providers=["CPUExecutionProvider"])
    xs = [np.random.default_rng(i).standard_normal((1 + i % 3, 16)).astype(np.float32) for i in range(48)]
    replicas: list[str] = []
    async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{ray_http_port}", timeout=120) as c:
        meta = (await c.get("/v2/models/mlp")).json()
        assert meta["inputs"] == [{"name": "x", "datatype": "FP32", "shape": [-1, 16]}]

        async def call(i: int) -> None:
            x = xs[i]
            t = {"name": "x", "shape": list(x.shape), "datatype": "FP32", "data": x.reshape(-1).tolist()}
            r = await c.post("/v2/models/mlp/infer", json={"id": str(i), "inputs": [t]})
            assert r.status_code == 200, r.text
            body = r.json()
            assert body["id"] == str(i)
            y = np.asarray(body["outputs"][0]["data"], np.float32).reshape(body["outputs"][0]["shape"])
            np.testing.assert_allclose(y, sess.run(None, {"x": x})[0], rtol=1e-4, atol=1e-5)
            replicas.append(r.headers["x-aioge-replica"])

        async with anyio.create_task_group() as tg:
            for i in range(len(xs)):
                tg.start_soon(call, i)
        r = await c.post("/v2/models/mlp/infer", json={"inputs": [{"name": "x", "shape": [1, 3], "datatype": "FP32",
                                                                   "data": [1, 2, 3]}]})  # fmt: skip
        assert r.status_code == 400 and "the model takes [-1, 16]" in r.json()["error"]
    assert len(replicas) == len(xs) and len(set(replicas)) == 2  # both replicas served
    serve.delete("aioge")
