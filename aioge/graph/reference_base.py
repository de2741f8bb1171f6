"""The reference executor's kernel table and the helpers its kernel modules share.

:mod:`.reference` (the executor and the core ONNX kernels) and :mod:`.reference_ops`,
:mod:`.reference_resize`, :mod:`.reference_rnn` (kernels of the newer ops) register into
``KERNELS`` with ``@_kernel``; every one of them imports this module, none imports another
(the executor imports the three kernel modules, so the table is full once it is loaded).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import numpy as np

from .. import _shapes as S
from .schema import get_attr, get_schema

if TYPE_CHECKING:
    from .ir import Node

__all__ = ("Arr", "Kernel", "KERNELS", "reduce_axes")

Arr = np.ndarray
Kernel = Callable[["Node", list[Any]], list[Arr]]
KERNELS: dict[str, Kernel] = {}


def _kernel(*ops: str) -> Callable[[Kernel], Kernel]:
    def deco(fn: Kernel) -> Kernel:
        for op in ops:
            KERNELS[op] = fn
        return fn

    return deco


def _ints(a: Any) -> list[int] | None:
    if type(a) is np.ndarray and a.dtype.kind in "iu":
        return a.reshape(-1).tolist()  # Python ints at once, as int() of each element gives
    return None if a is None else [int(v) for v in np.asarray(a).reshape(-1)]


def _attrs(node: Node) -> dict[str, Any]:
    """The node's attrs over the schema's defaults."""
    return {**get_schema(node.op_type).attrs, **node.attrs}


def reduce_axes(node: Node, xs: list[Any], rank: int) -> tuple[int, ...] | None:
    """Axes a Reduce* node reduces over; ``None`` means "no-op" (empty axes + noop_with_empty_axes)."""
    axes = _ints(xs[1]) if len(xs) > 1 and xs[1] is not None else None
    if not axes:
        if int(get_attr(node, "noop_with_empty_axes")):
            return None
        return tuple(range(rank))
    return tuple(S.normalize_axes(axes, rank))
