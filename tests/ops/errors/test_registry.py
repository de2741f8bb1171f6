"""Every op type the runtime registers has a bad-descriptor case; an unknown op type or a
mistyped attr value is refused; the typed API's Python-side checks raise ValueError /
TypeError before any launch."""

from __future__ import annotations

import numpy as np
import pytest

import aioge
from aioge import Attr, TensorSpec, ops
from aioge.errors import OpAttrMismatchError, OpNotFoundError
from tests.ops.errors.cases import CASES
from tests.ops.errors.harness import CT, OUT_KINDS, F
from tests.ops.opsutil import up

pytestmark = pytest.mark.anyio


def test_every_op_type_has_a_case():
    # the runtime's registry is the list to cover: a new op without a case fails here
    assert sorted({c.op for c in CASES}) == aioge._native.op_types()
    for c in CASES:
        kinds = {kind for kind, _, _ in c.bad}
        assert "count" in kinds, f"{c.op}: no wrong-count case"
        assert kinds & OUT_KINDS, f"{c.op}: no output case"
        assert any(err is CT for _, _, err in c.bad), f"{c.op}: no data-type case"


async def test_unknown_op_and_attr_value_types(stream):
    x = up(stream, np.zeros(3, np.float32))
    with pytest.raises(OpNotFoundError, match="NoSuchOp"):
        aioge.op("NoSuchOp", [x], [TensorSpec((3,), F)])
    with pytest.raises(OpAttrMismatchError, match="axes"):
        aioge.op("ReduceSumD", [x], [TensorSpec((), F)], {"axes": Attr("ListFloat", [0.0])})
    (y,) = aioge.op("Relu", [x], [TensorSpec((3,), F)])
    await y


async def test_typed_api_checks_before_launch(stream):
    before = aioge._native.counters()["op_cache_misses"]
    x = up(stream, np.zeros((2, 3), np.float32))
    i = up(stream, np.zeros((2, 3), np.int32))
    raising = [
        (ValueError, lambda: ops.add(x, up(stream, np.zeros((4,), np.float32)))),
        (TypeError, lambda: ops.add(x, i)),
        (TypeError, lambda: ops.sqrt(i)),
        (TypeError, lambda: ops.reduce_mean(i)),
        (ValueError, lambda: ops.reduce_sum(x, axes=2)),
        (ValueError, lambda: ops.reduce_sum(x, axes=(0, 0))),
        (ValueError, lambda: ops.matmul(x, x)),
        (TypeError, lambda: ops.matmul(i, i)),
        (ValueError, lambda: ops.gemm(x, x, trans_a=False)),
        (ValueError, lambda: ops.softmax(x, axis=3)),
        (ValueError, lambda: ops.layer_norm(x, up(stream, np.ones(4, np.float32)))),
        (ValueError, lambda: ops.conv2d(x, x)),
        (ValueError, lambda: ops.max_pool2d(x, 2)),
        (ValueError, lambda: ops.transpose(x, (0, 0))),
        (ValueError, lambda: ops.concat([x, up(stream, np.zeros((3, 3), np.float32))], axis=1)),
        (ValueError, lambda: ops.split(x, 4, axis=1)),
        (ValueError, lambda: ops.split(x, [1, 1], axis=1)),
        (ValueError, lambda: ops.slice(x, [0], [1], steps=[0])),
        (ValueError, lambda: ops.broadcast_to(x, (3, 3))),
        (ValueError, lambda: ops.pad(x, [1, 1])),
        (ValueError, lambda: ops.pad(x, [(3, 0), (0, 0)], mode="reflect")),
        (ValueError, lambda: ops.squeeze(x, 0)),
        (ValueError, lambda: ops.reshape(x, (4, 2))),
        (TypeError, lambda: ops.where(x, x, x)),
        (TypeError, lambda: ops.gather(x, [0.5])),
        (ValueError, lambda: ops.gelu(x, approximate="fast")),
        (ValueError, lambda: ops.lrn(up(stream, np.zeros((1, 2, 2, 2), np.float32)), 2)),
        (TypeError, lambda: ops.cast(x, "complex64")),
        (ValueError, lambda: ops.argmax(up(stream, np.zeros((0,), np.float32)))),
    ]
    for exc, fn in raising:
        with pytest.raises(exc):
            fn()
    assert aioge._native.counters()["op_cache_misses"] == before  # nothing reached the runtime
    await ops.add(x, x)
