"""Helpers shared by the typed op functions: operand coercion, shape rules, dtype sets."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from .. import _shapes, dtypes
from ..errors import UnsupportedDataTypeError
from ..runtime.launch import Const, HostInput, launch
from ..runtime.stream import Tensor

if TYPE_CHECKING:
    from ..runtime.stream import Stream

__all__ = (
    "ALL",
    "FLOATS",
    "INTS",
    "SIGNED",
    "as_tensor_like",
    "broadcast_shape",
    "check_dtype",
    "const",
    "emit",
    "emit_on",
    "int_list",
    "normalize_axes",
    "normalize_axis",
    "require_tensor",
)

FLOATS = dtypes.FLOAT_TYPES
SIGNED = dtypes.SIGNED_INT_TYPES
INTS = SIGNED | {np.dtype("uint8")}
ALL = FLOATS | INTS | {np.dtype("bool")}
# dtypes the runtime moves by size (shape/data-movement ops): every fixed-size ACL type but complex
MOVABLE = frozenset(dt for dt in dtypes.ACL_CODE if dt.kind != "c")


def require_tensor(x: Any, name: str = "x") -> Tensor:
    if type(x) is not Tensor:
        raise TypeError(f"{name} must be an aioge.Tensor, got {type(x).__name__}")
    return x


def check_dtype(op: str, dt: np.dtype, allowed: frozenset[np.dtype], what: str = "x") -> None:
    """:class:`~aioge.UnsupportedDataTypeError` (also a ``TypeError``) naming the op and dtype
    when (op, dtype) is not supported: the same class ``aioge.op`` raises for it."""
    if dt not in allowed:
        names = sorted(str(d) for d in allowed)
        verb = "have" if what.endswith("s") else "has"  # "x has", "the operands have"
        msg = f"{what} {verb} dtype {dt}, which is not supported (supported: {', '.join(names)})"
        raise UnsupportedDataTypeError(100026, msg, op)


def const(value: Any, dtype: Any = None) -> Const:
    """A :class:`Const` that keeps a 0-d value 0-d (``np.ascontiguousarray`` would make it 1-d)."""
    arr = np.asarray(value, dtype)
    c = Const(arr)
    if arr.ndim == 0:
        c.array = np.array(arr)
    return c


def as_tensor_like(x: Any, like: Tensor) -> Tensor | Const:
    """A tensor operand, or a Python/numpy scalar or array as a constant of ``like``'s dtype."""
    if type(x) is Tensor:
        return x
    if isinstance(x, Const):
        return x
    arr = np.asarray(x)
    if arr.dtype == object:
        raise TypeError(f"cannot use {type(x).__name__} as an operand")
    return const(arr.astype(like.dtype, copy=False))


def shape_of(x: Tensor | Const) -> tuple[int, ...]:
    return x.shape if isinstance(x, Tensor) else tuple(x.array.shape)


def dtype_of(x: Tensor | Const) -> np.dtype:
    return x.dtype if isinstance(x, Tensor) else dtypes.normalize(x.array.dtype)


# the shape rules are aioge._shapes' (the graph compiler's too); these add the typed API's
# argument checks and messages that name the op
def broadcast_shape(op: str, *shapes: Sequence[int]) -> tuple[int, ...]:
    first = tuple(shapes[0])
    if all(tuple(s) == first for s in shapes[1:]):  # the common case, on every elementwise launch
        return first
    try:
        return _shapes.broadcast_shapes(*[tuple(map(int, s)) for s in shapes])
    except ValueError:
        raise ValueError(f"{op}: shapes {', '.join(str(tuple(s)) for s in shapes)} do not broadcast") from None


def normalize_axis(axis: int, ndim: int, op: str) -> int:
    """``axis`` in ``[0, ndim)``; a 0-d operand takes axis 0 (or -1), as numpy's reductions do."""
    if not isinstance(axis, (int, np.integer)) or isinstance(axis, bool):
        raise TypeError(f"{op}: axis must be an int, got {axis!r}")
    try:
        return _shapes.normalize_axis(int(axis), max(ndim, 1))
    except ValueError:
        raise ValueError(f"{op}: axis {axis} is out of range for rank {ndim}") from None


def normalize_axes(axes: int | Sequence[int] | None, ndim: int, op: str) -> tuple[int, ...]:
    """Sorted, normalised, duplicate-free axes; None means every axis."""
    if axes is None:
        return tuple(range(ndim))
    if isinstance(axes, (int, np.integer)):
        axes = (int(axes),)
    out = [normalize_axis(a, ndim, op) for a in axes]  # the typed checks and messages, per axis
    try:
        return tuple(sorted(_shapes.normalize_axes(out, max(ndim, 1))))
    except ValueError:
        raise ValueError(f"{op}: repeated axis in {tuple(axes)}") from None


def int_list(v: Any, n: int | None, op: str, what: str) -> tuple[int, ...]:
    """An int or a sequence of ints as a tuple (an int is repeated n times)."""
    if isinstance(v, (int, np.integer)) and not isinstance(v, bool):
        if n is None:
            return (int(v),)
        return (int(v),) * n
    try:
        out = tuple(int(x) for x in v)
    except TypeError:
        raise TypeError(f"{op}: {what} must be an int or a sequence of ints, got {v!r}") from None
    if n is not None and len(out) != n:
        raise ValueError(f"{op}: {what} must have {n} values, got {len(out)}")
    return out


def host_ints(values: Sequence[int]) -> HostInput:
    """A host-placed int64 value input (shapes, axes, perms, paddings)."""
    return HostInput(np.asarray(list(values), dtype=np.int64))


def emit(
    op_type: str,
    inputs: Sequence[Any],
    out_shapes: Sequence[tuple[tuple[int, ...], np.dtype]],
    attrs: dict[str, Any] | None = None,
    *,
    formats: Sequence[int] | None = None,
) -> list[Tensor]:
    """Allocate outputs on the first tensor input's stream and launch."""
    stream = next(x for x in inputs if type(x) is Tensor)._memory().home()
    return emit_on(stream, op_type, inputs, out_shapes, attrs, formats=formats)


def emit_on(
    stream: Stream,
    op_type: str,
    inputs: Sequence[Any],
    out_shapes: Sequence[tuple[tuple[int, ...], np.dtype]],
    attrs: dict[str, Any] | None = None,
    *,
    formats: Sequence[int] | None = None,
) -> list[Tensor]:
    """Allocate outputs on ``stream`` and launch there."""
    outs = [Tensor._empty(stream, tuple(int(d) for d in shape), np.dtype(dt)) for shape, dt in out_shapes]
    launch(stream, op_type, inputs, outs, attrs, formats)
    return outs
