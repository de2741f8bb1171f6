"""Elementwise ops with numpy semantics (broadcasting, dtype checks)."""

from __future__ import annotations

from typing import Any

from .. import dtypes
from ._common import as_tensor_like, broadcast_shape, dtype_of, emit, require_tensor, shape_of

__all__ = ("add", "sub", "mul", "div", "relu", "cast")

_INT_KINDS = "iub"


def _binary(op_type: str, name: str, a: Any, b: Any, *, floats_only: bool = False) -> Any:
    if type(a).__name__ != "Tensor" and type(b).__name__ == "Tensor":
        a = as_tensor_like(a, b)
    else:
        a = require_tensor(a, "a")
        b = as_tensor_like(b, a)
    da, db = dtype_of(a), dtype_of(b)
    if da != db:
        raise TypeError(f"{name}: operands have different dtypes ({da} and {db}); cast one first")
    if floats_only and da.kind in _INT_KINDS:
        raise TypeError(f"{name}: needs a floating dtype, got {da}")
    shape = broadcast_shape(name, shape_of(a), shape_of(b))
    return emit(op_type, [a, b], [(shape, da)])[0]


def add(a: Any, b: Any) -> Any:
    """Elementwise ``a + b`` with numpy broadcasting (CANN ``Add``).

    One operand may be a Python/numpy scalar or array (used as a constant of
    the tensor's dtype).

    Example:
        >>> y = aioge.ops.add(x, 1.0)
    """
    return _binary("Add", "add", a, b)


def sub(a: Any, b: Any) -> Any:
    """Elementwise ``a - b`` with broadcasting (CANN ``Sub``).

    Example:
        >>> y = aioge.ops.sub(x, x)
    """
    return _binary("Sub", "sub", a, b)


def mul(a: Any, b: Any) -> Any:
    """Elementwise ``a * b`` with broadcasting (CANN ``Mul``).

    Example:
        >>> y = aioge.ops.mul(x, 2.0)
    """
    return _binary("Mul", "mul", a, b)


def div(a: Any, b: Any) -> Any:
    """Elementwise ``a / b`` with broadcasting (CANN ``Div``).

    Floating dtypes divide exactly; integer dtypes truncate toward zero (as
    C and ONNX do) and give 0 for a zero divisor.

    Example:
        >>> y = aioge.ops.div(x, 4.0)
    """
    return _binary("Div", "div", a, b)


def relu(x: Any) -> Any:
    """``max(x, 0)`` elementwise (CANN ``Relu``); NaN stays NaN.

    Example:
        >>> y = aioge.ops.relu(x)
    """
    x = require_tensor(x)
    return emit("Relu", [x], [(x.shape, x.dtype)])[0]


def cast(x: Any, dtype: dtypes.DTypeLike) -> Any:
    """Convert to ``dtype`` (CANN ``Cast`` with ``dst_type``).

    Float to integer truncates toward zero and saturates at the integer
    range (NaN becomes 0); integer to integer wraps like ``numpy.astype``.

    Example:
        >>> y = aioge.ops.cast(x, "float16")
    """
    x = require_tensor(x)
    dt = dtypes.normalize(dtype)
    return emit("Cast", [x], [(x.shape, dt)], {"dst_type": int(dtypes.to_acl(dt))})[0]



