"""Hostile HTTP bodies against ``aioge.serve.app`` in process (Starlette's TestClient).

Generated with a fixed seed: arbitrary bytes, arbitrary JSON, and near-valid
Open Inference Protocol requests whose fields (names, shapes with edge
values, datatypes, data, binary sizes, parameters) are wrong in one or more
ways.  Invariant: a 4xx with a JSON error text, or a 200 whose outputs match
onnxruntime; never a 5xx; the server stays healthy.
"""

from __future__ import annotations

import json
from typing import Any

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import aioge.serve
from tests.fuzz.fuzzutil import fuzz
from tests.serve import serve_models as M
from tests.support.edges import INT_EDGES

testclient = pytest.importorskip("starlette.testclient")
ort = pytest.importorskip("onnxruntime")

PROTO = M.mlp()
SESSION = ort.InferenceSession(PROTO.SerializeToString(), providers=["CPUExecutionProvider"])

json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
    max_leaves=20,
)
dims = st.sampled_from([*INT_EDGES, 16, 4])


@st.composite
def near_valid(draw: Any) -> bytes:
    n = draw(st.integers(0, 5))
    shape = (
        draw(st.sampled_from([[n, 16], [n], [], [n, 16, 1]]))
        if draw(st.booleans())
        else draw(st.lists(dims, max_size=4))
    )
    size = int(np.prod([max(d, 0) for d in shape])) if shape and all(0 <= d < 1000 for d in shape) else 3
    data: Any = draw(
        st.sampled_from(
            [
                [1.0] * size,
                [1.0] * (size + 1),
                ["x"] * size,
                [[1.0] * 16] * max(n, 1),
                None,
                float("nan"),
                [float("inf")] * size,
                [2**70] * size,
            ]
        )
    )
    x: dict[str, Any] = {
        "name": draw(st.sampled_from(["x", "y", "", "x" * 1000, 5])),
        "shape": shape,
        "datatype": draw(st.sampled_from(["FP32", "FP16", "INT32", "BOOL", "BYTES", "FP64", "fp32", "X", 3])),
    }
    if data is not None:
        x["data"] = data
    if draw(st.booleans()):
        x["parameters"] = {"binary_data_size": draw(st.sampled_from([*INT_EDGES, "64", None]))}
    body: dict[str, Any] = {"inputs": draw(st.sampled_from([[x], [x, x], x, []]))}
    if draw(st.booleans()):
        body["outputs"] = draw(
            st.sampled_from(
                [[{"name": "y"}], [{"name": "z"}], "y", [{"name": "y", "parameters": {"binary_data": True}}]]
            )
        )
    if draw(st.booleans()):
        body["id"] = draw(json_values)
    return json.dumps(body).encode()


bodies = st.one_of(
    st.binary(max_size=256), json_values.map(lambda v: json.dumps(v).encode()), near_valid(), near_valid()
)


def test_hostile_bodies(monkeypatch):
    cases: list[tuple[bytes, dict[str, str]]] = []

    @fuzz(40)
    @given(body=bodies, ctype=st.sampled_from(["application/json", "application/octet-stream", "text/plain", ""]))
    def draw(body: bytes, ctype: str) -> None:
        headers = {"Content-Type": ctype} if ctype else {}
        if body and body[:1] == b"{" and ctype == "application/octet-stream":
            headers["Inference-Header-Content-Length"] = str(len(body))
        cases.append((body, headers))

    draw()
    app = aioge.serve.app({"mlp": aioge.serve.ModelSpec(PROTO.SerializeToString(), max_batch_size=4)})
    statuses: dict[int, int] = {}
    with testclient.TestClient(app, raise_server_exceptions=False) as c:
        for body, headers in cases:
            r = c.post("/v2/models/mlp/infer", content=body, headers=headers)
            statuses[r.status_code] = statuses.get(r.status_code, 0) + 1
            assert r.status_code < 500, (body[:200], r.status_code, r.text[:300])
            if r.status_code == 200 and "inference-header-content-length" in r.headers:  # binary outputs
                n = int(r.headers["inference-header-content-length"])
                assert json.loads(r.content[:n])["outputs"], r.content[:200]
            elif r.status_code == 200:
                _check_result(body, r.json())
            else:
                assert 400 <= r.status_code < 500 and isinstance(r.json()["error"], str), (body[:200], r.text[:300])
        # still healthy
        assert c.get("/v2/health/ready").status_code == 200
        x = np.ones((2, 16), np.float32)
        r = c.post(
            "/v2/models/mlp/infer",
            json={"inputs": [{"name": "x", "shape": [2, 16], "datatype": "FP32", "data": x.ravel().tolist()}]},
        )
        assert r.status_code == 200
        np.testing.assert_allclose(
            np.asarray(r.json()["outputs"][0]["data"]).reshape(2, 8),
            SESSION.run(None, {"x": x})[0],
            rtol=1e-4,
            atol=1e-5,
        )
    assert sum(statuses.values()) == len(cases)


def _check_result(body: bytes, out: dict) -> None:
    req = json.loads(body)
    (x,) = req["inputs"] if isinstance(req["inputs"], list) else [req["inputs"]]
    a = np.asarray(x["data"], np.float32).reshape(x["shape"])
    (want,) = SESSION.run(None, {"x": a})
    got = np.asarray(out["outputs"][0]["data"], np.float32).reshape(out["outputs"][0]["shape"])
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)


names = st.one_of(
    st.sampled_from(["..", ".", "%2e%2e", "..%2Fmlp", "mlp%00", "mlp.onnx", "MLP", "x" * 2000, "%ff", "stats"]),
    st.text(alphabet=st.characters(blacklist_categories=("Cs",), blacklist_characters="/?#"), min_size=1, max_size=12),
)


def test_hostile_repository_config_and_statistics_requests(tmp_path):
    """Triton's extensions (repository index/load/unload, config, stats) under hostile names and bodies:
    a 4xx with a JSON error or a 200, never a 5xx; the served model stays loaded and answers."""
    from urllib.parse import quote

    cases: list[tuple[str, str, bytes]] = []

    @fuzz(40)
    @given(name=names, body=bodies, route=st.sampled_from(["load", "unload", "config", "stats", "index"]))
    def draw(name: str, body: bytes, route: str) -> None:
        if name == "mlp":
            return
        cases.append((name, route, body))

    draw()
    M.save(PROTO, tmp_path / "mlp.onnx")
    (tmp_path / "mlp.json").write_text(json.dumps({"max_batch_size": 4}))
    app = aioge.serve.app([str(tmp_path)], max_batch_size=4)
    with testclient.TestClient(app, raise_server_exceptions=False) as c:
        (tmp_path / "junk.onnx").write_bytes(b"\x08\x07junk")  # in the repository, failing to load
        assert c.post("/v2/repository/models/junk/load").status_code == 400
        for name, route, body in cases:
            q = quote(name, safe="%")
            if route in ("load", "unload"):
                r = c.post(f"/v2/repository/models/{q}/{route}", content=body)
            elif route == "index":
                r = c.post("/v2/repository/index", content=body)
            else:
                r = c.get(f"/v2/models/{q}/{route}")
            assert r.status_code < 500, (name, route, body[:200], r.status_code, r.text[:300])
            if r.status_code != 200:
                assert isinstance(r.json()["error"], str), (name, route, r.text[:300])
        assert c.get("/v2/health/ready").status_code == 200
        assert c.get("/v2/models/mlp/ready").json()["ready"] is True
        x = np.ones((1, 16), np.float32)
        r = c.post(
            "/v2/models/mlp/infer",
            json={"inputs": [{"name": "x", "shape": [1, 16], "datatype": "FP32", "data": x.ravel().tolist()}]},
        )
        assert r.status_code == 200
        stats = c.get("/v2/models/stats").json()["model_stats"]
        assert [m["name"] for m in stats] == ["mlp"] and stats[0]["inference_count"] == 1
