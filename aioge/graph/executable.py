"""The executable layout of a planned, lowered graph (pure: no runtime, no C).

Places every operand of every lowered op -- an input, a weight, an output, an
arena offset, a constant or an absent optional -- and cuts each stream's
steps into *segments* (runs of consecutive steps between waits and records),
which the runtime's executor (:mod:`aioge.runtime.graphs.executable`) loads as one
``aiogeGraph`` and enqueues segment by segment.
"""

from __future__ import annotations

import enum
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from .. import dtypes
from .lower.host import host_attrs

if TYPE_CHECKING:
    from .ir import Graph
    from .lower import LoweredNode
    from .planner import Plan

__all__ = ("ALIGN", "Layout", "Loc", "PlacedOp", "Segment", "aligned", "kind_of")


class Loc(enum.IntEnum):
    """Where an operand lives: ``AIOGE_LOC_*`` of ``cffi_build/aioge_graph.h`` (a test checks they agree)."""

    ARENA = 0
    INPUT = 1
    OUTPUT = 2
    CONST = 3
    ABSENT = 4


ARENA, INPUT, OUTPUT, CONST, ABSENT = (int(x) for x in Loc)
#: byte alignment of every arena placement
ALIGN = 64


def _contiguous(value: Any) -> np.ndarray:
    a = np.asarray(value)
    return a if a.flags.c_contiguous else a.copy(order="C")


def kind_of(g: Graph, name: str) -> tuple[tuple[int, ...], np.dtype]:
    """Static shape and dtype of a graph value (after shape inference)."""
    v = g.values.get(name) or g.value(name)  # g.value raises the KeyError naming it
    shape, dt = v.shape, v.dtype
    if shape is None or dt is None:
        raise ValueError(f"value {name!r} has no inferred shape/dtype")
    return shape if type(shape) is tuple else tuple(shape), dtypes.normalize(dt)


def aligned(n: int) -> int:
    """``n`` rounded up to :data:`ALIGN`."""
    return (n + ALIGN - 1) // ALIGN * ALIGN


@dataclass
class Segment:
    index: int
    stream: int
    steps: list[int] = field(default_factory=list)
    waits: set[int] = field(default_factory=set)  # segment indices
    record: bool = False


@dataclass
class PlacedOp:
    """One lowered op with resolved operand places."""

    op_type: str
    name: str
    segment: int
    inputs: list[tuple[Any, int, int]]  # (kind-or-const, loc, at): kind = (dtype, shape) or np.ndarray or None
    outputs: list[tuple[tuple[np.dtype, tuple[int, ...]], int, int]]
    attrs: dict[str, Any]


def _segments(p: Plan) -> tuple[list[Segment], dict[int, int]]:
    """Cut each stream's steps at incoming waits and outgoing records."""
    segs: list[Segment] = []
    open_seg: dict[int, Segment] = {}
    seg_of: dict[int, int] = {}
    for st in p.steps:
        if st.alias:
            continue
        cur = open_seg.get(st.stream)
        if cur is None or st.waits:
            cur = Segment(len(segs), st.stream)
            segs.append(cur)
            open_seg[st.stream] = cur
        for w in st.waits:
            w_seg = seg_of.get(_real_step(p, w))
            if w_seg is not None and w_seg != cur.index:
                cur.waits.add(w_seg)
        cur.steps.append(st.index)
        seg_of[st.index] = cur.index
        if st.record:
            cur.record = True
            open_seg.pop(st.stream)  # the next step on this stream starts a new segment
    return segs, seg_of


def _real_step(p: Plan, idx: int) -> int:
    """Waits on an alias step mean waiting on what produced its storage: the closest earlier real step."""
    st = p.steps[idx]
    while st.alias:
        src = st.node.inputs[0]
        prod = next((s for s in p.steps[: st.index] if src in s.node.outputs), None)
        if prod is None:
            return -1
        st = prod
    return st.index


class Layout:
    """Placements of every operand of a planned, lowered graph."""

    def __init__(self, g: Graph, p: Plan, lowered: Mapping[str, LoweredNode], weight_names: Sequence[str]) -> None:
        self.g = g
        self.p = p
        self.inputs = list(g.inputs)
        self.outputs = list(g.outputs)
        self.weights = list(weight_names)
        self.place: dict[str, tuple[int, int]] = {}
        #: value_kind's results by value name (a value feeds several ops: its kind is made once)
        self._kinds: dict[str, tuple[np.dtype, tuple[int, ...]]] = {}
        #: operand()'s results by value name, likewise
        self._operands: dict[str, tuple[tuple[np.dtype, tuple[int, ...]], int, int]] = {}
        for i, name in enumerate(self.inputs):
            self.place[name] = (INPUT, i)
        for k, name in enumerate(self.weights):
            self.place[name] = (INPUT, len(self.inputs) + k)
        self.copies: list[tuple[str, int]] = []  # (value, output index): outputs that need a copy
        claimed: set[str] = set()
        for j, o in enumerate(self.outputs):
            root = self._root(o)
            buf = p.buffers.get(root)
            if buf is not None and buf.kind == "arena" and root not in claimed and o not in self.inputs:
                claimed.add(root)
                self.place[root] = (OUTPUT, j)
            else:
                self.copies.append((o, j))
        for name, buf in p.buffers.items():
            if name in self.place:
                continue
            if buf.kind == "arena":
                self.place[name] = (ARENA, int(buf.offset or 0))
        self.arena_bytes = aligned(p.arena_bytes)
        self.segments, self.seg_of = _segments(p)
        self.ops: list[PlacedOp] = []
        self.scratch = 0
        self._lower_all(lowered)

    def _root(self, name: str) -> str:
        buf = self.p.buffers.get(name)
        while buf is not None and buf.kind == "alias" and buf.root != name:
            name = buf.root
            buf = self.p.buffers.get(name)
        return name

    def where(self, name: str) -> tuple[int, int]:
        if name in self.place:
            return self.place[name]
        root = self._root(name)
        if root in self.place:
            return self.place[root]
        raise KeyError(name)

    def value_kind(self, name: str) -> tuple[np.dtype, tuple[int, ...]]:
        k = self._kinds.get(name)
        if k is None:
            shape, dt = kind_of(self.g, name)
            k = self._kinds[name] = (dt, shape)
        return k

    def operand(self, name: str) -> tuple[tuple[np.dtype, tuple[int, ...]], int, int]:
        """A graph value as an op's operand: ``(kind, loc, at)``."""
        r = self._operands.get(name)
        if r is None:
            k = self._kinds.get(name)
            if k is None:  # value_kind's work, inline (operand() meets most values first)
                shape, dt = kind_of(self.g, name)
                k = self._kinds[name] = (dt, shape)
            at = self.place.get(name) or self.where(name)  # where()'s first look, inline
            r = self._operands[name] = (k, *at)
        return r

    def _lower_all(self, lowered: Mapping[str, LoweredNode]) -> None:
        # temporaries live in a per-stream scratch region after the arena
        scratch_need = 0
        # steps with temporaries only: each temporary's kind, and the placed ones' offsets in the scratch
        node_temps: dict[int, tuple[dict[str, tuple[np.dtype, tuple[int, ...]]], dict[str, int]]] = {}
        for st in self.p.steps:
            if st.alias:
                continue
            ln = lowered[st.node.name]
            if not ln.temps:
                continue
            places: dict[str, int] = {}
            kinds: dict[str, tuple[np.dtype, tuple[int, ...]]] = {}
            node_temps[st.index] = (kinds, places)
            off = 0
            alias_temps = {op.outputs[0] for op in ln.ops if op.alias}
            for t, (shape, dt) in ln.temps.items():
                kinds[t] = (dt if isinstance(dt, np.dtype) else np.dtype(dt), tuple(shape))
                if t in alias_temps:
                    continue
                places[t] = off
                off += aligned(math.prod(shape) * dt.itemsize)
            scratch_need = max(scratch_need, off)
        self.scratch = scratch_need
        operand = self.operand
        known = self._operands.get  # operand()'s cache, read first: most operands repeat
        for st in self.p.steps:
            if st.alias:
                continue
            ln = lowered[st.node.name]
            seg = self.seg_of[st.index]
            if not ln.temps and len(ln.ops) == 1 and not ln.ops[0].alias:
                # the common node: one op on graph values (the general path below, without temporaries)
                op = ln.ops[0]
                placed_in = [known(x) or operand(x) if isinstance(x, str) else (None, ABSENT, 0) if x is None
                             else (_contiguous(x.value), CONST, 0) for x in op.inputs]  # fmt: skip
                placed_out = [known(o) or operand(o) for o in op.outputs]
                attrs = host_attrs(op.op_type, op.attrs)
                self.ops.append(PlacedOp(op.op_type, st.node.name, seg, placed_in, placed_out, attrs))
                continue
            base = self.arena_bytes + st.stream * self.scratch
            temp_kind, places = node_temps.get(st.index) or ({}, {})
            # a placed temporary as an operand, made once per step (each is written and read by several ops);
            # a view's is added at the alias op that makes it.  Its (loc, at) is where the temporary lives
            temp_ops = {t: (temp_kind[t], ARENA, base + o) for t, o in places.items()}

            def loc(name: str, temp_ops: dict[str, tuple[Any, int, int]] = temp_ops) -> tuple[int, int]:
                r = temp_ops.get(name)
                return (r[1], r[2]) if r is not None else self.where(name)

            def kind(name: str, temp_kind: dict[str, Any] = temp_kind) -> tuple[np.dtype, tuple[int, ...]]:
                return temp_kind[name] if name in temp_kind else self.value_kind(name)

            for k, op in enumerate(ln.ops):
                name = f"{st.node.name}" if len(ln.ops) == 1 else f"{st.node.name}/{k}:{op.op_type}"
                as_kind: dict[str, Any] | None = None  # operands described anew (made only for a copy)
                if op.alias:
                    src, dst = op.inputs[0], op.outputs[0]
                    assert isinstance(src, str), "an alias views a value"
                    if dst in temp_kind and dst not in temp_ops:
                        temp_ops[dst] = (temp_kind[dst], *loc(src))  # a view: same bytes
                        continue
                    if loc(src) == loc(dst):
                        continue
                    # the view must land in a separately placed value: copy the bytes, the source described
                    # with the destination's shape (a Reshape to a scalar would need an empty const, which ACL refuses)
                    op_type, attrs = "Identity", {}
                    ins: Sequence[Any] = [src]
                    if kind(src)[1] != kind(dst)[1]:
                        as_kind = {src: kind(dst)}
                else:
                    op_type, ins, attrs = op.op_type, op.inputs, host_attrs(op.op_type, op.attrs)
                r_ins: list[tuple[Any, int, int]] = []
                for x in ins:
                    if x is None:
                        r_ins.append((None, ABSENT, 0))
                    elif isinstance(x, str):
                        if as_kind and x in as_kind:  # described anew
                            r_ins.append((as_kind[x], *loc(x)))
                            continue
                        # a placed temporary (one look-up: most operands are), else a temporary placed
                        # late, else a graph value
                        r = temp_ops.get(x)
                        if r is None:
                            r = (kind(x), *loc(x)) if x in temp_kind else known(x) or operand(x)
                        r_ins.append(r)
                    else:  # ConstInput
                        r_ins.append((_contiguous(x.value), CONST, 0))
                r_outs = [temp_ops[o] if o in temp_ops else (kind(o), *loc(o)) if o in temp_kind
                          else known(o) or operand(o) for o in op.outputs]  # fmt: skip
                self.ops.append(PlacedOp(op_type, name, seg, r_ins, r_outs, attrs))
        # outputs that alias an input, a weight or another output: one copy each, at the end
        if self.copies:
            final = Segment(len(self.segments), 0, waits={s.index for s in self.segments if s.stream != 0})
            self.segments.append(final)
            for o, j in self.copies:
                self.ops.append(PlacedOp("Identity", f"output:{o}", final.index, [(self.value_kind(o), *self.where(o))],
                                    [(self.value_kind(o), OUTPUT, j)], {}))  # fmt: skip

    @property
    def total_arena(self) -> int:
        return self.arena_bytes + self.p.num_streams * self.scratch
