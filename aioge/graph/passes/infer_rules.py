"""The shape-function table of shape inference: what a shape function sees of a node
(``_Ctx``) and ``@_shape_fn`` registration.

:mod:`.infer_shapes` (the pass and the core ONNX ops) and :mod:`.infer_ops` (the newer
ops) both register here; neither imports the other's rules (the pass imports
:mod:`.infer_ops`, so the table is full once it is loaded).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import numpy as np

from ..errors import DynamicShapeError, GraphError, ShapeInferenceError
from ..schema import get_attr

if TYPE_CHECKING:
    from ..ir import Node

Shape = tuple[int, ...]
ShapeFn = Callable[["_Ctx"], list[Shape]]
_SHAPE_FNS: dict[str, ShapeFn] = {}


class _Ctx:
    """What a shape function sees of one node."""

    __slots__ = ("_values", "node", "shapes")

    def __init__(self, node: Node, shapes: list[Shape | None], values: list[np.ndarray | None]) -> None:
        self.node = node
        self.shapes = shapes
        self._values = values

    def shape(self, i: int) -> Shape:
        s = self.shapes[i] if i < len(self.shapes) else None
        if s is None:
            raise self.error(f"input {i} is missing")
        return s

    def has(self, i: int) -> bool:
        return i < len(self.node.inputs) and bool(self.node.inputs[i])

    def value(self, i: int, what: str) -> np.ndarray:
        v = self._values[i] if i < len(self._values) else None
        if v is None:
            raise DynamicShapeError(
                f"input {i} ({what}, {self.node.input(i)!r}) must be a compile-time constant for static shapes",
                node=self.node.name,
                op_type=self.node.op_type,
            )
        return v

    def ints(self, i: int, what: str) -> list[int]:
        v = self.value(i, what).reshape(-1)
        return v.tolist() if v.dtype.kind in "iu" else [int(x) for x in v]  # tolist: Python ints at once

    def opt_ints(self, i: int, what: str) -> list[int] | None:
        return self.ints(i, what) if self.has(i) else None

    def attr(self, name: str) -> Any:
        attrs = self.node.attrs
        return attrs[name] if name in attrs else get_attr(self.node, name)  # (the schema's default)

    def error(self, msg: str) -> ShapeInferenceError:
        return ShapeInferenceError(msg, node=self.node.name, op_type=self.node.op_type)


def _wrap(c: _Ctx, e: ValueError) -> GraphError:
    """A ValueError from shape arithmetic as an error naming the node (GraphErrors pass through)."""
    return e if isinstance(e, GraphError) else c.error(str(e))


def _shape_fn(*ops: str) -> Callable[[ShapeFn], ShapeFn]:
    def deco(fn: ShapeFn) -> ShapeFn:
        for op in ops:
            _SHAPE_FNS[op] = fn
        return fn

    return deco
