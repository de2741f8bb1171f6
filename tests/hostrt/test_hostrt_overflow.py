"""Integer attrs at the edges of int64 (and the audit behind them).

The host runtime is built with -fwrapv: an attr that overflows arithmetic
wraps silently, and a wrapped value that sizes, bounds or divides is a crash
or a read outside the buffer.  Each case here crashed (SIGFPE) or read foreign
memory before; now it is a typed error or the numpy result, and the stream
keeps working.
"""

from __future__ import annotations

import numpy as np
import pytest

import aioge
from aioge import HostInput, TensorSpec
from aioge.errors import AclParamError
from tests.support.edges import I64_MAX, I64_MIN, OVERFLOW_EDGES

pytestmark = pytest.mark.anyio


def up(stream, arr):
    a = np.asarray(arr)
    return stream.upload(a).reshape(a.shape)


async def still_usable(stream):
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    (y,) = aioge.op("Relu", [up(stream, x - 2)], [TensorSpec((2, 3), "float32")])
    np.testing.assert_array_equal(await y.numpy(), np.maximum(x - 2, 0))
    await stream.synchronize()


@pytest.mark.parametrize("r", [I64_MAX, 2**62, 2**31 + 1, 7])
async def test_lrn_huge_depth_radius_covers_all_channels(stream, r):
    # 2*r + 2 wrapped to 0 and divided: SIGFPE.  A radius past C is every channel.
    x = np.random.default_rng(0).standard_normal((1, 3, 2, 2)).astype(np.float32)
    (y,) = aioge.op("LRN", [up(stream, x)], [TensorSpec(x.shape, "float32")], {"depth_radius": r, "alpha": 0.5})
    ref = x / (1.0 + 0.5 * (x * x).sum(axis=1, keepdims=True)) ** 0.5
    np.testing.assert_allclose(await y.numpy(), ref, rtol=1e-5)
    await still_usable(stream)


@pytest.mark.parametrize("r", [-1, I64_MIN])
async def test_lrn_negative_depth_radius_is_refused(stream, r):
    x = np.ones((1, 3, 2, 2), np.float32)
    with pytest.raises(AclParamError, match="depth_radius"):
        aioge.op("LRN", [up(stream, x)], [TensorSpec(x.shape, "float32")], {"depth_radius": r})
    await still_usable(stream)


async def test_lrn_zero_channels(stream):
    x = np.ones((1, 0, 2, 2), np.float32)
    (y,) = aioge.op("LRN", [up(stream, x)], [TensorSpec(x.shape, "float32")], {"depth_radius": 2})
    assert (await y.numpy()).shape == x.shape


@pytest.mark.parametrize("off", OVERFLOW_EDGES)
async def test_sliced_offsets_near_int64_max_are_refused(stream, off):
    # o + s > D wrapped and passed the check: a read before the input buffer
    x = np.arange(12, dtype=np.float32).reshape(3, 4)
    with pytest.raises(AclParamError, match="out of range"):
        aioge.op("SliceD", [up(stream, x)], [TensorSpec((1, 2), "float32")], {"offsets": [off, 0], "size": [2, 2]})
    with pytest.raises(AclParamError, match="out of range"):
        aioge.op("SliceD", [up(stream, x)], [TensorSpec((1, 2), "float32")], {"offsets": [1, 0], "size": [off, 2]})
    await still_usable(stream)


@pytest.mark.parametrize("off", OVERFLOW_EDGES)
async def test_slice_value_offsets_near_int64_max_are_refused(stream, off):
    x = np.arange(12, dtype=np.float32).reshape(3, 4)
    begin, size = HostInput(np.array([off, 0])), HostInput(np.array([2, 2]))
    with pytest.raises(AclParamError, match="out of range"):
        aioge.op("Slice", [up(stream, x), begin, size], [TensorSpec((2, 2), "float32")])
    await still_usable(stream)


@pytest.mark.parametrize("step", [I64_MAX, I64_MIN, I64_MIN + 1, 2**62, -(2**62)])
async def test_strided_slice_huge_strides_take_one_element(stream, step):
    # (hi - lo + s - 1) / s wrapped negative; -INT64_MIN has no value
    x = np.arange(12, dtype=np.float32).reshape(3, 4)
    begin, end = ([0, 0], [3, 4]) if step > 0 else ([2, 3], [-5, -5])
    (y,) = aioge.op(
        "StridedSliceD",
        [up(stream, x)],
        [TensorSpec((1, 1), "float32")],
        {"begin": begin, "end": end, "strides": [step, step], "begin_mask": 0, "end_mask": 0},
    )
    ref = x[begin[0] :: step, begin[1] :: step] if step > 0 else x[2::-3, 3::-4][:1, :1]
    np.testing.assert_array_equal(await y.numpy(), ref[:1, :1])
    await still_usable(stream)


@pytest.mark.parametrize("pads", [[I64_MAX, I64_MAX], [I64_MAX, -I64_MAX], [I64_MIN, 1], [2**62, 2**62]])
async def test_pad_paddings_that_wrap_are_refused(stream, pads):
    x = np.arange(4, dtype=np.float32)
    with pytest.raises(AclParamError):
        aioge.op("Pad", [up(stream, x), HostInput(np.array([pads]))], [TensorSpec((4,), "float32")])
    await still_usable(stream)


async def test_winograd_conv_matches_reference(stream):
    # 3x3 stride-1 NCHW float32 with C >= 32, Cout >= 16 and >= 128 tiles takes the Winograd path,
    # whose scratch sizes were not multiples of the aligned_alloc alignment (ASan aborted here)
    rng = np.random.default_rng(1)
    x = rng.standard_normal((1, 33, 23, 25)).astype(np.float32)
    w = rng.standard_normal((17, 33, 3, 3)).astype(np.float32)
    attrs = {"strides": [1, 1, 1, 1], "pads": [1, 1, 1, 1], "dilations": [1, 1, 1, 1], "data_format": "NCHW"}
    (y,) = aioge.op(
        "Conv2D",
        [up(stream, x), up(stream, w), None, None],
        [TensorSpec((1, 17, 23, 25), "float32")],
        attrs,
        formats=[0, 0, 2, 2, 0],
    )
    xp = np.pad(x, ((0, 0), (0, 0), (1, 1), (1, 1)))
    win = np.lib.stride_tricks.sliding_window_view(xp, (3, 3), axis=(2, 3))  # n c h w kh kw
    ref = np.einsum("nchwij,ocij->nohw", win, w, optimize=True)
    np.testing.assert_allclose(await y.numpy(), ref, rtol=1e-3, atol=1e-3)


async def test_tile_multiples_whose_product_wraps_are_refused(stream):
    # 4 * (2^62 + 2) wraps to 8: it matched an output of 8 and ran as a tile by 2
    x = np.arange(4, dtype=np.float32)
    with pytest.raises(AclParamError, match="overflow"):
        aioge.op("TileD", [up(stream, x)], [TensorSpec((8,), "float32")], {"multiples": [2**62 + 2]})
    with pytest.raises(AclParamError, match="overflow"):
        aioge.op("Tile", [up(stream, x), HostInput(np.array([2**62 + 2]))], [TensorSpec((8,), "float32")])
    await still_usable(stream)


async def test_split_sizes_whose_sum_wraps_are_refused(stream):
    # (2^63 - 1) * 2 + 5 wraps to 3, the dim's size
    x = np.ones((2, 3), np.float32)
    outs = [TensorSpec((2, 1), "float32")] * 3
    with pytest.raises(AclParamError, match="overflow"):
        aioge.op(
            "SplitVD", [up(stream, x)], outs, {"num_split": 3, "size_splits": [I64_MAX, I64_MAX, 5], "split_dim": 1}
        )
    await still_usable(stream)
