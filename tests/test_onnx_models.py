"""Whole ONNX models on the device against onnxruntime: sunk and per-op paths."""

from __future__ import annotations

import numpy as np
import onnxruntime as ort
import pytest

import aioge

from .graph import models as M

pytestmark = pytest.mark.anyio

MODELS = {
    "mlp": lambda: M.mlp(small=True),
    "residual_cnn": lambda: M.residual_cnn(small=True),
    "inception": lambda: M.inception(small=True),
    "attention": lambda: M.attention(small=True),
}


@pytest.fixture
def anyio_backend():
    return ("asyncio", {"debug": True})


def ort_outputs(proto, feeds):
    sess = ort.InferenceSession(proto.SerializeToString(), providers=["CPUExecutionProvider"])
    return dict(zip((o.name for o in sess.get_outputs()), sess.run(None, feeds)))


@pytest.mark.parametrize("name", list(MODELS))
@pytest.mark.parametrize("mode", ["sunk", "per_op"])
async def test_model_matches_onnxruntime(dev, name, mode):
    proto = MODELS[name]()
    feeds = M.sample_inputs(proto)
    ref = ort_outputs(proto, feeds)
    model = await dev.compile(aioge.load_onnx(proto), mode=mode)
    out = await model.execute(feeds)
    assert set(out) == set(ref)
    for k in ref:
        np.testing.assert_allclose(out[k], ref[k], rtol=1e-4, atol=1e-5, err_msg=f"{name}/{mode}/{k}")


@pytest.mark.parametrize("name", ["inception", "attention"])
async def test_multi_stream_plans_agree_with_one_stream(dev, name):
    proto = MODELS[name]()
    feeds = M.sample_inputs(proto, seed=3)
    g = aioge.load_onnx(proto)
    one = await dev.compile(g, max_streams=1)
    two = await dev.compile(g, max_streams=2)
    a, b = await one.execute(feeds), await two.execute(feeds)
    for k in a:
        np.testing.assert_allclose(a[k], b[k], rtol=1e-5, atol=1e-6)


async def test_concurrent_clients_on_a_cnn(dev):
    import anyio

    proto = MODELS["residual_cnn"]()
    model = await dev.compile(aioge.load_onnx(proto))
    feeds = [M.sample_inputs(proto, seed=i) for i in range(12)]
    refs = [ort_outputs(proto, f) for f in feeds]
    got = {}

    async def client(i):
        got[i] = await model.execute(feeds[i])

    async with anyio.create_task_group() as tg:
        for i in range(len(feeds)):
            tg.start_soon(client, i)
    for i, ref in enumerate(refs):
        for k in ref:
            np.testing.assert_allclose(got[i][k], ref[k], rtol=1e-4, atol=1e-5)
