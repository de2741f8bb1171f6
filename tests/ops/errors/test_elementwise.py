"""Bad descriptors of the elementwise unary and binary ops (broadcasting, comparisons, casts):
each refused at launch with its typed error
(the harness: ``harness.check_refusals``)."""

from __future__ import annotations

import pytest

from tests.ops.errors.harness import CA, CI, CO, CT, I32, U16, B, Case, F, T, binary, check_refusals, unary

pytestmark = pytest.mark.anyio

CASES = [
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
]


@pytest.mark.parametrize("case", CASES, ids=[c.op for c in CASES])
async def test_bad_descriptors(shared_stream, case):
    await check_refusals(shared_stream, case)
