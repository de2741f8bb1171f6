"""A weight's host array as compile loads it (``_native.contiguous``): C-contiguous, equal to the
value, and a copy exactly when the value is not contiguous -- also for a broadcast scalar (a folded
fill), which is filled rather than copied element by element."""

from __future__ import annotations

import numpy as np
from hypothesis import given
from hypothesis import strategies as st

from aioge._native import contiguous

DTYPES = [np.float32, np.float16, np.float64, np.int8, np.int32, np.int64, np.uint8, np.bool_]


@given(
    st.sampled_from(DTYPES),
    st.lists(st.integers(min_value=0, max_value=5), max_size=4),
    st.integers(min_value=-3, max_value=3),
    st.sampled_from(["broadcast", "row", "strided", "plain"]),
)
def test_contiguous(dtype: type, shape: list[int], value: int, how: str) -> None:
    a: np.ndarray
    if how == "broadcast":
        a = np.broadcast_to(np.array(value).astype(dtype), tuple(shape))
    elif how == "row":
        a = np.broadcast_to(np.arange(3).astype(dtype), (*shape, 3))
    elif how == "strided":
        a = np.arange(int(np.prod(shape)) * 2).astype(dtype)[::2].reshape(shape)
    else:
        a = np.full(tuple(shape), value).astype(dtype)
    before = np.array(a, copy=True)
    r = contiguous(a)
    assert r.flags.c_contiguous
    assert r.dtype == a.dtype and r.shape == a.shape
    assert np.array_equal(r, a)
    if a.flags.c_contiguous:
        assert r is a
    else:
        assert not np.shares_memory(r, a)
        r[...] = 0  # writable, and the value's bytes are not its
        assert np.array_equal(a, before)
