"""NN ops: softmax family and normalisations against numpy; convolution,
pooling and LRN against onnxruntime's single-node CPU kernels."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import aioge
from aioge import HostInput, TensorSpec, ops
from tests.ops.opsutil import BF16, F16, F32, F64, check, few, ort_run, rand, rounded, shapes, up

pytestmark = pytest.mark.anyio

NCHW, NHWC, ND = 0, 1, 2


def _softmax64(x, axis):
    e = np.exp(x - x.max(axis=axis, keepdims=True))
    return e / e.sum(axis=axis, keepdims=True)


@few(40)
@given(
    shape=shapes(1, 4, 1, 7),
    data=st.integers(0, 2**16),
    dt=st.sampled_from([F32, F16, BF16, F64]),
    log=st.booleans(),
)
async def test_softmax(stream, shape, data, dt, log):
    rng = np.random.default_rng(data)
    axis = int(rng.integers(-len(shape), len(shape)))
    x = rand(rng, shape, dt, -10, 10)
    x64 = x.astype(np.float64)
    if log:
        got = await ops.log_softmax(up(stream, x), axis=axis).numpy()
        ref = x64 - x64.max(axis=axis, keepdims=True)
        ref = ref - np.log(np.exp(ref).sum(axis=axis, keepdims=True))
    else:
        got = await ops.softmax(up(stream, x), axis=axis).numpy()
        ref = _softmax64(x64, axis)
    if dt in (F16, BF16):
        check(got, rounded(ref, dt), dt, ulps=2, atol=2e-3 if log else 1e-3)
    else:
        check(got, ref, dt, rtol=1e-5 if dt == F32 else 1e-12, atol=1e-6 if dt == F32 else 1e-14)


async def test_softmax_big_rows_and_half_to_float(stream):
    x = np.random.default_rng(0).standard_normal((64, 1024)).astype(np.float32) * 5
    check(await ops.softmax(up(stream, x)).numpy(), _softmax64(x.astype(np.float64), -1), rtol=1e-5, atol=1e-9)
    h = x.astype(np.float16)
    (y,) = aioge.op(
        "SoftmaxV2", [up(stream, h)], [TensorSpec(h.shape, "float32")], {"axes": [-1], "half_to_float": True}
    )
    check(await y.numpy(), _softmax64(h.astype(np.float64), -1), rtol=1e-5, atol=1e-9)
    # a row of -inf gives NaN (0/0), like numpy
    z = np.full((2, 3), -np.inf, np.float32)
    with np.errstate(invalid="ignore"):
        check(await ops.softmax(up(stream, z)).numpy(), np.exp(z - 0) / np.exp(z).sum(-1, keepdims=True))


@few(40)
@given(
    shape=shapes(1, 4, 1, 8),
    data=st.integers(0, 2**16),
    dt=st.sampled_from([F32, F16, BF16, F64]),
    affine=st.sampled_from(["both", "weight", "none"]),
)
async def test_layer_norm(stream, shape, data, dt, affine):
    rng = np.random.default_rng(data)
    axis = int(rng.integers(-len(shape), len(shape)))
    x = rand(rng, shape, dt, -3, 3)
    ns = x.shape[axis % len(shape) :]
    g = rand(rng, ns, dt, 0.5, 1.5) if affine != "none" else None
    b = rand(rng, ns, dt, -1, 1) if affine == "both" else None
    got = await ops.layer_norm(
        up(stream, x),
        None if g is None else up(stream, g),
        None if b is None else up(stream, b),
        axis=axis,
        epsilon=1e-5,
    ).numpy()
    x64 = x.astype(np.float64)
    red = tuple(range(axis % len(shape), len(shape)))
    ref = (x64 - x64.mean(axis=red, keepdims=True)) / np.sqrt(x64.var(axis=red, keepdims=True) + 1e-5)
    if g is not None:
        ref = ref * g.astype(np.float64)
    if b is not None:
        ref = ref + b.astype(np.float64)
    if dt in (F16, BF16):
        check(got, rounded(ref, dt), dt, ulps=2, atol=1e-2)
    else:
        check(got, ref, dt, rtol=1e-4 if dt == F32 else 1e-10, atol=1e-5 if dt == F32 else 1e-10)


async def test_cann_layer_norm_stats_and_v3(stream):
    rng = np.random.default_rng(1)
    x = rng.standard_normal((2, 3, 8)).astype(np.float32)
    g, b = rng.random((3, 8), np.float32), rng.random((3, 8), np.float32)
    # begin_norm_axis 2, begin_params_axis 1: gamma covers (3, 8) and broadcasts over the rows
    y, mean, var = aioge.op(
        "LayerNorm",
        [up(stream, x), up(stream, g), up(stream, b)],
        [
            TensorSpec((2, 3, 8), "float32"),
            TensorSpec((2, 3, 1), "float32"),
            TensorSpec((2, 3, 1), "float32"),
        ],
        {"begin_norm_axis": 2, "begin_params_axis": 1, "epsilon": 1e-7},
    )
    x64 = x.astype(np.float64)
    mu, va = x64.mean(-1, keepdims=True), x64.var(-1, keepdims=True)
    check(await y.numpy(), (x64 - mu) / np.sqrt(va + 1e-7) * g + b, rtol=1e-4, atol=1e-5)
    check(await mean.numpy(), mu, rtol=1e-5, atol=1e-6)
    check(await var.numpy(), va, rtol=1e-5, atol=1e-6)
    y, mean, rstd = aioge.op(
        "LayerNormV3",
        [up(stream, x), up(stream, g[0]), up(stream, b[0])],
        [
            TensorSpec((2, 3, 8), "float32"),
            TensorSpec((2, 3, 1), "float32"),
            TensorSpec((2, 3, 1), "float32"),
        ],
        {"begin_norm_axis": -1, "begin_params_axis": -1},
    )
    check(await rstd.numpy(), 1 / np.sqrt(va + 1e-5), rtol=1e-5)


@few(30)
@given(shape=shapes(1, 4, 1, 8), data=st.integers(0, 2**16), dt=st.sampled_from([F32, F16, BF16, F64]))
async def test_rms_norm(stream, shape, data, dt):
    rng = np.random.default_rng(data)
    k = int(rng.integers(1, len(shape) + 1))
    x, g = rand(rng, shape, dt), rand(rng, shape[len(shape) - k :], dt, 0.5, 1.5)
    got = await ops.rms_norm(up(stream, x), up(stream, g), epsilon=1e-6).numpy()
    x64 = x.astype(np.float64)
    red = tuple(range(len(shape) - k, len(shape)))
    ref = x64 / np.sqrt((x64 * x64).mean(axis=red, keepdims=True) + 1e-6) * g.astype(np.float64)
    if dt in (F16, BF16):
        check(got, rounded(ref, dt), dt, ulps=2, atol=1e-2)
    else:
        check(got, ref, dt, rtol=1e-5 if dt == F32 else 1e-10, atol=1e-6)


@few(20)
@given(
    n=st.integers(1, 3),
    c=st.integers(1, 5),
    hw=st.tuples(st.integers(1, 5), st.integers(1, 5)),
    nhwc=st.booleans(),
    dt=st.sampled_from([F32, F16, F64]),
    seed=st.integers(0, 2**16),
)
async def test_batch_norm(stream, n, c, hw, nhwc, dt, seed):
    rng = np.random.default_rng(seed)
    x = rand(rng, (n, c, *hw), dt)
    sc, bi, mu = (rand(rng, (c,), dt) for _ in range(3))
    va = rand(rng, (c,), dt, 0.2, 2)
    xin = x.transpose(0, 2, 3, 1).copy() if nhwc else x
    got = await ops.batch_norm(
        up(stream, xin),
        *(up(stream, t) for t in (sc, bi, mu, va)),
        epsilon=1e-5,
        data_format="NHWC" if nhwc else "NCHW",
    ).numpy()
    f = lambda t: t.astype(np.float64)[None, :, None, None]  # noqa: E731
    ref = (x.astype(np.float64) - f(mu)) / np.sqrt(f(va) + 1e-5) * f(sc) + f(bi)
    if nhwc:
        ref = ref.transpose(0, 2, 3, 1)
    check(got, rounded(ref, dt) if dt == F16 else ref, dt, rtol=1e-5, atol=1e-5, ulps=2)


async def test_cann_batch_norm_training(stream):
    rng = np.random.default_rng(2)
    x = rng.standard_normal((4, 3, 2, 2)).astype(np.float32)
    sc, of = np.ones(3, np.float32), np.zeros(3, np.float32)
    outs = aioge.op(
        "BatchNorm",
        [up(stream, x), up(stream, sc), up(stream, of), None, None],
        [TensorSpec(x.shape, "float32")] + [TensorSpec((3,), "float32")] * 4,
        {"epsilon": 1e-3, "is_training": True},
        formats=[NCHW, ND, ND, ND, ND, NCHW, ND, ND, ND, ND],
    )
    x64 = x.astype(np.float64)
    mu, va = x64.mean(axis=(0, 2, 3)), x64.var(axis=(0, 2, 3))
    check(
        await outs[0].numpy(),
        (x64 - mu[:, None, None]) / np.sqrt(va[:, None, None] + 1e-3),
        rtol=1e-4,
        atol=1e-5,
    )
    check(await outs[1].numpy(), mu, rtol=1e-5, atol=1e-6)
    check(await outs[2].numpy(), x64.var(axis=(0, 2, 3), ddof=1), rtol=1e-5)


# ------------------------------------------------------------ convolution
@st.composite
def conv_case(draw, transpose=False):
    groups = draw(st.sampled_from([1, 1, 2, 3]))
    cin = groups * draw(st.integers(1, 3))
    cout = groups * draw(st.integers(1, 3))
    if not transpose and draw(st.integers(0, 4)) == 0:
        groups, cin = cin, cin  # depthwise, multiplier cout/cin
        cout = cin * draw(st.integers(1, 2))
    k = (draw(st.integers(1, 3)), draw(st.integers(1, 3)))
    s = (draw(st.integers(1, 3)), draw(st.integers(1, 3)))
    d = (draw(st.integers(1, 2)), draw(st.integers(1, 2)))
    p = tuple(draw(st.integers(0, 2)) for _ in range(4))  # ONNX order t, l, b, r
    hw = (draw(st.integers(1, 7)), draw(st.integers(1, 7)))
    n = draw(st.integers(1, 2))
    return n, cin, cout, groups, k, s, d, p, hw


@few(60)
@given(case=conv_case(), nhwc=st.booleans(), bias=st.booleans(), seed=st.integers(0, 2**16))
async def test_conv2d_vs_onnxruntime(stream, case, nhwc, bias, seed):
    n, cin, cout, groups, k, s, d, p, hw = case
    eh, ew = d[0] * (k[0] - 1) + 1, d[1] * (k[1] - 1) + 1
    if hw[0] + p[0] + p[2] < eh or hw[1] + p[1] + p[3] < ew:
        return
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((n, cin, *hw)).astype(np.float32)
    w = rng.standard_normal((cout, cin // groups, *k)).astype(np.float32)
    b = rng.standard_normal(cout).astype(np.float32)
    ref = ort_run(
        "Conv",
        [x, w, b] if bias else [x, w],
        kernel_shape=list(k),
        strides=list(s),
        dilations=list(d),
        pads=list(p),
        group=groups,
    )
    xin = x.transpose(0, 2, 3, 1).copy() if nhwc else x
    y = ops.conv2d(
        up(stream, xin),
        up(stream, w),
        up(stream, b) if bias else None,
        strides=s,
        pads=p,
        dilations=d,
        groups=groups,
        data_format="NHWC" if nhwc else "NCHW",
    )
    got = await y.numpy()
    check(got, ref.transpose(0, 2, 3, 1) if nhwc else ref, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("dt", [F16, BF16, F64])
async def test_conv2d_dtypes(stream, dt):
    rng = np.random.default_rng(3)
    x = rng.standard_normal((1, 4, 6, 6)).astype(np.float32)
    w = rng.standard_normal((6, 2, 3, 3)).astype(np.float32)
    xd, wd = x.astype(dt), w.astype(dt)
    ref = ort_run(
        "Conv",
        [xd.astype(np.float32), wd.astype(np.float32)],
        kernel_shape=[3, 3],
        pads=[1, 1, 1, 1],
        group=2,
    ).astype(np.float64)
    got = await ops.conv2d(up(stream, xd), up(stream, wd), pads=1, groups=2).numpy()
    if dt == F64:
        check(got, ref, dt, rtol=1e-5, atol=1e-5)
    else:
        check(got, rounded(ref, dt), dt, ulps=1, atol=1e-3)


async def test_conv2d_resnet_shapes(stream):
    rng = np.random.default_rng(4)
    x = rng.standard_normal((1, 64, 56, 56)).astype(np.float32)
    for k, pad, s in ((3, 1, 1), (1, 0, 1), (1, 0, 2), (3, 1, 2)):
        w = (rng.standard_normal((64, 64, k, k)) * 0.1).astype(np.float32)
        ref = ort_run("Conv", [x, w], kernel_shape=[k, k], pads=[pad] * 4, strides=[s, s])
        check(
            await ops.conv2d(up(stream, x), up(stream, w), pads=pad, strides=s).numpy(),
            ref,
            rtol=1e-4,
            atol=1e-4,
        )


@few(12)
@given(
    cin=st.sampled_from([32, 40, 130]),
    cout=st.integers(16, 30),
    hw=st.tuples(st.integers(26, 41), st.integers(26, 41)),  # >= 128 output tiles
    pads=st.tuples(*[st.integers(0, 2)] * 4),
    n=st.integers(1, 2),
    act=st.sampled_from(["none", "Relu"]),
    seed=st.integers(0, 2**16),
)
async def test_conv2d_winograd_path(stream, cin, cout, hw, pads, n, act, seed):
    # 3x3 stride-1 NCHW convs with 32+ input channels and 128+ output tiles run Winograd F(2x2, 3x3):
    # odd sizes (partial tiles), asymmetric pads, several channel blocks (130 > 128), a fused activation
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((n, cin, *hw)).astype(np.float32)
    w = (rng.standard_normal((cout, cin, 3, 3)) * np.sqrt(2 / (9 * cin))).astype(np.float32)
    b = rng.standard_normal(cout).astype(np.float32)
    ref = ort_run("Conv", [x, w, b], kernel_shape=[3, 3], pads=list(pads))
    attrs = {"strides": [1, 1, 1, 1], "pads": [pads[0], pads[2], pads[1], pads[3]], "data_format": "NCHW",
             "activation": act}  # fmt: skip
    (y,) = aioge.op(
        "_FusedConv2D",
        [up(stream, x), up(stream, w), up(stream, b)],
        [TensorSpec(ref.shape, "float32")],
        attrs,
        formats=[NCHW, NCHW, ND, NCHW],
    )
    check(await y.numpy(), np.maximum(ref, 0) if act == "Relu" else ref, rtol=1e-4, atol=2e-5)


async def test_conv2d_stem_stride2(stream):
    # ResNet's stem: 3 input channels, 7x7, stride 2 (packed from the column phases of the padded input)
    rng = np.random.default_rng(12)
    x = rng.standard_normal((2, 3, 38, 45)).astype(np.float32)
    w = (rng.standard_normal((20, 3, 7, 7)) * 0.1).astype(np.float32)
    ref = ort_run("Conv", [x, w], kernel_shape=[7, 7], pads=[3, 3, 3, 3], strides=[2, 2])
    check(await ops.conv2d(up(stream, x), up(stream, w), pads=3, strides=2).numpy(), ref, rtol=1e-4, atol=1e-4)


async def test_conv2d_and_pool_with_a_stride_beyond_the_input(stream):
    # one output row/column reads the same window whatever the stride: a huge stride (within the
    # attr bound) runs like stride 1 -- it used to size the padded copy by the stride and fail
    rng = np.random.default_rng(13)
    x = rng.standard_normal((2, 3, 6, 7)).astype(np.float32)
    w = rng.standard_normal((4, 3, 3, 3)).astype(np.float32)
    big = 1 << 20
    want = (await ops.conv2d(up(stream, x), up(stream, w), pads=1).numpy())[:, :, :1, :1]
    check(await ops.conv2d(up(stream, x), up(stream, w), pads=1, strides=(big, big)).numpy(), want, rtol=1e-5)
    (y,) = aioge.op("MaxPoolV3", [up(stream, x)], [TensorSpec((2, 3, 1, 1))],
                    {"ksize": [1, 1, 2, 2], "strides": [1, 1, big, big]})  # fmt: skip
    check(await y.numpy(), x[:, :, :2, :2].max(axis=(2, 3), keepdims=True))


@pytest.mark.parametrize(
    ("act", "extra", "ref_fn"),
    [
        ("Relu", {}, lambda y: np.maximum(y, 0)),
        ("LeakyRelu", {"alpha": 0.2}, lambda y: np.where(y < 0, 0.2 * y, y)),
        ("Clip", {"min": -0.5, "max": 0.75}, lambda y: np.clip(y, -0.5, 0.75)),
        ("Sigmoid", {}, lambda y: 1 / (1 + np.exp(-y))),
    ],
)
@pytest.mark.parametrize(("cin", "k", "s", "dt"), [(4, 3, 1, F32), (3, 5, 2, F32), (8, 1, 1, F32), (4, 3, 2, F64)])
async def test_fused_conv2d_activation(stream, act, extra, ref_fn, cin, k, s, dt):
    # the graph engine's host-only _FusedConv2D: Conv2D + bias + an activation in the epilogue,
    # on every conv path (packed direct, 1x1 GEMM, float64)
    rng = np.random.default_rng(13)
    x = rng.standard_normal((2, cin, 11, 9)).astype(dt)
    w = rng.standard_normal((7, cin, k, k)).astype(dt)
    b = rng.standard_normal(7).astype(dt)
    pad = k // 2
    ref = ort_run(
        "Conv", [a.astype(np.float32) for a in (x, w, b)], kernel_shape=[k, k], pads=[pad] * 4, strides=[s, s]
    ).astype(np.float64)
    attrs = {"strides": [1, 1, s, s], "pads": [pad] * 4, "dilations": [1, 1, 1, 1], "groups": 1,
             "data_format": "NCHW", "activation": act, **extra}  # fmt: skip
    (y,) = aioge.op(
        "_FusedConv2D",
        [up(stream, x), up(stream, w), up(stream, b)],
        [TensorSpec(ref.shape, dt)],
        attrs,
        formats=[NCHW, NCHW, ND, NCHW],
    )
    check(await y.numpy(), ref_fn(ref), rtol=1e-4, atol=1e-4)


async def test_fused_conv2d_rejects_unknown_activation(stream):
    x = up(stream, np.ones((1, 2, 4, 4), np.float32))
    w = up(stream, np.ones((3, 2, 3, 3), np.float32))
    attrs = {"strides": [1, 1, 1, 1], "pads": [1, 1, 1, 1], "data_format": "NCHW", "activation": "Softmax"}
    with pytest.raises(aioge.OpAttrMismatchError, match="unknown activation 'Softmax'"):
        aioge.op("_FusedConv2D", [x, w], [TensorSpec((1, 3, 4, 4), "float32")], attrs, formats=[NCHW, NCHW, NCHW])
    await stream.synchronize()


async def test_cann_conv2d_ort_style_call(stream):
    # ONNX Runtime's CANN provider: NCHW descs, strides/dilations prefixed {1,1}, pads in ONNX order,
    # "group" (not "groups") plus attrs the IR does not have
    rng = np.random.default_rng(5)
    x = rng.standard_normal((1, 4, 5, 5)).astype(np.float32)
    w = rng.standard_normal((4, 2, 3, 3)).astype(np.float32)
    b = rng.standard_normal(4).astype(np.float32)
    attrs = {
        "strides": [1, 1, 1, 1],
        "pads": [1, 1, 1, 1],
        "dilations": [1, 1, 1, 1],
        "group": 2,
        "data_format": "NCHW",
        "auto_pad": "NOTSET",
        "dim_size": 4,
        "trans_2d": False,
    }
    (y,) = aioge.op(
        "Conv2D",
        [up(stream, x), up(stream, w), up(stream, b), None],
        [TensorSpec((1, 4, 5, 5), "float32")],
        attrs,
        formats=[NCHW, NCHW, ND, ND, NCHW],
    )
    check(
        await y.numpy(),
        ort_run("Conv", [x, w, b], kernel_shape=[3, 3], pads=[1] * 4, group=2),
        rtol=1e-4,
        atol=1e-5,
    )
    # TensorFlow style: NHWC data with an HWCN filter (ND filter desc)
    (y,) = aioge.op(
        "Conv2D",
        [up(stream, x.transpose(0, 2, 3, 1).copy()), up(stream, w.transpose(2, 3, 1, 0).copy()), None, None],
        [TensorSpec((1, 5, 5, 4), "float32")],
        {"strides": [1, 1, 1, 1], "pads": [1, 1, 1, 1], "groups": 2, "data_format": "NHWC"},
        formats=[NHWC, ND, ND, ND, NHWC],
    )
    check(
        await y.numpy(),
        ort_run("Conv", [x, w], kernel_shape=[3, 3], pads=[1] * 4, group=2).transpose(0, 2, 3, 1),
        rtol=1e-4,
        atol=1e-5,
    )


@few(40)
@given(
    case=conv_case(transpose=True),
    bias=st.booleans(),
    nhwc=st.booleans(),
    seed=st.integers(0, 2**16),
    opad=st.tuples(st.integers(0, 1), st.integers(0, 1)),
)
async def test_conv_transpose2d_vs_onnxruntime(stream, case, bias, nhwc, seed, opad):
    n, cin, cout, groups, k, s, d, p, hw = case
    op_ = tuple(min(o, si - 1) for o, si in zip(opad, s, strict=True))
    ho = s[0] * (hw[0] - 1) + op_[0] + d[0] * (k[0] - 1) + 1 - p[0] - p[2]
    wo = s[1] * (hw[1] - 1) + op_[1] + d[1] * (k[1] - 1) + 1 - p[1] - p[3]
    if ho < 1 or wo < 1:
        return
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((n, cin, *hw)).astype(np.float32)
    w = rng.standard_normal((cin, cout // groups, *k)).astype(np.float32)
    b = rng.standard_normal(cout).astype(np.float32)
    ref = ort_run(
        "ConvTranspose",
        [x, w, b] if bias else [x, w],
        kernel_shape=list(k),
        strides=list(s),
        dilations=list(d),
        pads=list(p),
        group=groups,
        output_padding=list(op_),
    )
    xin = x.transpose(0, 2, 3, 1).copy() if nhwc else x
    y = ops.conv_transpose2d(
        up(stream, xin),
        up(stream, w),
        up(stream, b) if bias else None,
        strides=s,
        pads=p,
        dilations=d,
        groups=groups,
        output_padding=op_,
        data_format="NHWC" if nhwc else "NCHW",
    )
    check(await y.numpy(), ref.transpose(0, 2, 3, 1) if nhwc else ref, rtol=1e-4, atol=1e-4)


async def test_cann_conv2d_transpose_d(stream):
    rng = np.random.default_rng(6)
    x = rng.standard_normal((1, 3, 4, 4)).astype(np.float32)
    w = rng.standard_normal((3, 2, 3, 3)).astype(np.float32)
    attrs = {"input_size": [1, 2, 8, 8], "strides": [1, 1, 2, 2], "pads": [1, 0, 1, 0], "data_format": "NCHW"}
    (y,) = aioge.op(
        "Conv2DTransposeD",
        [up(stream, x), up(stream, w), None, None],
        [TensorSpec((1, 2, 8, 8), "float32")],
        attrs,
        formats=[NCHW, NCHW, ND, ND, NCHW],
    )
    ref = ort_run(
        "ConvTranspose", [x, w], kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 0, 0], output_padding=[0, 0]
    )
    check(await y.numpy(), ref, rtol=1e-4, atol=1e-5)
    (y,) = aioge.op(
        "Conv2DTranspose",
        [HostInput(np.array([1, 2, 8, 8], np.int32)), up(stream, x), up(stream, w), None, None],
        [TensorSpec((1, 2, 8, 8), "float32")],
        {k: v for k, v in attrs.items() if k != "input_size"},
        formats=[ND, NCHW, NCHW, ND, ND, NCHW],
    )
    check(await y.numpy(), ref, rtol=1e-4, atol=1e-5)


# ---------------------------------------------------------------- pooling
@st.composite
def pool_case(draw):
    k = (draw(st.integers(1, 3)), draw(st.integers(1, 3)))
    s = (draw(st.integers(1, 3)), draw(st.integers(1, 3)))
    p = tuple(draw(st.integers(0, kk - 1)) for kk in (k[0], k[1], k[0], k[1]))  # ONNX: pads < kernel
    hw = (draw(st.integers(1, 8)), draw(st.integers(1, 8)))
    return draw(st.integers(1, 2)), draw(st.integers(1, 3)), k, s, p, hw


@few(60)
@given(
    case=pool_case(),
    is_max=st.booleans(),
    ceil=st.booleans(),
    incl=st.booleans(),
    nhwc=st.booleans(),
    seed=st.integers(0, 2**16),
)
async def test_pool_vs_onnxruntime(stream, case, is_max, ceil, incl, nhwc, seed):
    n, c, k, s, p, hw = case
    if hw[0] + p[0] + p[2] < k[0] or hw[1] + p[1] + p[3] < k[1]:
        return
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((n, c, *hw)).astype(np.float32)
    kw = {"kernel_shape": list(k), "strides": list(s), "pads": list(p), "ceil_mode": int(ceil)}
    if is_max:
        ref = ort_run("MaxPool", [x], opset=12, **kw)
    else:
        ref = ort_run("AveragePool", [x], opset=19, count_include_pad=int(incl), **kw)
    xin = x.transpose(0, 2, 3, 1).copy() if nhwc else x
    fmt = "NHWC" if nhwc else "NCHW"
    if is_max:
        y = ops.max_pool2d(up(stream, xin), k, s, p, ceil_mode=ceil, data_format=fmt)
    else:
        y = ops.avg_pool2d(up(stream, xin), k, s, p, ceil_mode=ceil, count_include_pad=incl, data_format=fmt)
    check(await y.numpy(), ref.transpose(0, 2, 3, 1) if nhwc else ref, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize(
    ("shape", "k", "s", "p"),
    [
        ((1, 3, 28, 28), (28, 28), (1, 1), (0, 0, 0, 0)),  # global: whole rows reduced as one run
        ((2, 2, 9, 7), (4, 7), (2, 1), (1, 0, 1, 0)),  # Wo == 1 with row padding
        ((1, 2, 3, 2500), (3, 5), (2, 4), (1, 2, 1, 2)),  # rows wider than the on-stack buffers
    ],
)
async def test_pool_large_and_whole_row_windows(stream, shape, k, s, p):
    x = np.random.default_rng(11).standard_normal(shape).astype(np.float32)
    kw = {"kernel_shape": list(k), "strides": list(s), "pads": list(p)}
    check(await ops.max_pool2d(up(stream, x), k, s, p).numpy(), ort_run("MaxPool", [x], opset=12, **kw))
    ref = ort_run("AveragePool", [x], opset=19, **kw)
    check(await ops.avg_pool2d(up(stream, x), k, s, p).numpy(), ref, rtol=1e-5, atol=1e-6)
    # max propagates NaN (numpy/torch semantics): exactly the windows that see it become NaN
    x[0, 0, 1, 3] = np.nan
    got = await ops.max_pool2d(up(stream, x), k, s, p).numpy()
    ones = np.where(np.isnan(x), np.float32(1e30), np.float32(0))
    hit = ort_run("MaxPool", [ones], opset=12, **kw) > 1e29
    np.testing.assert_array_equal(np.isnan(got), hit)


@pytest.mark.parametrize("auto_pad", ["SAME_UPPER", "SAME_LOWER", "VALID"])
async def test_pool_auto_pad(stream, auto_pad):
    x = np.random.default_rng(7).standard_normal((1, 2, 7, 6)).astype(np.float32)
    for op, fn in (("MaxPool", ops.max_pool2d), ("AveragePool", ops.avg_pool2d)):
        ref = ort_run(op, [x], kernel_shape=[3, 2], strides=[2, 2], auto_pad=auto_pad)
        check(await fn(up(stream, x), (3, 2), 2, auto_pad=auto_pad).numpy(), ref, rtol=1e-5, atol=1e-6)


async def test_global_avg_pool_and_cann_padding_modes(stream):
    x = np.random.default_rng(8).standard_normal((2, 3, 5, 4)).astype(np.float32)
    check(
        await ops.global_avg_pool(up(stream, x)).numpy(),
        x.astype(np.float64).mean(axis=(2, 3), keepdims=True),
        rtol=1e-6,
    )
    xh = x.transpose(0, 2, 3, 1).copy()
    check(
        await ops.global_avg_pool(up(stream, xh), data_format="NHWC").numpy(),
        xh.astype(np.float64).mean(axis=(1, 2), keepdims=True),
        rtol=1e-6,
    )
    # ORT-style MaxPoolV3 SAME and the TF MaxPool / AvgPool ops
    (y,) = aioge.op(
        "MaxPoolV3",
        [up(stream, x)],
        [TensorSpec((2, 3, 3, 2), "float32")],
        {"ksize": [1, 1, 3, 3], "strides": [1, 1, 2, 2], "padding_mode": "SAME", "data_format": "NCHW"},
        formats=[NCHW, NCHW],
    )
    check(await y.numpy(), ort_run("MaxPool", [x], kernel_shape=[3, 3], strides=[2, 2], auto_pad="SAME_UPPER"))
    (y,) = aioge.op(
        "AvgPool",
        [up(stream, xh)],
        [TensorSpec((2, 2, 2, 3), "float32")],
        {"ksize": [1, 2, 2, 1], "strides": [1, 2, 2, 1], "padding": "VALID"},
        formats=[NHWC, NHWC],
    )
    check(
        await y.numpy(),
        ort_run("AveragePool", [x], kernel_shape=[2, 2], strides=[2, 2]).transpose(0, 2, 3, 1),
        rtol=1e-6,
    )
    (y,) = aioge.op(
        "AvgPoolV2",
        [up(stream, x)],
        [TensorSpec((2, 3, 2, 2), "float32")],
        {"ksize": [1, 1, 2, 2], "strides": [1, 1, 2, 2], "divisor_override": 2},
        formats=[NCHW, NCHW],
    )
    check(await y.numpy(), x[:, :, :4, :4].reshape(2, 3, 2, 2, 2, 2).sum(axis=(3, 5)) / 2, rtol=1e-6)


async def test_max_pool_int8(stream):
    x = np.random.default_rng(9).integers(-100, 100, (1, 2, 4, 4)).astype(np.int8)
    check(await ops.max_pool2d(up(stream, x), 2, 2).numpy(), x.reshape(1, 2, 2, 2, 2, 2).max(axis=(3, 5)))


@few(20)
@given(
    size=st.sampled_from([1, 3, 5]),
    c=st.integers(1, 7),
    seed=st.integers(0, 2**16),
    dt=st.sampled_from([F32, F16]),
)
async def test_lrn_vs_onnxruntime(stream, size, c, seed, dt):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((2, c, 3, 3)).astype(dt)
    ref = ort_run("LRN", [x.astype(np.float32)], size=size, alpha=1e-2, beta=0.75, bias=2.0)
    got = await ops.lrn(up(stream, x), size, alpha=1e-2, beta=0.75, bias=2.0).numpy()
    check(got, ref if dt == F32 else rounded(ref, dt), dt, rtol=1e-5, atol=1e-6, ulps=1)
