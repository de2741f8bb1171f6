"""The compiled-op cache: same signature hits, different attrs/shapes/const
values miss, the LRU bound (aclopSetMaxOpQueueNum) is respected, and
kernels evicted while still queued run correctly."""

from __future__ import annotations

import numpy as np
import pytest

import aioge
from aioge import Const, TensorSpec, ops
from aioge._native import lib
from tests.ops.opsutil import check, up

pytestmark = pytest.mark.anyio

ACL_DEFAULT_MAX = 20000  # GE acl_op_inner.h


def counts():
    # the public view of the runtime's counters (aioge.op_cache_info) -- checked against them below
    info = aioge.op_cache_info()
    assert info is not None
    return info.hits, info.misses, info.currsize, info.evictions


@pytest.fixture
def fresh_cache():
    lib.aiogeHostResetOpCache()
    yield
    assert lib.aclopSetMaxOpQueueNum(ACL_DEFAULT_MAX) == 0
    lib.aiogeHostResetOpCache()


async def test_hits_and_misses(stream, fresh_cache):
    x = up(stream, np.ones((2, 3), np.float32))
    h0, m0, e0, _ = counts()
    assert e0 == 0
    ops.add(x, x)
    ops.add(x, x)
    await ops.add(x, x)
    h, m, e, _ = counts()
    assert (h - h0, m - m0, e) == (2, 1, 1)
    # different attrs miss, the same attrs hit
    ops.leaky_relu(x, 0.1)
    ops.leaky_relu(x, 0.2)
    await ops.leaky_relu(x, 0.1)
    h2, m2, e2, _ = counts()
    assert (h2 - h, m2 - m, e2) == (1, 2, 3)
    # a different shape or dtype misses
    await ops.add(up(stream, np.ones((3, 2), np.float32)), 1.0)
    await ops.add(up(stream, np.ones((2, 3), np.float16)), up(stream, np.ones((2, 3), np.float16)))
    h3, m3, _, _ = counts()
    assert m3 - m2 == 2
    # const values are part of the key
    for v in (1.0, 2.0, 1.0):
        (y,) = aioge.op("Add", [x, Const(np.float32(v))], [TensorSpec((2, 3), "float32")])
        await y
    h4, m4, _, _ = counts()
    assert (h4 - h3, m4 - m3) == (1, 2)


async def test_lru_bound(stream, fresh_cache):
    assert lib.aclopSetMaxOpQueueNum(4) == 0
    x = up(stream, np.ones(8, np.float32))
    _, _, _, ev0 = counts()
    for i in range(10):
        await ops.leaky_relu(x, 0.01 * i)
    _, _, e, ev = counts()
    assert e == 4
    assert ev - ev0 == 6
    # the most recent entries survive: re-running the last one hits
    h, m, _, _ = counts()
    await ops.leaky_relu(x, 0.09)
    h2, m2, _, _ = counts()
    assert (h2 - h, m2 - m) == (1, 0)
    # and the oldest were evicted
    await ops.leaky_relu(x, 0.0)
    _, m3, _, _ = counts()
    assert m3 - m2 == 1
    # shrinking the bound trims at once
    assert lib.aclopSetMaxOpQueueNum(1) == 0
    assert counts()[2] == 1
    assert lib.aclopSetMaxOpQueueNum(0) != 0  # 0 is refused
    aioge._native.recent_error()


async def test_evicted_kernels_still_run(stream, fresh_cache):
    assert lib.aclopSetMaxOpQueueNum(1) == 0
    a = np.arange(1000, dtype=np.float32)
    x = up(stream, a)
    ys = [ops.leaky_relu(ops.neg(x), 0.001 * (i + 1)) for i in range(20)]  # each launch evicts the previous kernel
    for i, y in enumerate(ys):
        check(await y.numpy(), np.where(-a > 0, -a, -a * np.float32(0.001 * (i + 1))), rtol=1e-6)


async def test_default_bound_is_acl_default(stream, fresh_cache):
    # the ACL default (20000) holds many distinct kernels without evicting
    x = up(stream, np.ones(4, np.float32))
    _, _, _, ev0 = counts()
    for i in range(300):
        ops.leaky_relu(x, float(i))
    await stream.synchronize()
    _, _, e, ev = counts()
    assert e == 300 and ev == ev0


async def test_op_cache_info_is_the_public_view(stream, fresh_cache):
    x = up(stream, np.ones(3, np.float32))
    await ops.relu(x)
    info = aioge.op_cache_info()
    assert isinstance(info, aioge.OpCacheInfo) and isinstance(info, tuple)
    c = aioge._native.counters()
    assert info == (c["op_cache_hits"], c["op_cache_misses"], ACL_DEFAULT_MAX, c["op_cache_entries"],
                    c["op_cache_evictions"], c["op_cache_bytes"], c["op_cache_max_bytes"])  # fmt: skip
    assert info._fields == ("hits", "misses", "maxsize", "currsize", "evictions", "nbytes", "max_bytes")
    # maxsize follows aclopSetMaxOpQueueNum; a refused launch counts as a miss and caches nothing
    assert lib.aclopSetMaxOpQueueNum(7) == 0
    with pytest.raises(aioge.OpInputMismatchError):
        aioge.op("Add", [x, up(stream, np.ones(4, np.float32))], [TensorSpec((3,), "float32")])
    after = aioge.op_cache_info()
    assert after is not None
    assert (after.maxsize, after.misses - info.misses, after.currsize) == (7, 1, info.currsize)


def test_op_cache_info_without_host_hooks_is_none(monkeypatch):
    # a real libascendcl.so has no statistics call: None, not an error (see also test_abi_mode)
    monkeypatch.setattr(aioge._native, "has_host_hooks", False)
    assert aioge.op_cache_info() is None
