"""The NCHWc8 blocked layout: convolution chains computed on channel-blocked tensors.

A float32 tensor of logical NCHW shape ``[N, C, H, W]`` with ``C % 8 == 0``
is stored in the NCHWc8 layout as the 5-D tensor ``[N, C/8, H, W, 8]``:
channel ``c`` lives at block ``c // 8``, lane ``c % 8``.  In the graph (and
in the runtime's descriptors) it is an ordinary 5-D float32 tensor, so the
planner and the arena need nothing new.  Convolutions on that layout read
eight contiguous channels per pixel, which suits the host kernels' 8-wide
vectors; ordinary elementwise ops run on it unchanged (every operand of one
logical shape has the same layout; a per-channel constant ``[1, C, 1, 1]``
becomes ``[1, C/8, 1, 1, 8]`` and still broadcasts).

:func:`nchwc_layout` rewrites a graph into four host-only ops (float32 only;
their graph attrs are the host kernels' attrs):

* ``_ReorderToNchwc(x)``: ``[N, C, H, W]`` -> ``[N, C/8, H, W, 8]``;
* ``_ReorderFromNchwc(x)``: ``[N, C/8, H, W, 8]`` -> ``[N, C, H, W]``;
* ``_NchwcConv2D(x, w, b?, z?)``: ``y = act(conv(x, w) + b + z)`` with ``x``,
  ``z`` (an optional residual of the output's shape) and ``y`` blocked, ``w``
  the ordinary ``[Cout, Cin/groups, kh, kw]`` filter (a constant) and ``b`` a
  ``[Cout]`` bias; attrs ``strides`` and ``dilations`` ``[1, 1, h, w]``,
  ``pads`` ``[top, bottom, left, right]``, ``groups`` (1, depthwise, or groups
  whose input and output channel counts are multiples of 8), ``activation``
  and its params as ``_FusedConv2D`` takes them
  (:func:`aioge._layout.conv2d_attrs`);
* ``_NchwcPool2D(x)``: max or average pooling of a blocked tensor; attrs
  ``mode`` (``"max"``/``"avg"``), ``global`` (0/1: one output pixel over the
  whole plane; the window attrs are then ignored), ``kernel``, ``strides``,
  ``dilations`` (2 ints each), ``pads`` ``[top, bottom, left, right]`` and
  ``count_include_pad`` (0/1).  The output size is the floor-mode one: ONNX's
  ``ceil_mode`` arrives as extra bottom/right padding.  Windows are clipped
  to the input for max and, with ``count_include_pad = 0``, for the
  average's divisor; with 1 the divisor counts the taps inside input + pads.

What the pass converts:

* ``Conv``/``_FusedConv`` nodes, 2-D, float32, with a constant filter and
  channel counts and groups of a form above -> ``_NchwcConv2D``;
* ``MaxPool`` (no indices output), ``AveragePool`` (2-D; not an average that
  counts padding while ``ceil_mode`` adds some), ``GlobalAveragePool``,
  ``GlobalMaxPool`` on a multiple of 8 channels -> ``_NchwcPool2D``;
* elementwise ops (``Relu``, ``Add``, ``Mul``, ``Clip``, ``HardSwish``,
  ``_FusedElementwise``, ...) with at least one blocked operand, every other
  operand blocked with the same channel count, a per-channel constant
  (re-laid out), a computed ``[N, C, 1, 1]`` value (reordered: a
  squeeze-excitation's scale from convs that stay NCHW) or a single element,
  stay blocked;
* ``Concat`` on the channel axis of blocked inputs (and NCHW ones with a
  multiple of 8 channels, reordered) -> ``Concat`` on axis 1 of the 5-D
  tensors;
* an inference ``BatchNormalization`` (constant parameters) of a blocked
  value -> a depthwise 1x1 ``_NchwcConv2D`` (DenseNet's BatchNorm after a
  Concat; it does not count as a convolution for the rule below);
* a ``Mul`` of a blocked value of one batch item by a computed ``[1, C, 1, 1]``
  scale (a squeeze-excitation's) -> a depthwise 1x1 ``_NchwcConv2D`` whose
  filter ``[C, 1, 1, 1]`` is a ``Reshape`` (a view) of the scale: a
  broadcast ``Mul`` of the blocked layout reads a row of 8 floats at a time
  (3-6x the NCHW ``Mul``'s time), the conv whole planes (the same time); it
  does not count as a convolution either;
* ``Add(conv, other)`` [+ an activation the conv takes], where the conv has
  no activation and is the only reader of its output and ``other`` is blocked
  with the same shape, becomes the conv's residual input ``z`` and activation
  (ResNet's Conv + Add + Relu); an activation after a conv that has none (a
  BatchNormalization's) becomes its activation.

Everything else is an edge: it reads the NCHW value, which one
``_ReorderFromNchwc`` per blocked value (shared by its NCHW readers, and by
graph outputs) recomputes; a converted conv or pool reading an NCHW value
reads it through one ``_ReorderToNchwc`` per value.  A value of one pixel
(``H = W = 1``: a global pool's output, a squeeze-excitation's scale) has
the same bytes in both layouts: its reorder is a ``Reshape`` (a view).

**The rule for short chains**: the converted nodes form components (linked
by the blocked values between them); a component with fewer than two
convolutions stays NCHW, since one conv between NCHW ops would pay two
reorders for no blocked neighbour.

The pass needs inferred shapes; :func:`aioge.graph.optimize` runs it at
level 2 after ``fuse`` for targets whose ``layouts`` include ``"NCHWc8"``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ... import _shapes as S
from ..._layout import conv2d_attrs
from ..ewprogram import ACTIVATIONS
from ..ir import Graph, Node, Value
from ..reference import to_nchwc
from ..schema import ELEMENTWISE_BINARY, ELEMENTWISE_UNARY, get_attr
from ._util import node_order, require_shapes, single_consumer, working_copy
from .fuse import _activation, _explicit_conv_attrs
from .infer_ops import nchwc_groups_ok
from .infer_shapes import carry_node

__all__ = ("nchwc_layout", "LANES")

#: channels per block
LANES = 8
_F32 = np.dtype("float32")
_POOLS = frozenset({"MaxPool", "AveragePool", "GlobalAveragePool", "GlobalMaxPool"})
_ELEMENTWISE = ELEMENTWISE_UNARY | ELEMENTWISE_BINARY | {"Sum", "Mean", "HardSwish", "HardSigmoid",
                                                         "_FusedElementwise"}  # fmt: skip


def blocked_shape(shape: tuple[int, ...]) -> tuple[int, ...]:
    """The NCHWc8 shape of a logical NCHW shape."""
    n, c, h, w = shape
    return (n, c // LANES, h, w, LANES)


@dataclass
class _Plan:
    """Which nodes convert and how (node ids), and which values are blocked (original names)."""

    kind: dict[int, str] = field(default_factory=dict)  # "conv" | "pool" | "ew" | "concat"
    attrs: dict[int, dict[str, Any]] = field(default_factory=dict)  # the _Nchwc* attrs of conv/pool nodes
    blocked: set[str] = field(default_factory=set)
    reordered: set[str] = field(default_factory=set)  # NCHW values a converted conv or pool reads (reordered)
    #: the epilogues: conv id -> (residual z value or "", absorbed nodes in order, activation attrs)
    residual: dict[int, tuple[str, list[Node], dict[str, Any]]] = field(default_factory=dict)
    absorbed: dict[int, Node] = field(default_factory=dict)  # absorbed node id -> its conv
    #: BatchNormalization nodes run as depthwise 1x1 convs: node id -> (filter, bias)
    affine: dict[int, tuple[np.ndarray, np.ndarray]] = field(default_factory=dict)
    #: channel scalings (a squeeze-excitation's Mul) run as depthwise 1x1 convs: node id -> (x, the scale)
    scale: dict[int, tuple[str, str]] = field(default_factory=dict)

    def x_of(self, n: Node) -> str:
        """The (image) input of a converted conv or pool."""
        return self.scale[id(n)][0] if id(n) in self.scale else n.inputs[0]


def _shape(g: Graph, v: str) -> tuple[int, ...]:
    return g.values[v].shape or ()


def _nchw_float32(g: Graph, v: str) -> bool:
    val = g.values[v]
    return val.dtype == _F32 and len(val.shape or ()) == 4 and (val.shape or (0, 1))[1] % LANES == 0


def _conv_attrs(g: Graph, n: Node) -> dict[str, Any] | None:
    x, w, out = n.inputs[0], n.inputs[1], n.outputs[0]
    if not (_nchw_float32(g, x) and _nchw_float32(g, out)) or w not in g.constants or len(_shape(g, w)) != 4:
        return None
    group = int(get_attr(n, "group") or 1)
    if not nchwc_groups_ok(_shape(g, x)[1], _shape(g, out)[1], group):
        return None
    return conv2d_attrs(n.attrs if n.op_type == "_FusedConv" else _explicit_conv_attrs(g, n))  # (reads it only)


def _pool_attrs(g: Graph, n: Node) -> dict[str, Any] | None:
    x, out = n.inputs[0], n.outputs[0]
    if not (_nchw_float32(g, x) and _nchw_float32(g, out)) or any(n.outputs[1:]):
        return None
    if n.op_type.startswith("Global"):
        return {"mode": "max" if n.op_type == "GlobalMaxPool" else "avg", "global": 1}
    kernel = [int(k) for k in get_attr(n, "kernel_shape") or []]
    if len(kernel) != 2:
        return None
    strides = [int(s) for s in get_attr(n, "strides") or [1, 1]]
    dil = [int(d) for d in get_attr(n, "dilations") or [1, 1]]
    hw = _shape(g, x)[2:]
    pb, pe, out_hw = S.pool_geometry(hw, kernel, strides, dil, get_attr(n, "pads"), str(get_attr(n, "auto_pad")),
                                     int(get_attr(n, "ceil_mode")))  # fmt: skip
    if tuple(out_hw) != _shape(g, out)[2:]:
        return None
    # ceil_mode: the last window may hang past the end padding; that overhang becomes padding
    extra = [max(0, (out_hw[i] - 1) * strides[i] + (kernel[i] - 1) * dil[i] + 1 - (hw[i] + pb[i] + pe[i]))
             for i in range(2)]  # fmt: skip
    attrs: dict[str, Any] = {"mode": "max" if n.op_type == "MaxPool" else "avg", "global": 0, "kernel": kernel,
                             "strides": strides, "pads": [pb[0], pe[0] + extra[0], pb[1], pe[1] + extra[1]],
                             "dilations": dil}  # fmt: skip
    if n.op_type == "AveragePool":
        attrs["count_include_pad"] = int(get_attr(n, "count_include_pad"))
        if attrs["count_include_pad"] and any(extra):  # its divisor would count the overhang
            return None
    return attrs


def _batchnorm_affine(g: Graph, n: Node) -> tuple[np.ndarray, np.ndarray] | None:
    """An inference BatchNormalization with constant parameters as the filter ``[C, 1, 1, 1]`` and
    bias ``[C]`` of a depthwise 1x1 conv computing ``x * s + (B - mean * s)``, ``s = scale / sqrt(var + eps)``
    (the reference's arithmetic, in float32)."""
    if any(n.outputs[1:]) or not _nchw_float32(g, n.outputs[0]) or not all(i in g.constants for i in n.inputs[1:]):
        return None
    if int(get_attr(n, "training_mode") or 0):
        return None
    scale, bias, mean, var = (np.asarray(g.constants[i], _F32).reshape(-1) for i in n.inputs[1:])
    c = _shape(g, n.outputs[0])[1]
    if any(a.size != c for a in (scale, bias, mean, var)):
        return None
    eps = np.asarray(float(get_attr(n, "epsilon")), _F32)
    s = (scale / np.sqrt(var + eps)).astype(_F32)
    return s.reshape(c, 1, 1, 1), (bias - mean * s).astype(_F32)


def _per_channel(g: Graph, v: str, channels: int) -> bool:
    """A constant that varies along the channel axis only: ``[C, 1, 1]`` or ``[1, C, 1, 1]``."""
    s = _shape(g, v)
    return v in g.constants and len(s) <= 4 and (1,) * (4 - len(s)) + s == (1, channels, 1, 1)


def _ew_ok(g: Graph, n: Node, p: _Plan) -> bool:
    out = n.outputs[0]
    if len(n.outputs) != 1 or not _nchw_float32(g, out) or not any(i in p.blocked for i in n.inputs):
        return False
    c = _shape(g, out)[1]
    for i in n.inputs:
        if not i or math.prod(_shape(g, i)) == 1:
            continue
        if i in p.blocked or i in p.reordered:
            if _shape(g, i)[1] != c:
                return False
        elif not (_per_channel(g, i, c) or _one_pixel(g, i, c)):
            return False
    return True


def _one_pixel(g: Graph, v: str, channels: int) -> bool:
    """A computed ``[N, C, 1, 1]`` float32 value (a squeeze-excitation's scale): cheap to reorder."""
    s = _shape(g, v)
    return v not in g.constants and _nchw_float32(g, v) and s[1] == channels and s[2:] == (1, 1)


def _channel_scale(g: Graph, n: Node, p: _Plan) -> tuple[str, str] | None:
    """(x, s) of a ``Mul`` of a blocked image ``x`` of one batch item by a computed per-channel scale
    ``s`` ``[1, C, 1, 1]`` (a squeeze-excitation's): a depthwise 1x1 conv whose filter is ``s`` (a
    view), where a blocked broadcast ``Mul`` reads and writes one vector per pixel and channel block."""
    if len(n.inputs) != 2 or len(n.outputs) != 1 or not _nchw_float32(g, n.outputs[0]):
        return None
    out = _shape(g, n.outputs[0])
    for x, s in (n.inputs, n.inputs[::-1]):
        if (x in p.blocked and _shape(g, x) == out and out[0] == 1 and out[2:] != (1, 1)
                and (s in p.blocked or _one_pixel(g, s, out[1])) and _shape(g, s) == (1, out[1], 1, 1)):  # fmt: skip
            return x, s
    return None


def _decide(g: Graph, order: list[Node]) -> _Plan:
    p = _Plan()
    for n in order:
        attrs: dict[str, Any] | None = None
        op = n.op_type
        if op in ("Conv", "_FusedConv"):
            attrs = _conv_attrs(g, n)
            kind = "conv"
        elif op in _POOLS:
            attrs = _pool_attrs(g, n)
            kind = "pool"
        elif op == "BatchNormalization":
            affine = _batchnorm_affine(g, n) if n.inputs[0] in p.blocked else None
            if affine is None:
                continue
            p.affine[id(n)] = affine
            c = affine[1].size
            attrs = {"strides": [1, 1, 1, 1], "pads": [0, 0, 0, 0], "dilations": [1, 1, 1, 1], "groups": c}
            kind = "conv"
        elif op == "Mul" and (xs := _channel_scale(g, n, p)) is not None:
            p.scale[id(n)] = xs
            attrs = {"strides": [1, 1, 1, 1], "pads": [0, 0, 0, 0], "dilations": [1, 1, 1, 1],
                     "groups": _shape(g, n.outputs[0])[1]}  # fmt: skip
            kind = "conv"
        elif op in _ELEMENTWISE:
            kind = "ew" if _ew_ok(g, n, p) else ""
        elif op == "Concat":  # of blocked values and NCHW ones (reordered) with multiples of 8 channels
            ok = _nchw_float32(g, n.outputs[0]) and int(get_attr(n, "axis")) in (1, -3)
            ok = ok and any(i in p.blocked for i in n.inputs) and all(_nchw_float32(g, i) for i in n.inputs)
            kind = "concat" if ok else ""
        else:
            continue
        if kind in ("conv", "pool"):
            if attrs is None:
                continue
            p.attrs[id(n)] = attrs
            if p.x_of(n) not in p.blocked:
                p.reordered.add(p.x_of(n))
        elif not kind:
            continue
        p.kind[id(n)] = kind
        p.blocked.add(n.outputs[0])
    _drop_short_chains(g, order, p)
    return p


def _drop_short_chains(g: Graph, order: list[Node], p: _Plan) -> None:
    """Revert the components with fewer than two convolutions (the module docstring's rule)."""
    parent = {id(n): id(n) for n in order if id(n) in p.kind}

    def find(a: int) -> int:
        while parent[a] != a:
            parent[a] = parent[parent[a]]
            a = parent[a]
        return a

    kind, blocked = p.kind, p.blocked
    members = [n for n in order if id(n) in kind]
    producers = {n.outputs[0]: n for n in members}
    for n in members:
        for i in n.inputs:
            if i in blocked:
                parent[find(id(producers[i]))] = find(id(n))
    roots = [find(id(n)) for n in members]
    convs: dict[int, int] = {}
    for n, r in zip(members, roots, strict=True):
        if kind[id(n)] == "conv" and id(n) not in p.affine and id(n) not in p.scale:
            convs[r] = convs.get(r, 0) + 1
    for n, r in zip(members, roots, strict=True):
        if convs.get(r, 0) < 2:
            del kind[id(n)]
            p.attrs.pop(id(n), None)
            p.affine.pop(id(n), None)
            p.scale.pop(id(n), None)
            blocked.discard(n.outputs[0])
    p.reordered = {p.x_of(n) for n in order if p.kind.get(id(n)) in ("conv", "pool")} - p.blocked


def _residual_add(n: Node) -> tuple[list[str], dict[str, Any] | None] | None:
    """(the two summands, the activation after the sum or None) of an ``Add`` node or of a
    ``_FusedElementwise`` computing ``act?(a + b)``; None for anything else."""
    if n.op_type == "Add":
        return list(n.inputs), None
    if n.op_type != "_FusedElementwise":
        return None
    prog = list(get_attr(n, "program") or [])
    if not prog or len(prog) > 2 or prog[0][0] != "Add" or sorted(prog[0][1]) != [0, 1] or len(n.inputs) != 2:
        return None
    if len(prog) == 1:
        return list(n.inputs), None
    act, srcs, params = prog[1]
    if act not in ACTIVATIONS or act == "none" or list(srcs) != [2]:
        return None
    attrs: dict[str, Any] = {"activation": act}
    attrs.update(zip(ACTIVATIONS[act], (float(x) for x in params), strict=False))
    return list(n.inputs), attrs


def _fuse_residuals(g: Graph, order: list[Node], p: _Plan, consumers: dict[str, list[Node]]) -> None:
    producers = {o: n for n in order for o in n.outputs if o}
    for add in order:
        found = _residual_add(add) if p.kind.get(id(add)) == "ew" else None
        if found is None:
            continue
        (a, b), act = found
        for conv_out, z in ((a, b), (b, a)):
            conv = producers.get(conv_out)
            if (conv is None or p.kind.get(id(conv)) != "conv" or id(conv) in p.residual or conv_out == z
                    or p.attrs[id(conv)].get("activation", "none") != "none"
                    or (z not in p.blocked and z not in p.reordered)
                    or _shape(g, z) != _shape(g, conv_out) or _shape(g, add.outputs[0]) != _shape(g, conv_out)
                    or single_consumer(g, consumers, conv_out) is not add):  # fmt: skip
                continue
            absorbed = [add]
            nxt = single_consumer(g, consumers, add.outputs[0]) if act is None else None
            if nxt is not None and p.kind.get(id(nxt)) == "ew" and nxt.inputs[0] == add.outputs[0]:
                act = _activation(g, nxt)
                if act is not None:
                    absorbed.append(nxt)
            # the fused conv takes the place of the last absorbed node: z is computed before it
            p.residual[id(conv)] = (z, absorbed, act or {"activation": "none"})
            for m in absorbed:
                p.absorbed[id(m)] = conv
            break
    for conv in order:  # an activation after a conv fuse has not joined (a BatchNormalization's)
        if p.kind.get(id(conv)) != "conv" or id(conv) in p.residual or "activation" in p.attrs[id(conv)]:
            continue
        nxt = single_consumer(g, consumers, conv.outputs[0])
        act = _activation(g, nxt) if nxt is not None and p.kind.get(id(nxt)) == "ew" else None
        if nxt is not None and act is not None and nxt.inputs[0] == conv.outputs[0]:
            p.residual[id(conv)] = ("", [nxt], act)
            p.absorbed[id(nxt)] = conv


class _Rewriter:
    def __init__(self, g: Graph, p: _Plan, consumers: dict[str, list[Node]]) -> None:
        self.g, self.p = g, p
        self.nodes: list[Node] = []
        self.bname: dict[str, str] = {}  # blocked value (original name) -> its 5-D value
        self.to_cache: dict[str, str] = {}  # NCHW value -> its _ReorderToNchwc output
        self.consts: dict[str, str] = {}  # per-channel constant -> its re-laid-out copy
        self.consumers = consumers  # g's readers (g.nodes is replaced only after the rewrite)

    def new_value(self, prefix: str, shape: tuple[int, ...]) -> str:
        name = self.g.fresh_name(prefix)
        self.g.values[name] = Value(name, shape, _F32)
        return name

    def blocked_in(self, v: str) -> str:
        """``v`` in NCHWc8: its blocked value or (once per value) a _ReorderToNchwc of it."""
        if v in self.bname:
            return self.bname[v]
        if v not in self.to_cache:
            out = self.new_value(f"{v}/nchwc8", blocked_shape(_shape(self.g, v)))
            self.nodes.append(self.reorder("_ReorderToNchwc", v, out))
            self.to_cache[v] = out
        return self.to_cache[v]

    def reorder(self, op: str, src: str, dst: str) -> Node:
        """``op`` from ``src`` to ``dst``, or a ``Reshape`` (a view) for one pixel, where both layouts
        are the same bytes (channel c of image n at n * C + c)."""
        shape = _shape(self.g, dst)
        name = self.g.fresh_name(f"{dst}/{'to' if op == '_ReorderToNchwc' else 'from'}_nchwc8")
        if math.prod(shape[2:4]) != 1:
            return Node(op, [src], [dst], {}, name)
        target = self.g.fresh_name(f"{name}/shape")
        self.g.set_constant(target, np.asarray(shape, np.int64))
        return Node("Reshape", [src, target], [dst], {}, name)

    def conv_inputs(self, n: Node) -> list[str]:
        """x (blocked), w, b of a converted conv (or BatchNormalization: its depthwise filter and bias;
        a channel scaling: the scale viewed as the depthwise filter)."""
        if id(n) in self.p.scale:
            x, s = self.p.scale[id(n)]
            c = _shape(self.g, s)[1]
            w = self.new_value(f"{s}/filter", (c, 1, 1, 1))
            target = self.g.fresh_name(f"{w}/shape")
            self.g.set_constant(target, np.asarray((c, 1, 1, 1), np.int64))
            self.nodes.append(Node("Reshape", [self.bname.get(s, s), target], [w], {}, self.g.fresh_name(w)))
            return [self.blocked_in(x), w]
        if id(n) not in self.p.affine:
            return [self.blocked_in(n.inputs[0]), n.inputs[1], n.input(2)]
        names = []
        for what, arr in zip(("filter", "bias"), self.p.affine[id(n)], strict=True):
            names.append(self.g.fresh_name(f"{n.name or n.op_type}/{what}"))
            self.g.set_constant(names[-1], arr)
        return [self.blocked_in(n.inputs[0]), *names]

    def ew_in(self, v: str, channels: int) -> str:
        """An operand of a blocked elementwise node (``_ew_ok``'s kinds) in the blocked layout."""
        if not v or v in self.p.blocked:
            return self.bname[v] if v else v
        if math.prod(_shape(self.g, v)) == 1:
            return v  # a single element: broadcasts as it is
        if _per_channel(self.g, v, channels):
            if v not in self.consts:
                arr = self.g.constants[v].reshape(1, channels, 1, 1)
                name = self.g.fresh_name(f"{v}/nchwc8")
                self.g.set_constant(name, to_nchwc(arr))
                self.consts[v] = name
            return self.consts[v]
        # an NCHW image of these channels: one pixel, or reordered for a conv or pool (once, shared) --
        # also when the short-chain rule reverted that conv or pool after this node was decided
        return self.blocked_in(v)

    def emit(self, n: Node, inputs: list[str], attrs: dict[str, Any], op: str, out: str) -> None:
        """Emit the blocked form of ``n`` writing the blocked copy of ``out`` (and its NCHW form if read)."""
        while inputs and not inputs[-1]:
            inputs.pop()
        b = self.new_value(f"{out}/nchwc8", blocked_shape(_shape(self.g, out)))
        self.bname[out] = b
        self.nodes.append(Node(op, inputs, [b], attrs, n.name, n.domain))
        # an edge: a graph output or a reader that stays NCHW reads it through one reorder
        if out in self.g.outputs or any(id(c) not in self.p.kind for c in self.consumers.get(out, [])):
            self.nodes.append(self.reorder("_ReorderFromNchwc", b, out))

    def run(self, order: list[Node]) -> None:
        p = self.p
        for n in order:
            kind = p.kind.get(id(n))
            if kind is None:
                self.nodes.append(n)
                continue
            if id(n) in p.absorbed:
                conv = p.absorbed[id(n)]
                z, absorbed, act = p.residual[id(conv)]
                if n is absorbed[-1]:  # the conv with its residual input and activation takes this place
                    attrs = {**p.attrs[id(conv)], **act}
                    ins = [*self.conv_inputs(conv), self.blocked_in(z) if z else ""]
                    self.emit(conv, ins, attrs, "_NchwcConv2D", n.outputs[0])
                continue
            if kind == "conv":
                if id(n) in p.residual:
                    continue  # emitted in the place of its last absorbed node
                self.emit(n, self.conv_inputs(n), dict(p.attrs[id(n)]), "_NchwcConv2D", n.outputs[0])
            elif kind == "pool":
                self.emit(n, [self.blocked_in(n.inputs[0])], dict(p.attrs[id(n)]), "_NchwcPool2D", n.outputs[0])
            elif kind == "concat":
                self.emit(n, [self.blocked_in(i) for i in n.inputs], {"axis": 1}, "Concat", n.outputs[0])
            else:
                c = _shape(self.g, n.outputs[0])[1]
                self.emit(n, [self.ew_in(i, c) for i in n.inputs], dict(n.attrs), n.op_type, n.outputs[0])


def nchwc_layout(graph: Graph, *, tidy: bool = False) -> Graph:
    """Rewrite convolution chains into the NCHWc8 layout (see the module docstring); returns a new graph.
    ``tidy``: ``graph``'s nodes are known to be in topological order (see ``fuse``): not checked again.

    Raises:
        PlanError: if the graph has no inferred shapes.
    """
    require_shapes(graph, "nchwc_layout")
    g = working_copy(graph)
    if not any(n.op_type in ("Conv", "_FusedConv") for n in g.nodes):
        return g
    order = node_order(g, tidy)[0]
    p = _decide(g, order)
    if not p.kind:
        return g
    consumers = g.consumers()  # (neither the plan nor the residual fusion edits g)
    _fuse_residuals(g, order, p, consumers)
    r = _Rewriter(g, p, consumers)
    r.run(order)
    kept = {id(n) for n in order}
    for n in r.nodes:
        if id(n) not in kept:  # emitted with its outputs' blocked (or NCHW) shapes and float32
            carry_node(g, n)
    g.nodes = r.nodes
    g.prune_values()
    return g
