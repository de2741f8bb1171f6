"""One-row GEMMs (a fully connected layer on one sample) take blas.c's GEMV path: both layouts of B,
a transposed A, ragged column counts, against numpy in float64."""

from __future__ import annotations

import numpy as np
import pytest

from aioge import ops
from tests.ops.opsutil import check, up

pytestmark = pytest.mark.anyio


@pytest.mark.parametrize(("k", "n"), [(9216, 64), (300, 1000), (17, 5003), (4096, 1537), (1, 70000)])
@pytest.mark.parametrize("tb", [False, True])
@pytest.mark.parametrize("ta", [False, True])
async def test_one_row_matmul(stream, k, n, ta, tb):
    rng = np.random.default_rng(k + n)
    a = rng.standard_normal((k, 1) if ta else (1, k)).astype(np.float32)
    b = rng.standard_normal((n, k) if tb else (k, n)).astype(np.float32)
    got = await ops.matmul(up(stream, a), up(stream, b), transpose_a=ta, transpose_b=tb).numpy()
    ref = (a.T if ta else a).astype(np.float64) @ (b.T if tb else b).astype(np.float64)
    check(got, ref, rtol=1e-4, atol=1e-4 * np.sqrt(k))
