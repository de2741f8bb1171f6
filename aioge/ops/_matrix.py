"""Matrix products."""

from __future__ import annotations

from typing import Any

from ._common import broadcast_shape, emit, require_tensor

__all__ = ("matmul",)

_FLOAT_KINDS = "fV"  # ml_dtypes.bfloat16 has kind 'V'


def matmul(a: Any, b: Any, *, transpose_a: bool = False, transpose_b: bool = False) -> Any:
    """Matrix product with ``numpy.matmul`` semantics.

    2-D operands use CANN ``MatMul`` (``transpose_x1``/``transpose_x2``);
    higher ranks use ``BatchMatMul`` (``adj_x1``/``adj_x2``) with the batch
    dims broadcast; a 1-D operand is promoted as numpy does and the added
    dim removed from the result.  ``transpose_a``/``transpose_b`` swap the
    last two dims of that operand first.

    Example:
        >>> y = aioge.ops.matmul(x, w)          # (M, K) @ (K, N) -> (M, N)
    """
    a = require_tensor(a, "a")
    b = require_tensor(b, "b")
    if a.dtype != b.dtype:
        raise TypeError(f"matmul: operands have different dtypes ({a.dtype} and {b.dtype})")
    if a.dtype.kind not in _FLOAT_KINDS:
        raise TypeError(f"matmul: needs a floating dtype, got {a.dtype}")
    if a.ndim == 0 or b.ndim == 0:
        raise ValueError("matmul: operands must have rank >= 1")
    squeeze_m = a.ndim == 1
    squeeze_n = b.ndim == 1
    if squeeze_m:
        a = a.reshape(1, a.shape[0])
        transpose_a = False
    if squeeze_n:
        b = b.reshape(b.shape[0], 1)
        transpose_b = False
    m = a.shape[-1] if transpose_a else a.shape[-2]
    ka = a.shape[-2] if transpose_a else a.shape[-1]
    kb = b.shape[-1] if transpose_b else b.shape[-2]
    n = b.shape[-2] if transpose_b else b.shape[-1]
    if ka != kb:
        raise ValueError(f"matmul: inner dims differ: {a.shape} and {b.shape} ({ka} vs {kb})")
    if a.ndim == 2 and b.ndim == 2:
        y = emit("MatMul", [a, b, None], [((m, n), a.dtype)],
                 {"transpose_x1": transpose_a, "transpose_x2": transpose_b})[0]  # fmt: skip
    else:
        batch = broadcast_shape("matmul", a.shape[:-2], b.shape[:-2])
        y = emit("BatchMatMul", [a, b], [((*batch, m, n), a.dtype)], {"adj_x1": transpose_a, "adj_x2": transpose_b})[0]
    if squeeze_m or squeeze_n:
        shape = list(y.shape)
        if squeeze_n:
            shape.pop(-1)
        if squeeze_m:
            shape.pop(-2 if squeeze_n is False else -1)
        y = y.reshape(tuple(shape))
    return y
