"""Reductions and arg-reductions against numpy, typed and CANN-level."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import aioge
from aioge import HostInput, TensorSpec, ops
from tests.ops.opsutil import BF16, F16, F32, F64, INTS, check, few, rand, rounded, shapes, up

pytestmark = pytest.mark.anyio

RED = {
    "sum": (ops.reduce_sum, np.sum, [F32, F16, BF16, F64, *INTS]),
    "mean": (ops.reduce_mean, np.mean, [F32, F16, BF16, F64]),
    "max": (ops.reduce_max, np.max, [F32, F16, BF16, F64, *INTS]),
    "min": (ops.reduce_min, np.min, [F32, F16, BF16, F64, *INTS]),
    "prod": (ops.reduce_prod, np.prod, [F32, F16, F64, *INTS]),
}


@st.composite
def shape_and_axes(draw):
    shape = draw(shapes(0, 5, 1, 5))
    if draw(st.booleans()) or not shape:
        axes = None
    else:
        axes = tuple(
            draw(
                st.lists(
                    st.integers(-len(shape), len(shape) - 1),
                    min_size=1,
                    max_size=len(shape),
                    unique_by=lambda a: a % len(shape),
                )
            )
        )
    return shape, axes


@pytest.mark.parametrize(("name", "dt"), [(n, d) for n in sorted(RED) for d in RED[n][2]], ids=str)
@few(10)
@given(sa=shape_and_axes(), keep=st.booleans(), seed=st.integers(0, 2**16))
async def test_reduce(stream, name, dt, sa, keep, seed):
    shape, axes = sa
    fn, ref_fn, _ = RED[name]
    rng = np.random.default_rng(seed)
    lo, hi = (0.5, 1.5) if name == "prod" else (-3, 3)
    x = rand(rng, shape, dt, lo, hi)
    if name == "prod" and dt.kind in "iu":
        x = (x % 3).astype(dt)
    got = await fn(up(stream, x), axes=axes, keepdims=keep).numpy()
    x64 = x.astype(np.float64) if dt.kind not in "iu" else x.astype(np.int64)
    ref = np.asarray(ref_fn(x64, axis=axes, keepdims=keep))
    if dt.kind in "iu":
        check(got, ref.astype(dt))
    elif dt in (F16, BF16):
        n = max(1, x.size // max(got.size, 1))
        check(got, rounded(ref, dt), dt, ulps=1, atol=1e-3 * n if name in ("sum", "mean") else 0)
    else:
        check(got, ref, dt, rtol=1e-5 if dt == F32 else 1e-12, atol=1e-5 if dt == F32 else 1e-12)


async def test_reduce_big_full_sum_is_accurate(stream):
    x = np.random.default_rng(0).standard_normal(1 << 21).astype(np.float32)  # split over the pool (partials)
    got = await ops.reduce_sum(up(stream, x)).numpy()
    ref = x.astype(np.float64).sum()
    assert abs(float(got) - ref) <= 1e-6 * np.abs(x).sum()
    got = await ops.reduce_max(up(stream, x.reshape(2, -1)), axes=1).numpy()
    check(got, x.reshape(2, -1).max(1))


async def test_reduce_empty_axes_and_zero_size(stream):
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    check(await ops.reduce_sum(up(stream, x), axes=()).numpy(), x)
    z = np.zeros((3, 0), np.float32)
    check(await ops.reduce_sum(up(stream, z), axes=1).numpy(), np.zeros(3, np.float32))
    check(await ops.reduce_prod(up(stream, z), axes=1).numpy(), np.ones(3, np.float32))
    with pytest.raises(ValueError, match="no identity"):
        ops.reduce_max(up(stream, z), axes=1)
    check(await ops.reduce_max(up(stream, z), axes=0).numpy(), np.zeros(0, np.float32))


@few(40)
@given(
    shape=shapes(1, 4, 1, 6),
    data=st.integers(0, 2**16),
    dt=st.sampled_from([F32, F16, F64, *INTS]),
    keep=st.booleans(),
    use_axis=st.booleans(),
    is_max=st.booleans(),
)
async def test_argmax_argmin(stream, shape, data, dt, keep, use_axis, is_max):
    rng = np.random.default_rng(data)
    x = rand(rng, shape, dt, -2, 2)
    if dt.kind == "f":
        x = np.round(x).astype(dt)  # ties: the first index wins
    axis = int(rng.integers(-len(shape), len(shape))) if use_axis else None
    fn, ref_fn = (ops.argmax, np.argmax) if is_max else (ops.argmin, np.argmin)
    got = await fn(up(stream, x), axis=axis, keepdims=keep).numpy()
    check(got, ref_fn(x, axis=axis, keepdims=keep).astype(np.int64))


async def test_argmax_nan_and_int32(stream):
    x = np.array([[1, np.nan, 3], [np.nan, 5, np.nan]], np.float32)
    check(await ops.argmax(up(stream, x), axis=1).numpy(), np.argmax(x, axis=1))
    check(await ops.argmin(up(stream, x), axis=1, dtype="int32").numpy(), np.argmin(x, axis=1).astype(np.int32))


async def test_cann_reduce_axes_input(stream):
    x = np.random.default_rng(1).standard_normal((2, 3, 4)).astype(np.float32)
    t = up(stream, x)
    (y,) = aioge.op(
        "ReduceSum",
        [t, HostInput(np.array([0, 2], np.int64))],
        [TensorSpec((1, 3, 1), "float32")],
        {"keep_dims": True},
    )
    check(await y.numpy(), x.sum(axis=(0, 2), keepdims=True), rtol=1e-6)
    (y,) = aioge.op("ReduceMean", [t, aioge.Const(np.array([-1], np.int32))], [TensorSpec((2, 3), "float32")])
    check(await y.numpy(), x.mean(axis=-1), rtol=1e-6)
    # empty axes: ReduceX (TF) is a no-op by default; noop_with_empty_axes=false reduces everything
    (y,) = aioge.op("ReduceMax", [t, HostInput(np.zeros(0, np.int64))], [TensorSpec((2, 3, 4), "float32")])
    check(await y.numpy(), x)
    (y,) = aioge.op("ReduceMaxD", [t], [TensorSpec((), "float32")], {"axes": aioge.Attr("ListInt", [])})
    check(await y.numpy(), np.max(x))
    (y,) = aioge.op("ReduceProdD", [t], [TensorSpec((2, 4), "float32")], {"axes": [1], "keep_dims": False})
    check(await y.numpy(), x.astype(np.float64).prod(axis=1), rtol=1e-5)
    b = x > 0
    (y,) = aioge.op("ReduceAllD", [up(stream, b)], [TensorSpec((2,), "bool")], {"axes": [1, 2]})
    check(await y.numpy(), b.all(axis=(1, 2)))
    (y,) = aioge.op("ReduceAny", [up(stream, b), HostInput(np.array([0]))], [TensorSpec((3, 4), "bool")])
    check(await y.numpy(), b.any(axis=0))


async def test_cann_argmax_v2(stream):
    x = np.random.default_rng(2).standard_normal((3, 5)).astype(np.float32)
    (y,) = aioge.op("ArgMaxV2", [up(stream, x), HostInput(np.array(1, np.int32))], [TensorSpec((3,), "int32")])
    check(await y.numpy(), x.argmax(1).astype(np.int32))
    (y,) = aioge.op(
        "ArgMin",
        [up(stream, x), HostInput(np.array([0], np.int64))],
        [TensorSpec((5,), "int64")],
        {"dtype": int(aioge.DataType.INT64)},
    )
    check(await y.numpy(), x.argmin(0))
