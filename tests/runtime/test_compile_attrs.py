"""The ACL attr kind of a Python value (``descs._attr_kind``): built-in values and their numpy
counterparts get the same kind and the same normalised value, and a bool is never an Int."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from aioge.runtime.descs import Attr, _attr_kind

ints = st.integers(min_value=-(2**62), max_value=2**62)
floats = st.floats(allow_nan=False, width=32)


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (3, ("Int", 3)),
        (np.int64(3), ("Int", 3)),
        (True, ("Bool", True)),
        (np.bool_(False), ("Bool", False)),
        (1.5, ("Float", 1.5)),
        (np.float32(1.5), ("Float", 1.5)),
        ("NCHW", ("String", "NCHW")),
        ([], ("ListInt", ())),
        ((), ("ListInt", ())),
        ([1, 2], ("ListInt", (1, 2))),
        ((1, np.int32(2)), ("ListInt", (1, 2))),
        ([True, False], ("ListBool", (True, False))),
        ([1, True], ("ListFloat", (1.0, 1.0))),
        ([1, 2.5], ("ListFloat", (1.0, 2.5))),
        ([0.5, 2.5], ("ListFloat", (0.5, 2.5))),
        (["a", "b"], ("ListString", ("a", "b"))),
        (np.array([1, 2], np.int64), ("ListInt", (1, 2))),
        (Attr("ListInt", [4]), ("ListInt", (4,))),
        (Attr("Float", 1), ("Float", 1)),
    ],
)
def test_kinds(value: object, expected: tuple[str, object]) -> None:
    kind, v = _attr_kind(value)
    assert (kind, v) == expected
    want = expected[1]
    items, want = (v, want) if isinstance(v, tuple) and isinstance(want, tuple) else ((v,), (want,))
    assert [type(x) for x in items] == [type(x) for x in want]  # built-in types, never numpy scalars


@pytest.mark.parametrize("value", [[1, "a"], [1.0, "a"], object(), [None]])
def test_no_kind(value: object) -> None:
    with pytest.raises(TypeError, match="cannot infer an ACL attr type"):
        _attr_kind(value)


@given(st.lists(ints, max_size=8))
def test_int_lists_as_numpy(xs: list[int]) -> None:
    expected = ("ListInt", tuple(xs))
    assert _attr_kind(xs) == expected
    assert _attr_kind(tuple(xs)) == expected
    assert _attr_kind([np.int64(x) for x in xs]) == expected
    assert _attr_kind(np.array(xs, np.int64)) == expected


@given(st.lists(floats, min_size=1, max_size=8))
def test_float_lists_as_numpy(xs: list[float]) -> None:
    expected = ("ListFloat", tuple(xs))
    assert _attr_kind(xs) == expected
    assert _attr_kind([np.float64(x) for x in xs]) == expected
    assert _attr_kind(np.array(xs, np.float64)) == expected


@given(st.one_of(ints, floats, st.booleans(), st.text(max_size=4)))
def test_scalars_as_numpy(x: object) -> None:
    kind, v = _attr_kind(x)
    assert v == x and type(v) is type(x)
    if not isinstance(x, str):
        assert _attr_kind(np.asarray(x)[()]) == (kind, x)
