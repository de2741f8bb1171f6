"""Reductions with numpy semantics (``axes``/``keepdims``), on the CANN ``*D`` forms."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from .. import dtypes
from ..runtime.stream import Tensor
from ._common import ALL, FLOATS, INTS, check_dtype, emit, normalize_axes, normalize_axis, require_tensor

__all__ = ("argmax", "argmin", "reduce_max", "reduce_mean", "reduce_min", "reduce_prod", "reduce_sum")

Axes = int | Sequence[int] | None


def _reduce(op_type: str, name: str, x: Any, axes: Axes, keepdims: bool, allowed: frozenset[np.dtype]) -> Tensor:
    x = require_tensor(x)
    check_dtype(name, x.dtype, allowed)
    if axes is not None and not isinstance(axes, (int, np.integer)) and len(axes) == 0:
        # numpy: reducing over no axis is the identity
        return emit(
            op_type,
            [x],
            [(x.shape, x.dtype)],
            {"axes": [], "keep_dims": bool(keepdims), "noop_with_empty_axes": True},
        )[0]
    ax = normalize_axes(axes, x.ndim, name)
    if name in ("reduce_max", "reduce_min") and any(x.shape[a] == 0 for a in ax):
        if math.prod(n for d, n in enumerate(x.shape) if d not in ax) > 0:
            raise ValueError(f"{name}: zero-size reduction has no identity")
    shape = tuple((1 if d in ax else n) for d, n in enumerate(x.shape) if keepdims or d not in ax)
    if x.ndim == 0:
        shape = ()
        ax = (0,)
    return emit(op_type, [x], [(shape, x.dtype)], {"axes": list(ax), "keep_dims": bool(keepdims)})[0]


def reduce_sum(x: Any, axes: Axes = None, keepdims: bool = False) -> Tensor:
    """Sum over ``axes`` (all when None), like ``numpy.sum(x, axis, keepdims=)`` but keeping
    ``x``'s dtype (CANN ``ReduceSumD``).  Floats accumulate in float64, integers wrap.

    Example:
        >>> s = aioge.ops.reduce_sum(x, axes=(0, 2), keepdims=True)
    """
    return _reduce("ReduceSumD", "reduce_sum", x, axes, keepdims, FLOATS | INTS)


def reduce_mean(x: Any, axes: Axes = None, keepdims: bool = False) -> Tensor:
    """Mean over ``axes`` (CANN ``ReduceMeanD``); floating dtypes only.

    Example:
        >>> m = aioge.ops.reduce_mean(x, axes=-1)
    """
    return _reduce("ReduceMeanD", "reduce_mean", x, axes, keepdims, FLOATS)


def reduce_max(x: Any, axes: Axes = None, keepdims: bool = False) -> Tensor:
    """Maximum over ``axes``, NaN-propagating like ``numpy.max`` (CANN ``ReduceMaxD``).

    Example:
        >>> m = aioge.ops.reduce_max(x, axes=1)
    """
    return _reduce("ReduceMaxD", "reduce_max", x, axes, keepdims, FLOATS | INTS)


def reduce_min(x: Any, axes: Axes = None, keepdims: bool = False) -> Tensor:
    """Minimum over ``axes``, NaN-propagating like ``numpy.min`` (CANN ``ReduceMinD``).

    Example:
        >>> m = aioge.ops.reduce_min(x, axes=1)
    """
    return _reduce("ReduceMinD", "reduce_min", x, axes, keepdims, FLOATS | INTS)


def reduce_prod(x: Any, axes: Axes = None, keepdims: bool = False) -> Tensor:
    """Product over ``axes`` (CANN ``ReduceProdD``).

    Example:
        >>> p = aioge.ops.reduce_prod(x, axes=0)
    """
    return _reduce("ReduceProdD", "reduce_prod", x, axes, keepdims, FLOATS | INTS)


def _arg(op_type: str, name: str, x: Any, axis: int | None, keepdims: bool, dtype: dtypes.DTypeLike) -> Tensor:
    x = require_tensor(x)
    check_dtype(name, x.dtype, ALL)
    dt = dtypes.normalize(dtype)
    if dt not in (np.dtype(np.int32), np.dtype(np.int64)):
        raise TypeError(f"{name}: dtype must be int32 or int64, got {dt}")
    orig = x.shape
    if axis is None:
        x = x.reshape(-1)
        ax = 0
    else:
        if x.ndim == 0:
            raise ValueError(f"{name}: x must have rank >= 1")
        ax = normalize_axis(axis, x.ndim, name)
    if x.shape[ax] == 0:
        raise ValueError(f"{name}: attempt to get {name} of an empty sequence")
    shape = tuple(n for d, n in enumerate(x.shape) if d != ax)
    y = emit(op_type, [x], [(shape, dt)], {"dimension": ax, "dtype": int(dtypes.to_acl(dt))})[0]
    if keepdims:
        full = [1] * len(orig) if axis is None else list(orig)
        if axis is not None:
            full[ax] = 1
        y = y.reshape(tuple(full))
    return y


def argmax(x: Any, axis: int | None = None, keepdims: bool = False, dtype: dtypes.DTypeLike = "int64") -> Tensor:
    """Index of the first maximum along ``axis`` (flattened when None), like ``numpy.argmax``;
    a NaN counts as the maximum (CANN ``ArgMaxD``, attrs ``dimension``, ``dtype``).

    Example:
        >>> i = aioge.ops.argmax(logits, axis=-1)
    """
    return _arg("ArgMaxD", "argmax", x, axis, keepdims, dtype)


def argmin(x: Any, axis: int | None = None, keepdims: bool = False, dtype: dtypes.DTypeLike = "int64") -> Tensor:
    """Index of the first minimum along ``axis`` (flattened when None), like ``numpy.argmin``
    (CANN ``ArgMinD``).

    Example:
        >>> i = aioge.ops.argmin(x, axis=0)
    """
    return _arg("ArgMinD", "argmin", x, axis, keepdims, dtype)
