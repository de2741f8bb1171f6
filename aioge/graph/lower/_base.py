"""The lowering's building blocks: lowered op records and the per-node builder.

A lowering rule is a function ``rule(L: Builder) -> None`` registered for IR
op types with :func:`rule`; it reads ``L.node`` and the graph's shapes and
appends CANN ops with ``L.op`` / ``L.to`` (see :mod:`aioge.graph.lower`).
"""

from __future__ import annotations

import math
import weakref
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from ... import dtypes
from .._records import dict_init
from ..errors import LoweringError
from ..ir import Graph, Node, normalize_dtype
from ..schema import get_attr

if TYPE_CHECKING:
    from ..target import Target

__all__ = ("ConstInput", "InputRef", "LoweredOp", "LoweredNode", "Builder", "RULES", "Rule", "rule", "acl_dtype")

@dict_init
@dataclass(frozen=True, eq=False)
class ConstInput:
    """A small host array passed as a const input."""

    value: np.ndarray

    def __repr__(self) -> str:
        return f"ConstInput({self.value.tolist()!r}, {self.value.dtype})"


InputRef = str | ConstInput | None


@dict_init
@dataclass(frozen=True)
class LoweredOp:
    """One CANN single-op call."""

    op_type: str
    inputs: tuple[InputRef, ...]
    outputs: tuple[str, ...]
    attrs: dict[str, Any] = field(default_factory=dict)
    alias: bool = False
    #: descriptor shapes that differ from the named value's own shape (same elements, contiguous),
    #: e.g. a 1-D Conv writing its (N, C, 1, W) result straight into the (N, C, W) output
    shapes: dict[str, tuple[int, ...]] = field(default_factory=dict)


@dict_init
@dataclass(frozen=True)
class LoweredNode:
    """The CANN ops of one IR node and the temporaries they exchange (name -> (shape, dtype)).

    Temporaries are node-local: an executor allocates them per node (see
    :meth:`scratch`) and may reuse that scratch for the next node.
    """

    node: Node
    ops: tuple[LoweredOp, ...]
    temps: dict[str, tuple[tuple[int, ...], np.dtype]]

    def scratch(self, alignment: int = 64) -> tuple[int, dict[str, int], dict[str, str]]:
        """Scratch layout: (total bytes, temp -> byte offset, alias temp -> the name it views).

        Outputs of alias ops (Reshape/Identity views) take no bytes; they view
        their input (a temporary or a graph value).
        """
        views: dict[str, str] = {}
        for op in self.ops:
            if op.alias and op.outputs[0] in self.temps:
                src = op.inputs[0]
                assert isinstance(src, str)
                views[op.outputs[0]] = views.get(src, src)
        offsets: dict[str, int] = {}
        total = 0
        for name, (shape, dtype) in self.temps.items():
            if name in views:
                continue
            offsets[name] = total
            total += -(-math.prod(shape) * dtype.itemsize // alignment) * alignment
        return total, offsets, views


def acl_dtype(dtype: Any) -> int:
    """``aclDataType`` number of a numpy dtype."""
    dt = normalize_dtype(dtype)
    try:
        return dtypes.ACL_CODE[dt]
    except KeyError:
        raise LoweringError(f"dtype {dt} has no aclDataType") from None


class Builder:
    """Builder for one node's lowering (``target``: the backend lowered for)."""

    def __init__(self, g: Graph, node: Node, target: Target) -> None:
        self.g = g
        self.node = node
        self.target = target
        self.ops: list[LoweredOp] = []
        self.temps: dict[str, tuple[tuple[int, ...], np.dtype]] = {}

    def shape(self, name: str) -> tuple[int, ...]:
        if name in self.temps:
            return self.temps[name][0]
        s = self.g.values[name].shape
        if s is None:
            raise LoweringError(
                f"value {name!r} has no shape (run infer_shapes)",
                node=self.node.name,
                op_type=self.node.op_type,
            )
        return s

    def dtype(self, name: str) -> np.dtype:
        if name in self.temps:
            return self.temps[name][1]
        dt = self.g.values[name].dtype
        assert dt is not None
        return dt

    def attr(self, name: str) -> Any:
        return get_attr(self.node, name)

    def tmp(self, shape: Sequence[int], dtype: Any) -> str:
        name = f"{self.node.name}/t{len(self.temps)}"
        self.temps[name] = (tuple(map(int, shape)), dtype if isinstance(dtype, np.dtype) else normalize_dtype(dtype))
        return name

    def tmps(self, n: int, shape: Sequence[int], dtype: Any) -> list[str]:
        """``n`` fresh temporaries of one shape and dtype: ``tmp``'s names, its kind made once."""
        kind = (tuple(map(int, shape)), dtype if isinstance(dtype, np.dtype) else normalize_dtype(dtype))
        temps = self.temps
        k = len(temps)
        names = [f"{self.node.name}/t{i}" for i in range(k, k + n)]
        for name in names:
            temps[name] = kind
        return names

    def op(
        self,
        op_type: str,
        inputs: Sequence[InputRef],
        outputs: Sequence[str],
        /,
        alias: bool = False,
        **attrs: Any,
    ) -> None:
        self.ops.append(LoweredOp(op_type, tuple(inputs), tuple(outputs), attrs, alias))

    def to(
        self,
        op_type: str,
        inputs: Sequence[InputRef],
        out_shape: Sequence[int],
        out_dtype: Any,
        /,
        **attrs: Any,
    ) -> str:
        """Emit an op with a fresh temporary output and return its name."""
        out = self.tmp(out_shape, out_dtype)
        self.op(op_type, inputs, [out], **attrs)
        return out

    def reshape(self, x: str, shape: Sequence[int], out: str | None = None) -> str:
        out = out or self.tmp(shape, self.dtype(x))
        self.op("Reshape", [x, ConstInput(np.array(list(shape), np.int64))], [out], alias=True)
        return out

    def fill(self, shape: Sequence[int], value: Any, dtype: Any, out: str | None = None) -> str:
        """``Fill(dims, value)`` into ``out`` (or a new temporary); a scalar (whose dims would be an
        empty const, which ACL refuses) or a tiny result is an ``Identity`` of a const instead."""
        dt = normalize_dtype(dtype)
        shape = tuple(int(d) for d in shape)
        out = out or self.tmp(shape, dt)
        if not shape or 0 < math.prod(shape) <= 16:
            self.op("Identity", [ConstInput(np.full(shape, value, dt))], [out])
        else:
            self.op("Fill", [ConstInput(np.array(shape, np.int64)), ConstInput(np.array(value, dt))], [out])
        return out

    def scalar(self, v: Any, dtype: Any) -> ConstInput:
        return ConstInput(np.array(v, dtype=normalize_dtype(dtype)))

    def fail(self, msg: str) -> LoweringError:
        return LoweringError(msg, node=self.node.name, op_type=self.node.op_type)


Rule = Callable[[Builder], None]
#: IR op type -> lowering rule (filled by the op-family modules of this package)
RULES: dict[str, Rule] = {}


def rule(*op_types: str) -> Callable[[Rule], Rule]:
    """Register a lowering rule for ``op_types``."""

    def deco(fn: Rule) -> Rule:
        for op in op_types:
            RULES[op] = fn
        return fn

    return deco


def ints(v: Any) -> list[int] | None:
    """A constant as a flat list of ints (``None`` stays ``None``)."""
    if v is None:
        return None
    a = np.asarray(v).reshape(-1)
    items: list[Any] = a.tolist()  # Python scalars (ints for an integer array): no numpy scalar per item
    return items if a.dtype.kind in "iu" else [int(x) for x in items]


def const(L: Builder, i: int) -> np.ndarray | None:
    """The compile-time value of the node's input ``i``: a constant, or a small value computed from
    constants and static shapes (``Shape`` -> ``Gather`` -> ``Concat`` ...) that was not folded."""
    name = L.node.input(i)
    if not name:
        return None
    g = L.g
    c = g.constants.get(name)
    if c is not None:
        return c
    if name in g.inputs:  # a graph input (never a constant or a node's output) has no compile-time value:
        return None  # known_values would walk the whole graph to say so (a Gather of input ids)
    return _known(g).get(name)


_KNOWN: weakref.WeakKeyDictionary[Graph, tuple[tuple[int, int, int], dict[str, np.ndarray]]] = (
    weakref.WeakKeyDictionary()
)


def _known(g: Graph) -> dict[str, np.ndarray]:
    """``known_values(g)``, computed once per graph (and again if its nodes or constants change)."""
    key = (id(g.nodes), len(g.nodes), len(g.constants))
    hit = _KNOWN.get(g)
    if hit is not None and hit[0] == key:
        return hit[1]
    from ..passes.infer_shapes import known_values

    vals = known_values(g)
    _KNOWN[g] = (key, vals)
    return vals
