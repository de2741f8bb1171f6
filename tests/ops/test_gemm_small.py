"""The small-M float32 GEMM (kernels/gemm_small.c: 16 <= M <= 96, N and K >= 128, alpha 1) against
numpy in float64: ragged M (6-row tiles), N (16-column panels), K (256-row blocks), op(B) = B^T,
the Gemm accumulate path (beta = 1 over a prefilled C), batches (small GEMMs inside the pool's
batch split), and sizes either side of the selection bounds (the BLAS path) for the same results."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from aioge import ops
from tests.ops.opsutil import check, few, up

pytestmark = pytest.mark.anyio


@few(40)
@given(m=st.integers(14, 100), n=st.integers(120, 300), k=st.integers(120, 600), tb=st.booleans(),
       seed=st.integers(0, 2**16))  # fmt: skip
async def test_small_gemm_vs_numpy(stream, m, n, k, tb, seed):
    rng = np.random.default_rng(seed)
    a = rng.standard_normal((m, k)).astype(np.float32)
    b = rng.standard_normal((n, k) if tb else (k, n)).astype(np.float32)
    ref = a.astype(np.float64) @ (b.T if tb else b).astype(np.float64)
    y = ops.matmul(up(stream, a), up(stream, b), transpose_b=tb)
    check(await y.numpy(), ref, rtol=1e-4, atol=1e-3)


@few(20)
@given(m=st.integers(16, 96), n=st.integers(128, 260), k=st.integers(128, 530), tb=st.booleans(),
       beta=st.sampled_from([1.0, 0.5]), seed=st.integers(0, 2**16))  # fmt: skip
async def test_small_gemm_accumulates_into_c(stream, m, n, k, tb, beta, seed):
    rng = np.random.default_rng(seed)
    a = rng.standard_normal((m, k)).astype(np.float32)
    b = rng.standard_normal((n, k) if tb else (k, n)).astype(np.float32)
    c = rng.standard_normal((m, n)).astype(np.float32)
    ref = a.astype(np.float64) @ (b.T if tb else b).astype(np.float64) + beta * c
    y = ops.gemm(up(stream, a), up(stream, b), up(stream, c), beta=beta, trans_b=tb)
    check(await y.numpy(), ref, rtol=1e-4, atol=1e-3)


@pytest.mark.parametrize(("m", "k", "n"), [(32, 1024, 4096), (64, 768, 768), (96, 256, 1000), (17, 129, 129)])
async def test_small_gemm_mlp_and_transformer_shapes(stream, m, k, n):
    rng = np.random.default_rng(m + n)
    a = rng.standard_normal((m, k)).astype(np.float32)
    b = (rng.standard_normal((k, n)) / np.sqrt(k)).astype(np.float32)
    y = ops.matmul(up(stream, a), up(stream, b))
    check(await y.numpy(), a.astype(np.float64) @ b.astype(np.float64), rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize(("nb", "m", "k", "n"), [(3, 40, 200, 300), (8, 20, 128, 128)])
async def test_small_gemm_batched(stream, nb, m, k, n):
    # per-batch small-M GEMMs at a row stride; the small ones run inside the pool's batch split
    rng = np.random.default_rng(nb + m)
    a = rng.standard_normal((nb, m, k)).astype(np.float32)
    b = rng.standard_normal((nb, k, n)).astype(np.float32)
    y = ops.matmul(up(stream, a), up(stream, b))
    check(await y.numpy(), a.astype(np.float64) @ b.astype(np.float64), rtol=1e-4, atol=1e-3)
