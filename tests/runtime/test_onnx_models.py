"""Whole ONNX models on the device against onnxruntime: sunk and per-op paths."""

from __future__ import annotations

import numpy as np
import onnxruntime as ort
import pytest

import aioge
from tests.graph import models as M

pytestmark = pytest.mark.anyio

MODELS = {
    "mlp": lambda: M.mlp(small=True),
    "residual_cnn": lambda: M.residual_cnn(small=True),
    "inception": lambda: M.inception(small=True),
    "attention": lambda: M.attention(small=True),
}


def ort_outputs(proto, feeds):
    sess = ort.InferenceSession(proto.SerializeToString(), providers=["CPUExecutionProvider"])
    return dict(zip((o.name for o in sess.get_outputs()), sess.run(None, feeds)))


@pytest.mark.parametrize("name", list(MODELS))
@pytest.mark.parametrize("mode", ["sunk", "per_op"])
async def test_model_matches_onnxruntime(dev, compiled, name, mode):
    proto = MODELS[name]()
    feeds = M.sample_inputs(proto)
    ref = ort_outputs(proto, feeds)
    model = await compiled(aioge.load_onnx(proto), mode=mode)
    out = await model.execute(feeds)
    assert set(out) == set(ref)
    for k in ref:
        np.testing.assert_allclose(out[k], ref[k], rtol=1e-4, atol=1e-5, err_msg=f"{name}/{mode}/{k}")


@pytest.mark.parametrize("name", ["inception", "attention"])
async def test_multi_stream_plans_agree_with_one_stream(dev, compiled, name):
    proto = MODELS[name]()
    feeds = M.sample_inputs(proto, seed=3)
    g = aioge.load_onnx(proto)
    one = await compiled(g, max_streams=1)
    two = await compiled(g, max_streams=2)
    a, b = await one.execute(feeds), await two.execute(feeds)
    for k in a:
        np.testing.assert_allclose(a[k], b[k], rtol=1e-5, atol=1e-6)


async def test_concurrent_clients_on_a_cnn(dev, compiled):
    import anyio

    proto = MODELS["residual_cnn"]()
    model = await compiled(aioge.load_onnx(proto))
    feeds = [M.sample_inputs(proto, seed=i) for i in range(12)]
    serial = [await model.execute(f) for f in feeds]
    for f, out in zip(feeds, serial):
        for k, ref in ort_outputs(proto, f).items():
            np.testing.assert_allclose(out[k], ref, rtol=1e-4, atol=1e-5)
    got = {}

    async def client(i):
        got[i] = await model.execute(feeds[i])

    async with anyio.create_task_group() as tg:
        for i in range(len(feeds)):
            tg.start_soon(client, i)
    for i, want in enumerate(serial):  # bit-exact: the host kernels are deterministic for a given shape
        for k in want:
            np.testing.assert_array_equal(got[i][k], want[k])


async def test_executions_on_different_streams_use_their_own_aux_streams(dev, compiled):
    """Two user streams, one multi-stream model: each caller's segments run on streams of
    its own, so neither queues behind the other's executions."""
    import anyio

    proto = M.inception(channels=32, size=16, classes=10)  # big enough for the planner to use 2 streams
    model = await compiled(aioge.load_onnx(proto), max_streams=2)
    assert model.plan.num_streams == 2
    on_aux = sum(1 for seg in model._build.segments if seg.stream == 1)  # segments per execution on stream 1
    feeds = [M.sample_inputs(proto, seed=i) for i in range(8)]
    serial = [await model.execute(f) for f in feeds]
    default_aux = model._aux_for(dev.default_stream)
    runs = 5
    got: dict[tuple[int, int], dict] = {}
    async with dev.open_stream() as s1, dev.open_stream() as s2:

        async def client(s, who, i):
            got[who, i] = await model.execute(feeds[i], stream=s)

        async with anyio.create_task_group() as tg:
            for who, s in enumerate((s1, s2)):
                for i in range(runs):
                    tg.start_soon(client, s, who, i)
        a1, a2 = model._aux_for(s1), model._aux_for(s2)
        streams = [s1, s2, dev.default_stream, *a1, *a2, *default_aux]
        assert len(a1) == len(a2) == 1 and len({id(x) for x in streams}) == len(streams)  # all distinct
        # every launch on a caller's aux stream is one of that caller's segments
        assert a1[0].stats["launched"] == a2[0].stats["launched"] == runs * on_aux
        assert model.stats["aux_streams"] == 3
    for (_, i), out in got.items():
        for k in out:
            np.testing.assert_array_equal(out[k], serial[i][k])
    # a closed caller's aux streams pass to the next newcomer (bounded, reused)
    async with dev.open_stream() as s3:
        assert model._aux_for(s3) in (a1, a2)
        out = await model.execute(feeds[0], stream=s3)
        for k in out:
            np.testing.assert_array_equal(out[k], serial[0][k])
    assert model.stats["aux_streams"] == 3


def _mobilenet_like():
    """Depthwise-separable blocks with ReLU6 (Clip), a strided depthwise conv, GAP, Gemm."""
    from onnx import TensorProto, helper, numpy_helper

    rng = np.random.default_rng(11)
    inits, nodes = [], []

    def w(name, *shape):
        inits.append(numpy_helper.from_array((rng.standard_normal(shape) * 0.2).astype(np.float32), name))
        return name

    def c(name, v):
        inits.append(numpy_helper.from_array(np.asarray(v, np.float32), name))
        return name

    x = "x"
    c(lo := "six_lo", 0.0)
    c(hi := "six_hi", 6.0)
    stem = helper.make_node("Conv", [x, w("w0", 8, 3, 3, 3), w("b0", 8)], ["c0"], pads=[1, 1, 1, 1], strides=[2, 2])
    nodes.append(stem)
    nodes.append(helper.make_node("Clip", ["c0", lo, hi], ["r0"]))
    prev, ch = "r0", 8
    for i, (out_ch, stride) in enumerate([(16, 1), (16, 2), (24, 1)]):
        nodes.append(helper.make_node("Conv", [prev, w(f"dw{i}", ch, 1, 3, 3)], [f"d{i}"], group=ch, pads=[1, 1, 1, 1],
                                      strides=[stride, stride]))  # fmt: skip
        nodes.append(helper.make_node("BatchNormalization", [f"d{i}", c(f"s{i}", rng.uniform(0.5, 1.5, ch)),
                                      c(f"bb{i}", rng.uniform(-0.1, 0.1, ch)), c(f"m{i}", rng.uniform(-0.1, 0.1, ch)),
                                      c(f"v{i}", rng.uniform(0.5, 1.5, ch))], [f"n{i}"]))  # fmt: skip
        nodes.append(helper.make_node("Clip", [f"n{i}", lo, hi], [f"a{i}"]))
        nodes.append(helper.make_node("Conv", [f"a{i}", w(f"pw{i}", out_ch, ch, 1, 1)], [f"p{i}"]))
        nodes.append(helper.make_node("Relu", [f"p{i}"], [f"q{i}"]))
        prev, ch = f"q{i}", out_ch
    nodes.append(helper.make_node("GlobalAveragePool", [prev], ["g"]))
    nodes.append(helper.make_node("Flatten", ["g"], ["f"]))
    nodes.append(helper.make_node("Gemm", ["f", w("fw", 10, ch), w("fb", 10)], ["y"], transB=1))
    xi = helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3, 32, 32])
    yi = helper.make_tensor_value_info("y", TensorProto.FLOAT, None)
    g = helper.make_graph(nodes, "mobilenet_like", [xi], [yi], inits)
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)]), {
        "x": rng.standard_normal((2, 3, 32, 32)).astype(np.float32)
    }


def _masked_encoder():
    """Token embedding (Gather), masked self-attention (Equal/Where), LayerNorm, erf-Gelu MLP."""
    from onnx import TensorProto, helper, numpy_helper

    rng = np.random.default_rng(12)
    d, t, v = 32, 6, 50
    inits = []

    def p(name, *shape, scale=0.2):
        inits.append(numpy_helper.from_array((rng.standard_normal(shape) * scale).astype(np.float32), name))
        return name

    def k(name, arr):
        inits.append(numpy_helper.from_array(np.asarray(arr), name))
        return name

    n = helper.make_node
    nodes = [
        n("Gather", [p("emb", v, d), "ids"], ["e"], axis=0),
        n("LayerNormalization", ["e", k("g1", np.ones(d, np.float32)), k("b1", np.zeros(d, np.float32))], ["h"],
          axis=-1, epsilon=1e-5),
        n("MatMul", ["h", p("wq", d, d)], ["q"]),
        n("MatMul", ["h", p("wk", d, d)], ["kk"]),
        n("MatMul", ["h", p("wv", d, d)], ["vv"]),
        n("Transpose", ["kk"], ["kt"], perm=[0, 2, 1]),
        n("MatMul", ["q", "kt"], ["s0"]),
        n("Div", ["s0", k("sq", np.float32(np.sqrt(d)))], ["s1"]),
        n("Equal", ["mask", k("zero", np.int64(0))], ["pad"]),
        n("Unsqueeze", ["pad", k("ax1", np.array([1], np.int64))], ["pad3"]),
        n("Where", ["pad3", k("neg", np.float32(-1e9)), "s1"], ["s2"]),
        n("Softmax", ["s2"], ["a"], axis=-1),
        n("MatMul", ["a", "vv"], ["o"]),
        n("Add", ["o", "e"], ["r"]),
        n("MatMul", ["r", p("w1", d, 2 * d)], ["m0"]),
        n("Div", ["m0", k("rt2", np.float32(np.sqrt(2)))], ["m1"]),
        n("Erf", ["m1"], ["m2"]),
        n("Add", ["m2", k("one", np.float32(1))], ["m3"]),
        n("Mul", ["m0", "m3"], ["m4"]),
        n("Mul", ["m4", k("half", np.float32(0.5))], ["m5"]),
        n("MatMul", ["m5", p("w2", 2 * d, d)], ["m6"]),
        n("Add", ["m6", "r"], ["y"]),
    ]
    g = helper.make_graph(nodes, "masked_encoder",
                          [helper.make_tensor_value_info("ids", TensorProto.INT64, [2, t]),
                           helper.make_tensor_value_info("mask", TensorProto.INT64, [2, t])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], inits)  # fmt: skip
    ids = rng.integers(0, v, (2, t)).astype(np.int64)
    mask = np.ones((2, t), np.int64)
    mask[1, 4:] = 0
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]), {"ids": ids, "mask": mask}


@pytest.mark.parametrize("build", [_mobilenet_like, _masked_encoder], ids=["mobilenet_like", "masked_encoder"])
@pytest.mark.parametrize("mode", ["sunk", "per_op"])
async def test_more_architectures(dev, compiled, build, mode):
    proto, feeds = build()
    ref = ort_outputs(proto, feeds)
    model = await compiled(aioge.load_onnx(proto), mode=mode)
    out = await model.execute(feeds)
    for k in ref:
        np.testing.assert_allclose(out[k], ref[k], rtol=1e-4, atol=1e-5)
