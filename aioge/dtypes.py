"""numpy dtypes <-> ACL data types (``aclDataType``) and formats.

``bfloat16`` is ``ml_dtypes.bfloat16``.  Anything numpy accepts as a dtype
(``np.float32``, ``"float16"``, ``np.dtype("int64")``) plus ``"bfloat16"`` and
:class:`DataType` members is accepted wherever aioge takes a dtype.

Example:
    >>> aioge.dtypes.to_acl("float16")
    <DataType.FLOAT16: 1>
    >>> aioge.dtypes.to_numpy(aioge.DataType.BF16)
    dtype(bfloat16)
"""

from __future__ import annotations

import enum
from typing import Any, Union

import ml_dtypes
import numpy as np

__all__ = ("ACL_CODE", "DataType", "Format", "DTypeLike", "bfloat16", "to_acl", "to_numpy", "normalize", "itemsize",
           "as_numpy", "FLOAT_TYPES", "SIGNED_INT_TYPES", "UNSIGNED_INT_TYPES", "INT_TYPES")  # fmt: skip

bfloat16: np.dtype = np.dtype(ml_dtypes.bfloat16)


class DataType(enum.IntEnum):
    """``aclDataType`` values (CANN ``acl_base.h``)."""

    UNDEFINED = -1
    FLOAT = 0
    FLOAT16 = 1
    INT8 = 2
    INT32 = 3
    UINT8 = 4
    INT16 = 6
    UINT16 = 7
    UINT32 = 8
    INT64 = 9
    UINT64 = 10
    DOUBLE = 11
    BOOL = 12
    STRING = 13
    COMPLEX64 = 16
    COMPLEX128 = 17
    BF16 = 27


class Format(enum.IntEnum):
    """``aclFormat`` values used by aioge."""

    UNDEFINED = -1
    NCHW = 0
    NHWC = 1
    ND = 2
    NC1HWC0 = 3
    FRACTAL_Z = 4
    HWCN = 16
    NDHWC = 27
    FRACTAL_NZ = 29
    NCDHW = 30
    NC = 35
    NCL = 47


DTypeLike = Union[str, type, np.dtype, DataType]  # noqa: UP007 (a runtime alias; py3.10 has no type statement)

_NP_TO_ACL: dict[np.dtype, DataType] = {
    np.dtype(np.float32): DataType.FLOAT,
    np.dtype(np.float16): DataType.FLOAT16,
    np.dtype(np.int8): DataType.INT8,
    np.dtype(np.int32): DataType.INT32,
    np.dtype(np.uint8): DataType.UINT8,
    np.dtype(np.int16): DataType.INT16,
    np.dtype(np.uint16): DataType.UINT16,
    np.dtype(np.uint32): DataType.UINT32,
    np.dtype(np.int64): DataType.INT64,
    np.dtype(np.uint64): DataType.UINT64,
    np.dtype(np.float64): DataType.DOUBLE,
    np.dtype(np.bool_): DataType.BOOL,
    np.dtype(np.complex64): DataType.COMPLEX64,
    np.dtype(np.complex128): DataType.COMPLEX128,
    bfloat16: DataType.BF16,
}
#: dtype families: the one table aioge.ops and aioge.graph check dtypes against
FLOAT_TYPES: frozenset[np.dtype] = frozenset(np.dtype(t) for t in ("float16", "float32", "float64")) | {bfloat16}
SIGNED_INT_TYPES: frozenset[np.dtype] = frozenset(np.dtype(t) for t in ("int8", "int16", "int32", "int64"))
UNSIGNED_INT_TYPES: frozenset[np.dtype] = frozenset(np.dtype(t) for t in ("uint8", "uint16", "uint32", "uint64"))
INT_TYPES: frozenset[np.dtype] = SIGNED_INT_TYPES | UNSIGNED_INT_TYPES

_ACL_TO_NP: dict[DataType, np.dtype] = {v: k for k, v in _NP_TO_ACL.items()}
#: numpy dtype -> aclDataType as a plain int (hot path of every launch)
ACL_CODE: dict[np.dtype, int] = {k: int(v) for k, v in _NP_TO_ACL.items()}


def as_numpy(dtype: Any) -> np.dtype:
    """The numpy dtype of any dtype-like value, whether or not an ACL type has it (the graph
    compiler's dtypes, e.g. a string tensor's, need not live on a device).

    Raises:
        TypeError: for something that is not a dtype.
    """
    if isinstance(dtype, DataType):
        return to_numpy(dtype)
    if isinstance(dtype, str) and dtype.lower() in ("bfloat16", "bf16"):
        return bfloat16
    try:
        dt: np.dtype = np.dtype(dtype)
    except TypeError as e:
        raise TypeError(f"not a dtype: {dtype!r}") from e
    return dt


def normalize(dtype: Any) -> np.dtype:
    """Return the numpy dtype for any dtype-like value.

    Raises:
        TypeError: for something that is not a dtype aioge can place on a device.
    """
    if isinstance(dtype, np.dtype) and dtype in _NP_TO_ACL:
        return dtype  # already one (np.dtype(dtype) is dtype itself)
    dt = as_numpy(dtype)
    if dt not in _NP_TO_ACL:
        raise TypeError(f"dtype {dt} has no ACL data type")
    return dt


def to_acl(dtype: Any) -> DataType:
    """``aclDataType`` of a dtype-like value."""
    return _NP_TO_ACL[normalize(dtype)]


def to_numpy(dt: int) -> np.dtype:
    """numpy dtype of an ``aclDataType`` value.

    Raises:
        TypeError: for ``UNDEFINED``, ``STRING`` or an unknown value.
    """
    try:
        return _ACL_TO_NP[DataType(dt)]
    except (KeyError, ValueError) as e:
        raise TypeError(f"aclDataType {dt} has no numpy dtype") from e


def itemsize(dtype: Any) -> int:
    """Bytes per element."""
    return normalize(dtype).itemsize
