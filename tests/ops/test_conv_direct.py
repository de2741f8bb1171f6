"""float32 NCHW convolutions on the direct kernel (conv_direct.c) against onnxruntime.

The kernel reads the OIHW filter in place, splits work into pixel blocks x filter-row blocks and
accumulates in the output over K blocks of 256, so the cases cover: filter rows that are not a
multiple of the 6-row tile, pixel counts that are not a multiple of the 16-pixel panel, K above
one block (and not a multiple of it), groups, strides (1x1 strided too), pads, dilations, bias
and a fused activation, and small images with many filter rows (the filter-row split)."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import aioge
from aioge import TensorSpec, ops
from tests.ops.opsutil import check, few, ort_run, up

pytestmark = pytest.mark.anyio

NCHW, ND = 0, 2


@st.composite
def conv_case(draw):
    groups = draw(st.sampled_from([1, 1, 2, 3]))
    cin_g = draw(st.integers(1, 40))
    cout_g = draw(st.integers(1, 20))
    k = (draw(st.integers(1, 4)), draw(st.integers(1, 4)))
    s = (draw(st.integers(1, 3)), draw(st.integers(1, 3)))
    d = (draw(st.integers(1, 2)), draw(st.integers(1, 2)))
    p = tuple(draw(st.integers(0, 2)) for _ in range(4))  # ONNX order t, l, b, r
    hw = (draw(st.integers(1, 19)), draw(st.integers(1, 37)))
    n = draw(st.integers(1, 2))
    return n, groups, cin_g, cout_g, k, s, d, p, hw


def _fits(k, d, p, hw) -> bool:
    eh, ew = d[0] * (k[0] - 1) + 1, d[1] * (k[1] - 1) + 1
    return hw[0] + p[0] + p[2] >= eh and hw[1] + p[1] + p[3] >= ew


@few(80)
@given(case=conv_case(), bias=st.booleans(), seed=st.integers(0, 2**16))
async def test_direct_conv_vs_onnxruntime(stream, case, bias, seed):
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


# (C_in, H=W, C_out, kernel, stride, pad, groups): K over several 256-row blocks, small images with
# many filter rows (split over filter rows), ragged tiles everywhere, strided 1x1
SHAPES = [
    (192, 7, 40, 3, 1, 1, 1),  # K = 1728: 7 K blocks, 49 pixels
    (64, 5, 130, 3, 1, 1, 1),  # 130 filter rows at 25 pixels: row blocks, ragged last tile
    (300, 6, 14, 1, 2, 0, 1),  # strided 1x1, K = 300
    (48, 13, 36, 3, 2, 1, 3),  # groups of 16 -> 12 at stride 2
    (3, 33, 8, 7, 2, 3, 1),  # an image stem
    (3, 41, 10, 3, 2, 1, 1),  # stride 2: padded rows split into phases of 22 columns (a ragged vector)
]


@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("act", [None, "Relu"])
async def test_direct_conv_shapes(stream, shape, act):
    ci, hw, co, k, s, pad, g = shape
    rng = np.random.default_rng(ci * hw + co)
    x = rng.standard_normal((1, ci, hw, hw)).astype(np.float32)
    w = (rng.standard_normal((co, ci // g, k, k)) * 0.1).astype(np.float32)
    b = rng.standard_normal(co).astype(np.float32)
    ref = ort_run("Conv", [x, w, b], kernel_shape=[k, k], pads=[pad] * 4, strides=[s, s], group=g)
    attrs = {"strides": [1, 1, s, s], "pads": [pad] * 4, "dilations": [1, 1, 1, 1], "groups": g,
             "data_format": "NCHW", "activation": act or "none"}  # fmt: skip
    if act is None:
        y = ops.conv2d(up(stream, x), up(stream, w), up(stream, b), strides=s, pads=pad, groups=g)
    else:
        (y,) = aioge.op("_FusedConv2D", [up(stream, x), up(stream, w), up(stream, b)],
                        [TensorSpec(ref.shape, np.float32)], attrs, formats=[NCHW, NCHW, ND, NCHW])  # fmt: skip
        ref = np.maximum(ref, 0)
    check(await y.numpy(), ref, rtol=1e-4, atol=1e-4)


async def test_direct_conv_stride2_wide_rows(stream):
    """Stride-2 rows too wide for the phase split's row buffer keep the element-wise split."""
    rng = np.random.default_rng(11)
    x = rng.standard_normal((1, 2, 5, 2100)).astype(np.float32)
    w = rng.standard_normal((7, 2, 3, 3)).astype(np.float32)
    ref = ort_run("Conv", [x, w], kernel_shape=[3, 3], pads=[1, 2, 1, 0], strides=[2, 2])
    y = ops.conv2d(up(stream, x), up(stream, w), strides=2, pads=(1, 2, 1, 0))
    check(await y.numpy(), ref, rtol=1e-4, atol=1e-4)
