"""Bad descriptors, per op: wrong input count, dtype, rank, output shape,
missing or mistyped attrs, bad formats.  Each is refused at launch with the
typed error for its ACL code, nothing is enqueued, and the stream keeps
working.  Also the typed API's Python-side checks (ValueError/TypeError
before any launch)."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pytest

import aioge
from aioge import Attr, Const, HostInput, TensorSpec, ops
from aioge.errors import (
    FormatMismatchError,
    OpAttrMismatchError,
    OpInputMismatchError,
    OpNotFoundError,
    OpOutputMismatchError,
    UnsupportedDataTypeError,
)
from tests.ops.opsutil import up
from tests.support.harness import live_handles

pytestmark = pytest.mark.anyio

F, I32, U16, B = "float32", "int32", "uint16", "bool"
NCHW, NHWC, ND, NC1HWC0 = 0, 1, 2, 3


@dataclass
class Case:
    op: str
    ins: list[Any]  # ("t", shape, dtype) device tensor, ("h", array) host input, ("c", array) const, None
    outs: list[Any]  # (shape, dtype)
    attrs: dict[str, Any] = field(default_factory=dict)
    formats: list[int] | None = None
    bad: list[tuple[str, Any, type]] = field(default_factory=list)  # (kind, arg, error)


def T(shape, dt=F):
    return ("t", tuple(shape), dt)


def H(v, dt=np.int64):
    return ("h", np.asarray(v, dt))


def C(v, dt=np.int64):
    return ("c", np.asarray(v, dt))


CI, CO, CA, CT = OpInputMismatchError, OpOutputMismatchError, OpAttrMismatchError, UnsupportedDataTypeError


def unary(op, bad_dt=I32, attrs=None, extra=()):
    """An elementwise unary op on (2, 3): count, input dtype, output shape and dtype."""
    bad = [
        ("count", 2, CI),
        ("dtype", (0, T((2, 3), bad_dt)), CT),
        ("out", ((3, 2), F), CO),
        ("outdtype", "float64", CT),
    ]
    return Case(op, [T((2, 3))], [((2, 3), F)], attrs or {}, bad=bad + list(extra))


def binary(op, dt=F, out_dt=None, bad_dt=I32):
    """A broadcasting binary op: count, mixed dtypes, shapes that do not broadcast, output shape and dtype."""
    out_dt = out_dt or dt
    return Case(
        op,
        [T((2, 3), dt), T((3,), dt)],
        [((2, 3), out_dt)],
        bad=[
            ("count", 1, CI),
            ("count", 3, CI),
            ("dtype", (1, T((3,), bad_dt)), CT),
            ("in", (1, T((4,), dt)), CI),
            ("out", ((3, 3), out_dt), CO),
            ("outdtype", "float16" if out_dt != "float16" else F, CT),
        ],
    )


def reduce_d(op, dt=F, bad_dt=I32):
    """A *D reduction (axes attr, required)."""
    return Case(
        op,
        [T((2, 3), dt)],
        [((2,), dt)],
        {"axes": [1]},
        bad=[
            ("noattr", "axes", CA),
            ("attr", {"axes": [3]}, CA),
            ("attr", {"keep_dims": 1}, CA),
            ("out", ((3,), dt), CO),
            ("dtype", (0, T((2, 3), bad_dt)), CT),
            ("count", 2, CI),
        ],
    )


def reduce_in(op, dt=F, bad_dt=I32):
    """A reduction with the axes as a host-placed input."""
    return Case(
        op,
        [T((2, 3), dt), H([0])],
        [((3,), dt)],
        bad=[
            ("in", (1, H([2])), CI),
            ("in", (1, H([[0]])), CI),
            ("out", ((2,), dt), CO),
            ("dtype", (0, T((2, 3), bad_dt)), CT),
            ("outdtype", I32 if dt != I32 else F, CT),
            ("count", 3, CI),
        ],
    )


CASES = [
    # elementwise
    Case(
        "Add",
        [T((2, 3)), T((3,))],
        [((2, 3), F)],
        bad=[
            ("count", 1, CI),
            ("dtype", (1, T((3,), I32)), CT),
            ("in", (1, T((4,))), CI),
            ("out", ((2, 4), F), CO),
            ("outdtype", I32, CT),
        ],
    ),
    Case(
        "Div",
        [T((2, 3)), T((2, 3))],
        [((2, 3), F)],
        bad=[("dtype", (0, T((2, 3), U16)), CT), ("count", 3, CI), ("out", ((3, 2), F), CO)],
    ),
    Case(
        "Pow",
        [T((3,)), T((3,))],
        [((3,), F)],
        bad=[("dtype", (0, T((3,), B)), CT), ("count", 1, CI), ("out", ((4,), F), CO)],
    ),
    Case("Equal", [T((3,)), T((3,))], [((3,), B)], bad=[("outdtype", F, CT), ("out", ((4,), B), CO), ("count", 3, CI)]),
    Case(
        "Greater",
        [T((3,)), T((3,))],
        [((3,), B)],
        bad=[("dtype", (1, T((3,), I32)), CT), ("count", 1, CI), ("out", ((2,), B), CO)],
    ),
    Case(
        "Select",
        [T((2,), B), T((2, 3)), T((2, 3))],
        [((2, 3), F)],
        bad=[("dtype", (0, T((2,), F)), CT), ("in", (2, T((3, 3))), CI), ("count", 2, CI), ("out", ((3, 3), F), CO)],
    ),
    Case(
        "ClipByValue",
        [T((4,)), T(()), T(())],
        [((4,), F)],
        bad=[("dtype", (1, T((), I32)), CT), ("count", 2, CI), ("out", ((5,), F), CO)],
    ),
    Case(
        "Exp",
        [T((4,))],
        [((4,), F)],
        {"base": -1.0, "scale": 1.0, "shift": 0.0},
        bad=[
            ("dtype", (0, T((4,), I32)), CT),
            ("attr", {"base": 0.0}, CA),
            ("attr", {"scale": "x"}, CA),
            ("out", ((5,), F), CO),
            ("count", 2, CI),
        ],
    ),
    Case(
        "Log", [T((4,))], [((4,), F)], bad=[("attr", {"base": 1.0}, CA), ("outdtype", "float16", CT), ("count", 2, CI)]
    ),
    Case(
        "Sqrt",
        [T((4,))],
        [((4,), F)],
        bad=[("dtype", (0, T((4,), "int64")), CT), ("count", 2, CI), ("out", ((5,), F), CO)],
    ),
    Case(
        "LeakyRelu",
        [T((4,))],
        [((4,), F)],
        {"negative_slope": 0.1},
        bad=[
            ("attr", {"negative_slope": 1}, CA),
            ("count", 2, CI),
            ("out", ((5,), F), CO),
            ("dtype", (0, T((4,), I32)), CT),
        ],
    ),
    Case(
        "Round",
        [T((4,))],
        [((4,), F)],
        bad=[
            ("attr", {"decimals": 1.5}, CA),
            ("attr", {"decimals": 99}, CA),
            ("count", 0, CI),
            ("out", ((3,), F), CO),
            ("dtype", (0, T((4,), I32)), CT),
        ],
    ),
    Case(
        "GeluV2",
        [T((4,))],
        [((4,), F)],
        bad=[
            ("attr", {"approximate": "erf"}, CA),
            ("count", 2, CI),
            ("out", ((3,), F), CO),
            ("dtype", (0, T((4,), I32)), CT),
        ],
    ),
    Case(
        "Cast",
        [T((4,))],
        [((4,), I32)],
        {"dst_type": 3},
        bad=[
            ("noattr", "dst_type", CA),
            ("attr", {"dst_type": 0}, CA),
            ("dtype", (0, T((4,), "complex64")), CT),
            ("count", 2, CI),
            ("out", ((5,), I32), CO),
        ],
    ),
    # matrix
    Case(
        "MatMul",
        [T((2, 3)), T((3, 4)), None],
        [((2, 4), F)],
        {"transpose_x1": False},
        bad=[
            ("in", (1, T((4, 4))), CI),
            ("in", (0, T((2, 2, 3))), CI),
            ("out", ((4, 2), F), CO),
            ("dtype", (1, T((3, 4), I32)), CT),
            ("attr", {"transpose_x1": 1}, CA),
            ("count", 5, CI),
        ],
    ),
    Case(
        "MatMulV2",
        [T((2, 3)), T((3, 4)), T((4,)), None],
        [((2, 4), F)],
        bad=[
            ("in", (2, T((5,))), CI),
            ("attr", {"offset_x": 3}, CA),
            ("count", 1, CI),
            ("out", ((2, 5), F), CO),
            ("dtype", (1, T((3, 4), "float16")), CT),
        ],
    ),
    Case(
        "BatchMatMul",
        [T((2, 2, 3)), T((1, 3, 4))],
        [((2, 2, 4), F)],
        bad=[
            ("in", (1, T((3, 3, 4))), CI),
            ("count", 3, CI),
            ("out", ((2, 2, 5), F), CO),
            ("dtype", (0, T((2, 2, 3), I32)), CT),
        ],
    ),
    Case(
        "BatchMatMulV2",
        [T((2, 2, 3)), T((3, 4)), None, None],
        [((2, 2, 4), F)],
        {"adj_x2": False},
        bad=[
            ("in", (0, T((3,))), CI),
            ("out", ((2, 2, 5), F), CO),
            ("count", 5, CI),
            ("dtype", (1, T((3, 4), "float64")), CT),
        ],
    ),
    Case(
        "GEMM",
        [T((2, 3)), T((3, 4)), T((2, 4)), C([1.0], np.float32), C([1.0], np.float32)],
        [((2, 4), F)],
        bad=[
            ("in", (2, T((3, 4))), CI),
            ("in", (3, C([1.0, 2.0], np.float32)), CI),
            ("count", 4, CI),
            ("in", (4, C([1], np.int32)), CT),
            ("out", ((2, 5), F), CO),
        ],
    ),
    # reductions
    Case(
        "ReduceSumD",
        [T((2, 3))],
        [((2,), F)],
        {"axes": [1]},
        bad=[
            ("noattr", "axes", CA),
            ("attr", {"axes": [2]}, CA),
            ("attr", {"axes": [1, 1]}, CA),
            ("attr", {"axes": [1.0]}, CA),
            ("out", ((2, 1), F), CO),
            ("dtype", (0, T((2, 3), B)), CT),
            ("count", 2, CI),
        ],
    ),
    Case(
        "ReduceSum",
        [T((2, 3)), H([1])],
        [((2,), F)],
        bad=[
            ("in", (1, T((1,), "int64")), CI),
            ("in", (1, H([1.0], np.float32)), CT),
            ("in", (1, H([5])), CI),
            ("count", 3, CI),
            ("out", ((3,), F), CO),
        ],
    ),
    Case(
        "ReduceMeanD",
        [T((2, 3))],
        [((3,), F)],
        {"axes": [0]},
        bad=[("dtype", (0, T((2, 3), I32)), CT), ("noattr", "axes", CA), ("count", 2, CI), ("out", ((2,), F), CO)],
    ),
    Case(
        "ReduceMaxD",
        [T((2, 3))],
        [((2,), F)],
        {"axes": [1]},
        bad=[
            ("in", (0, T((2, 0))), CI),
            ("noattr", "axes", CA),
            ("count", 2, CI),
            ("out", ((3,), F), CO),
            ("dtype", (0, T((2, 3), B)), CT),
        ],
    ),
    Case(
        "ArgMaxV2",
        [T((2, 3)), H(1, np.int32)],
        [((2,), I32)],
        bad=[
            ("outdtype", "int64", CT),
            ("attr", {"dtype": 0}, CA),
            ("in", (1, H(2, np.int32)), CA),
            ("out", ((3,), I32), CO),
            ("count", 1, CI),
        ],
    ),
    Case(
        "ArgMinD",
        [T((2, 3))],
        [((3,), I32)],
        {"dimension": 0},
        bad=[
            ("noattr", "dimension", CA),
            ("count", 2, CI),
            ("out", ((2,), I32), CO),
            ("dtype", (0, T((2, 3), "complex64")), CT),
        ],
    ),
    # nn
    Case(
        "SoftmaxV2",
        [T((2, 3, 4))],
        [((2, 3, 4), F)],
        {"axes": [-1]},
        bad=[
            ("attr", {"axes": [0, 2]}, CA),
            ("attr", {"axes": [3]}, CA),
            ("dtype", (0, T((2, 3, 4), I32)), CT),
            ("out", ((2, 3), F), CO),
            ("count", 2, CI),
        ],
    ),
    Case(
        "LogSoftmaxV2",
        [T((2, 3))],
        [((2, 3), F)],
        bad=[("count", 2, CI), ("out", ((2, 2), F), CO), ("dtype", (0, T((2, 3), I32)), CT)],
    ),
    Case(
        "LayerNorm",
        [T((2, 8)), T((8,)), T((8,))],
        [((2, 8), F), ((2, 1), F), ((2, 1), F)],
        {"begin_norm_axis": 1, "begin_params_axis": 1},
        bad=[
            ("in", (1, T((7,))), CI),
            ("out1", ((3, 1), F), CO),
            ("attr", {"begin_norm_axis": 5}, CA),
            ("attr", {"epsilon": 1}, CA),
            ("count", 4, CI),
            ("dtype", (0, T((2, 8), I32)), CT),
        ],
    ),
    Case(
        "RmsNorm",
        [T((2, 8)), T((8,))],
        [((2, 8), F), ((2, 1), F)],
        bad=[
            ("in", (1, T((4,))), CI),
            ("count", 3, CI),
            ("out", ((2, 7), F), CO),
            ("dtype", (0, T((2, 8), "int64")), CT),
        ],
    ),
    Case(
        "BatchNorm",
        [T((1, 2, 3, 3)), T((2,)), T((2,)), T((2,)), T((2,))],
        [((1, 2, 3, 3), F)] + [((2,), F)] * 4,
        {"is_training": False, "data_format": "NCHW"},
        [NCHW, ND, ND, ND, ND, NCHW, ND, ND, ND, ND],
        bad=[
            ("in", (1, T((3,))), CI),
            ("in", (0, T((1, 2, 3))), CI),
            ("fmt", (0, NHWC), FormatMismatchError),
            ("fmt", (0, NC1HWC0), FormatMismatchError),
            ("count", 2, CI),
            ("out", ((1, 2, 3, 4), F), CO),
            ("dtype", (0, T((1, 2, 3, 3), I32)), CT),
        ],
    ),
    Case(
        "Conv2D",
        [T((1, 4, 5, 5)), T((6, 2, 3, 3)), None, None],
        [((1, 6, 3, 3), F)],
        {"strides": [1, 1, 1, 1], "pads": [0, 0, 0, 0], "groups": 2, "data_format": "NCHW"},
        [NCHW, NCHW, ND, ND, NCHW],
        bad=[
            ("noattr", "strides", CA),
            ("noattr", "pads", CA),
            ("attr", {"strides": [1, 1]}, CA),
            ("attr", {"groups": 3}, CI),
            ("attr", {"offset_x": 1}, CA),
            ("in", (0, T((4, 5, 5))), CI),
            ("in", (1, T((6, 2, 9, 9))), CI),
            ("out", ((1, 6, 5, 5), F), CO),
            ("dtype", (1, T((6, 2, 3, 3), "float16")), CT),
            ("fmt", (0, NHWC), FormatMismatchError),
            ("fmt", (1, NC1HWC0), FormatMismatchError),
            ("in", (2, T((5,))), CI),
            ("attr", {"data_format": "NCDHW"}, CA),
            ("attr", {"strides": [1, 1, 0, 1]}, CA),
            ("attr", {"strides": [1, 1, 1, 2**40]}, CA),
            ("attr", {"pads": [2**62, 0, 0, 0]}, CA),
            ("count", 1, CI),
        ],
    ),
    Case(
        "Conv2DTranspose",
        [H([1, 2, 8, 8], np.int32), T((1, 3, 4, 4)), T((3, 2, 3, 3)), None, None],
        [((1, 2, 8, 8), F)],
        {"strides": [1, 1, 2, 2], "pads": [1, 0, 1, 0], "data_format": "NCHW"},
        [ND, NCHW, NCHW, ND, ND, NCHW],
        bad=[
            ("in", (0, H([1, 2, 9, 9], np.int32)), CI),
            ("in", (0, T((4,), I32)), CI),
            ("in", (2, T((4, 2, 3, 3))), CI),
            ("noattr", "strides", CA),
            ("noattr", "pads", CA),
            ("count", 2, CI),
            ("out", ((1, 2, 7, 7), F), CO),
            ("dtype", (1, T((1, 3, 4, 4), "float16")), CT),
        ],
    ),
    Case(
        "MaxPoolV3",
        [T((1, 2, 4, 4))],
        [((1, 2, 2, 2), F)],
        {"ksize": [1, 1, 2, 2], "strides": [1, 1, 2, 2]},
        [NCHW, NCHW],
        bad=[
            ("noattr", "ksize", CA),
            ("attr", {"padding_mode": "FULL"}, CA),
            ("attr", {"ksize": [1, 1, 9, 9]}, CI),
            ("attr", {"ksize": [1, 1, 1, 2**62], "padding_mode": "SAME"}, CA),  # used to overrun a table
            ("attr", {"pads": [2**62, 2**62, 0, 0]}, CA),
            ("out", ((1, 2, 3, 3), F), CO),
            ("dtype", (0, T((1, 2, 4, 4), B)), CT),
            ("in", (0, T((2, 4, 4))), CI),
            ("noattr", "strides", CA),
            ("count", 2, CI),
        ],
    ),
    Case(
        "AvgPoolV2",
        [T((1, 2, 4, 4))],
        [((1, 2, 2, 2), F)],
        {"ksize": [1, 1, 2, 2], "strides": [1, 1, 2, 2]},
        [NCHW, NCHW],
        bad=[
            ("dtype", (0, T((1, 2, 4, 4), I32)), CT),
            ("attr", {"divisor_override": -1}, CA),
            ("noattr", "ksize", CA),
            ("count", 2, CI),
            ("out", ((1, 2, 3, 3), F), CO),
        ],
    ),
    Case(
        "MaxPool",
        [T((1, 4, 4, 2))],
        [((1, 2, 2, 2), F)],
        {"ksize": [1, 2, 2, 1], "strides": [1, 2, 2, 1], "padding": "VALID"},
        [NHWC, NHWC],
        bad=[
            ("noattr", "padding", CA),
            ("attr", {"padding": "CALCULATED"}, CA),
            ("noattr", "ksize", CA),
            ("count", 2, CI),
            ("out", ((1, 3, 3, 2), F), CO),
            ("dtype", (0, T((1, 4, 4, 2), B)), CT),
        ],
    ),
    Case(
        "LRN",
        [T((1, 3, 2, 2))],
        [((1, 3, 2, 2), F)],
        {"depth_radius": 1},
        bad=[
            ("attr", {"norm_region": "WITHIN_CHANNEL"}, CA),
            ("in", (0, T((3, 2, 2))), CI),
            ("count", 2, CI),
            ("out", ((1, 3, 2, 1), F), CO),
            ("dtype", (0, T((1, 3, 2, 2), I32)), CT),
        ],
    ),
    # shape / data movement
    Case(
        "Reshape",
        [T((2, 3)), H([3, 2])],
        [((3, 2), F)],
        bad=[
            ("in", (1, H([4, 2])), CI),
            ("in", (1, H([-1, -1])), CI),
            ("in", (1, T((2,), "int64")), CI),
            ("in", (1, H([3.0, 2.0], np.float32)), CT),
            ("out", ((6,), F), CO),
            ("count", 1, CI),
        ],
    ),
    Case(
        "Squeeze",
        [T((2, 1))],
        [((2,), F)],
        {"axis": [1]},
        bad=[
            ("attr", {"axis": [0]}, CA),
            ("count", 2, CI),
            ("out", ((1, 2), F), CO),
            ("dtype", (0, T((2, 1), "complex128")), CT),
        ],
    ),
    Case(
        "Unsqueeze",
        [T((2,))],
        [((1, 2), F)],
        {"axes": [0]},
        bad=[
            ("attr", {"axes": [5]}, CA),
            ("out", ((2, 1), F), CO),
            ("count", 2, CI),
            ("dtype", (0, T((2,), "complex128")), CT),
        ],
    ),
    Case(
        "ExpandDims",
        [T((2,)), H([0])],
        [((1, 2), F)],
        bad=[
            ("in", (1, H([0, 1])), CI),
            ("count", 1, CI),
            ("out", ((2, 1), F), CO),
            ("dtype", (0, T((2,), "complex128")), CT),
        ],
    ),
    Case(
        "Flatten",
        [T((2, 3, 4))],
        [((2, 12), F)],
        bad=[
            ("attr", {"axis": 4}, CA),
            ("count", 2, CI),
            ("out", ((24,), F), CO),
            ("dtype", (0, T((2, 3, 4), "complex128")), CT),
        ],
    ),
    Case("Identity", [T((2,))], [((2,), F)], bad=[("out", ((3,), F), CO), ("outdtype", I32, CT), ("count", 2, CI)]),
    Case(
        "TransposeD",
        [T((2, 3))],
        [((3, 2), F)],
        {"perm": [1, 0]},
        bad=[
            ("noattr", "perm", CA),
            ("attr", {"perm": [0, 0]}, CA),
            ("attr", {"perm": [0]}, CA),
            ("out", ((2, 3), F), CO),
            ("count", 2, CI),
            ("dtype", (0, T((2, 3), "complex128")), CT),
        ],
    ),
    Case(
        "Transpose",
        [T((2, 3)), H([1, 0])],
        [((3, 2), F)],
        bad=[
            ("in", (1, H([1, 2])), CI),
            ("in", (1, T((2,), I32)), CI),
            ("count", 1, CI),
            ("out", ((2, 3), F), CO),
            ("dtype", (0, T((2, 3), "complex128")), CT),
        ],
    ),
    Case(
        "ConcatD",
        [T((2, 3)), T((2, 4))],
        [((2, 7), F)],
        {"concat_dim": 1, "N": 2},
        bad=[
            ("noattr", "concat_dim", CA),
            ("attr", {"N": 3}, CA),
            ("in", (1, T((3, 4))), CI),
            ("dtype", (1, T((2, 4), I32)), CT),
            ("out", ((2, 8), F), CO),
            ("attr", {"concat_dim": 2}, CA),
            ("count", 3, CA),
        ],
    ),
    Case(
        "ConcatV2",
        [T((2, 3)), T((2, 3)), H(0, np.int32)],
        [((4, 3), F)],
        bad=[
            ("in", (2, T((), I32)), CI),
            ("count", 1, CI),
            ("out", ((4, 4), F), CO),
            ("dtype", (1, T((2, 3), I32)), CT),
        ],
    ),
    Case(
        "SplitD",
        [T((4, 2))],
        [((2, 2), F), ((2, 2), F)],
        {"split_dim": 0, "num_split": 2},
        bad=[
            ("noattr", "num_split", CA),
            ("attr", {"num_split": 3}, CO),
            ("out1", ((3, 2), F), CO),
            ("noattr", "split_dim", CA),
            ("count", 2, CI),
            ("dtype", (0, T((4, 2), "complex128")), CT),
        ],
    ),
    Case(
        "SplitV",
        [T((5,)), H([2, -1]), H(0)],
        [((2,), F), ((3,), F)],
        {"num_split": 2},
        bad=[
            ("in", (1, H([2, 2])), CI),
            ("in", (1, H([-1, -1])), CI),
            ("noattr", "num_split", CA),
            ("count", 2, CI),
            ("out", ((3,), F), CO),
            ("outdtype", I32, CT),
        ],
    ),
    Case(
        "SliceD",
        [T((4, 4))],
        [((2, 2), F)],
        {"offsets": [1, 1], "size": [2, 2]},
        bad=[
            ("attr", {"offsets": [3, 3]}, CA),
            ("attr", {"size": [2]}, CA),
            ("noattr", "size", CA),
            ("count", 2, CI),
            ("out", ((2, 3), F), CO),
            ("dtype", (0, T((4, 4), "complex128")), CT),
        ],
    ),
    Case(
        "StridedSlice",
        [T((4,)), H([0]), H([4]), H([2])],
        [((2,), F)],
        bad=[
            ("in", (3, H([0])), CI),
            ("in", (1, H([0, 0])), CI),
            ("attr", {"shrink_axis_mask": 1}, CO),
            ("attr", {"ellipsis_mask": 3}, CA),
            ("count", 2, CI),
            ("out", ((3,), F), CO),
            ("dtype", (0, T((4,), "complex128")), CT),
        ],
    ),
    Case(
        "GatherV2",
        [T((4, 3)), T((2,), I32), H([0])],
        [((2, 3), F)],
        bad=[
            ("in", (1, T((2,), F)), CT),
            ("in", (2, H([2])), CA),
            ("out", ((3, 3), F), CO),
            ("attr", {"batch_dims": 2}, CA),
            ("count", 2, CI),
        ],
    ),
    Case(
        "BroadcastToD",
        [T((3,))],
        [((2, 3), F)],
        {"shape": [2, 3]},
        bad=[
            ("attr", {"shape": [2, 4]}, CA),
            ("noattr", "shape", CA),
            ("count", 2, CI),
            ("out", ((3, 3), F), CO),
            ("dtype", (0, T((3,), "complex128")), CT),
        ],
    ),
    Case(
        "BroadcastTo",
        [T((3,)), H([2, 3])],
        [((2, 3), F)],
        bad=[
            ("in", (1, H([3, 2])), CI),
            ("count", 1, CI),
            ("out", ((3, 3), F), CO),
            ("dtype", (0, T((3,), "complex128")), CT),
        ],
    ),
    Case(
        "TileD",
        [T((2, 3))],
        [((4, 3), F)],
        {"multiples": [2, 1]},
        bad=[
            ("attr", {"multiples": [2]}, CA),
            ("attr", {"multiples": [-1, 1]}, CA),
            ("count", 2, CI),
            ("out", ((2, 3), F), CO),
            ("dtype", (0, T((2, 3), "complex128")), CT),
        ],
    ),
    Case(
        "PadV3",
        [T((2, 3)), H([1, 1, 0, 0])],
        [((4, 3), F)],
        {"mode": "constant"},
        bad=[
            ("in", (1, H([1, 1])), CI),
            ("attr", {"mode": "wrap"}, CA),
            ("in", (1, H([-3, 0, 0, 0])), CI),
            ("in", (2, C([1, 2], np.float32)), CI),
            ("count", 1, CI),
            ("out", ((2, 3), F), CO),
            ("dtype", (0, T((2, 3), "complex128")), CT),
        ],
    ),
    Case(
        "Fill",
        [C([2, 2]), T((1,))],
        [((2, 2), F)],
        bad=[("in", (0, H([2, -2])), CI), ("in", (1, T((2,))), CI), ("outdtype", I32, CT), ("count", 1, CI)],
    ),
    Case(
        "Fills",
        [T((2,))],
        [((2,), F)],
        {"value": 1.0},
        bad=[
            ("noattr", "value", CA),
            ("attr", {"value": 1}, CA),
            ("count", 2, CI),
            ("out", ((3,), F), CO),
            ("outdtype", I32, CT),
        ],
    ),
    # ---- every other registered op type (test_every_op_type_has_a_case keeps this complete)
    # elementwise unary
    unary("Abs", bad_dt=B),
    unary("Neg", bad_dt=B),
    unary("Sign", bad_dt=B),
    unary("Square", bad_dt=B),
    unary("Relu", bad_dt=B),
    unary("Ceil"),
    unary("Floor"),
    unary("Cos"),
    unary("Sin"),
    unary("Erf"),
    unary("Gelu"),
    unary("FastGelu"),
    unary("Inv"),
    unary("Reciprocal", bad_dt="int64"),
    unary("Rsqrt", bad_dt="int8"),
    unary("Sigmoid", bad_dt="uint8"),
    unary("Tanh"),
    unary("Softplus"),
    unary("Swish", attrs={"scale": 1.5}, extra=[("attr", {"scale": 2}, CA)]),
    unary("Snapshot", bad_dt="complex128"),
    # elementwise binary
    binary("AddV2"),
    binary("Sub"),
    binary("Mul", I32, bad_dt="int64"),
    binary("RealDiv"),
    binary("Maximum"),
    binary("Minimum", "int64", bad_dt=I32),
    binary("SquaredDifference"),
    binary("Less", out_dt=B),
    binary("LessEqual", out_dt=B),
    binary("GreaterEqual", out_dt=B),
    binary("NotEqual", I32, out_dt=B, bad_dt=F),
    binary("LogicalAnd", B, bad_dt=F),
    binary("LogicalOr", B, bad_dt=I32),
    Case(
        "SelectV2",
        [T((2, 1), B), T((2, 3)), T((3,))],
        [((2, 3), F)],
        bad=[
            ("count", 2, CI),
            ("dtype", (0, T((2, 1), "int8")), CT),
            ("dtype", (2, T((3,), "float16")), CT),
            ("in", (0, T((3, 1), B)), CI),
            ("out", ((2, 1), F), CO),
            ("outdtype", "float16", CT),
        ],
    ),
    # reductions
    reduce_d("ReduceMinD", bad_dt=B),
    reduce_d("ReduceProdD", "float16", bad_dt=B),
    reduce_d("ReduceAllD", B, bad_dt=F),
    reduce_d("ReduceAnyD", B, bad_dt="uint8"),
    reduce_in("ReduceMean", bad_dt="int64"),
    reduce_in("ReduceMax", "int64", bad_dt=B),
    reduce_in("ReduceMin", I32, bad_dt=B),
    reduce_in("ReduceProd", bad_dt=B),
    reduce_in("ReduceAll", B, bad_dt=F),
    reduce_in("ReduceAny", B, bad_dt="int8"),
    Case(
        "ArgMaxD",
        [T((2, 3))],
        [((2,), I32)],
        {"dimension": 1},
        bad=[
            ("noattr", "dimension", CA),
            ("attr", {"dimension": 2}, CA),
            ("attr", {"dtype": 3.0}, CA),
            ("out", ((3,), I32), CO),
            ("outdtype", F, CT),
            ("dtype", (0, T((2, 3), "complex64")), CT),
            ("in", (0, T(())), CI),
            ("count", 2, CI),
        ],
    ),
    Case(
        "ArgMin",
        [T((2, 3)), H(0, np.int32)],
        [((3,), "int64")],
        {"dtype": 9},
        bad=[
            ("in", (1, H([0, 1], np.int32)), CI),
            ("in", (1, T((), I32)), CI),
            ("in", (0, T((0, 3))), CI),
            ("attr", {"dtype": 3}, CT),
            ("out", ((2,), "int64"), CO),
            ("count", 1, CI),
        ],
    ),
    # nn
    Case(
        "LayerNormV3",
        [T((2, 8)), T((8,)), T((8,))],
        [((2, 8), F), ((2, 1), F), ((2, 1), F)],
        {"begin_norm_axis": 1, "begin_params_axis": 1},
        bad=[
            ("in", (2, T((7,))), CI),
            ("out", ((2, 7), F), CO),
            ("out1", ((2, 8), F), CO),
            ("attr", {"begin_params_axis": -3}, CA),
            ("attr", {"epsilon": "1e-5"}, CA),
            ("dtype", (0, T((2, 8), I32)), CT),
            ("dtype", (1, T((8,), "float16")), CT),
            ("count", 4, CI),
        ],
    ),
    Case(
        "AvgPool",
        [T((1, 4, 4, 2))],
        [((1, 2, 2, 2), F)],
        {"ksize": [1, 2, 2, 1], "strides": [1, 2, 2, 1], "padding": "VALID"},
        [NHWC, NHWC],
        bad=[
            ("noattr", "ksize", CA),
            ("noattr", "strides", CA),
            ("noattr", "padding", CA),
            ("attr", {"padding": "CALCULATED"}, CA),
            ("attr", {"ksize": [2, 2]}, CA),
            ("dtype", (0, T((1, 4, 4, 2), I32)), CT),
            ("in", (0, T((4, 4, 2))), CI),
            ("out", ((1, 3, 3, 2), F), CO),
            ("fmt", (0, NC1HWC0), FormatMismatchError),
            ("count", 2, CI),
        ],
    ),
    Case(
        "Conv2DTransposeD",
        [T((1, 3, 4, 4)), T((3, 2, 3, 3)), None, None],
        [((1, 2, 8, 8), F)],
        {"input_size": [1, 2, 8, 8], "strides": [1, 1, 2, 2], "pads": [1, 0, 1, 0], "data_format": "NCHW"},
        [NCHW, NCHW, ND, ND, NCHW],
        bad=[
            ("noattr", "input_size", CA),
            ("noattr", "strides", CA),
            ("noattr", "pads", CA),
            ("attr", {"input_size": [1, 2, 8]}, CA),
            ("attr", {"input_size": [1, 2, 9, 9]}, CI),
            ("in", (1, T((4, 2, 3, 3))), CI),
            ("in", (0, T((3, 4, 4))), CI),
            ("in", (2, T((5,))), CI),
            ("dtype", (1, T((3, 2, 3, 3), "float16")), CT),
            ("out", ((1, 2, 7, 7), F), CO),
            ("fmt", (1, NC1HWC0), FormatMismatchError),
            ("count", 1, CI),
        ],
    ),
    Case(
        "_FusedConv2D",
        [T((1, 4, 5, 5)), T((6, 2, 3, 3)), T((6,)), None],
        [((1, 6, 3, 3), F)],
        {"strides": [1, 1, 1, 1], "pads": [0, 0, 0, 0], "groups": 2, "data_format": "NCHW", "activation": "Relu"},
        [NCHW, NCHW, ND, ND, NCHW],
        bad=[
            ("noattr", "strides", CA),
            ("attr", {"activation": "Exp"}, CA),
            ("attr", {"alpha": 1}, CA),
            ("in", (2, T((4,))), CI),
            ("in", (1, T((6, 2, 3))), CI),
            ("dtype", (0, T((1, 4, 5, 5), I32)), CT),
            ("out", ((1, 6, 5, 5), F), CO),
            ("count", 5, CI),
        ],
    ),
    Case(
        "_FusedMatMul",
        [T((2, 3)), T((3, 4)), T((4,))],
        [((2, 4), F)],
        {"trans_a": 0, "trans_b": 0, "activation": "Relu"},
        bad=[
            ("in", (1, T((4, 4))), CI),
            ("in", (0, T((3,))), CI),
            ("in", (2, T((5,))), CI),
            ("dtype", (1, T((3, 4), "float64")), CT),
            ("dtype", (0, T((2, 3), I32)), CT),
            ("out", ((4, 2), F), CO),
            ("attr", {"activation": "Exp"}, CA),
            ("attr", {"scale": 2}, CA),
            ("attr", {"trans_a": True}, CA),
            ("count", 1, CI),
            ("count", 4, CI),
        ],
    ),
    Case(
        "_FusedElementwise",
        [T((2, 3)), T((3,))],
        [((2, 3), F)],
        {"ops": ["Add", "Relu"], "srcs": [0, 1, 2, -1], "params": [0.0, 0.0, 0.0, 0.0]},
        bad=[
            ("noattr", "ops", CA),
            ("noattr", "srcs", CA),
            ("noattr", "params", CA),
            ("attr", {"ops": ["Add", "NoSuchStep"]}, CA),
            ("attr", {"srcs": [0, 5, 2, -1]}, CA),
            ("attr", {"params": [0.0, 0.0]}, CA),
            ("dtype", (1, T((3,), I32)), CT),
            ("outdtype", I32, CT),
            ("in", (1, T((4,))), CI),
            ("out", ((3, 3), F), CI),  # the output shape is the iteration space: inputs must broadcast to it
            ("count", 0, CI),
        ],
    ),
    # shape / data movement
    unary("OnesLike", bad_dt="complex128"),
    unary("ZerosLike", bad_dt="complex128"),
    Case(
        "Concat",
        [H(1, np.int32), T((2, 3)), T((2, 4))],
        [((2, 7), F)],
        bad=[
            ("in", (0, T((), I32)), CI),
            ("in", (0, H(2, np.int32)), CA),
            ("in", (2, T((3, 4))), CI),
            ("dtype", (2, T((2, 4), I32)), CT),
            ("out", ((2, 8), F), CO),
            ("attr", {"N": 3}, CA),
            ("count", 1, CI),
        ],
    ),
    Case(
        "ConcatV2D",
        [T((2, 3)), T((2, 3))],
        [((4, 3), F)],
        {"concat_dim": 0},
        bad=[
            ("noattr", "concat_dim", CA),
            ("attr", {"N": 1}, CA),
            ("attr", {"concat_dim": -3}, CA),
            ("in", (1, T((2, 4))), CI),
            ("dtype", (1, T((2, 3), "float16")), CT),
            ("out", ((4, 4), F), CO),
            ("count", 0, CI),
        ],
    ),
    Case(
        "Pack",
        [T((2, 3)), T((2, 3))],
        [((2, 2, 3), F)],
        {"axis": 0},
        bad=[
            ("attr", {"N": 3}, CA),
            ("attr", {"axis": 3}, CA),
            ("in", (1, T((3, 2))), CI),
            ("dtype", (1, T((2, 3), I32)), CT),
            ("out", ((2, 3, 2), F), CO),
            ("count", 0, CI),
        ],
    ),
    Case(
        "Split",
        [H(0, np.int32), T((4, 2))],
        [((2, 2), F), ((2, 2), F)],
        {"num_split": 2},
        bad=[
            ("noattr", "num_split", CA),
            ("attr", {"num_split": 3}, CO),
            ("in", (0, H(2, np.int32)), CA),
            ("in", (0, T((), I32)), CI),
            ("in", (1, T((3, 2))), CI),
            ("out1", ((3, 2), F), CO),
            ("outdtype", I32, CT),
            ("count", 1, CI),
        ],
    ),
    Case(
        "SplitVD",
        [T((5,))],
        [((2,), F), ((3,), F)],
        {"size_splits": [2, -1], "split_dim": 0, "num_split": 2},
        bad=[
            ("noattr", "size_splits", CA),
            ("noattr", "split_dim", CA),
            ("noattr", "num_split", CA),
            ("attr", {"size_splits": [2, 2]}, CA),
            ("attr", {"size_splits": [2, -2]}, CA),
            ("attr", {"split_dim": 1}, CA),
            ("out1", ((2,), F), CO),
            ("outdtype", I32, CT),
            ("count", 2, CI),
        ],
    ),
    Case(
        "Slice",
        [T((4, 4)), H([1, 1]), H([2, 2])],
        [((2, 2), F)],
        bad=[
            ("in", (1, H([3, 3])), CI),
            ("in", (2, H([2])), CI),
            ("in", (1, T((2,), "int64")), CI),
            ("in", (2, H([2.0, 2.0], np.float32)), CT),
            ("dtype", (0, T((4, 4), "complex128")), CT),
            ("out", ((2, 3), F), CO),
            ("count", 2, CI),
        ],
    ),
    Case(
        "StridedSliceD",
        [T((4,))],
        [((2,), F)],
        {"begin": [0], "end": [4], "strides": [2]},
        bad=[
            ("noattr", "begin", CA),
            ("noattr", "end", CA),
            ("noattr", "strides", CA),
            ("attr", {"strides": [0]}, CA),
            ("attr", {"end": [4, 4]}, CA),
            ("attr", {"ellipsis_mask": 3}, CA),
            ("dtype", (0, T((4,), "complex128")), CT),
            ("out", ((3,), F), CO),
            ("count", 2, CI),
        ],
    ),
    Case(
        "Gather",
        [T((4, 3)), T((2,), I32)],
        [((2, 3), F)],
        bad=[
            ("in", (1, T((2,), F)), CT),
            ("in", (0, T(())), CI),
            ("dtype", (0, T((4, 3), "complex128")), CT),
            ("attr", {"batch_dims": 2}, CA),
            ("out", ((3, 3), F), CO),
            ("outdtype", I32, CT),
            ("count", 3, CI),
        ],
    ),
    Case(
        "Pad",
        [T((2, 3)), H([1, 1, 0, 0])],
        [((4, 3), F)],
        bad=[
            ("in", (1, H([1, 1])), CI),
            ("in", (1, H([-3, 0, 0, 0])), CI),
            ("in", (1, T((4,), "int64")), CI),
            ("in", (1, H([1.0, 1.0, 0.0, 0.0], np.float32)), CT),
            ("dtype", (0, T((2, 3), "complex128")), CT),
            ("out", ((2, 3), F), CO),
            ("outdtype", I32, CT),
            ("count", 3, CI),
        ],
    ),
    Case(
        "PadV2",
        [T((2, 3)), H([1, 1, 0, 0]), C(0.5, np.float32)],
        [((4, 3), F)],
        bad=[
            ("in", (2, C([1.0, 2.0], np.float32)), CI),
            ("in", (2, C(1, np.int32)), CI),
            ("in", (1, H([1, 1, 0])), CI),
            ("dtype", (0, T((2, 3), "complex128")), CT),
            ("out", ((4, 4), F), CO),
            ("count", 2, CI),
        ],
    ),
    Case(
        "Tile",
        [T((2, 3)), H([2, 1])],
        [((4, 3), F)],
        bad=[
            ("in", (1, H([2])), CI),
            ("in", (1, H([-1, 1])), CI),
            ("in", (1, T((2,), "int64")), CI),
            ("dtype", (0, T((2, 3), "complex128")), CT),
            ("out", ((2, 3), F), CO),
            ("outdtype", I32, CT),
            ("count", 1, CI),
        ],
    ),
]


# the op types the onnx lane added keep their cases in their own module
from tests.ops.error_cases_onnx import cases as _onnx_cases  # noqa: E402

CASES += _onnx_cases(Case, T, H, C)


def _materialise(stream, spec):
    if spec is None:
        return None
    kind = spec[0]
    if kind == "t":
        _, shape, dt = spec
        return up(stream, np.zeros(shape, np.dtype(dt)))
    if kind == "h":
        return HostInput(spec[1])
    return Const(spec[1])


def _launch(stream, case, ins, outs, attrs, formats):
    tensors = [_materialise(stream, s) for s in ins]
    specs = [TensorSpec(sh, dt) for sh, dt in outs]
    fm = formats
    if fm is not None and len(fm) != len(ins) + len(outs):
        fm = None
    return aioge.op(case.op, tensors, specs, attrs, stream=stream, formats=fm)


OUT_KINDS = {"out", "out1", "outdtype"}


def test_every_op_type_has_a_case():
    # the runtime's registry is the list to cover: a new op without a case fails here
    assert sorted({c.op for c in CASES}) == aioge._native.op_types()
    for c in CASES:
        kinds = {kind for kind, _, _ in c.bad}
        assert "count" in kinds, f"{c.op}: no wrong-count case"
        assert kinds & OUT_KINDS, f"{c.op}: no output case"
        assert any(err is CT for _, _, err in c.bad), f"{c.op}: no data-type case"


@pytest.fixture(scope="module")
def anyio_backend():
    return ("asyncio", {"debug": True})


@pytest.fixture(scope="module", autouse=True)
def no_leaked_handles():
    """Checked per module here: the shared device below caches descs, attrs,
    events and memory blocks from case to case until it closes."""
    before = live_handles()
    yield
    after = live_handles()
    assert after == before, f"leaked runtime handles: {after} != {before}"


@pytest.fixture(scope="module")
async def shared_stream():
    """One device and stream for the whole table (opening one per case would
    dominate its time); fails on errors the loop only logs, like ``dev``."""
    loop, errors = asyncio.get_running_loop(), []
    loop.set_exception_handler(lambda _loop, ctx: errors.append(ctx))
    async with aioge.open_device(0) as dev, dev.open_stream() as s:
        yield s
    loop.set_exception_handler(None)
    assert not errors, f"the event loop reported: {errors}"


@pytest.mark.parametrize("case", CASES, ids=[c.op for c in CASES])
async def test_bad_descriptors(shared_stream, case):
    stream = shared_stream
    # the good call works
    ys = _launch(stream, case, case.ins, case.outs, case.attrs, case.formats)
    await ys[0]
    for kind, arg, err in case.bad:
        ins, outs, attrs, formats = list(case.ins), list(case.outs), dict(case.attrs), case.formats
        if kind == "count":
            ins = ins[:arg] if arg < len(ins) else ins + [T((1,))] * (arg - len(ins))
            formats = None
        elif kind in ("dtype", "in"):
            i, spec = arg
            if i == len(ins):
                ins.append(spec)
            else:
                ins[i] = spec
        elif kind == "out":
            outs[0] = arg
        elif kind == "out1":
            outs[1] = arg
        elif kind == "outdtype":
            outs[0] = (outs[0][0], arg)
        elif kind == "attr":
            attrs.update(arg)
        elif kind == "noattr":
            attrs.pop(arg)
        elif kind == "fmt":
            i, f = arg
            formats = list(formats)
            formats[i] = f
        with pytest.raises(err) as ei:
            _launch(stream, case, ins, outs, attrs, formats)
        msg = ei.value.message  # the runtime's own text (aclGetRecentErrMsg) names the op
        assert case.op in msg, (kind, arg, msg)
        if err is UnsupportedDataTypeError:
            assert any(n in msg for n in ("float", "int", "bool", "complex", "uint")), msg
    # nothing was enqueued by the refused calls; the stream still works
    ys = _launch(stream, case, case.ins, case.outs, case.attrs, case.formats)
    await ys[0]
    await stream.synchronize()


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
