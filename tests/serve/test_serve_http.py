"""The v2 server over real HTTP: ``python -m aioge.serve`` on 127.0.0.1, driven by httpx and tritonclient,
results compared with onnxruntime; status codes; hostile bodies that must leave the server healthy."""

from __future__ import annotations

import gzip
import json
import re
import socket

import anyio
import httpx
import numpy as np
import onnxruntime as ort
import pytest

from tests.serve import serve_models as M

pytestmark = pytest.mark.anyio

PROTOS = {"mlp": M.mlp(), "two": M.two_inputs(), "cnn": M.cnn(), "fixed": M.fixed(), "held": M.identity(4)}
_SESSIONS: dict[str, ort.InferenceSession] = {}


def ort_run(name: str, feeds: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    sess = _SESSIONS.get(name)
    if sess is None:
        sess = _SESSIONS[name] = ort.InferenceSession(PROTOS[name].SerializeToString(),
                                                      providers=["CPUExecutionProvider"])  # fmt: skip
    names = [o.name for o in sess.get_outputs()]
    return dict(zip(names, sess.run(names, feeds)))


def tensor(name: str, a: np.ndarray, datatype: str = "FP32", nested: bool = False) -> dict:
    return {"name": name, "shape": list(a.shape), "datatype": datatype,
            "data": a.tolist() if nested else a.reshape(-1).tolist()}  # fmt: skip


def as_array(out: dict) -> np.ndarray:
    dt = {"FP32": np.float32, "INT32": np.int32}[out["datatype"]]
    return np.asarray(out["data"], dt).reshape(out["shape"])


def metric(text: str, name: str, **labels: str) -> float:
    want = ",".join(f'{k}="{v}"' for k, v in sorted(labels.items()))
    for line in text.splitlines():
        m = re.match(r"^(\w+)\{(.*)\} (\S+)$", line)
        if m and m.group(1) == name and ",".join(sorted(m.group(2).split(","))) == want:
            return float(m.group(3))
    return 0.0


# ---------------------------------------------------------------- httpx (every backend)
async def test_health_metadata_and_not_found(server):
    async with httpx.AsyncClient(base_url=server.url) as c:
        assert (await c.get("/v2/health/live")).json() == {"live": True}
        assert (await c.get("/v2/health/ready")).status_code == 200
        meta = (await c.get("/v2")).json()
        assert meta["name"] == "aioge" and "binary_tensor_data" in meta["extensions"]
        mlp = (await c.get("/v2/models/mlp")).json()
        assert mlp["inputs"] == [{"name": "x", "datatype": "FP32", "shape": [-1, 16]}]
        assert mlp["outputs"] == [{"name": "y", "datatype": "FP32", "shape": [-1, 8]}]
        two = (await c.get("/v2/models/two/versions/1")).json()
        assert [(t["name"], t["datatype"]) for t in two["inputs"]] == [("a", "FP32"), ("b", "FP32"), ("c", "INT32")]
        fixed = (await c.get("/v2/models/fixed")).json()
        assert fixed["inputs"][0]["shape"] == [2, 3] and fixed["max_batch_size"] == 0
        assert (await c.get("/v2/models/cnn/ready")).json() == {"name": "cnn", "ready": True}
        index = (await c.post("/v2/repository/index")).json()
        assert sorted(m["name"] for m in index) == ["cnn", "fixed", "held", "mlp", "narrow", "two"]
        for path in ("/v2/models/nope", "/v2/models/mlp/versions/2", "/v2/models/nope/ready", "/nope"):
            r = await c.get(path)
            assert r.status_code == 404 and isinstance(r.json()["error"], str), path
        r = await c.post("/v2/models/nope/infer", json={"inputs": []})
        assert r.status_code == 404 and "nope" in r.json()["error"]
        r = await c.get("/v2/models/mlp/infer")
        assert r.status_code == 405 and "error" in r.json()


async def test_json_inference_matches_onnxruntime(server):
    rng = np.random.default_rng(2)
    async with httpx.AsyncClient(base_url=server.url) as c:
        x = rng.standard_normal((3, 16)).astype(np.float32)
        for nested in (False, True):
            r = await c.post("/v2/models/mlp/infer", json={"id": "q1", "inputs": [tensor("x", x, nested=nested)]})
            assert r.status_code == 200, r.text
            body = r.json()
            assert body["id"] == "q1" and body["model_name"] == "mlp" and body["outputs"][0]["shape"] == [3, 8]
            np.testing.assert_allclose(as_array(body["outputs"][0]), ort_run("mlp", {"x": x})["y"], rtol=1e-4,
                                       atol=1e-5)  # fmt: skip
        a, b = rng.standard_normal((2, 4)).astype(np.float32), rng.standard_normal((2, 4)).astype(np.float32)
        k = np.array([[1, -2], [3, 2**30]], np.int32)
        req = {"inputs": [tensor("a", a), tensor("b", b), tensor("c", k, "INT32")],
               "outputs": [{"name": "k"}, {"name": "s"}]}
        body = (await c.post("/v2/models/two/infer", json=req)).json()
        assert [o["name"] for o in body["outputs"]] == ["k", "s"] and "id" not in body  # the subset, in order
        ref = ort_run("two", {"a": a, "b": b, "c": k})
        np.testing.assert_array_equal(as_array(body["outputs"][0]), ref["k"])
        np.testing.assert_allclose(as_array(body["outputs"][1]), ref["s"], rtol=1e-6)
        img = rng.standard_normal((2, 3, 16, 16)).astype(np.float32)
        body = (await c.post("/v2/models/cnn/infer", json={"inputs": [tensor("x", img)]})).json()
        np.testing.assert_allclose(as_array(body["outputs"][0]), ort_run("cnn", {"x": img})["p"], rtol=1e-4, atol=1e-5)
        f = np.array([[-1, 2, 3], [4, -5, 6]], np.float32)
        body = (await c.post("/v2/models/fixed/infer", json={"inputs": [tensor("x", f)]})).json()
        np.testing.assert_allclose(as_array(body["outputs"][0]), np.maximum(f, 0) + 1)


async def test_binary_tensor_data_with_httpx(server):
    x = np.random.default_rng(3).standard_normal((2, 16)).astype(np.float32)
    head = json.dumps({"inputs": [{"name": "x", "shape": [2, 16], "datatype": "FP32",
                                   "parameters": {"binary_data_size": x.nbytes}}],
                       "parameters": {"binary_data_output": True}}).encode()  # fmt: skip
    async with httpx.AsyncClient(base_url=server.url) as c:
        r = await c.post("/v2/models/mlp/infer", content=head + x.tobytes(),
                         headers={"Inference-Header-Content-Length": str(len(head))})  # fmt: skip
    assert r.status_code == 200 and r.headers["content-type"] == "application/octet-stream"
    hl = int(r.headers["inference-header-content-length"])
    meta = json.loads(r.content[:hl])
    (out,) = meta["outputs"]
    assert out["parameters"]["binary_data_size"] == 2 * 8 * 4 and "data" not in out
    y = np.frombuffer(r.content[hl:], np.float32).reshape(out["shape"])
    np.testing.assert_allclose(y, ort_run("mlp", {"x": x})["y"], rtol=1e-4, atol=1e-5)


async def test_concurrent_http_requests_form_one_batch(server):
    """``held`` waits up to 10 s for 8 rows: eight concurrent requests leave together as one batch."""
    xs = [np.full((1, 4), i, np.float32) for i in range(8)]
    async with httpx.AsyncClient(base_url=server.url, timeout=60) as c:
        before = (await c.get("/metrics")).text
        outs: dict[int, np.ndarray] = {}

        async def call(i: int) -> None:
            r = await c.post("/v2/models/held/infer", json={"inputs": [tensor("x", xs[i])]})
            assert r.status_code == 200, r.text
            outs[i] = as_array(r.json()["outputs"][0])

        async with anyio.create_task_group() as tg:
            for i in range(8):
                tg.start_soon(call, i)
        after = (await c.get("/metrics")).text
    for i, x in enumerate(xs):
        np.testing.assert_array_equal(outs[i], x)
    count = metric(after, "aioge_serve_batch_size_count", model="held") - metric(before, "aioge_serve_batch_size_count",
                                                                                   model="held")  # fmt: skip
    rows = metric(after, "aioge_serve_batch_size_sum", model="held") - metric(before, "aioge_serve_batch_size_sum",
                                                                                model="held")  # fmt: skip
    assert (count, rows) == (1, 8)
    assert metric(after, "aioge_serve_http_requests_total", model="held", code="200") >= 8
    assert metric(after, "aioge_serve_requests_total", model="held", status="ok") >= 8
    assert "aioge_serve_queue_seconds_bucket" in after and "aioge_serve_inflight_batches" in after


@pytest.mark.parametrize("anyio_backend", ["asyncio"])
async def test_full_queue_is_503_with_retry_after_and_deadline_504(server):
    """``narrow`` queues at most 2 requests: two wait (deadline 4 s, never filled), a third is refused."""
    async with httpx.AsyncClient(base_url=server.url, timeout=60) as c:
        codes: list[int] = []

        async def waiting() -> None:
            r = await c.post("/v2/models/narrow/infer", json={"inputs": [tensor("x", np.ones((1, 4), np.float32))],
                                                             "parameters": {"timeout": 4_000_000}})  # fmt: skip
            codes.append(r.status_code)
            assert "deadline" in r.json()["error"]

        async with anyio.create_task_group() as tg:
            tg.start_soon(waiting)
            tg.start_soon(waiting)
            with anyio.fail_after(30):
                while metric((await c.get("/metrics")).text, "aioge_serve_queue_depth", model="narrow") != 2:
                    await anyio.sleep(0.01)
            r = await c.post("/v2/models/narrow/infer", json={"inputs": [tensor("x", np.ones((1, 4), np.float32))]})
            assert r.status_code == 503 and int(r.headers["retry-after"]) >= 1
            assert "max_queue_size" in r.json()["error"]
        assert codes == [504, 504]
        assert (await c.get("/v2/health/ready")).status_code == 200


# ---------------------------------------------------------------- tritonclient (the peer's own client)
def test_tritonclient_json_and_binary(server):
    tc = pytest.importorskip("tritonclient.http")
    from tritonclient.utils import InferenceServerException

    client = tc.InferenceServerClient(f"127.0.0.1:{server.port}")
    try:
        assert client.is_server_live() and client.is_server_ready() and client.is_model_ready("mlp")
        meta = client.get_model_metadata("mlp")
        assert meta["inputs"][0]["shape"] == [-1, 16] and meta["outputs"][0]["datatype"] == "FP32"
        rng = np.random.default_rng(4)
        x = rng.standard_normal((4, 16)).astype(np.float32)
        ref = ort_run("mlp", {"x": x})["y"]
        for binary_in in (True, False):
            for binary_out in (True, False):
                inp = tc.InferInput("x", list(x.shape), "FP32")
                inp.set_data_from_numpy(x, binary_data=binary_in)
                res = client.infer("mlp", [inp], request_id=f"r{binary_in}{binary_out}",
                                   outputs=[tc.InferRequestedOutput("y", binary_data=binary_out)])  # fmt: skip
                np.testing.assert_allclose(res.as_numpy("y"), ref, rtol=1e-4, atol=1e-5)
                assert res.get_response()["id"] == f"r{binary_in}{binary_out}"
        a = rng.standard_normal((3, 4)).astype(np.float32)
        b = rng.standard_normal((3, 4)).astype(np.float32)
        k = rng.integers(-1000, 1000, (3, 2)).astype(np.int32)
        ins = [tc.InferInput("a", [3, 4], "FP32"), tc.InferInput("b", [3, 4], "FP32"),
               tc.InferInput("c", [3, 2], "INT32")]
        for t, v, binary in zip(ins, (a, b, k), (True, False, True)):
            t.set_data_from_numpy(v, binary_data=binary)
        res = client.infer("two", ins)  # no outputs named: all, binary
        want = ort_run("two", {"a": a, "b": b, "c": k})
        for n in ("s", "p", "k"):
            np.testing.assert_allclose(res.as_numpy(n), want[n], rtol=1e-6)
        res = client.infer("mlp", [inp], request_compression_algorithm="gzip")
        np.testing.assert_allclose(res.as_numpy("y"), ref, rtol=1e-4, atol=1e-5)
        bad = tc.InferInput("x", [1, 15], "FP32")
        bad.set_data_from_numpy(np.zeros((1, 15), np.float32))
        with pytest.raises(InferenceServerException, match="the model takes \\[-1, 16\\]") as e:
            client.infer("mlp", [bad])
        assert e.value.status() == "400"
        with pytest.raises(InferenceServerException) as e:
            client.get_model_metadata("nope")
        assert e.value.status() == "404"
    finally:
        client.close()


def test_nan_and_infinity_round_trip_through_tritonclient_json(server):
    """tritonclient's JSON mode writes NaN, Infinity, -Infinity (Python's json, as Triton's parser reads
    them); the server takes them for float inputs and writes them back the same way, never as null."""
    tc = pytest.importorskip("tritonclient.http")
    client = tc.InferenceServerClient(f"127.0.0.1:{server.port}")
    try:
        a = np.array([[np.nan, np.inf, -np.inf, 1.5], [2.0, -np.inf, 0.0, np.nan]], np.float32)
        b = np.ones((2, 4), np.float32)
        k = np.array([[1, 2], [3, 4]], np.int32)
        ins = [tc.InferInput("a", [2, 4], "FP32"), tc.InferInput("b", [2, 4], "FP32"),
               tc.InferInput("c", [2, 2], "INT32")]
        for t, v in zip(ins, (a, b, k)):
            t.set_data_from_numpy(v, binary_data=False)
        outs = [tc.InferRequestedOutput(n, binary_data=False) for n in ("s", "p", "k")]
        res = client.infer("two", ins, outputs=outs)
        want = ort_run("two", {"a": a, "b": b, "c": k})
        for n in ("s", "p", "k"):
            np.testing.assert_array_equal(res.as_numpy(n), want[n])  # NaN where NaN, each infinity's sign
        assert np.isnan(res.as_numpy("s")).sum() == 2 and np.isinf(res.as_numpy("p")).sum() == 3
    finally:
        client.close()
    body = json.dumps({"inputs": [tensor("a", a), tensor("b", b), tensor("c", k, "INT32")]})
    assert "NaN" in body and "-Infinity" in body
    r = httpx.post(f"{server.url}/v2/models/two/infer", content=body, timeout=60)
    assert r.status_code == 200, r.text
    assert "null" not in r.text and "NaN" in r.text and "-Infinity" in r.text
    s = json.loads(r.text)["outputs"][0]
    assert s["name"] == "s" and str(s["data"][:3]) == "[nan, inf, -inf]"


def test_booleans_are_refused_for_numeric_datatypes(server):
    with httpx.Client(base_url=server.url, timeout=60) as c:
        r = c.post("/v2/models/mlp/infer", json={"inputs": [{**GOOD_X, "data": [1.0] * 15 + [True]}]})
        assert r.status_code == 400 and "booleans" in r.json()["error"] and "FP32" in r.json()["error"]
        r = c.post("/v2/models/two/infer", content=_two([True, 1]))
        assert r.status_code == 400 and "booleans" in r.json()["error"] and "INT32" in r.json()["error"]
        # "true" elsewhere in the request (a parameter) does not refuse numbers
        r = c.post("/v2/models/mlp/infer", json={"inputs": [GOOD_X], "parameters": {"binary_data_output": False},
                                                 "outputs": [{"name": "y", "parameters": {"binary_data": True}}]})
        assert r.status_code == 200, r.text


# ---------------------------------------------------------------- hostile HTTP
def _json_body(obj) -> bytes:
    return json.dumps(obj).encode()


GOOD_X = tensor("x", np.ones((1, 16), np.float32))


def _two(c_data: list, b_rows: int = 1) -> bytes:
    """A request to ``two`` whose int32 input holds ``c_data``."""
    c = {"name": "c", "shape": [1, 2], "datatype": "INT32", "data": c_data}
    return _json_body({"inputs": [tensor("a", np.ones((1, 4))), tensor("b", np.ones((b_rows, 4))), c]})
BIG = 2**40

HOSTILE = {
    "truncated JSON": (_json_body({"inputs": [GOOD_X]})[:40], {}),
    "empty body": (b"", {}),
    "not JSON": (b"\x00\x01garbage", {}),
    "non-UTF-8": (b'{"inputs": [{"name": "\xff\xfe\xfd", "shape": [1, 16]}]}', {}),
    "UTF-16 junk": (b"\xff\xfe{\x00}\x00\xd8\x00", {}),
    "deep nesting (arrays)": (b'{"inputs": [{"name": "x", "shape": [1, 16], "datatype": "FP32", "data": '
                              + b"[" * 200_000 + b"]" * 200_000 + b"}]}", {}),
    "deep nesting (objects)": (b'{"a":' * 100_000 + b"1" + b"}" * 100_000, {}),
    "numpy-deep data": (_json_body({"inputs": [{"name": "x", "shape": [1, 16], "datatype": "FP32",
                                                "data": json.loads("[" * 80 + "1" + "]" * 80)}]}), {}),
    "a list": (b"[1, 2, 3]", {}),
    "no inputs": (_json_body({"inputs": []}), {}),
    "inputs not a list": (_json_body({"inputs": {"x": 1}}), {}),
    "shape 2^40 rows": (_json_body({"inputs": [{**GOOD_X, "shape": [BIG, 16]}]}), {}),
    "shape 2^40 inner": (_json_body({"inputs": [{**GOOD_X, "shape": [1, BIG]}]}), {}),
    "shape 2^40 binary": (_json_body({"inputs": [{"name": "x", "shape": [BIG, 16], "datatype": "FP32",
                                                  "parameters": {"binary_data_size": BIG * 64}}]}), {}),
    "shape 2^40 fixed model": (_json_body({"inputs": [{"name": "x", "shape": [BIG, BIG], "datatype": "FP32",
                                                       "data": [1]}]}), {"model": "fixed"}),
    "negative dim": (_json_body({"inputs": [{**GOOD_X, "shape": [-1, 16]}]}), {}),
    "float dim": (_json_body({"inputs": [{**GOOD_X, "shape": [1.0, 16]}]}), {}),
    "huge int dim": (b'{"inputs": [{"name": "x", "shape": [1' + b"0" * 5000 + b', 16], "datatype": "FP32"}]}', {}),
    "datatype mismatch": (_json_body({"inputs": [{**GOOD_X, "datatype": "FP64"}]}), {}),
    "unknown datatype": (_json_body({"inputs": [{**GOOD_X, "datatype": "FP8"}]}), {}),
    "BYTES": (_json_body({"inputs": [{**GOOD_X, "datatype": "BYTES", "data": ["a"] * 16}]}), {}),
    "unknown input": (_json_body({"inputs": [{**GOOD_X, "name": "z"}]}), {}),
    "input twice": (_json_body({"inputs": [GOOD_X, GOOD_X]}), {}),
    "too few elements": (_json_body({"inputs": [{**GOOD_X, "data": [1.0] * 15}]}), {}),
    "ragged data": (_json_body({"inputs": [{**GOOD_X, "data": [[1.0] * 8, [1.0] * 9]}]}), {}),
    "string data": (_json_body({"inputs": [{**GOOD_X, "data": ["1.5"] * 16}]}), {}),
    "null data": (_json_body({"inputs": [{**GOOD_X, "data": [None] * 16}]}), {}),
    "object data": (_json_body({"inputs": [{**GOOD_X, "data": [{}] * 16}]}), {}),
    "no data": (_json_body({"inputs": [{k: v for k, v in GOOD_X.items() if k != "data"}]}), {}),
    "booleans for FP32": (_json_body({"inputs": [{**GOOD_X, "data": [True] * 16}]}), {}),
    "a boolean among floats": (_json_body({"inputs": [{**GOOD_X, "data": [1.5] * 15 + [False]}]}), {}),
    "nested booleans": (_json_body({"inputs": [{**GOOD_X, "data": [[1.0] * 15 + [True]]}]}), {}),
    "booleans for INT32": (_two([True, False]), {"model": "two"}),
    "NaN for INT32": (_two([float("nan"), 0]), {"model": "two"}),
    "Infinity for INT32": (_two([float("inf"), 0]), {"model": "two"}),
    "int32 overflow": (_two([2**31, 0]), {"model": "two"}),
    "float for int": (_two([1.5, 0]), {"model": "two"}),
    "rows differ": (_two([1, 2], b_rows=2), {"model": "two"}),
    "unknown output": (_json_body({"inputs": [GOOD_X], "outputs": [{"name": "nope"}]}), {}),
    "classification": (_json_body({"inputs": [GOOD_X],
                                   "outputs": [{"name": "y", "parameters": {"classification": 3}}]}), {}),
    "bad id": (_json_body({"id": 5, "inputs": [GOOD_X]}), {}),
    "bad timeout": (_json_body({"inputs": [GOOD_X], "parameters": {"timeout": "soon"}}), {}),
    "binary size too small": None,
    "binary size too large": None,
    "binary size not an int": None,
    "extra binary bytes": None,
    "header length beyond body": None,
    "header length not a number": None,
    "binary and data": None,
    "unsupported encoding": (_json_body({"inputs": [GOOD_X]}), {"headers": {"Content-Encoding": "br"}}),
    "bad gzip": (b"\x1f\x8b\x08\x00garbage", {"headers": {"Content-Encoding": "gzip"}}),
}


def _binary(declared, raw: bytes, header_length=None, extra: dict | None = None):
    head = _json_body({"inputs": [{"name": "x", "shape": [1, 16], "datatype": "FP32",
                                   "parameters": {"binary_data_size": declared}, **(extra or {})}]})  # fmt: skip
    hl = len(head) if header_length is None else header_length
    return head + raw, {"headers": {"Inference-Header-Content-Length": str(hl)}}


_X = np.ones(16, np.float32).tobytes()
HOSTILE["binary size too small"] = _binary(32, _X)
HOSTILE["binary size too large"] = _binary(128, _X + _X)
HOSTILE["binary size not an int"] = _binary("64", _X)
HOSTILE["extra binary bytes"] = _binary(64, _X + b"\x00" * 8)
HOSTILE["header length beyond body"] = _binary(64, _X, header_length=10**6)
HOSTILE["header length not a number"] = _binary(64, _X, header_length="ten")
HOSTILE["binary and data"] = _binary(64, _X, extra={"data": [1.0] * 16})


def _peak_rss_kb(pid: int) -> int:
    with open(f"/proc/{pid}/status") as f:
        return int(next(line for line in f if line.startswith("VmHWM")).split()[1])


def _healthy(c: httpx.Client) -> None:
    assert c.get("/v2/health/ready").status_code == 200
    r = c.post("/v2/models/mlp/infer", json={"inputs": [GOOD_X]})
    assert r.status_code == 200 and r.json()["outputs"][0]["shape"] == [1, 8]


def test_hostile_bodies_are_4xx_and_the_server_stays_healthy(server):
    peak = _peak_rss_kb(server.proc.pid)
    failures = []
    with httpx.Client(base_url=server.url, timeout=60) as c:
        _healthy(c)
        for what, (body, opts) in HOSTILE.items():
            r = c.post(f"/v2/models/{opts.get('model', 'mlp')}/infer", content=body, headers=opts.get("headers", {}))
            try:
                ok = 400 <= r.status_code < 500 and isinstance(r.json()["error"], str)
            except ValueError:
                ok = False
            if not ok:
                failures.append((what, r.status_code, r.text[:200]))
        _healthy(c)
    assert not failures, failures
    assert server.proc.poll() is None
    assert _peak_rss_kb(server.proc.pid) - peak < 256 * 1024  # nothing sized by a declared 2^40 shape


def test_oversized_and_compressed_bodies(server):
    with httpx.Client(base_url=server.url, timeout=60) as c:
        body = gzip.compress(_json_body({"inputs": [GOOD_X]}))
        r = c.post("/v2/models/mlp/infer", content=body, headers={"Content-Encoding": "gzip"})
        assert r.status_code == 200
        bomb = gzip.compress(b" " * (65 << 20), compresslevel=9)  # 65 MiB of JSON whitespace, past the limit
        r = c.post("/v2/models/mlp/infer", content=bomb, headers={"Content-Encoding": "gzip"})
        assert r.status_code == 413 and "exceeds" in r.json()["error"]
        _healthy(c)
    # a declared length past the limit is refused before any of it is read
    with socket.create_connection(("127.0.0.1", server.port), timeout=30) as s:
        s.sendall(b"POST /v2/models/mlp/infer HTTP/1.1\r\nHost: x\r\nContent-Length: 1000000000000\r\n\r\n{")
        head = s.recv(4096)
    assert head.startswith(b"HTTP/1.1 413")
    with httpx.Client(base_url=server.url, timeout=60) as c:
        _healthy(c)


def test_truncated_and_broken_connections(server):
    for raw in (b"POST /v2/models/mlp/infer HTTP/1.1\r\nHost: x\r\nContent-Length: 1000\r\n\r\n" + b'{"inputs": [',
                b"POST /v2/models/mlp/infer HTTP/1.1\r\nHost: x\r\nContent-Le",
                b"\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03 TLS hello to a plain port",
                b"GET /" + b"a" * 100_000 + b" HTTP/1.1\r\nHost: x\r\n\r\n"):  # fmt: skip
        with socket.create_connection(("127.0.0.1", server.port), timeout=30) as s:
            s.sendall(raw)
            s.shutdown(socket.SHUT_WR)  # the client goes away mid-request
            try:
                s.recv(4096)
            except OSError:
                pass
    with httpx.Client(base_url=server.url, timeout=60) as c:
        _healthy(c)
    assert server.proc.poll() is None
