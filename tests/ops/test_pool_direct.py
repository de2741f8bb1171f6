"""float32 NCHW pooling on the direct kernel (pooling.c, strides 1 and 2: window rows folded into an
identity-bordered scratch row, 8 outputs a register; a max plane without NaN folds with vmaxps, one with a NaN with
the NaN-propagating select) against onnxruntime: rows wider than one and several vectors with ragged ends,
windows up to 5, pads, ceil mode, both average modes, NaN propagation (max) in one plane of several."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from aioge import ops
from tests.ops.opsutil import check, few, ort_run, up

pytestmark = pytest.mark.anyio


@st.composite
def direct_case(draw):
    k = (draw(st.integers(1, 5)), draw(st.integers(1, 5)))
    s = (draw(st.integers(1, 2)), draw(st.integers(1, 2)))
    p = tuple(draw(st.integers(0, kk - 1)) for kk in (k[0], k[1], k[0], k[1]))  # ONNX: pads < kernel
    hw = (draw(st.integers(1, 20)), draw(st.integers(1, 63)))  # stride-1 rows of 16+ run direct too
    return draw(st.integers(1, 2)), draw(st.integers(1, 4)), k, s, p, hw


@few(80)
@given(case=direct_case(), is_max=st.booleans(), ceil=st.booleans(), incl=st.booleans(), nan=st.booleans(),
       seed=st.integers(0, 2**16))  # fmt: skip
async def test_direct_pool_vs_onnxruntime(stream, case, is_max, ceil, incl, nan, seed):
    n, c, k, s, p, hw = case
    if hw[0] + p[0] + p[2] < k[0] or hw[1] + p[1] + p[3] < k[1]:
        return
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((n, c, *hw)).astype(np.float32)
    kw = {"kernel_shape": list(k), "strides": list(s), "pads": list(p), "ceil_mode": int(ceil)}
    if is_max:
        ref = ort_run("MaxPool", [x], opset=12, **kw)
        if nan:  # a NaN propagates to every window holding it (onnxruntime's max pool drops it)
            at = rng.integers(0, x.size)
            mask = np.zeros_like(x)
            mask.flat[at] = 1.0
            x.flat[at] = np.nan
            hit = ort_run("MaxPool", [mask], opset=12, **kw) > 0
            ref = np.where(hit, np.nan, ort_run("MaxPool", [x], opset=12, **kw))
        y = ops.max_pool2d(up(stream, x), k, s, p, ceil_mode=ceil)
    else:
        ref = ort_run("AveragePool", [x], opset=19, count_include_pad=int(incl), **kw)
        y = ops.avg_pool2d(up(stream, x), k, s, p, ceil_mode=ceil, count_include_pad=incl)
    check(await y.numpy(), ref, rtol=1e-5, atol=1e-6)


# the networks' pools: inception's 3x3 s2 with pads (0, 1), 3x3 s1 averages, resnet's stem, squeezenet's
@pytest.mark.parametrize(("shape", "k", "s", "p", "is_max"), [
    ((1, 64, 112, 112), 3, 2, (0, 0, 1, 1), True),
    ((1, 40, 14, 14), 3, 2, (0, 0, 1, 1), True),
    ((1, 24, 28, 28), 3, 1, (1, 1, 1, 1), False),
    ((1, 16, 7, 7), 3, 1, (1, 1, 1, 1), True),
    ((1, 8, 109, 109), 3, 2, (0, 0, 0, 0), True),
    ((1, 12, 27, 27), 3, 1, (1, 1, 1, 1), True),
    ((1, 6, 13, 13), 3, 1, (1, 1, 1, 1), True),
    ((1, 10, 28, 28), 3, 1, (1, 1, 1, 1), False),
])  # fmt: skip
async def test_direct_pool_network_shapes(stream, shape, k, s, p, is_max):
    x = np.random.default_rng(3).standard_normal(shape).astype(np.float32)
    kw = {"kernel_shape": [k, k], "strides": [s, s], "pads": list(p)}
    if is_max:
        ref = ort_run("MaxPool", [x], opset=12, **kw)
        y = ops.max_pool2d(up(stream, x), (k, k), (s, s), p)
    else:
        ref = ort_run("AveragePool", [x], opset=19, **kw)
        y = ops.avg_pool2d(up(stream, x), (k, k), (s, s), p)
    check(await y.numpy(), ref, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("fill", [np.inf, -np.inf])
async def test_direct_max_pool_infinities_and_nan_planes(stream, fill):
    """Planes without NaN (the vmaxps fold) holding infinities, beside a plane holding a NaN (the select),
    against numpy's NaN-propagating max over the -inf padded windows (onnxruntime starts a window at
    -FLT_MAX, so its all -inf windows differ)."""
    rng = np.random.default_rng(7)
    x = rng.standard_normal((1, 3, 21, 30)).astype(np.float32)
    x[0, 0, 4, 5:9] = fill
    x[0, 1, :, 3:] = fill
    x[0, 2, 10, 17] = np.nan
    xp = np.pad(x, ((0, 0), (0, 0), (1, 1), (1, 1)), constant_values=-np.inf)
    win = np.lib.stride_tricks.sliding_window_view(xp, (3, 3), axis=(2, 3))
    ref = win.max(axis=(-2, -1))
    got = await ops.max_pool2d(up(stream, x), (3, 3), (1, 1), (1, 1, 1, 1)).numpy()
    assert np.isnan(ref[0, 2, 9:12, 16:19]).all() and np.isnan(ref).sum() == 9
    np.testing.assert_array_equal(got, ref)


# planes whose output rows are shorter than one vector (Wo 2-7), several planes, float16 (computed in a float32
# scratch block of exactly the planes' size): a row's whole-vector store may spill only into its plane's next row
@pytest.mark.parametrize("dtype", ["float32", "float16"])
@pytest.mark.parametrize(("hw", "k", "s"), [((4, 4), 2, 2), ((5, 5), 3, 1), ((9, 9), 3, 1), ((7, 15), 2, 2),
                                            ((6, 8), 3, 2), ((3, 9), 1, 1)])  # fmt: skip
@pytest.mark.parametrize("is_max", [True, False])
async def test_short_output_rows_stay_in_their_plane(stream, dtype, hw, k, s, is_max):
    x = np.random.default_rng(sum(hw) + k + s).standard_normal((2, 5, *hw)).astype(np.float32)
    kw = {"kernel_shape": [k, k], "strides": [s, s], "pads": [0, 0, 0, 0]}
    ref = ort_run("MaxPool" if is_max else "AveragePool", [x], opset=12, **kw)
    xd = up(stream, x.astype(dtype))
    y = ops.max_pool2d(xd, (k, k), (s, s), (0, 0, 0, 0)) if is_max else ops.avg_pool2d(xd, (k, k), (s, s), (0, 0, 0, 0))
    tol = 1e-5 if dtype == "float32" else 2e-3
    check((await y.numpy()).astype(np.float32), ref, rtol=tol, atol=tol)


@pytest.mark.parametrize(("hw", "k", "s", "p"), [
    ((9, 19), 3, 2, (0, 0, 0, 0)),  # 16 columns, then the last 16 overlapping by one and one scalar column
    ((7, 20), 3, 2, (1, 1, 1, 1)),  # an odd left pad: column 0 is an odd padded column
    ((6, 35), 2, 2, (0, 1, 0, 1)),
    ((5, 13), 3, 2, (1, 1, 1, 1)),  # rows under 16 columns: every column scalar
    ((8, 21), 3, 1, (1, 1, 1, 1)),
    ((3, 9), 1, 2, (0, 0, 0, 0)),  # one row a window
])  # fmt: skip
async def test_direct_max_pool_nan_at_every_position(stream, hw, k, s, p):
    """One plane per input position, each holding a NaN there (every row and column of the folds: the first
    and later rows of a window, the vector and the scalar columns, before and after rows without NaN), against
    numpy's NaN-propagating max over the -inf padded windows."""
    h, w = hw
    rng = np.random.default_rng(11)
    x = np.repeat(rng.standard_normal((1, 1, h, w)).astype(np.float32), h * w, axis=1)
    x[0, np.arange(h * w), np.arange(h * w) // w, np.arange(h * w) % w] = np.nan
    xp = np.pad(x, ((0, 0), (0, 0), (p[0], p[2]), (p[1], p[3])), constant_values=-np.inf)
    ref = np.lib.stride_tricks.sliding_window_view(xp, (k, k), axis=(2, 3))[:, :, ::s, ::s].max(axis=(-2, -1))
    got = await ops.max_pool2d(up(stream, x), (k, k), (s, s), p).numpy()
    assert np.isnan(ref).any(axis=(2, 3)).sum() > 0
    np.testing.assert_array_equal(got, ref)
