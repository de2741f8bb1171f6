"""Uploading many arrays as one step (a compiled model's weights): Stream._upload_all and the
pool's take_many."""

from __future__ import annotations

import numpy as np
import pytest

from aioge.errors import AclError, InvalidParamError

pytestmark = pytest.mark.anyio


async def test_upload_all_is_upload_of_each(dev):
    s = dev.default_stream
    arrays = [np.arange(6, dtype=np.float32).reshape(2, 3), np.zeros((0, 4), np.int64),
              np.array([True, False]), np.full((3,), 7, np.float16)]  # fmt: skip
    ts = s._upload_all(arrays)
    assert len(ts) == len(arrays)
    for a, t in zip(arrays, ts, strict=True):
        u = s._upload(a, None, None, now=True)
        assert (t.shape, t.dtype, t.nbytes) == (u.shape, u.dtype, u.nbytes) == (a.shape, a.dtype, a.nbytes)
        np.testing.assert_array_equal(await t.numpy(), a)
    assert s._upload_all([]) == []
    with pytest.raises(TypeError):  # as _upload: a dtype the device has no type for
        s._upload_all([np.zeros(2, np.float32), np.array(["x"])])


async def test_take_many_counts_hits_and_misses(dev):
    pool = dev.context.pool
    pool.release()
    pool.limit = 1 << 20
    try:
        first = pool.take(1000)  # a 1024-byte block, pooled below
        pool.give(*first)
        hits, misses = pool.hits, pool.misses
        got = pool.take_many([100, 1000, 600])
        assert [cap for _, _, cap in got] == [512, 1024, 1024]
        assert got[1][0] == first[0]  # the cached block of its class
        assert (pool.hits - hits, pool.misses - misses, pool.cached) == (1, 2, 0)
        for b in got:
            pool.give(*b)
        assert pool.cached == 512 + 2 * 1024
        with pytest.raises(InvalidParamError):
            pool.take_many([8, 1 << 64])
        assert pool.cached == 512 + 2 * 1024  # nothing taken
    finally:
        pool.release()


async def test_take_many_failing_allocation_keeps_nothing(dev):
    from aioge._native import counters

    pool = dev.context.pool
    pool.release()
    before = counters()["device_bytes"]
    with pytest.raises(AclError):  # the runtime refuses the second block: the first goes back too
        pool.take_many([512, 1 << 62])
    assert counters()["device_bytes"] == before and pool.cached == 0
    got = pool.take_many([512, 2048])  # and the pool works on
    assert [cap for _, _, cap in got] == [512, 2048]
    for b in got:
        pool.give(*b)
    pool.release()
