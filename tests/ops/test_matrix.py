"""MatMul / BatchMatMul / GEMM against numpy (float64 reference)."""

from __future__ import annotations

import os
import subprocess
import sys

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import aioge
from aioge import TensorSpec, ops
from tests.ops.opsutil import BF16, F16, F32, F64, check, few, rand, up

pytestmark = pytest.mark.anyio

MM_DTYPES = [F32, F16, BF16, F64]


def _tol(dt, k):
    # accumulation in float32 (float64 for float64), one rounding at the end
    if dt == F64:
        return {"rtol": 1e-12, "atol": 1e-12 * k}
    if dt == F32:
        return {"rtol": 1e-5, "atol": 1e-5 * k}
    return {"ulps": 1, "atol": 1e-3 * k}


@few(40)
@given(
    m=st.integers(1, 9),
    n=st.integers(1, 9),
    k=st.integers(1, 9),
    ta=st.booleans(),
    tb=st.booleans(),
    dt=st.sampled_from(MM_DTYPES),
    seed=st.integers(0, 2**16),
)
async def test_matmul_2d(stream, m, n, k, ta, tb, dt, seed):
    rng = np.random.default_rng(seed)
    a = rand(rng, (k, m) if ta else (m, k), dt, -1, 1)
    b = rand(rng, (n, k) if tb else (k, n), dt, -1, 1)
    got = await ops.matmul(up(stream, a), up(stream, b), transpose_a=ta, transpose_b=tb).numpy()
    a64, b64 = a.astype(np.float64), b.astype(np.float64)
    ref = (a64.T if ta else a64) @ (b64.T if tb else b64)
    check(got, ref, dt, **_tol(dt, k))


@few(40)
@given(
    batch=st.tuples(st.lists(st.integers(1, 3), max_size=3), st.lists(st.integers(1, 3), max_size=3)),
    m=st.integers(1, 6),
    n=st.integers(1, 6),
    k=st.integers(1, 6),
    ta=st.booleans(),
    tb=st.booleans(),
    dt=st.sampled_from([F32, F16, F64]),
    seed=st.integers(0, 2**16),
)
async def test_batch_matmul_broadcast(stream, batch, m, n, k, ta, tb, dt, seed):
    ba, bb = batch
    # make the batch dims broadcastable: where both have a dim, one of them is 1 or they agree
    bb = list(bb)
    for i in range(1, min(len(ba), len(bb)) + 1):
        if ba[-i] != bb[-i] and ba[-i] != 1:
            bb[-i] = 1
    rng = np.random.default_rng(seed)
    a = rand(rng, (*ba, k, m) if ta else (*ba, m, k), dt, -1, 1)
    b = rand(rng, (*bb, n, k) if tb else (*bb, k, n), dt, -1, 1)
    if a.ndim == 2 and b.ndim == 2:
        a = a[None]
    got = await ops.matmul(up(stream, a), up(stream, b), transpose_a=ta, transpose_b=tb).numpy()
    a64, b64 = a.astype(np.float64), b.astype(np.float64)
    ref = np.matmul(np.swapaxes(a64, -1, -2) if ta else a64, np.swapaxes(b64, -1, -2) if tb else b64)
    check(got, ref, dt, **_tol(dt, k))


async def test_matmul_vectors(stream):
    rng = np.random.default_rng(0)
    a, b, v = rng.random((3, 4), np.float32), rng.random((2, 4, 5), np.float32), rng.random(4, np.float32)
    check(await ops.matmul(up(stream, v), up(stream, v)).numpy(), v.astype(np.float64) @ v, rtol=1e-6)
    check(await ops.matmul(up(stream, a), up(stream, v)).numpy(), a.astype(np.float64) @ v, rtol=1e-6)
    check(await ops.matmul(up(stream, v), up(stream, b)).numpy(), v.astype(np.float64) @ b, rtol=1e-6)


async def test_many_small_batched_gemms(stream):
    # below OpenBLAS's threading threshold: batches are spread over the intra-op pool
    rng = np.random.default_rng(3)
    a, b = rng.random((256, 8, 16), np.float32), rng.random((256, 16, 8), np.float32)
    check(await ops.matmul(up(stream, a), up(stream, b)).numpy(), a.astype(np.float64) @ b, rtol=1e-5)


async def test_large_gemm_matches_numpy(stream):
    rng = np.random.default_rng(4)
    a, b = rng.random((300, 200), np.float32), rng.random((200, 250), np.float32)
    check(await ops.matmul(up(stream, a), up(stream, b)).numpy(), a.astype(np.float64) @ b, rtol=1e-5, atol=1e-4)


@few(30)
@given(
    m=st.integers(1, 7),
    n=st.integers(1, 7),
    k=st.integers(1, 7),
    ta=st.booleans(),
    tb=st.booleans(),
    cshape=st.sampled_from(["mn", "n", "1n", "m1", "1", "none"]),
    alpha=st.sampled_from([1.0, 0.5, -2.0]),
    beta=st.sampled_from([1.0, 0.0, 3.0]),
    dt=st.sampled_from([F32, F16, F64]),
    seed=st.integers(0, 2**16),
)
async def test_gemm(stream, m, n, k, ta, tb, cshape, alpha, beta, dt, seed):
    rng = np.random.default_rng(seed)
    a = rand(rng, (k, m) if ta else (m, k), dt, -1, 1)
    b = rand(rng, (n, k) if tb else (k, n), dt, -1, 1)
    shp = {"mn": (m, n), "n": (n,), "1n": (1, n), "m1": (m, 1), "1": (1,), "none": None}[cshape]
    c = None if shp is None else rand(rng, shp, dt, -1, 1)
    y = ops.gemm(
        up(stream, a),
        up(stream, b),
        None if c is None else up(stream, c),
        alpha=alpha,
        beta=beta,
        trans_a=ta,
        trans_b=tb,
    )
    a64, b64 = a.astype(np.float64), b.astype(np.float64)
    ref = alpha * ((a64.T if ta else a64) @ (b64.T if tb else b64))
    if c is not None:
        ref = ref + beta * c.astype(np.float64)
    check(await y.numpy(), ref, dt, **_tol(dt, 3 * k))


async def test_cann_matmul_v2_bias_and_attrs(stream):
    rng = np.random.default_rng(5)
    a, b, bias = rng.random((4, 3), np.float32), rng.random((5, 3), np.float32), rng.random(5, np.float32)
    (y,) = aioge.op(
        "MatMulV2",
        [up(stream, a), up(stream, b), up(stream, bias), None],
        [TensorSpec((4, 5), "float32")],
        {"transpose_x1": False, "transpose_x2": True, "offset_x": 0},
    )
    check(await y.numpy(), a.astype(np.float64) @ b.T + bias, rtol=1e-6)
    (y,) = aioge.op(
        "MatMul",
        [up(stream, a.T.copy()), up(stream, b.T.copy()), None],
        [TensorSpec((4, 5), "float32")],
        {"transpose_x1": True},
    )
    check(await y.numpy(), a.astype(np.float64) @ b.T, rtol=1e-6)


async def test_cann_batch_matmul_v2(stream):
    rng = np.random.default_rng(6)
    a, b, bias = (
        rng.random((2, 3, 4, 5), np.float32),
        rng.random((3, 6, 5), np.float32),
        rng.random(6, np.float32),
    )
    (y,) = aioge.op(
        "BatchMatMulV2",
        [up(stream, a), up(stream, b), up(stream, bias), None],
        [TensorSpec((2, 3, 4, 6), "float32")],
        {"adj_x1": False, "adj_x2": True},
    )
    check(await y.numpy(), a.astype(np.float64) @ np.swapaxes(b, -1, -2) + bias, rtol=1e-6)
    (y,) = aioge.op(
        "BatchMatMul",
        [up(stream, a), up(stream, np.swapaxes(b, -1, -2).copy())],
        [TensorSpec((2, 3, 4, 6), "float32")],
        {"adj_x1": False, "adj_x2": False},
    )
    check(await y.numpy(), a.astype(np.float64) @ np.swapaxes(b, -1, -2), rtol=1e-6)


async def test_cann_gemm_host_alpha_beta(stream):
    rng = np.random.default_rng(7)
    a, b, c = rng.random((3, 4), np.float32), rng.random((4, 2), np.float32), rng.random((3, 2), np.float32)
    alpha, beta = np.array([2.0], np.float32), np.array([0.5], np.float32)
    (y,) = aioge.op(
        "GEMM",
        [up(stream, a), up(stream, b), up(stream, c), aioge.HostInput(alpha), up(stream, beta)],
        [TensorSpec((3, 2), "float32")],
        {"transpose_a": False, "transpose_b": False},
    )
    check(await y.numpy(), 2 * (a.astype(np.float64) @ b) + 0.5 * c, rtol=1e-6)


async def test_two_streams_gemm_concurrently(dev):
    # two streams running GEMMs at once share the cores; results stay exact
    rng = np.random.default_rng(8)
    a = rng.random((256, 256), np.float32)
    async with dev.open_stream() as s1, dev.open_stream() as s2:
        x1, x2 = up(s1, a), up(s2, a)
        ys1 = [ops.matmul(x1, x1) for _ in range(4)]
        ys2 = [ops.matmul(x2, x2) for _ in range(4)]
        ref = a.astype(np.float64) @ a
        for y in ys1 + ys2:
            check(await y.numpy(), ref, rtol=1e-5, atol=1e-4)


_FALLBACK_GEMM = r"""
import asyncio, numpy as np, aioge
from aioge import Const, TensorSpec, _native

assert _native.blas_info().startswith("builtin C GEMM"), _native.blas_info()


def close(got, want, k, dt):
    tol = 1e-12 if dt == np.float64 else 1e-5
    np.testing.assert_allclose(got.astype(np.float64), want, rtol=tol, atol=tol * max(k, 1))


async def main():
    rng = np.random.default_rng(7)
    async with aioge.open_device(0) as dev, dev.open_stream() as s:
        assert _native.recent_error() == ""  # a BLAS that does not load is no error of aclInit
        assert "/nonexistent.so" in _native.blas_info(), _native.blas_info()
        # (m, n, k): tiny, odd, k = 0 (C = beta C), and big enough to split rows over the pool
        for (m, n, k), dt in [((1, 1, 1), np.float32), ((7, 5, 3), np.float64), ((3, 4, 0), np.float32),
                              ((130, 70, 257), np.float32), ((300, 200, 150), np.float32), ((65, 33, 17), np.float64)]:
            for ta in (False, True):
                for tb in (False, True):
                    a = rng.uniform(-1, 1, (k, m) if ta else (m, k)).astype(dt)
                    b = rng.uniform(-1, 1, (n, k) if tb else (k, n)).astype(dt)
                    bias = rng.uniform(-1, 1, n).astype(dt)
                    want = (a.T if ta else a).astype(np.float64) @ (b.T if tb else b).astype(np.float64)
                    (y,) = aioge.op("MatMulV2", [s.upload(a), s.upload(b), s.upload(bias), None],
                                    [TensorSpec((m, n), dt)], {"transpose_x1": ta, "transpose_x2": tb}, stream=s)
                    close(await y.numpy(), want + bias, k, dt)
                    c = rng.uniform(-1, 1, (m, n)).astype(dt)
                    (g,) = aioge.op("GEMM", [s.upload(a), s.upload(b), s.upload(c), Const(np.float32(0.5)),
                                             Const(np.float32(-2.0))],
                                    [TensorSpec((m, n), dt)], {"transpose_a": ta, "transpose_b": tb}, stream=s)
                    close(await g.numpy(), 0.5 * want - 2.0 * c, k, dt)
        # broadcast batches, adjoint flags, half precision through the float32 GEMM
        a = rng.uniform(-1, 1, (2, 1, 9, 6)).astype(np.float32)
        b = rng.uniform(-1, 1, (3, 5, 9)).astype(np.float32)
        (y,) = aioge.op("BatchMatMulV2", [s.upload(a), s.upload(b)], [TensorSpec((2, 3, 6, 5), np.float32)],
                        {"adj_x1": True, "adj_x2": True}, stream=s)
        close(await y.numpy(), np.swapaxes(a, -1, -2).astype(np.float64) @ np.swapaxes(b, -1, -2), 9, np.float32)
        h = rng.uniform(-1, 1, (4, 16, 8)).astype(np.float16)
        w = rng.uniform(-1, 1, (8, 12)).astype(np.float16)
        got = await aioge.ops.matmul(s.upload(h), s.upload(w)).numpy()
        np.testing.assert_allclose(got.astype(np.float64), (h.astype(np.float64) @ w), rtol=2e-3, atol=1e-2)
        # a convolution lowered onto the GEMM
        x = rng.uniform(-1, 1, (2, 8, 12, 12)).astype(np.float32)
        f = rng.uniform(-1, 1, (16, 8, 3, 3)).astype(np.float32)
        got = await aioge.ops.conv2d(s.upload(x), s.upload(f), pads=(1, 1, 1, 1)).numpy()
        xp = np.pad(x.astype(np.float64), [(0, 0), (0, 0), (1, 1), (1, 1)])
        cols = np.lib.stride_tricks.sliding_window_view(xp, (3, 3), axis=(2, 3))  # n c h w kh kw
        close(got, np.einsum("nchwij,ocij->nohw", cols, f.astype(np.float64)), 72, np.float32)
    print("ok")


asyncio.run(main())
"""


def test_fallback_gemm_without_openblas_matches_numpy():
    # OpenBLAS is picked at import: a fresh process that cannot load one uses the built-in C GEMM
    env = {**os.environ, "AIOGE_BLAS_LIBRARY": "/nonexistent.so", "AIOGE_BACKEND": "host"}
    out = subprocess.run([sys.executable, "-c", _FALLBACK_GEMM], env=env, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0 and out.stdout.strip() == "ok", out.stderr[-4000:]
