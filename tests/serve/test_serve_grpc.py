"""Triton's gRPC service (``inference.GRPCInferenceService``) of ``python -m aioge.serve --grpc-port``,
through tritonclient.grpc (sync and aio) and the generated stub itself: the same server as HTTP."""

from __future__ import annotations

import asyncio
import json
import queue
import threading

import httpx
import numpy as np
import pytest

from tests.serve import serve_models as M
from tests.serve.conftest import ServerProcess
from tests.serve.test_serve_http import metric

tg = pytest.importorskip("tritonclient.grpc")
grpc = pytest.importorskip("grpc")
ort = pytest.importorskip("onnxruntime")
from tritonclient.grpc import service_pb2 as pb  # noqa: E402
from tritonclient.grpc import service_pb2_grpc  # noqa: E402
from tritonclient.utils import InferenceServerException  # noqa: E402


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    repo = tmp_path_factory.mktemp("repo")
    M.save(M.mlp(), repo / "mlp.onnx")
    M.save(M.mlp(), repo / "counted.onnx")
    M.save(M.fixed(), repo / "fixed.onnx")
    M.save(M.two_inputs(), repo / "two.onnx")
    M.save(M.identity(4), repo / "held.onnx")  # waits 10 s for 8 rows
    M.save(M.identity(4), repo / "narrow.onnx")  # likewise, 2 queued requests at most
    (repo / "mlp.json").write_text(json.dumps({"batch_sizes": [1, 4, 8], "timeout_ms": 5000}))
    (repo / "held.json").write_text(json.dumps({"max_queue_delay_us": 10e6, "batch_sizes": [8]}))
    (repo / "narrow.json").write_text(json.dumps({"max_queue_delay_us": 10e6, "batch_sizes": [8],
                                                  "max_queue_size": 2}))  # fmt: skip
    s = ServerProcess(str(repo), "--max-batch-size", "8", "--max-queue-delay-us", "2000", grpc=True)
    client = tg.InferenceServerClient(f"127.0.0.1:{s.grpc_port}")
    yield s, client
    client.close()
    assert s.stop() == 0, "".join(s.stderr)[-3000:]


@pytest.fixture(scope="module")
def stub(served):
    s, _ = served
    channel = grpc.insecure_channel(f"127.0.0.1:{s.grpc_port}",
                                    options=[("grpc.max_send_message_length", 128 << 20)])  # fmt: skip
    yield service_pb2_grpc.GRPCInferenceServiceStub(channel)
    channel.close()


def _ref(model, x: np.ndarray) -> np.ndarray:
    sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    return sess.run(None, {"x": x})[0]


def _input(x: np.ndarray, name: str = "x", dt: str = "FP32"):
    i = tg.InferInput(name, list(x.shape), dt)
    i.set_data_from_numpy(x)
    return i


def _status(call, *args, **kwargs) -> grpc.StatusCode:
    with pytest.raises(grpc.RpcError) as e:
        call(*args, **kwargs)
    return e.value.code()


def _healthy(s, client) -> None:
    assert client.is_server_live() and client.is_server_ready() and client.is_model_ready("mlp")
    y = client.infer("mlp", [_input(np.ones((1, 16), np.float32))]).as_numpy("y")
    assert y.shape == (1, 8)
    assert httpx.get(f"{s.url}/v2/health/ready").status_code == 200


def test_banner_names_both_ports(served):
    s, _ = served
    assert f"grpc 127.0.0.1:{s.grpc_port};" in s.banner and "listening on http://127.0.0.1:" in s.banner


def test_health_and_metadata(served):
    _, client = served
    assert client.is_server_live() and client.is_server_ready()
    assert client.is_model_ready("mlp") and client.is_model_ready("mlp", "1")
    assert not client.is_model_ready("nope") and not client.is_model_ready("mlp", "2")
    meta = client.get_server_metadata(as_json=True)
    assert meta["name"] == "aioge"
    assert {"model_configuration", "statistics", "model_repository"} <= set(meta["extensions"])
    m = client.get_model_metadata("mlp", as_json=True)
    assert m["name"] == "mlp" and m["versions"] == ["1"] and m["platform"] == "aioge"
    assert [(t["name"], t["datatype"], t["shape"]) for t in m["inputs"]] == [("x", "FP32", ["-1", "16"])]
    assert [(t["name"], t["datatype"], t["shape"]) for t in m["outputs"]] == [("y", "FP32", ["-1", "8"])]
    for args in (("nope",), ("mlp", "2")):
        with pytest.raises(InferenceServerException) as e:
            client.get_model_metadata(*args)
        assert e.value.status() == "StatusCode.NOT_FOUND"


def test_model_config(served):
    s, client = served
    cfg = client.get_model_config("mlp", as_json=True)["config"]
    assert cfg == client.get_model_config("mlp", "1", as_json=True)["config"]
    http = httpx.get(f"{s.url}/v2/models/mlp/config").json()
    assert cfg["name"] == "mlp" and cfg["backend"] == "aioge" and cfg["max_batch_size"] == 8 == http["max_batch_size"]
    assert [(t["name"], t["data_type"], t["dims"]) for t in cfg["input"]] == [("x", "TYPE_FP32", ["16"])]
    db = cfg["dynamic_batching"]
    assert db["preferred_batch_size"] == [1, 4, 8] and db["max_queue_delay_microseconds"] == "2000"
    assert db["default_queue_policy"]["default_timeout_microseconds"] == "5000000"
    proto = client.get_model_config("fixed").config  # the message itself
    assert proto.max_batch_size == 0 and not proto.HasField("dynamic_batching")
    assert list(proto.input[0].dims) == [2, 3]
    with pytest.raises(InferenceServerException) as e:
        client.get_model_config("nope")
    assert e.value.status() == "StatusCode.NOT_FOUND"


def test_infer_raw_matches_onnxruntime(served):
    _, client = served
    x = np.random.default_rng(0).standard_normal((5, 16)).astype(np.float32)
    r = client.infer("mlp", [_input(x)], request_id="r1", outputs=[tg.InferRequestedOutput("y")])
    np.testing.assert_allclose(r.as_numpy("y"), _ref(M.mlp(), x), rtol=1e-4, atol=1e-5)
    resp = r.get_response()
    assert resp.id == "r1" and resp.model_name == "mlp" and resp.model_version == "1"
    xf = np.random.default_rng(1).standard_normal((2, 3)).astype(np.float32)
    np.testing.assert_allclose(client.infer("fixed", [_input(xf)]).as_numpy("y"), _ref(M.fixed(), xf), rtol=1e-6)


def test_infer_typed_contents(served, stub):
    """``contents.fp32_contents`` rather than raw bytes (what other clients send); raw outputs back."""
    x = np.random.default_rng(2).standard_normal((3, 16)).astype(np.float32)
    req = pb.ModelInferRequest(model_name="mlp", id="typed")
    t = req.inputs.add(name="x", datatype="FP32", shape=[3, 16])
    t.contents.fp32_contents.extend(x.ravel().tolist())
    resp = stub.ModelInfer(req, timeout=60)
    assert resp.id == "typed" and [o.name for o in resp.outputs] == ["y"] and list(resp.outputs[0].shape) == [3, 8]
    y = np.frombuffer(resp.raw_output_contents[0], np.float32).reshape(3, 8)
    np.testing.assert_allclose(y, _ref(M.mlp(), x), rtol=1e-4, atol=1e-5)


def test_infer_two_inputs_typed_ints(served, stub):
    """A model of three inputs (FP32, INT64, FP32): typed int64_contents beside fp32_contents."""
    _, client = served
    meta = client.get_model_metadata("two", as_json=True)
    req = pb.ModelInferRequest(model_name="two")
    feeds = {}
    rng = np.random.default_rng(3)
    for t in meta["inputs"]:
        shape = [2 if d == "-1" else int(d) for d in t["shape"]]
        item = req.inputs.add(name=t["name"], datatype=t["datatype"], shape=shape)
        if t["datatype"] == "FP32":
            a = rng.standard_normal(shape).astype(np.float32)
            item.contents.fp32_contents.extend(a.ravel().tolist())
        else:
            a = rng.integers(0, 3, shape).astype(np.dtype(t["datatype"].lower()))
            getattr(item.contents, "int64_contents" if t["datatype"] == "INT64" else "int_contents").extend(
                a.ravel().tolist())
        feeds[t["name"]] = a
    resp = stub.ModelInfer(req, timeout=60)
    # the same inputs as raw bytes give the same answer
    raw = client.infer("two", [_input(a, n, t["datatype"]) for t, (n, a) in zip(meta["inputs"], feeds.items())])
    for i, o in enumerate(resp.outputs):
        got = np.frombuffer(resp.raw_output_contents[i], raw.as_numpy(o.name).dtype).reshape(list(o.shape))
        np.testing.assert_array_equal(got, raw.as_numpy(o.name))


def test_error_status_codes(served, stub):
    s, client = served
    x = np.ones((1, 16), np.float32)
    for model, inputs, code in (
        ("nope", [_input(x)], "NOT_FOUND"),
        ("mlp", [_input(np.ones((1, 15), np.float32))], "INVALID_ARGUMENT"),  # shape
        ("mlp", [_input(np.ones((9, 16), np.float32))], "INVALID_ARGUMENT"),  # past max_batch_size
        ("mlp", [_input(x.astype(np.float64), dt="FP64")], "INVALID_ARGUMENT"),  # datatype
        ("mlp", [_input(x, "z")], "INVALID_ARGUMENT"),  # input name
    ):
        with pytest.raises(InferenceServerException) as e:
            client.infer(model, inputs)
        assert e.value.status() == f"StatusCode.{code}", (model, e.value)
    with pytest.raises(InferenceServerException) as e:
        client.infer("mlp", [_input(x)], model_version="2")
    assert e.value.status() == "StatusCode.NOT_FOUND"
    # a deadline of the request (its timeout parameter), passed while it waits for a batch of 8
    with pytest.raises(InferenceServerException) as e:
        client.infer("held", [_input(np.ones((1, 4), np.float32))], timeout=200_000)
    assert e.value.status() == "StatusCode.DEADLINE_EXCEEDED"
    # the call's own gRPC deadline
    with pytest.raises(InferenceServerException) as e:
        client.infer("held", [_input(np.ones((1, 4), np.float32))], client_timeout=0.3)
    assert e.value.status() == "StatusCode.DEADLINE_EXCEEDED"
    _healthy(s, client)


def test_queue_full_is_unavailable(served):
    """``narrow`` queues 2 requests for 10 s: a third is refused with UNAVAILABLE at once."""
    s, client = served
    results: queue.Queue = queue.Queue()

    def call() -> None:
        c = tg.InferenceServerClient(f"127.0.0.1:{s.grpc_port}")
        try:
            results.put(c.infer("narrow", [_input(np.ones((1, 4), np.float32))], client_timeout=60).as_numpy("y"))
        except BaseException as e:
            results.put(e)
        finally:
            c.close()

    threads = [threading.Thread(target=call) for _ in range(2)]
    for t in threads:
        t.start()
    from tests.serve.conftest import wait_for

    wait_for(lambda: metric(httpx.get(f"{s.url}/metrics").text, "aioge_serve_queue_depth", model="narrow") == 2,
             what="two queued requests")  # fmt: skip
    with pytest.raises(InferenceServerException) as e:
        client.infer("narrow", [_input(np.ones((1, 4), np.float32))])
    assert e.value.status() == "StatusCode.UNAVAILABLE" and "queued" in e.value.message()
    # the two queued ones leave after their 10 s delay
    for t in threads:
        t.join(60)
    got = [results.get_nowait() for _ in range(2)]
    assert all(isinstance(g, np.ndarray) and g.shape == (1, 4) for g in got), got
    text = httpx.get(f"{s.url}/metrics").text
    assert metric(text, "aioge_serve_grpc_requests_total", model="narrow", code="UNAVAILABLE") == 1
    assert metric(text, "aioge_serve_grpc_requests_total", model="narrow", code="OK") == 2


def test_statistics_count_both_protocols(served):
    """Requests over gRPC and over HTTP land in the same statistics and metrics."""
    s, client = served
    import tritonclient.http as th

    http = th.InferenceServerClient(f"127.0.0.1:{s.port}")
    try:
        rng = np.random.default_rng(4)
        for rows in (1, 2, 3):  # gRPC: 6 rows, 3 batches
            client.infer("counted", [_input(rng.standard_normal((rows, 16)).astype(np.float32))])
        for rows in (1, 4):  # HTTP: 5 rows, 2 batches
            i = th.InferInput("x", [rows, 16], "FP32")
            i.set_data_from_numpy(rng.standard_normal((rows, 16)).astype(np.float32), binary_data=True)
            http.infer("counted", [i])
        with pytest.raises(InferenceServerException):  # refused over gRPC: a failure
            client.infer("counted", [_input(np.ones((1, 15), np.float32))])
        m = client.get_inference_statistics("counted", as_json=True)["model_stats"][0]
        assert m["name"] == "counted" and m["version"] == "1"
        assert int(m["inference_count"]) == 11 and int(m["execution_count"]) == 5
        assert int(m["inference_stats"]["success"]["count"]) == 5
        assert int(m["inference_stats"]["fail"]["count"]) == 1
        assert {int(b["batch_size"]) for b in m["batch_stats"]} == {1, 2, 3, 4}
        assert http.get_inference_statistics("counted")["model_stats"][0]["inference_count"] == 11
        everything = client.get_inference_statistics(as_json=True)["model_stats"]
        assert {x["name"] for x in everything} == {"counted", "fixed", "held", "mlp", "narrow", "two"}
        with pytest.raises(InferenceServerException) as e:
            client.get_inference_statistics("nope")
        assert e.value.status() == "StatusCode.NOT_FOUND"
        text = httpx.get(f"{s.url}/metrics").text
        assert metric(text, "aioge_serve_grpc_requests_total", model="counted", code="OK") == 3
        assert metric(text, "aioge_serve_grpc_requests_total", model="counted", code="INVALID_ARGUMENT") == 1
        assert metric(text, "aioge_serve_http_requests_total", model="counted", code="200") == 2
        assert metric(text, "aioge_serve_requests_total", model="counted", status="ok") == 5
        assert metric(text, "aioge_serve_requests_total", model="counted", status="invalid") == 1
    finally:
        http.close()


def test_repository_index(served):
    _, client = served
    index = client.get_model_repository_index(as_json=True)["models"]
    assert {m["name"]: m["state"] for m in index} == dict.fromkeys(
        ["counted", "fixed", "held", "mlp", "narrow", "two"], "READY")


def test_repository_load_unload(tmp_path):
    M.save(M.mlp(), tmp_path / "mlp.onnx")
    s = ServerProcess(str(tmp_path), "--batch-sizes", "1,4", grpc=True)
    client = tg.InferenceServerClient(f"127.0.0.1:{s.grpc_port}")
    try:
        M.save(M.cnn(), tmp_path / "cnn.onnx")
        index = {m["name"]: m for m in client.get_model_repository_index(as_json=True)["models"]}
        assert index["cnn"]["state"] == "UNAVAILABLE" and index["cnn"]["reason"] == "unloaded"
        assert not client.is_model_ready("cnn")
        client.load_model("cnn")
        assert client.is_model_ready("cnn")
        x = np.random.default_rng(5).standard_normal((2, 3, 16, 16)).astype(np.float32)
        np.testing.assert_allclose(client.infer("cnn", [_input(x)]).as_numpy("p"), _ref(M.cnn(), x),
                                   rtol=1e-4, atol=1e-5)  # fmt: skip
        client.unload_model("cnn")
        assert not client.is_model_ready("cnn")
        with pytest.raises(InferenceServerException) as e:
            client.infer("cnn", [_input(x)])
        assert e.value.status() == "StatusCode.NOT_FOUND"
        for call in (client.load_model, client.unload_model):
            with pytest.raises(InferenceServerException) as e:
                call("nope")
            assert e.value.status() == "StatusCode.INVALID_ARGUMENT"
        with pytest.raises(InferenceServerException, match="not supported"):
            client.load_model("cnn", config=json.dumps({"max_batch_size": 2}))
        _healthy(s, client)
    finally:
        client.close()
        assert s.stop() == 0, "".join(s.stderr)[-3000:]


def test_stream_infer(served):
    """ModelStreamInfer: requests on one stream are answered on it (errors as error messages); the
    ``held`` model's 8 requests of one row leave as one batch."""
    s, client = served
    got: queue.Queue = queue.Queue()
    client.start_stream(callback=lambda result, error: got.put((result, error)), stream_timeout=120)
    try:
        rng = np.random.default_rng(6)
        xs = {f"m{i}": rng.standard_normal((1 + i % 3, 16)).astype(np.float32) for i in range(6)}
        for rid, x in xs.items():
            client.async_stream_infer("mlp", [_input(x)], request_id=rid)
        client.async_stream_infer("nope", [_input(xs["m0"])], request_id="bad")
        before = client.get_inference_statistics("held", as_json=True)["model_stats"][0].get("execution_count", "0")
        for i in range(8):
            client.async_stream_infer("held", [_input(np.full((1, 4), i, np.float32))], request_id=f"h{i}")
        answers, errors = {}, []
        for _ in range(len(xs) + 1 + 8):
            result, error = got.get(timeout=60)
            if error is not None:
                errors.append(error)
            else:
                answers[result.get_response().id] = result
    finally:
        client.stop_stream()
    assert len(errors) == 1 and "unknown model 'nope'" in str(errors[0])
    for rid, x in xs.items():
        np.testing.assert_allclose(answers[rid].as_numpy("y"), _ref(M.mlp(), x), rtol=1e-4, atol=1e-5)
    for i in range(8):
        np.testing.assert_array_equal(answers[f"h{i}"].as_numpy("y"), np.full((1, 4), i, np.float32))
    after = client.get_inference_statistics("held", as_json=True)["model_stats"][0]["execution_count"]
    assert int(after) == int(before) + 1  # one batch of 8
    _healthy(s, client)


def test_asyncio_client(served):
    """tritonclient.grpc.aio: health, metadata, config, statistics, index, infer and a stream."""
    aio = pytest.importorskip("tritonclient.grpc.aio")
    s, _ = served

    async def main() -> None:
        client = aio.InferenceServerClient(f"127.0.0.1:{s.grpc_port}")
        try:
            assert await client.is_server_live() and await client.is_server_ready()
            assert await client.is_model_ready("mlp")
            assert "statistics" in (await client.get_server_metadata(as_json=True))["extensions"]
            assert (await client.get_model_metadata("mlp", as_json=True))["inputs"][0]["shape"] == ["-1", "16"]
            assert (await client.get_model_config("mlp", as_json=True))["config"]["max_batch_size"] == 8
            before = int((await client.get_inference_statistics("mlp", as_json=True))["model_stats"][0]
                         .get("inference_count", 0))  # fmt: skip
            xs = [np.random.default_rng(i).standard_normal((2, 16)).astype(np.float32) for i in range(8)]
            results = await asyncio.gather(*(client.infer("mlp", [_input(x, "x")]) for x in xs))
            for x, r in zip(xs, results):
                np.testing.assert_allclose(r.as_numpy("y"), _ref(M.mlp(), x), rtol=1e-4, atol=1e-5)
            after = (await client.get_inference_statistics("mlp", as_json=True))["model_stats"][0]
            assert int(after["inference_count"]) == before + 16
            index = await client.get_model_repository_index(as_json=True)
            assert "mlp" in {m["name"] for m in index["models"]}
            with pytest.raises(InferenceServerException) as e:
                await client.infer("nope", [_input(xs[0])])
            assert e.value.status() == "StatusCode.NOT_FOUND"

            async def requests():
                for i, x in enumerate(xs[:4]):
                    yield {"model_name": "mlp", "inputs": [_input(x)], "request_id": str(i)}

            seen = {}
            async for result, error in client.stream_infer(requests()):
                assert error is None, error
                seen[result.get_response().id] = result.as_numpy("y")
                if len(seen) == 4:
                    break
            for i, x in enumerate(xs[:4]):
                np.testing.assert_allclose(seen[str(i)], _ref(M.mlp(), x), rtol=1e-4, atol=1e-5)
        finally:
            await client.close()

    asyncio.run(main())


def test_hostile_messages(served, stub):
    """Messages no client library sends get status codes, and the server stays healthy."""
    s, client = served

    def req(shape, datatype="FP32", raw: bytes | None = None, model="mlp", name="x", **contents):
        r = pb.ModelInferRequest(model_name=model)
        t = r.inputs.add(name=name, datatype=datatype, shape=shape)
        for k, v in contents.items():
            getattr(t.contents, k).extend(v)
        if raw is not None:
            r.raw_input_contents.append(raw)
        return r

    big = 2**62
    cases = {
        "huge declared shape": req([big, big], raw=b"\0" * 64),
        "huge rows": req([big, 16], raw=b"\0" * 64),
        "negative dim": req([-1, 16], raw=b"\0" * 64),
        "raw too short": req([1, 16], raw=b"\0" * 63),
        "raw too long": req([1, 16], raw=b"\0" * 65),
        "typed count": req([1, 16], fp32_contents=[1.0] * 15),
        "typed wrong field": req([1, 16], int_contents=[1] * 16),
        "typed and raw": req([1, 16], raw=b"\0" * 64, fp32_contents=[1.0] * 16),
        "two typed fields": req([1, 16], fp32_contents=[1.0] * 16, fp64_contents=[1.0] * 16),
        "no data": req([1, 16]),
        "wrong datatype": req([1, 16], "FP64", raw=b"\0" * 128),
        "unknown datatype": req([1, 16], "FP31", raw=b"\0" * 64),
        "empty datatype": req([1, 16], "", raw=b"\0" * 64),
        "unknown input": req([1, 16], name="z", raw=b"\0" * 64),
        "no inputs": pb.ModelInferRequest(model_name="mlp"),
        "raw without inputs": pb.ModelInferRequest(model_name="mlp", raw_input_contents=[b"\0" * 64]),
        "rank": req([16], raw=b"\0" * 64),
        "fp16 typed": req([1, 16], "FP16", fp32_contents=[1.0] * 16),
    }
    two = req([1, 16], raw=b"\0" * 64)
    two.inputs.add(name="x", datatype="FP32", shape=[1, 16])
    two.raw_input_contents.append(b"\0" * 64)
    cases["input twice"] = two
    extra = req([1, 16], raw=b"\0" * 64)
    extra.raw_input_contents.append(b"\0" * 8)
    cases["extra raw"] = extra
    out = req([1, 16], raw=b"\0" * 64)
    out.outputs.add(name="nope")
    cases["unknown output"] = out
    tmo = req([1, 16], raw=b"\0" * 64)
    tmo.parameters["timeout"].string_param = "soon"
    cases["timeout string"] = tmo
    for what, r in cases.items():
        assert _status(stub.ModelInfer, r, timeout=60) == grpc.StatusCode.INVALID_ARGUMENT, what
    assert _status(stub.ModelInfer, req([1, 16], raw=b"\0" * 64, model="nope"), timeout=60) == \
        grpc.StatusCode.NOT_FOUND  # fmt: skip
    for name in ("", "../mlp", "x" * 10000):
        assert _status(stub.ModelInfer, req([1, 16], raw=b"\0" * 64, model=name), timeout=60) == \
            grpc.StatusCode.NOT_FOUND  # fmt: skip
    bad_version = req([1, 16], raw=b"\0" * 64)
    bad_version.model_version = "7"
    assert _status(stub.ModelInfer, bad_version, timeout=60) == grpc.StatusCode.NOT_FOUND
    # past the message limit (the HTTP body limit, 64 MiB): refused by gRPC itself
    huge = req([1, 16], raw=b"\0" * (80 << 20))
    assert _status(stub.ModelInfer, huge, timeout=60) == grpc.StatusCode.RESOURCE_EXHAUSTED
    # bytes that are no message at all
    channel = grpc.insecure_channel(f"127.0.0.1:{s.grpc_port}")
    try:
        raw_call = channel.unary_unary("/inference.GRPCInferenceService/ModelInfer")
        with pytest.raises(grpc.RpcError) as e:
            raw_call(b"\xff\xff\xff\xff garbage", timeout=60)
        assert e.value.code() == grpc.StatusCode.UNKNOWN  # grpcio's own answer to a message it cannot parse
        unknown = channel.unary_unary("/inference.GRPCInferenceService/NoSuchMethod")
        with pytest.raises(grpc.RpcError) as e:
            unknown(b"", timeout=60)
        assert e.value.code() == grpc.StatusCode.UNIMPLEMENTED
    finally:
        channel.close()
    _healthy(s, client)


def test_sigterm_drains_grpc(tmp_path):
    """SIGTERM while gRPC requests wait for a batch: each is answered, then the server exits 0."""
    M.save(M.identity(4), tmp_path / "held.onnx")
    (tmp_path / "held.json").write_text(json.dumps({"max_queue_delay_us": 30e6, "batch_sizes": [8]}))
    s = ServerProcess(str(tmp_path), grpc=True)
    results: queue.Queue = queue.Queue()

    def call(i: int) -> None:
        c = tg.InferenceServerClient(f"127.0.0.1:{s.grpc_port}")
        try:
            results.put(c.infer("held", [_input(np.full((1, 4), i, np.float32))], client_timeout=60).as_numpy("y"))
        except BaseException as e:
            results.put(e)
        finally:
            c.close()

    threads = [threading.Thread(target=call, args=(i,)) for i in range(3)]
    try:
        for t in threads:
            t.start()
        from tests.serve.conftest import wait_for

        wait_for(lambda: metric(httpx.get(f"{s.url}/metrics").text, "aioge_serve_queue_depth", model="held") == 3,
                 what="three queued requests")  # fmt: skip
        s.terminate()
        for t in threads:
            t.join(60)
    finally:
        code = s.stop()
    got = [results.get_nowait() for _ in range(3)]
    assert all(isinstance(g, np.ndarray) for g in got), got
    assert sorted(float(g[0, 0]) for g in got) == [0.0, 1.0, 2.0]
    assert code == 0, "".join(s.stderr)[-3000:]


def test_without_grpc_installed_it_serves_http_only(tmp_path, monkeypatch):
    """grpcio missing (a ``grpc`` package that fails to import first on the path): one line on stderr,
    then HTTP as usual."""
    shadow = tmp_path / "shadow" / "grpc"
    shadow.mkdir(parents=True)
    (shadow / "__init__.py").write_text("raise ImportError(\"No module named 'grpc'\")\n")
    monkeypatch.setenv("PYTHONPATH", str(tmp_path / "shadow"))
    M.save(M.mlp(), tmp_path / "mlp.onnx")
    s = ServerProcess(str(tmp_path / "mlp.onnx"), "--batch-sizes", "1", "--grpc-port", "8001")
    try:
        assert "grpc" not in s.banner
        r = httpx.post(f"{s.url}/v2/models/mlp/infer", json={"inputs": [
            {"name": "x", "shape": [1, 16], "datatype": "FP32", "data": [1.0] * 16}]})  # fmt: skip
        assert r.status_code == 200
    finally:
        code = s.stop()
    notes = [line for line in s.stderr if "gRPC" in line]
    assert len(notes) == 1 and "gRPC is off" in notes[0] and "aioge[serve]" in notes[0], s.stderr
    assert code == 0


def test_http_and_grpc_requests_share_a_batch(served):
    """4 requests over gRPC and 4 over HTTP to ``held`` (which waits 10 s for 8 rows) leave as one batch."""
    s, client = served
    import tritonclient.http as th

    before = int(client.get_inference_statistics("held", as_json=True)["model_stats"][0].get("execution_count", 0))
    results: queue.Queue = queue.Queue()

    def over_grpc(i: int) -> None:
        c = tg.InferenceServerClient(f"127.0.0.1:{s.grpc_port}")
        try:
            results.put((i, c.infer("held", [_input(np.full((1, 4), i, np.float32))], client_timeout=60).as_numpy("y")))
        except BaseException as e:
            results.put((i, e))
        finally:
            c.close()

    def over_http(i: int) -> None:
        c = th.InferenceServerClient(f"127.0.0.1:{s.port}", network_timeout=60)
        try:
            x = th.InferInput("x", [1, 4], "FP32")
            x.set_data_from_numpy(np.full((1, 4), i, np.float32), binary_data=True)
            results.put((i, c.infer("held", [x]).as_numpy("y")))
        except BaseException as e:
            results.put((i, e))
        finally:
            c.close()

    threads = [threading.Thread(target=over_grpc if i < 4 else over_http, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    got = dict(results.get_nowait() for _ in range(8))
    for i in range(8):
        assert isinstance(got[i], np.ndarray) and got[i].tolist() == [[float(i)] * 4], got[i]
    after = int(client.get_inference_statistics("held", as_json=True)["model_stats"][0]["execution_count"])
    assert after == before + 1


def test_sigterm_ends_an_open_stream(tmp_path):
    """SIGTERM with a stream open and two of its requests waiting for a batch: both are answered on the
    stream, the stream ends, and the server exits 0 (without waiting for the client to close it)."""
    M.save(M.identity(4), tmp_path / "held.onnx")
    (tmp_path / "held.json").write_text(json.dumps({"max_queue_delay_us": 30e6, "batch_sizes": [8]}))
    s = ServerProcess(str(tmp_path), grpc=True)
    client = tg.InferenceServerClient(f"127.0.0.1:{s.grpc_port}")
    got: queue.Queue = queue.Queue()
    try:
        client.start_stream(callback=lambda result, error: got.put((result, error)))
        for i in range(2):
            client.async_stream_infer("held", [_input(np.full((1, 4), i, np.float32))], request_id=str(i))
        from tests.serve.conftest import wait_for

        wait_for(lambda: metric(httpx.get(f"{s.url}/metrics").text, "aioge_serve_queue_depth", model="held") == 2,
                 what="two queued requests")  # fmt: skip
        s.terminate()
        answers = [got.get(timeout=60) for _ in range(2)]
        code = s.wait(60)
    finally:
        client.stop_stream()
        client.close()
        s.stop()
    assert all(e is None for _, e in answers), answers
    assert sorted(r.get_response().id for r, _ in answers) == ["0", "1"]
    assert code == 0, "".join(s.stderr)[-3000:]
