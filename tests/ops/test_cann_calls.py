"""Every registered CANN op once through the generic ``aioge.op`` with its CANN
name and attr names (the ones the typed API does not reach directly)."""

from __future__ import annotations

import math

import numpy as np
import pytest

import aioge
from aioge import HostInput, TensorSpec
from tests.ops.opsutil import check, up

pytestmark = pytest.mark.anyio

X = np.linspace(-2.5, 2.5, 24).astype(np.float32).reshape(2, 3, 4)
P = np.linspace(0.1, 3, 24).astype(np.float32).reshape(2, 3, 4)
I = np.array([[3, -2, 0, 7], [1, 1, -5, 2]], np.int32)

UNARY = [
    ("Abs", X, np.abs),
    ("Neg", X, np.negative),
    ("Ceil", X, np.ceil),
    ("Floor", X, np.floor),
    ("Cos", X, np.cos),
    ("Sin", X, np.sin),
    ("Erf", X, np.vectorize(math.erf)),
    ("Reciprocal", P, np.reciprocal),
    ("Rsqrt", P, lambda v: 1 / np.sqrt(v)),
    ("Sigmoid", X, lambda v: 1 / (1 + np.exp(-v))),
    ("Tanh", X, np.tanh),
    ("Sign", X, np.sign),
    ("Square", X, np.square),
    ("Softplus", X, lambda v: np.log1p(np.exp(v))),
    ("Snapshot", X, lambda v: v),
    ("Abs", I, np.abs),
    ("Neg", I, np.negative),
    ("Sign", I, np.sign),
    ("Square", I, np.square),
]


@pytest.mark.parametrize(("op", "x", "ref"), UNARY, ids=[f"{u[0]}-{u[1].dtype}" for u in UNARY])
async def test_unary(stream, op, x, ref):
    (y,) = aioge.op(op, [up(stream, x)], [TensorSpec(x.shape, x.dtype)])
    want = ref(x.astype(np.float64)) if x.dtype.kind == "f" else ref(x)
    check(await y.numpy(), np.asarray(want).astype(x.dtype) if x.dtype.kind != "f" else want, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize(
    ("op", "ref"),
    [("Less", np.less), ("LessEqual", np.less_equal), ("NotEqual", np.not_equal), ("GreaterEqual", np.greater_equal)],
)
async def test_comparisons(stream, op, ref):
    b = np.round(X[:, :1, :])
    (y,) = aioge.op(op, [up(stream, np.round(X)), up(stream, b)], [TensorSpec(X.shape, "bool")])
    check(await y.numpy(), ref(np.round(X), b))


async def test_logical_and_select_v2(stream):
    a, b = X > 0, P > 1
    for op, ref in (("LogicalAnd", np.logical_and), ("LogicalOr", np.logical_or)):
        (y,) = aioge.op(op, [up(stream, a), up(stream, b)], [TensorSpec(X.shape, "bool")])
        check(await y.numpy(), ref(a, b))
    (y,) = aioge.op(
        "SelectV2", [up(stream, a[:, :1]), up(stream, X), up(stream, P[0])], [TensorSpec(X.shape, "float32")]
    )
    check(await y.numpy(), np.where(a[:, :1], X, P[0]))


async def test_reductions(stream):
    t = up(stream, X)
    cases = [
        ("ReduceMin", [t, HostInput(np.array([1]))], {}, X.min(axis=1)),
        ("ReduceMinD", [t], {"axes": [0, 2], "keep_dims": True}, X.min(axis=(0, 2), keepdims=True)),
        ("ReduceProd", [t, HostInput(np.array([-1]))], {}, X.astype(np.float64).prod(axis=-1)),
        ("ArgMaxD", [t], {"dimension": 2, "dtype": 9}, X.argmax(axis=2)),
    ]
    for op, ins, attrs, want in cases:
        (y,) = aioge.op(op, ins, [TensorSpec(want.shape, want.dtype if want.dtype != np.float64 else "float32")], attrs)
        check(await y.numpy(), want, rtol=1e-6)
    b = up(stream, X > 0)
    (y,) = aioge.op("ReduceAll", [b, HostInput(np.array([0, 1]))], [TensorSpec((4,), "bool")])
    check(await y.numpy(), (X > 0).all(axis=(0, 1)))
    (y,) = aioge.op("ReduceAnyD", [b], [TensorSpec((2, 1, 1), "bool")], {"axes": [1, 2], "keep_dims": True})
    check(await y.numpy(), (X > 0).any(axis=(1, 2), keepdims=True))


async def test_pad_v2_and_split_vd(stream):
    t = up(stream, I)
    (y,) = aioge.op("PadV2", [t, HostInput(np.array([[1, 0], [0, 2]])), aioge.Const(np.array(9, np.int32))],
                    [TensorSpec((3, 6), "int32")])  # fmt: skip
    check(await y.numpy(), np.pad(I, [(1, 0), (0, 2)], constant_values=9))
    parts = aioge.op("SplitVD", [t], [TensorSpec((2, 1), "int32"), TensorSpec((2, 3), "int32")],
                     {"size_splits": [1, -1], "split_dim": -1, "num_split": 2})  # fmt: skip
    check(await parts[0].numpy(), I[:, :1])
    check(await parts[1].numpy(), I[:, 1:])
