"""``dtypes.normalize``: a numpy dtype aioge places on a device comes back as itself, however it
was spelled; one it cannot place (another byte order, a string dtype) raises TypeError."""

from __future__ import annotations

import numpy as np
import pytest

from aioge import dtypes

NAMES = ["float32", "float16", "float64", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64",
         "bool", "complex64", "complex128"]  # fmt: skip


@pytest.mark.parametrize("name", NAMES)
def test_placeable(name: str) -> None:
    dt = np.dtype(name)
    assert dtypes.normalize(dt) is dt
    assert dtypes.normalize(name) == dt
    assert dtypes.normalize(dt.newbyteorder("=")) == dt
    assert dtypes.normalize(dtypes.to_acl(dt)) == dt


def test_bfloat16() -> None:
    assert dtypes.normalize(dtypes.bfloat16) is dtypes.bfloat16
    assert dtypes.normalize("bfloat16") is dtypes.bfloat16


@pytest.mark.parametrize("dt", [np.dtype(">f4"), np.dtype(">i8"), np.dtype("U3"), np.dtype("O"), np.dtype("f2,f2")])
def test_not_placeable(dt: np.dtype) -> None:
    with pytest.raises(TypeError, match="has no ACL data type"):
        dtypes.normalize(dt)
