"""Bad descriptors of the reductions (the *D forms with an axes attr, the forms with host-placed axes) and arg/top ops:
each refused at launch with its typed error
(the harness: ``harness.check_refusals``)."""

from __future__ import annotations

import numpy as np
import pytest

from tests.ops.errors.harness import CA, CI, CO, CT, I32, B, Case, F, H, T, check_refusals, reduce_d, reduce_in

pytestmark = pytest.mark.anyio

CASES = [
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
]


@pytest.mark.parametrize("case", CASES, ids=[c.op for c in CASES])
async def test_bad_descriptors(shared_stream, case):
    await check_refusals(shared_stream, case)
