"""Helpers shared by the typed op functions: operand coercion, shape rules."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from .. import dtypes
from .._launch import Const, launch
from ..tensor import Tensor

__all__ = ("as_tensor_like", "broadcast_shape", "emit", "normalize_axis", "require_tensor")


def require_tensor(x: Any, name: str = "x") -> Tensor:
    if type(x) is not Tensor:
        raise TypeError(f"{name} must be an aioge.Tensor, got {type(x).__name__}")
    return x


def as_tensor_like(x: Any, like: Tensor) -> Tensor | Const:
    """A tensor operand, or a Python/numpy scalar or array as a constant of ``like``'s dtype."""
    if type(x) is Tensor:
        return x
    if isinstance(x, Const):
        return x
    arr = np.asarray(x)
    if arr.dtype == object:
        raise TypeError(f"cannot use {type(x).__name__} as an operand")
    return Const(arr.astype(like.dtype, copy=False))


def shape_of(x: Tensor | Const) -> tuple[int, ...]:
    return x.shape if isinstance(x, Tensor) else tuple(x.array.shape)


def dtype_of(x: Tensor | Const) -> np.dtype:
    return x.dtype if isinstance(x, Tensor) else dtypes.normalize(x.array.dtype)


def broadcast_shape(op: str, *shapes: Sequence[int]) -> tuple[int, ...]:
    try:
        return tuple(int(d) for d in np.broadcast_shapes(*[tuple(s) for s in shapes]))
    except ValueError:
        raise ValueError(f"{op}: shapes {', '.join(str(tuple(s)) for s in shapes)} do not broadcast") from None


def normalize_axis(axis: int, ndim: int, op: str) -> int:
    if not -ndim <= axis < max(ndim, 1):
        raise ValueError(f"{op}: axis {axis} is out of range for rank {ndim}")
    return axis % max(ndim, 1)


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
    outs = [Tensor._empty(stream, shape, dt) for shape, dt in out_shapes]
    launch(stream, op_type, inputs, outs, attrs, formats)
    return outs
