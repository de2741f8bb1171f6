"""Typed operator functions with numpy semantics.

Each function checks shapes and dtypes in Python (a ``ValueError`` or
``TypeError`` before anything is launched), picks the CANN op and attrs,
enqueues it on the stream of its first tensor operand, and returns the
output :class:`~aioge.Tensor` at once.
"""

from __future__ import annotations

from ._elementwise import add, cast, div, mul, relu, sub
from ._matrix import matmul

__all__ = ("add", "cast", "div", "matmul", "mul", "relu", "sub")
