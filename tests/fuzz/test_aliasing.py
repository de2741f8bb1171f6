"""An output that is also an input, for every registered op type.

For each op of tests/ops' table and each (input, output) pair of the same
dtype and size, the launch runs with the output written over the input, both
through ``aioge.op`` (aioge/runtime/aliasing.py refuses first, on any backend) and
straight through the runtime (cffi_build/hostrt/alias.c).  Either both refuse
with InvalidParamError and the op is not in-place capable, or both run and
every output equals the unaliased launch's.  Partial overlaps, which the
Tensor API cannot express, go through the raw ACL ABI.
"""

from __future__ import annotations

import numpy as np
import pytest

import aioge
from aioge import TensorSpec
from aioge.errors import InvalidParamError
from aioge.runtime import aliasing as _aliasing
from aioge.runtime.launch import launch
from aioge.runtime.stream import Tensor
from tests.fuzz.test_fuzz_ops import _materialise
from tests.ops.errors.cases import CASES
from tests.support.rawacl import raw_runtime

pytestmark = pytest.mark.anyio


@pytest.fixture
def anyio_backend():
    return "asyncio"


def _dtype(dt):
    return aioge.bfloat16 if dt == "bfloat16" else np.dtype(dt)


def _pairs(case):
    for i, sp in enumerate(case.ins):
        if sp is None or sp[0] != "t":
            continue
        for j, (shape, dt) in enumerate(case.outs):
            if _dtype(sp[2]) == _dtype(dt) and int(np.prod(sp[1])) == int(np.prod(shape)) and np.prod(shape) > 0:
                yield i, j


PAIRS = [(c, i, j) for c in CASES for i, j in _pairs(c)]


def test_tables_cover_registered_ops():
    ops = set(aioge._native.op_types())
    assert _aliasing.INPLACE <= ops and _aliasing.INPLACE_DATA <= ops
    # the acknowledged failures are refused
    for op in ("MatMul", "MatMulV2", "BatchMatMulV2", "TransposeD", "Transpose", "StridedSliceD", "Conv2D"):
        assert not _aliasing.may_alias(op, 0)


def _fmt(case):
    f = case.formats
    return f if f is not None and len(f) == len(case.ins) + len(case.outs) else None


async def _run(stream, case, alias, via_op):
    rng = np.random.default_rng(7)
    ins = [_materialise(stream, sp, rng) for sp in case.ins]
    outs = [Tensor._empty(stream, tuple(sh), _dtype(dt)) for sh, dt in case.outs]
    if alias is not None:
        i, j = alias
        outs[j] = ins[i].reshape(tuple(case.outs[j][0]))
    if via_op:
        aioge.op(case.op, ins, outs, case.attrs, stream=stream, formats=_fmt(case))
    else:
        launch(stream, case.op, ins, outs, case.attrs, _fmt(case))
    return [await y.numpy() for y in outs]


@pytest.mark.parametrize(("case", "i", "j"), PAIRS, ids=[f"{c.op}-in{i}-out{j}" for c, i, j in PAIRS])
async def test_output_over_input(stream, case, i, j):
    ref = await _run(stream, case, None, via_op=True)
    for via_op in (True, False):
        if _aliasing.may_alias(case.op, i):
            got = await _run(stream, case, (i, j), via_op)
            for a, b in zip(got, ref):
                np.testing.assert_array_equal(a, b)
        else:
            with pytest.raises(InvalidParamError, match="cannot run in place"):
                await _run(stream, case, (i, j), via_op)
    await stream.synchronize()  # nothing was enqueued by the refusals


async def test_same_output_twice_is_refused(stream):
    x = stream.upload(np.ones(4, np.float32))
    y = Tensor._empty(stream, (4,), np.dtype(np.float32))
    for via_op in (True, False):
        with pytest.raises(InvalidParamError, match="overlap"):
            if via_op:
                aioge.op("SplitD", [x], [y, y], {"split_dim": 0, "num_split": 2}, stream=stream)
            else:
                launch(stream, "Relu", [x], [y, y.reshape(4)])
    await stream.synchronize()


async def test_elementwise_in_place_with_broadcast(stream):
    a = np.arange(6, dtype=np.float32).reshape(2, 3)
    b = np.array([10, 20, 30], np.float32)
    x, y = stream.upload(a), stream.upload(b)
    aioge.op("Add", [x, y], [x])
    np.testing.assert_array_equal(await x.numpy(), a + b)
    aioge.op("Mul", [y, x], [x])  # the aliased input need not be the first
    np.testing.assert_array_equal(await x.numpy(), (a + b) * b)


@pytest.mark.parametrize(("op", "shift"), [("Relu", 4), ("Relu", -4), ("MatMul", 0), ("Add", 8)])
def test_partial_overlap_is_refused_by_the_runtime(op, shift):
    # raw pointers into one allocation: output [base + 16 + shift, +n) against input [base + 16, +n)
    with raw_runtime() as r:
        base = r.malloc(256)
        n, shape = 64, (4, 4)
        d = r.desc("float32", shape)
        x = (d, r.buf(aioge._native.ffi.cast("char *", base) + 16, n))
        y = (d, r.buf(aioge._native.ffi.cast("char *", base) + 16 + shift, n))
        ins = [x, x] if op != "Relu" else [x]
        rc = r.op(op, ins, [y])
        msg = aioge._native.recent_error()
        assert rc == 100000, (rc, msg)
        assert "overlap" in msg or "in place" in msg, msg
        assert r.sync() == 0


SQUARE = {
    "MatMul": ([(3, 3), (3, 3)], {}, lambda a, b: a @ b),
    "BatchMatMulV2": ([(2, 3, 3), (2, 3, 3)], {}, lambda a, b: a @ b),
    "TransposeD": ([(3, 3)], {"perm": [1, 0]}, lambda a: a.T),
    "StridedSliceD": ([(6,)], {"begin": [5], "end": [-7], "strides": [-1]}, lambda a: a[::-1]),
    "Conv2D": (
        [(1, 1, 3, 3), (1, 1, 1, 1)],
        {"strides": [1, 1, 1, 1], "pads": [0, 0, 0, 0], "dilations": [1, 1, 1, 1], "data_format": "NCHW"},
        lambda x, w: x * w[0, 0, 0, 0],
    ),
}


@pytest.mark.parametrize("op", sorted(SQUARE))
async def test_issue_ops_refuse_aliasing_and_match_numpy_unaliased(stream, op):
    shapes, attrs, ref = SQUARE[op]
    rng = np.random.default_rng(0)
    arrays = [rng.standard_normal(s).astype(np.float32) for s in shapes]
    fmts = [0, 0, 0] if op == "Conv2D" else None
    (y,) = aioge.op(op, [stream.upload(a).reshape(a.shape) for a in arrays], [TensorSpec(shapes[0], "float32")],
                    attrs, stream=stream, formats=fmts)  # fmt: skip
    np.testing.assert_allclose(await y.numpy(), ref(*arrays), rtol=1e-5, atol=1e-6)
    for via_op in (True, False):
        ins = [stream.upload(a).reshape(a.shape) for a in arrays]
        with pytest.raises(InvalidParamError, match="cannot run in place"):
            if via_op:
                aioge.op(op, ins, [ins[0]], attrs, stream=stream, formats=fmts)
            else:
                launch(stream, op, ins, [ins[0]], attrs, fmts)
    await stream.synchronize()
