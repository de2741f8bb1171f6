"""Matrix products."""

from __future__ import annotations

from typing import Any

import numpy as np

from ..runtime.launch import Const
from ..runtime.stream import Tensor
from ._common import (
    FLOATS,
    as_tensor_like,
    broadcast_shape,
    check_dtype,
    const,
    dtype_of,
    emit,
    require_tensor,
    shape_of,
)

__all__ = ("gemm", "matmul")


def matmul(a: Any, b: Any, *, transpose_a: bool = False, transpose_b: bool = False) -> Tensor:
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
    check_dtype("matmul", a.dtype, FLOATS, "a")
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
        y = emit(
            "MatMul",
            [a, b, None],
            [((m, n), a.dtype)],
            {"transpose_x1": transpose_a, "transpose_x2": transpose_b},
        )[0]
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


def gemm(
    a: Any,
    b: Any,
    c: Any = None,
    *,
    alpha: float = 1.0,
    beta: float = 1.0,
    trans_a: bool = False,
    trans_b: bool = False,
) -> Tensor:
    """ONNX ``Gemm``: ``alpha * op(a) @ op(b) + beta * c`` (CANN ``GEMM``).

    ``a`` and ``b`` are 2-D (``trans_a``/``trans_b`` transpose them first);
    ``c`` broadcasts to ``(M, N)`` (``[M, N]``, ``[N]``, ``[M, 1]``, a scalar)
    or is ``None`` (no addend).  alpha and beta are passed as the op's
    1-element float32 inputs.

    Example:
        >>> y = aioge.ops.gemm(x, w, bias, trans_b=True)
    """
    a = require_tensor(a, "a")
    b = require_tensor(b, "b")
    if a.dtype != b.dtype:
        raise TypeError(f"gemm: operands have different dtypes ({a.dtype} and {b.dtype})")
    check_dtype("gemm", a.dtype, FLOATS, "a")
    if a.ndim != 2 or b.ndim != 2:
        raise ValueError(f"gemm: a and b must be 2-D, got shapes {a.shape} and {b.shape}")
    m, ka = (a.shape[1], a.shape[0]) if trans_a else a.shape
    kb, n = (b.shape[1], b.shape[0]) if trans_b else b.shape
    if ka != kb:
        raise ValueError(
            f"gemm: inner dims differ: {a.shape}{' (transposed)' if trans_a else ''} and "
            f"{b.shape}{' (transposed)' if trans_b else ''}"
        )
    if c is None:
        cc: Any = const(np.zeros((), a.dtype))
        beta = 0.0
    else:
        cc = as_tensor_like(c, a)
        if dtype_of(cc) != a.dtype:
            raise TypeError(f"gemm: c has dtype {dtype_of(cc)}, a has {a.dtype}")
        cs = shape_of(cc)
        ok = len(cs) <= 2 and all(d in (1, want) for d, want in zip(reversed(cs), (n, m), strict=False))
        if not ok:
            raise ValueError(f"gemm: c of shape {cs} does not broadcast to {(m, n)}")
    al = Const(np.array([alpha], np.float32))
    be = Const(np.array([beta], np.float32))
    return emit(
        "GEMM",
        [a, b, cc, al, be],
        [((m, n), a.dtype)],
        {"transpose_a": bool(trans_a), "transpose_b": bool(trans_b)},
    )[0]
