"""Depthwise, few-channel grouped and image-stem convolutions (conv_dw.c: the register-blocked NCHW kernel) against
onnxruntime: rows wider than one and two vectors, ragged row ends, strides, dilations, multipliers, a fused
activation."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import aioge
from aioge import TensorSpec, ops
from tests.ops.opsutil import F32, F64, check, few, ort_run, up

pytestmark = pytest.mark.anyio

NCHW, ND = 0, 2


def _geometry(draw):
    """Kernel, strides, dilations, pads (ONNX order t, l, b, r), plane and batch of a conv case."""
    k = (draw(st.integers(1, 5)), draw(st.integers(1, 5)))
    s = (draw(st.integers(1, 3)), draw(st.integers(1, 3)))
    d = (draw(st.integers(1, 2)), draw(st.integers(1, 2)))
    p = tuple(draw(st.integers(0, 3)) for _ in range(4))
    hw = (draw(st.integers(1, 20)), draw(st.integers(1, 45)))
    return k, s, d, p, hw, draw(st.integers(1, 2))


def _fits(k, d, p, hw):
    """Whether the dilated kernel fits the padded plane."""
    return hw[0] + p[0] + p[2] >= d[0] * (k[0] - 1) + 1 and hw[1] + p[1] + p[3] >= d[1] * (k[1] - 1) + 1


@st.composite
def dw_case(draw):
    c = draw(st.integers(1, 6))
    mult = draw(st.integers(1, 2))
    k, s, d, p, hw, n = _geometry(draw)
    return n, c, mult, k, s, d, p, hw


@few(60)
@given(case=dw_case(), bias=st.booleans(), seed=st.integers(0, 2**16))
async def test_depthwise_vs_onnxruntime(stream, case, bias, seed):
    n, c, mult, k, s, d, p, hw = case
    if c == 1:
        c = 2  # groups == 1 is a plain conv
    if not _fits(k, d, p, hw):
        return
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((n, c, *hw)).astype(np.float32)
    w = rng.standard_normal((c * mult, 1, *k)).astype(np.float32)
    b = rng.standard_normal(c * mult).astype(np.float32)
    ref = ort_run("Conv", [x, w, b] if bias else [x, w], kernel_shape=list(k), strides=list(s), dilations=list(d),
                  pads=list(p), group=c)  # fmt: skip
    y = ops.conv2d(up(stream, x), up(stream, w), up(stream, b) if bias else None, strides=s, pads=p, dilations=d,
                   groups=c)  # fmt: skip
    check(await y.numpy(), ref, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize(("hw", "s"), [((56, 56), 1), ((112, 112), 2), ((7, 7), 1), ((14, 33), 2)])
@pytest.mark.parametrize("dt", [F32, F64])
async def test_fused_depthwise_relu6(stream, hw, s, dt):
    # MobileNet's depthwise block: 3x3, bias, Clip(0, 6) in the epilogue
    rng = np.random.default_rng(5)
    c = 24
    x = (rng.standard_normal((1, c, *hw)) * 3).astype(dt)
    w = rng.standard_normal((c, 1, 3, 3)).astype(dt)
    b = rng.standard_normal(c).astype(dt)
    ref = ort_run("Conv", [a.astype(np.float32) for a in (x, w, b)], kernel_shape=[3, 3], pads=[1] * 4, strides=[s, s],
                  group=c).astype(np.float64)  # fmt: skip
    attrs = {"strides": [1, 1, s, s], "pads": [1] * 4, "dilations": [1, 1, 1, 1], "groups": c,
             "data_format": "NCHW", "activation": "Clip", "min": 0.0, "max": 6.0}  # fmt: skip
    (y,) = aioge.op("_FusedConv2D", [up(stream, x), up(stream, w), up(stream, b)], [TensorSpec(ref.shape, dt)], attrs,
                    formats=[NCHW, NCHW, ND, NCHW])  # fmt: skip
    check(await y.numpy(), np.clip(ref, 0, 6), rtol=1e-4, atol=1e-4)


@st.composite
def grouped_case(draw):
    groups = draw(st.integers(2, 4))
    cin_g = draw(st.integers(2, 16))
    cout_g = 4 * draw(st.integers(1, 2)) if draw(st.booleans()) else draw(st.integers(1, 6))  # 4x: 4 channels an item
    k = (draw(st.integers(1, 4)), draw(st.integers(1, 4)))
    s = (draw(st.integers(1, 3)), draw(st.integers(1, 3)))
    d = (draw(st.integers(1, 2)), draw(st.integers(1, 2)))
    p = tuple(draw(st.integers(0, 2)) for _ in range(4))  # ONNX order t, l, b, r
    hw = (draw(st.integers(1, 18)), draw(st.integers(1, 40)))
    n = draw(st.integers(1, 2))
    return n, groups, cin_g, cout_g, k, s, d, p, hw


@few(60)
@given(case=grouped_case(), bias=st.booleans(), seed=st.integers(0, 2**16))
async def test_grouped_vs_onnxruntime(stream, case, bias, seed):
    # few input channels a group (cin_g * kh * kw <= 144, not 1x1): the depthwise kernel over the group's planes
    n, groups, cin_g, cout_g, k, s, d, p, hw = case
    if not _fits(k, d, p, hw):
        return
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((n, groups * cin_g, *hw)).astype(np.float32)
    w = rng.standard_normal((groups * cout_g, cin_g, *k)).astype(np.float32)
    b = rng.standard_normal(groups * cout_g).astype(np.float32)
    ref = ort_run("Conv", [x, w, b] if bias else [x, w], kernel_shape=list(k), strides=list(s), dilations=list(d),
                  pads=list(p), group=groups)  # fmt: skip
    y = ops.conv2d(up(stream, x), up(stream, w), up(stream, b) if bias else None, strides=s, pads=p, dilations=d,
                   groups=groups)  # fmt: skip
    check(await y.numpy(), ref, rtol=1e-4, atol=1e-4)


# (C_in, H=W, C_out, stride, groups): ResNeXt 32x4d stages (4, 8, 16 channels a group), ShuffleNet-like
# groups of 3x3 at stride 2, and 7x7 rows narrower than a vector
@pytest.mark.parametrize(
    ("ci", "hw", "co", "s", "g"),
    [(128, 56, 128, 1, 32), (256, 28, 256, 2, 32), (512, 14, 512, 1, 32), (64, 7, 64, 1, 8), (48, 30, 96, 2, 4)],
)
async def test_fused_grouped_relu(stream, ci, hw, co, s, g):
    rng = np.random.default_rng(11)
    x = rng.standard_normal((1, ci, hw, hw)).astype(np.float32)
    w = (rng.standard_normal((co, ci // g, 3, 3)) * 0.2).astype(np.float32)
    b = rng.standard_normal(co).astype(np.float32)
    ref = ort_run("Conv", [x, w, b], kernel_shape=[3, 3], pads=[1] * 4, strides=[s, s], group=g)
    attrs = {"strides": [1, 1, s, s], "pads": [1] * 4, "dilations": [1, 1, 1, 1], "groups": g,
             "data_format": "NCHW", "activation": "Relu"}  # fmt: skip
    (y,) = aioge.op("_FusedConv2D", [up(stream, x), up(stream, w), up(stream, b)], [TensorSpec(ref.shape, F32)], attrs,
                    formats=[NCHW, NCHW, ND, NCHW])  # fmt: skip
    check(await y.numpy(), np.maximum(ref, 0), rtol=1e-4, atol=1e-4)


@st.composite
def stem_case(draw):
    cin = draw(st.integers(1, 4))  # 1-3: the image-stem route; 4: the packed GEMM beside it
    cout = 4 * draw(st.integers(1, 3)) if draw(st.booleans()) else draw(st.integers(1, 7))  # 4x: 4 channels an item
    k, s, d, p, hw, n = _geometry(draw)
    return n, cin, cout, k, s, d, p, hw


@few(60)
@given(case=stem_case(), bias=st.booleans(), seed=st.integers(0, 2**16))
async def test_stem_vs_onnxruntime(stream, case, bias, seed):
    # ungrouped convs with 1-3 input channels (image stems) run the grouped kernel as one group
    n, cin, cout, k, s, d, p, hw = case
    if not _fits(k, d, p, hw):
        return
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((n, cin, *hw)).astype(np.float32)
    w = rng.standard_normal((cout, cin, *k)).astype(np.float32)
    b = rng.standard_normal(cout).astype(np.float32)
    ref = ort_run("Conv", [x, w, b] if bias else [x, w], kernel_shape=list(k), strides=list(s), dilations=list(d),
                  pads=list(p))  # fmt: skip
    y = ops.conv2d(up(stream, x), up(stream, w), up(stream, b) if bias else None, strides=s, pads=p, dilations=d)
    check(await y.numpy(), ref, rtol=1e-4, atol=1e-4)


# (C_in, H, W, C_out, k, stride, pad): MobileNet / EfficientNet stems (3x3 s2 on 224 and an odd plane), a grey
# image, a 5x5, and ResNet's 7x7 s2 stem (147 taps: past the route, the packed GEMM)
@pytest.mark.parametrize(
    ("ci", "h", "w", "co", "k", "s", "pad"),
    [(3, 224, 224, 32, 3, 2, 1), (3, 67, 45, 16, 3, 2, 1), (1, 28, 28, 8, 3, 1, 1), (2, 33, 31, 12, 5, 1, 2),
     (3, 64, 64, 64, 7, 2, 3)],
)  # fmt: skip
async def test_fused_stem_clip(stream, ci, h, w, co, k, s, pad):
    rng = np.random.default_rng(13)
    x = rng.standard_normal((1, ci, h, w)).astype(np.float32)
    wt = (rng.standard_normal((co, ci, k, k)) * 0.5).astype(np.float32)
    b = rng.standard_normal(co).astype(np.float32)
    ref = ort_run("Conv", [x, wt, b], kernel_shape=[k, k], pads=[pad] * 4, strides=[s, s])
    attrs = {"strides": [1, 1, s, s], "pads": [pad] * 4, "dilations": [1, 1, 1, 1], "groups": 1,
             "data_format": "NCHW", "activation": "Clip", "min": 0.0, "max": 6.0}  # fmt: skip
    (y,) = aioge.op("_FusedConv2D", [up(stream, x), up(stream, wt), up(stream, b)], [TensorSpec(ref.shape, F32)], attrs,
                    formats=[NCHW, NCHW, ND, NCHW])  # fmt: skip
    check(await y.numpy(), np.clip(ref, 0, 6), rtol=1e-4, atol=1e-4)
