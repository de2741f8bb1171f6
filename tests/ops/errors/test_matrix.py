"""Bad descriptors of the matrix ops (MatMul, BatchMatMul, Gemm):
each refused at launch with its typed error
(the harness: ``harness.check_refusals``)."""

from __future__ import annotations

import numpy as np
import pytest

from tests.ops.errors.harness import CA, CI, CO, CT, I32, C, Case, F, T, check_refusals

pytestmark = pytest.mark.anyio

CASES = [
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
]


@pytest.mark.parametrize("case", CASES, ids=[c.op for c in CASES])
async def test_bad_descriptors(shared_stream, case):
    await check_refusals(shared_stream, case)
