"""Big const values enter the compiled-op cache key as a digest; the lookup then compares the
values themselves with the kernel's own copy.  Equal big consts hit; big consts that differ --
anywhere, also in a byte a weak digest could miss -- compile apart and compute with their own
values."""

from __future__ import annotations

import numpy as np
import pytest

import aioge
from aioge import Const, TensorSpec
from aioge._native import lib
from tests.ops.opsutil import up

pytestmark = pytest.mark.anyio


@pytest.fixture
def fresh_cache():
    lib.aiogeHostResetOpCache()
    yield
    lib.aiogeHostResetOpCache()


def counts() -> tuple[int, int]:
    info = aioge.op_cache_info()
    assert info is not None
    return info.hits, info.misses


async def add_const(stream, x, c: np.ndarray) -> np.ndarray:
    (y,) = aioge.op("Add", [x, Const(c)], [TensorSpec(x.shape, "float32")], stream=stream)
    return await y.numpy()


@pytest.mark.parametrize("n", [1024, 1025, 4096])  # 4 KiB is the last inline size; 1025 floats is past it
async def test_equal_big_consts_hit_and_different_ones_miss(stream, fresh_cache, n):
    rng = np.random.default_rng(n)
    a = rng.standard_normal(n).astype(np.float32)
    x = up(stream, np.ones(n, np.float32))
    h0, m0 = counts()
    np.testing.assert_array_equal(await add_const(stream, x, a), a + 1)
    np.testing.assert_array_equal(await add_const(stream, x, a.copy()), a + 1)  # equal values, another buffer
    h1, m1 = counts()
    assert (h1 - h0, m1 - m0) == (1, 1)
    for where in (0, n // 2, n - 1):  # one element differs: a new kernel computing with its own value
        b = a.copy()
        b[where] += 1
        np.testing.assert_array_equal(await add_const(stream, x, b), b + 1)
    h2, m2 = counts()
    assert (h2 - h1, m2 - m1) == (0, 3)
    np.testing.assert_array_equal(await add_const(stream, x, a), a + 1)  # the first is still cached
    assert counts()[0] == h2 + 1


async def test_a_weak_digest_collision_still_compiles_apart(stream, fresh_cache):
    """Values whose 8-byte words are permuted in a way a word-xor hash might fold together: the
    lookup's value comparison keeps them apart whatever the digest says."""
    n = 4096
    a = np.arange(n, dtype=np.float32)
    b = a.reshape(-1, 2)[:, ::-1].reshape(-1).copy()  # swap floats within each 8-byte word
    x = up(stream, np.zeros(n, np.float32))
    np.testing.assert_array_equal(await add_const(stream, x, a), a)
    np.testing.assert_array_equal(await add_const(stream, x, b), b)
    np.testing.assert_array_equal(await add_const(stream, x, a), a)
