"""The reference kernels' paths for shape arithmetic (one signed index, integer tensors read as
ints) give what the general paths give, with the same errors."""

from __future__ import annotations

import numpy as np
import pytest

from aioge.graph import GraphError, Node
from aioge.graph.reference import evaluate_node
from aioge.graph.reference_base import _ints


@pytest.mark.parametrize("k", [-3, -1, 0, 2])
@pytest.mark.parametrize("dtype", [np.int64, np.int32])
def test_gather_one_index_of_a_shape(k: int, dtype: type) -> None:
    x = np.array([5, 7, 9], np.int64)
    (y,) = evaluate_node(Node("Gather", ["x", "i"], ["y"]), [x, np.array(k, dtype)])
    want = np.take(x, np.array(k % 3, np.int64), axis=0)
    assert type(y) is type(want) and y == want


@pytest.mark.parametrize("axis", [0, 1, -1])
def test_gather_one_index_of_a_matrix(axis: int) -> None:
    x = np.arange(12, dtype=np.float32).reshape(3, 4)
    (y,) = evaluate_node(Node("Gather", ["x", "i"], ["y"], {"axis": axis}), [x, np.array(-1, np.int64)])
    want = np.take(x, x.shape[axis] - 1, axis=axis)
    assert y.shape == want.shape and y.dtype == want.dtype and np.array_equal(y, want)


@pytest.mark.parametrize("k", [-4, 3, 100])
def test_gather_one_index_out_of_range(k: int) -> None:
    with pytest.raises(GraphError, match=r"Gather index out of range \[-3, 3\)"):
        evaluate_node(Node("Gather", ["x", "i"], ["y"]), [np.array([5, 7, 9]), np.array(k, np.int64)])


def test_ints_of_integer_and_other_tensors() -> None:
    for a in (np.array([[1, -2], [3, 4]], np.int64), np.array([7], np.uint8), np.array(5, np.int32)):
        got = _ints(a)
        assert got == [int(v) for v in a.reshape(-1)] and all(type(v) is int for v in got)
    assert _ints(np.array([1.9, -2.5])) == [1, -2]
    assert _ints(np.array([True, False])) == [1, 0]
    assert _ints([3, 4]) == [3, 4]
    assert _ints(None) is None
