"""Triton's model configuration and statistics extensions, through tritonclient.http against a real
``python -m aioge.serve``: what Triton's own tools read before they send a request."""

from __future__ import annotations

import json
import threading

import httpx
import numpy as np
import pytest

from tests.serve import serve_models as M
from tests.serve.conftest import ServerProcess
from tests.serve.test_serve_http import metric

tc = pytest.importorskip("tritonclient.http")
from tritonclient.utils import InferenceServerException  # noqa: E402


@pytest.fixture(scope="module")
def triton(tmp_path_factory):
    repo = tmp_path_factory.mktemp("repo")
    M.save(M.mlp(), repo / "mlp.onnx")
    M.save(M.mlp(), repo / "counted.onnx")
    M.save(M.fixed(), repo / "fixed.onnx")
    M.save(M.identity(4), repo / "held.onnx")  # waits 10 s for 8 rows: 8 concurrent requests make one batch
    (repo / "mlp.json").write_text(json.dumps({"batch_sizes": [1, 4, 8], "timeout_ms": 5000}))
    (repo / "held.json").write_text(json.dumps({"max_queue_delay_us": 10e6, "batch_sizes": [8]}))
    s = ServerProcess(str(repo), "--max-batch-size", "8", "--max-queue-delay-us", "2000", "--max-queue-size", "100")
    client = tc.InferenceServerClient(f"127.0.0.1:{s.port}")
    yield s, client
    client.close()
    assert s.stop() == 0, "".join(s.stderr)[-3000:]


def _infer(client, model: str, x: np.ndarray):
    inp = tc.InferInput("x", list(x.shape), "FP32")
    inp.set_data_from_numpy(x, binary_data=True)
    return client.infer(model, [inp])


def test_server_metadata_advertises_the_extensions(triton):
    _, client = triton
    ext = client.get_server_metadata()["extensions"]
    assert {"model_configuration", "statistics", "binary_tensor_data"} <= set(ext)


def test_model_config(triton):
    s, client = triton
    cfg = client.get_model_config("mlp")
    assert cfg["name"] == "mlp" and cfg["backend"] == "aioge" and cfg["max_batch_size"] == 8
    assert [(t["name"], t["data_type"], t["dims"]) for t in cfg["input"]] == [("x", "TYPE_FP32", [16])]
    assert [(t["name"], t["data_type"], t["dims"]) for t in cfg["output"]] == [("y", "TYPE_FP32", [8])]
    db = cfg["dynamic_batching"]
    assert db["preferred_batch_size"] == [1, 4, 8] and db["max_queue_delay_microseconds"] == 2000
    assert db["default_queue_policy"]["default_timeout_microseconds"] == 5_000_000
    assert db["default_queue_policy"]["max_queue_size"] == 100
    assert client.get_model_config("mlp", "1") == cfg
    held = client.get_model_config("held")["dynamic_batching"]
    assert held["preferred_batch_size"] == [8] and held["max_queue_delay_microseconds"] == 10_000_000
    fixed = client.get_model_config("fixed")
    assert fixed["max_batch_size"] == 0 and "dynamic_batching" not in fixed
    assert fixed["input"][0]["dims"] == [2, 3] and fixed["output"][0]["dims"] == [2, 3]
    for args in (("nope",), ("mlp", "2")):
        with pytest.raises(InferenceServerException) as e:
            client.get_model_config(*args)
        assert e.value.status() == "404"
    r = httpx.get(f"{s.url}/v2/models/mlp/versions/1/config")
    assert r.status_code == 200 and r.json() == cfg


def test_statistics_count_the_requests_sent(triton):
    s, client = triton
    rng = np.random.default_rng(0)
    for rows in (1, 1, 1, 1, 1, 3, 3):  # one after another: a batch each
        _infer(client, "counted", rng.standard_normal((rows, 16)).astype(np.float32))
    for _ in range(2):  # refused: a 400 each, never executed
        with pytest.raises(InferenceServerException) as e:
            _infer(client, "counted", np.zeros((1, 15), np.float32))
        assert e.value.status() == "400"
    st = client.get_inference_statistics("counted")["model_stats"]
    assert len(st) == 1
    m = st[0]
    assert m["name"] == "counted" and m["version"] == "1" and m["last_inference"] > 1.6e12
    assert m["inference_count"] == 11 and m["execution_count"] == 7
    inf = m["inference_stats"]
    assert inf["success"]["count"] == 7 and inf["success"]["ns"] > 0
    assert inf["fail"]["count"] == 2
    assert inf["queue"]["count"] == 7
    for k in ("compute_input", "compute_infer", "compute_output"):
        assert inf[k]["count"] == 7, k
    assert inf["compute_infer"]["ns"] > 0
    assert {b["batch_size"]: b["compute_infer"]["count"] for b in m["batch_stats"]} == {1: 5, 3: 2}
    assert client.get_inference_statistics("counted", "1") == client.get_inference_statistics("counted")
    with pytest.raises(InferenceServerException) as e:
        client.get_inference_statistics("nope")
    assert e.value.status() == "404"
    everything = client.get_inference_statistics()["model_stats"]
    assert sorted(x["name"] for x in everything) == ["counted", "fixed", "held", "mlp"]
    text = httpx.get(f"{s.url}/metrics").text
    assert metric(text, "aioge_serve_requests_total", model="counted", status="invalid") == 2
    assert metric(text, "aioge_serve_requests_total", model="counted", status="ok") == 7


def test_statistics_of_a_dynamic_batch(triton):
    """8 concurrent requests of one row leave as one batch of 8: 8 inferences, 1 execution."""
    s, client = triton
    errors: list[BaseException] = []

    def call(i: int) -> None:
        c = tc.InferenceServerClient(f"127.0.0.1:{s.port}", network_timeout=60)
        try:
            _infer(c, "held", np.full((1, 4), i, np.float32))
        except BaseException as e:
            errors.append(e)
        finally:
            c.close()

    threads = [threading.Thread(target=call, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert not errors, errors
    m = client.get_inference_statistics("held")["model_stats"][0]
    assert m["inference_count"] == 8 and m["execution_count"] == 1
    assert m["inference_stats"]["success"]["count"] == 8
    assert m["inference_stats"]["compute_infer"]["count"] == 8  # each request of the batch
    assert m["batch_stats"] == [{**m["batch_stats"][0], "batch_size": 8}]
    assert m["batch_stats"][0]["compute_infer"]["count"] == 1


def test_model_repository_index_load_unload(tmp_path):
    """Triton's model repository extension: models added to the directory after start-up are listed and
    loaded, a reload picks up the model's NAME.json, an unloaded model is refused and listed as such."""
    import onnxruntime as ort

    M.save(M.mlp(), tmp_path / "mlp.onnx")
    s = ServerProcess(str(tmp_path), "--batch-sizes", "1,4")
    client = tc.InferenceServerClient(f"127.0.0.1:{s.port}")
    try:
        assert "model_repository" in client.get_server_metadata()["extensions"]
        assert client.get_model_repository_index() == [{"name": "mlp", "version": "1", "state": "READY",
                                                        "reason": ""}]  # fmt: skip
        M.save(M.cnn(), tmp_path / "cnn.onnx")
        (tmp_path / "broken.onnx").write_bytes(b"not a model")
        index = {m["name"]: m for m in client.get_model_repository_index()}
        assert index["cnn"]["state"] == "UNAVAILABLE" and index["cnn"]["reason"] == "unloaded"
        assert [m["name"] for m in httpx.post(f"{s.url}/v2/repository/index", json={"ready": True}).json()] == ["mlp"]
        assert not client.is_model_ready("cnn")

        client.load_model("cnn")
        assert client.is_model_ready("cnn")
        assert client.get_model_config("cnn")["dynamic_batching"]["preferred_batch_size"] == [1, 4]
        x = np.random.default_rng(0).standard_normal((2, 3, 16, 16)).astype(np.float32)
        inp = tc.InferInput("x", list(x.shape), "FP32")
        inp.set_data_from_numpy(x)
        sess = ort.InferenceSession(M.cnn().SerializeToString(), providers=["CPUExecutionProvider"])
        np.testing.assert_allclose(client.infer("cnn", [inp]).as_numpy("p"), sess.run(None, {"x": x})[0],
                                   rtol=1e-4, atol=1e-5)  # fmt: skip

        (tmp_path / "cnn.json").write_text(json.dumps({"batch_sizes": [2]}))
        client.load_model("cnn")  # a reload, with the new options
        assert client.get_model_config("cnn")["dynamic_batching"]["preferred_batch_size"] == [2]
        np.testing.assert_allclose(client.infer("cnn", [inp]).as_numpy("p"), sess.run(None, {"x": x})[0],
                                   rtol=1e-4, atol=1e-5)  # fmt: skip

        client.unload_model("cnn")
        assert not client.is_model_ready("cnn")
        with pytest.raises(InferenceServerException) as e:
            client.infer("cnn", [inp])
        assert e.value.status() == "404"
        assert {m["name"]: m["state"] for m in client.get_model_repository_index()} == {
            "broken": "UNAVAILABLE", "cnn": "UNAVAILABLE", "mlp": "READY"}  # fmt: skip

        for call, name in ((client.load_model, "nope"), (client.load_model, "broken"), (client.unload_model, "nope")):
            with pytest.raises(InferenceServerException) as e:
                call(name)
            assert e.value.status() == "400", (call, name)
        with pytest.raises(InferenceServerException, match="not supported"):
            client.load_model("cnn", config=json.dumps({"max_batch_size": 2}))
        r = httpx.post(f"{s.url}/v2/repository/models/cnn/load", content=b"[1]")
        assert r.status_code == 400 and "JSON object" in r.json()["error"]
        assert client.is_server_ready() and client.is_model_ready("mlp")  # healthy after all of it
        xm = np.ones((1, 16), np.float32)
        inp = tc.InferInput("x", [1, 16], "FP32")
        inp.set_data_from_numpy(xm)
        assert client.infer("mlp", [inp]).as_numpy("y").shape == (1, 8)
    finally:
        client.close()
        assert s.stop() == 0, "".join(s.stderr)[-3000:]


def test_the_asyncio_client_reads_config_statistics_and_the_index(triton):
    """tritonclient.http.aio (aiohttp) against the same routes."""
    aio = pytest.importorskip("tritonclient.http.aio")
    import asyncio

    s, _ = triton

    async def main() -> None:
        client = aio.InferenceServerClient(f"127.0.0.1:{s.port}")
        try:
            assert "statistics" in (await client.get_server_metadata())["extensions"]
            cfg = await client.get_model_config("mlp")
            assert cfg["input"][0]["dims"] == [16] and cfg["max_batch_size"] == 8
            before = (await client.get_inference_statistics("mlp"))["model_stats"][0]["inference_count"]
            x = aio.InferInput("x", [2, 16], "FP32")
            x.set_data_from_numpy(np.ones((2, 16), np.float32))
            res = await client.infer("mlp", [x])
            assert res.as_numpy("y").shape == (2, 8)
            after = (await client.get_inference_statistics("mlp"))["model_stats"][0]
            assert after["inference_count"] == before + 2
            index = await client.get_model_repository_index()
            assert {m["name"] for m in index} == {"counted", "fixed", "held", "mlp"}
        finally:
            await client.close()

    asyncio.run(main())
