"""The compiled-op cache bounded in bytes: op_cache_info() reports the bytes the cached kernels hold,
the least recently used are evicted to fit the bound (AIOGE_OP_CACHE_BYTES, set_op_cache_max_bytes),
and evicted kernels still queued run correctly."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import aioge
from aioge import Const, TensorSpec
from aioge._native import lib
from tests.ops.opsutil import up

pytestmark = pytest.mark.anyio

ROOT = Path(__file__).resolve().parents[2]
MIB = 1 << 20
N = MIB // 4  # float32 elements of a 1 MiB const


def info() -> aioge.OpCacheInfo:
    i = aioge.op_cache_info()
    assert i is not None
    return i


@pytest.fixture
def fresh_cache():
    lib.aiogeHostResetOpCache()
    default = info().max_bytes
    yield default
    aioge.set_op_cache_max_bytes(default)
    lib.aiogeHostResetOpCache()


def add_const(x: aioge.Tensor, v: float) -> aioge.Tensor:
    """One kernel holding a 1 MiB copy of its const operand (the const is part of its key)."""
    (y,) = aioge.op("Add", [x, Const(np.full(N, v, np.float32))], [TensorSpec((N,), "float32")])
    return y


async def test_bytes_follow_the_cached_kernels(stream, fresh_cache):
    assert info().nbytes == 0 and info().currsize == 0
    x = up(stream, np.ones(N, np.float32))
    await add_const(x, 1.0)
    one = info().nbytes
    assert MIB <= one < MIB + 64 * 1024  # the const copy, the key, the descs
    await add_const(x, 1.0)  # a hit: nothing more
    assert info().nbytes == one
    await add_const(x, 2.0)
    assert info().nbytes == 2 * one and info().currsize == 2
    lib.aiogeHostResetOpCache()
    assert info().nbytes == 0


async def test_the_least_recently_used_are_evicted_to_fit(stream, fresh_cache):
    x = up(stream, np.ones(N, np.float32))
    await add_const(x, 0.0)
    per_kernel = info().nbytes
    aioge.set_op_cache_max_bytes(3 * per_kernel + per_kernel // 2)  # room for three
    assert info().max_bytes == 3 * per_kernel + per_kernel // 2
    ev0 = info().evictions
    ys = [add_const(x, float(v)) for v in range(1, 6)]  # queued: evicted kernels must still run
    for v, y in enumerate(ys, start=1):
        np.testing.assert_array_equal(await y.numpy(), np.full(N, 1.0 + v, np.float32))
    i = info()
    assert i.currsize == 3 and i.nbytes == 3 * per_kernel <= i.max_bytes
    assert i.evictions - ev0 == 3  # 0.0, 1.0 and 2.0 went
    # the three most recent hit, an evicted one compiles again
    h, m = i.hits, i.misses
    for v in (3.0, 4.0, 5.0):
        await add_const(x, v)
    await add_const(x, 1.0)
    assert (info().hits - h, info().misses - m) == (3, 1)
    # lowering the bound evicts at once
    aioge.set_op_cache_max_bytes(per_kernel)
    assert info().currsize == 1 and info().nbytes == per_kernel


async def test_a_kernel_larger_than_the_bound_runs_but_is_not_kept(stream, fresh_cache):
    aioge.set_op_cache_max_bytes(MIB // 2)
    x = up(stream, np.ones(N, np.float32))
    np.testing.assert_array_equal(await add_const(x, 2.0).numpy(), np.full(N, 3.0, np.float32))
    assert info().currsize == 0 and info().nbytes == 0
    small = up(stream, np.ones(4, np.float32))
    (y,) = aioge.op("Add", [small, small], [TensorSpec((4,), "float32")])
    np.testing.assert_array_equal(await y.numpy(), np.full(4, 2.0, np.float32))
    assert info().currsize == 1 and 0 < info().nbytes <= MIB // 2


def test_bad_bounds_are_refused(fresh_cache):
    for bad in (0, -1, 1.5, "1G"):
        with pytest.raises(ValueError, match="positive integer"):
            aioge.set_op_cache_max_bytes(bad)  # type: ignore[arg-type]
    assert lib.aiogeHostSetOpCacheBytes(0) != 0
    assert info().max_bytes == fresh_cache


def test_set_without_host_hooks_is_a_backend_error(monkeypatch):
    monkeypatch.setattr(aioge._native, "has_host_hooks", False)
    with pytest.raises(aioge.BackendError):
        aioge.set_op_cache_max_bytes(MIB)


@pytest.mark.parametrize(
    ("env", "want"),
    [
        ({"AIOGE_HOST_DEVICE_MEMORY": "1G"}, (1 << 30) // 8),  # default: an eighth of the device memory
        ({"AIOGE_HOST_DEVICE_MEMORY": "1G", "AIOGE_OP_CACHE_BYTES": "64M"}, 64 * MIB),
    ],
)
def test_the_bound_comes_from_the_environment(env, want):
    clean = {k: v for k, v in os.environ.items() if k not in ("AIOGE_OP_CACHE_BYTES", "AIOGE_HOST_DEVICE_MEMORY")}
    code = "import aioge; print(aioge.op_cache_info().max_bytes)"
    out = subprocess.run([sys.executable, "-c", code], env={**clean, **env}, cwd=ROOT, capture_output=True,
                         text=True)  # fmt: skip
    assert out.returncode == 0, out.stderr
    assert int(out.stdout.split()[-1]) == want


async def test_a_dynamic_model_over_many_shapes_stays_within_the_bound(dev, fresh_cache):
    """Every new shape of a dynamic-shape model compiles new kernels: the cache keeps to its byte bound,
    and shapes whose kernels were evicted still run right."""
    from aioge.graph import Graph

    w = np.linspace(-1, 1, 64 * 64, dtype=np.float32).reshape(64, 64)
    g = Graph("soak")
    x = g.input("x", ("S", 64), "float32")
    g.output(g.add_node("Relu", [g.add_node("MatMul", [x, g.constant("w", w)])], name="y"))
    async with await dev.compile(g) as model:
        await model.execute(np.ones((1, 64), np.float32))
        per_shape = info().nbytes
        assert per_shape > 0
        bound = 4 * per_shape
        aioge.set_op_cache_max_bytes(bound)
        ev0 = info().evictions
        for s in [*range(1, 25), 3, 1]:
            xs = np.linspace(-1, 1, s * 64, dtype=np.float32).reshape(s, 64)
            got = (await model.execute(xs))["y"]
            np.testing.assert_allclose(got, np.maximum(xs @ w, 0), rtol=1e-5, atol=1e-5)
            assert info().nbytes <= bound
        assert info().evictions > ev0
