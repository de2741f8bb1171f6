"""_NchwcConv2D's depthwise convs on large planes (nchwc_dw.c: tiles of 8 output pixels reusing each
input pixel across its taps, one-pixel border tiles, stride 1 and 2, 3- and 5-wide filters) and
_NchwcPool2D on the networks' planes, against float64 numpy references on the NCHW tensors."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import aioge
from aioge import TensorSpec
from tests.ops.opsutil import F32, check, few, up
from tests.ops.test_nchwc import (  # noqa: F401 (nchwc_family: test_nchwc.py's autouse fixture, every family)
    ACTS,
    check_conv_case,
    conv_ref,
    from_blocked,
    nchwc_family,
    pool_ref,
    run_conv,
    to_blocked,
)

pytestmark = pytest.mark.anyio


@st.composite
def dw_case(draw):
    kh = draw(st.integers(1, 7))
    kw = draw(st.sampled_from([3, 5, 3, 5, 1, 2, 4]))  # 3 and 5 wide: nchwc_dw.c; the others: the generic tile
    s = (draw(st.integers(1, 3)), draw(st.integers(1, 2)))
    d = (1, 1) if draw(st.integers(0, 3)) else (draw(st.integers(1, 2)), draw(st.integers(1, 2)))
    p = tuple(draw(st.integers(0, 3)) for _ in range(4))
    # rows wide enough that stride 1 is past the padded-copy route (output rows up to 32 pixels)
    hw = (draw(st.integers(1, 11)), draw(st.integers(30, 75)))
    c = 8 * draw(st.integers(1, 3))
    return draw(st.integers(1, 2)), c, (kh, kw), s, d, p, hw


@few(50)
@given(case=dw_case(), bias=st.booleans(), res=st.booleans(), act=st.sampled_from(sorted(ACTS)),
       seed=st.integers(0, 2**16))  # fmt: skip
async def test_depthwise_large_planes_vs_numpy(stream, case, bias, res, act, seed):
    n, c, k, s, d, p, hw = case
    await check_conv_case(stream, (n, c, c, c, k, s, d, p, hw), bias, res, act, seed)


# (C, H, W, k, stride, pads): MobileNet-v2's and EfficientNet-b0's depthwise convs on large planes, odd
# planes whose rows end in a short tile, and asymmetric pads (TF "same" at stride 2)
DW_NETS = [
    (32, 112, 112, 3, 1, (1, 1, 1, 1)),
    (16, 112, 112, 3, 2, (1, 1, 1, 1)),
    (24, 56, 56, 3, 1, (1, 1, 1, 1)),
    (24, 56, 56, 3, 2, (1, 1, 1, 1)),
    (16, 56, 56, 5, 2, (2, 2, 2, 2)),
    (8, 45, 67, 5, 1, (2, 2, 2, 2)),
    (8, 37, 53, 3, 2, (0, 1, 0, 1)),
    (8, 29, 41, 5, 2, (1, 2, 1, 2)),
]


@pytest.mark.parametrize(("c", "h", "w", "k", "s", "pads"), DW_NETS)
@pytest.mark.parametrize("res", [False, True])
async def test_depthwise_network_planes_vs_numpy(stream, c, h, w, k, s, pads, res):
    rng = np.random.default_rng(c + h + w + k)
    x = rng.standard_normal((1, c, h, w)).astype(np.float32)
    wt = (rng.standard_normal((c, 1, k, k)) * 0.3).astype(np.float32)
    b = rng.standard_normal(c).astype(np.float32)
    ref = conv_ref(x, wt, b, (s, s), (1, 1), pads, c)
    z = rng.standard_normal(ref.shape).astype(np.float32) if res else None
    if z is not None:
        ref = ref + z
    got = await run_conv(stream, x, wt, b, z, (s, s), (1, 1), pads, c, "Clip", const_w=True)
    check(got, np.clip(ref, 0, 6), rtol=1e-4, atol=1e-4)


async def test_depthwise_propagates_nan_and_inf_to_its_own_pixels(stream):
    """A NaN / inf input pixel reaches exactly the outputs whose windows hold it (no tile's
    extra lanes or columns leak it elsewhere)."""
    x = np.zeros((1, 8, 9, 50), np.float32)
    x[0, 3, 4, 0] = np.nan  # a border column
    x[0, 5, 2, 20] = np.inf  # interior
    w = np.ones((8, 1, 3, 3), np.float32)
    got = await run_conv(stream, x, w, None, None, (1, 1), (1, 1), (1, 1, 1, 1), 8)
    assert np.isnan(got[0, 3, 3:6, 0:2]).all() and np.isnan(got).sum() == 6
    assert np.isposinf(got[0, 5, 1:4, 19:22]).all() and np.isinf(got).sum() == 9


def _pool(stream, x, attrs, out_hw):
    n, c = x.shape[:2]
    (y,) = aioge.op("_NchwcPool2D", [up(stream, to_blocked(x))], [TensorSpec((n, c // 8, *out_hw, 8), F32)], attrs)
    return y


# (mode, C, H, W, k, stride, pads, count_include_pad): ResNet's stem max pool, odd planes, ceil-mode-style
# extra padding, 2x2 stride-2 pools, an average with and without the pads counted
POOLS = [
    ("max", 64, 112, 112, 3, 2, (1, 1, 1, 1), 0),
    ("max", 16, 111, 111, 3, 2, (0, 0, 0, 0), 0),
    ("max", 8, 57, 43, 3, 2, (1, 2, 1, 2), 0),
    ("max", 8, 40, 38, 2, 2, (0, 0, 0, 0), 0),
    ("max", 16, 28, 28, 3, 1, (1, 1, 1, 1), 0),
    ("avg", 8, 40, 38, 2, 2, (0, 0, 0, 0), 0),
    ("avg", 16, 28, 28, 3, 2, (1, 1, 1, 1), 1),
    ("avg", 16, 29, 35, 3, 2, (1, 1, 1, 1), 0),
]


@pytest.mark.parametrize(("mode", "c", "h", "w", "k", "s", "pads", "cip"), POOLS)
async def test_pool_network_planes_vs_numpy(stream, mode, c, h, w, k, s, pads, cip):
    x = np.random.default_rng(h * w).standard_normal((2, c, h, w)).astype(np.float32)
    ho, wo = (h + pads[0] + pads[1] - k) // s + 1, (w + pads[2] + pads[3] - k) // s + 1
    attrs = {"mode": mode, "kernel": [k, k], "strides": [s, s], "pads": list(pads), "count_include_pad": cip}
    y = _pool(stream, x, attrs, (ho, wo))
    ref = pool_ref(x, mode, (k, k), (s, s), pads, (1, 1), cip, (ho, wo))
    check(from_blocked(await y.numpy()), ref, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("hw", [(7, 7), (14, 14), (56, 56), (1, 33)])
async def test_global_average_network_planes_vs_numpy(stream, hw):
    x = np.random.default_rng(hw[0]).standard_normal((2, 32, *hw)).astype(np.float32)
    y = _pool(stream, x, {"mode": "avg", "global": 1}, (1, 1))
    check(from_blocked(await y.numpy()), x.astype(np.float64).mean(axis=(2, 3))[:, :, None, None], rtol=1e-5, atol=1e-6)
