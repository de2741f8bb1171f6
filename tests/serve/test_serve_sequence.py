"""Sequence models (a symbolic dim besides the batch) served by ``python -m aioge.serve`` over HTTP and gRPC:
results equal onnxruntime's at several lengths, requests of different lengths never share a batch,
a request whose fixed dim is wrong is refused."""

from __future__ import annotations

import json

import anyio
import httpx
import numpy as np
import pytest

from tests.serve import serve_models as M
from tests.serve.conftest import ServerProcess

ort = pytest.importorskip("onnxruntime")

pytestmark = pytest.mark.anyio

PROTO = M.sequence()


def ort_run(x: np.ndarray) -> np.ndarray:
    sess = ort.InferenceSession(PROTO.SerializeToString(), providers=["CPUExecutionProvider"])
    return sess.run(None, {"x": x})[0]


def tensor(a: np.ndarray) -> dict:
    return {"name": "x", "shape": list(a.shape), "datatype": "FP32", "data": a.reshape(-1).tolist()}


def as_array(out: dict) -> np.ndarray:
    return np.asarray(out["data"], np.float32).reshape(out["shape"])


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    """``seq`` batches at once; ``slow`` waits up to 0.3 s for a batch, so concurrent requests queue together;
    ``plans`` (one bucket, ``--max-plans 3``) and ``bounded`` (its ``max_plans`` 2) serve the plan tests only."""
    repo = tmp_path_factory.mktemp("repo")
    M.save(PROTO, repo / "seq.onnx")
    M.save(PROTO, repo / "slow.onnx")
    M.save(PROTO, repo / "plans.onnx")
    (repo / "plans.json").write_text(json.dumps({"batch_sizes": [1]}))
    M.save(PROTO, repo / "bounded.onnx")
    (repo / "bounded.json").write_text(json.dumps({"batch_sizes": [1], "max_plans": 2}))
    (repo / "seq.json").write_text(json.dumps({"batch_sizes": [1, 2, 4]}))
    (repo / "slow.json").write_text(json.dumps({"batch_sizes": [4, 8], "max_queue_delay_us": 300_000}))
    s = ServerProcess(str(repo), "--max-batch-size", "8", "--max-queue-delay-us", "0", "--max-plans", "3", grpc=True)
    yield s
    assert s.stop() == 0, "".join(s.stderr)[-3000:]


async def test_metadata_and_config_report_symbolic_dims_as_minus_one(served):
    async with httpx.AsyncClient(base_url=served.url) as c:
        meta = (await c.get("/v2/models/seq")).json()
        assert meta["inputs"] == [{"name": "x", "datatype": "FP32", "shape": [-1, -1, 8]}]
        assert meta["outputs"] == [{"name": "y", "datatype": "FP32", "shape": [-1, -1, 4]}]
        cfg = (await c.get("/v2/models/seq/config")).json()
        assert cfg["max_batch_size"] == 4
        assert [(t["name"], t["dims"]) for t in cfg["input"]] == [("x", [-1, 8])]
        assert [(t["name"], t["dims"]) for t in cfg["output"]] == [("y", [-1, 4])]


async def test_three_lengths_match_onnxruntime(served):
    rng = np.random.default_rng(0)
    async with httpx.AsyncClient(base_url=served.url, timeout=60) as c:
        for rows, length in ((1, 3), (2, 17), (3, 64), (1, 3)):
            x = rng.standard_normal((rows, length, 8)).astype(np.float32)
            r = await c.post("/v2/models/seq/infer", json={"inputs": [tensor(x)]})
            assert r.status_code == 200, r.text
            (out,) = r.json()["outputs"]
            assert out["shape"] == [rows, length, 4]
            np.testing.assert_allclose(as_array(out), ort_run(x), rtol=1e-4, atol=1e-5)


async def test_concurrent_requests_of_two_lengths(served):
    """Requests of lengths 5 and 9 queue together for ``slow``; each batch holds one length only."""
    rng = np.random.default_rng(1)
    xs = [rng.standard_normal((1, 5 if i % 2 else 9, 8)).astype(np.float32) for i in range(8)]
    outs: dict[int, np.ndarray] = {}
    async with httpx.AsyncClient(base_url=served.url, timeout=60) as c:
        before = (await c.get("/v2/models/slow/stats")).json()["model_stats"][0]

        async def one(i: int) -> None:
            r = await c.post("/v2/models/slow/infer", json={"inputs": [tensor(xs[i])]})
            assert r.status_code == 200, r.text
            outs[i] = as_array(r.json()["outputs"][0])

        async with anyio.create_task_group() as tg:
            for i in range(len(xs)):
                tg.start_soon(one, i)
        after = (await c.get("/v2/models/slow/stats")).json()["model_stats"][0]
    for i, x in enumerate(xs):
        np.testing.assert_allclose(outs[i], ort_run(x), rtol=1e-4, atol=1e-5)
    assert after["inference_count"] - before["inference_count"] == 8
    assert after["execution_count"] - before["execution_count"] >= 2  # two lengths: two batches at least


async def test_wrong_fixed_dim_is_400(served):
    async with httpx.AsyncClient(base_url=served.url) as c:
        for shape in ((1, 3, 7), (1, 0, 8), (3, 8)):
            r = await c.post("/v2/models/seq/infer", json={"inputs": [tensor(np.zeros(shape, np.float32))]})
            assert r.status_code == 400 and "shape" in r.json()["error"], (shape, r.text)
        assert (await c.get("/v2/health/ready")).status_code == 200


def test_grpc_lengths_and_invalid_argument(served):
    tg = pytest.importorskip("tritonclient.grpc")
    from tritonclient.utils import InferenceServerException

    client = tg.InferenceServerClient(f"127.0.0.1:{served.grpc_port}")
    try:
        cfg = client.get_model_config("seq", as_json=True)["config"]
        assert [t["dims"] for t in cfg["input"]] == [["-1", "8"]]
        rng = np.random.default_rng(2)
        for length in (2, 11, 40):
            x = rng.standard_normal((2, length, 8)).astype(np.float32)
            i = tg.InferInput("x", list(x.shape), "FP32")
            i.set_data_from_numpy(x)
            np.testing.assert_allclose(client.infer("seq", [i]).as_numpy("y"), ort_run(x), rtol=1e-4, atol=1e-5)
        bad = tg.InferInput("x", [1, 4, 7], "FP32")
        bad.set_data_from_numpy(np.zeros((1, 4, 7), np.float32))
        with pytest.raises(InferenceServerException) as e:
            client.infer("seq", [bad])
        assert e.value.status() == "StatusCode.INVALID_ARGUMENT"
    finally:
        client.close()


def _gauges(text: str, model: str) -> dict[str, float]:
    """``aioge_serve_*plan*`` samples of ``model`` in a /metrics page."""
    out = {}
    for line in text.splitlines():
        if line.startswith("aioge_serve_") and "plan" in line.split("{")[0] and f'model="{model}"' in line:
            out[line.split("{")[0]] = float(line.rsplit(" ", 1)[1])
    return out


@pytest.mark.parametrize("anyio_backend", ["asyncio"])  # one run: the counts start from a fresh model
async def test_plan_statistics_in_stats_and_metrics(served):
    """Three lengths: three plans compiled and held, then a length seen before hits its plan."""
    rng = np.random.default_rng(3)
    async with httpx.AsyncClient(base_url=served.url, timeout=60) as c:
        before = (await c.get("/v2/models/plans/stats")).json()["model_stats"][0]
        assert before["aioge_plans"]["plans"] == 0 and before["aioge_plans"]["max_plans"] == 3  # --max-plans
        for length in (4, 12, 30, 12):
            x = rng.standard_normal((1, length, 8)).astype(np.float32)
            r = await c.post("/v2/models/plans/infer", json={"inputs": [tensor(x)]})
            assert r.status_code == 200, r.text
        st = (await c.get("/v2/models/plans/stats")).json()["model_stats"][0]
        metrics = (await c.get("/metrics")).text
        other = (await c.get("/v2/models/seq/stats")).json()["model_stats"][0]
    p = st["aioge_plans"]
    assert (p["plans"], p["compiles"], p["evictions"], p["misses"], p["hits"]) == (3, 3, 0, 3, 1), p
    assert st["inference_count"] == 4 and st["execution_count"] == 4  # Triton's fields intact
    assert "aioge_plans" in other  # every dynamic-shape model has them
    g = _gauges(metrics, "plans")
    assert g == {"aioge_serve_plans": 3, "aioge_serve_max_plans": p["max_plans"], "aioge_serve_plan_compiles_total": 3,
                 "aioge_serve_plan_evictions_total": 0, "aioge_serve_plan_hits_total": 1,
                 "aioge_serve_plan_misses_total": 3}, g  # fmt: skip


def test_grpc_statistics_with_plans(served):
    """Triton's statistics message has no field for the plans: gRPC answers its own fields."""
    tg = pytest.importorskip("tritonclient.grpc")
    client = tg.InferenceServerClient(f"127.0.0.1:{served.grpc_port}")
    try:
        stats = client.get_inference_statistics("plans", as_json=True)["model_stats"]
        assert [s["name"] for s in stats] == ["plans"]
    finally:
        client.close()


@pytest.mark.parametrize("anyio_backend", ["asyncio"])  # one run: the counts start from a fresh model
async def test_sidecar_max_plans_bounds_the_plans(served):
    """``bounded.json`` says ``max_plans: 2`` (over ``--max-plans 3``): a third length evicts the oldest plan,
    which compiles again when its length comes back."""
    rng = np.random.default_rng(4)
    async with httpx.AsyncClient(base_url=served.url, timeout=60) as c:
        for length in (4, 12, 30, 4):
            x = rng.standard_normal((1, length, 8)).astype(np.float32)
            r = await c.post("/v2/models/bounded/infer", json={"inputs": [tensor(x)]})
            assert r.status_code == 200, r.text
            np.testing.assert_allclose(as_array(r.json()["outputs"][0]), ort_run(x), rtol=1e-4, atol=1e-5)
        p = (await c.get("/v2/models/bounded/stats")).json()["model_stats"][0]["aioge_plans"]
        g = _gauges((await c.get("/metrics")).text, "bounded")
    assert (p["max_plans"], p["plans"], p["compiles"], p["evictions"], p["hits"]) == (2, 2, 4, 2, 0), p
    assert (g["aioge_serve_max_plans"], g["aioge_serve_plans"], g["aioge_serve_plan_evictions_total"]) == (2, 2, 2)


@pytest.mark.parametrize("bad", [0, -1, 2.5, "3", True])
def test_max_plans_must_be_a_positive_integer(bad, tmp_path):
    from aioge.serve import ModelSpec, load_model
    from aioge.serve.server import discover_models

    with pytest.raises(ValueError, match="max_plans must be a positive integer"):
        ModelSpec("m.onnx", max_plans=bad)
    with pytest.raises(ValueError, match="max_plans must be a positive integer"):
        anyio.run(lambda: load_model(None, PROTO, max_plans=bad))  # refused before the device is used
    M.save(PROTO, tmp_path / "m.onnx")
    (tmp_path / "m.json").write_text(json.dumps({"max_plans": bad}))
    with pytest.raises(ValueError, match=r"m\.json: max_plans must be a positive integer"):
        discover_models([tmp_path])
