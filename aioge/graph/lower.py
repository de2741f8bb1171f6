"""Lowering: IR nodes -> CANN single ops for ``aclopCompileAndExecute``.

``lower_node(graph, node) -> LoweredNode`` and ``lower(graph) -> list[LoweredNode]``
(topological order) for a shape-inferred graph.  Each :class:`LoweredOp`
names its CANN op type and attrs exactly as the GE op prototypes
(``research/acl-spec.md`` §7); inputs are in IR order and are

* a value name (a graph value, or a node-local temporary in ``LoweredNode.temps``),
* a :class:`ConstInput` — a small host array passed as a *const* input
  (``aclSetTensorConst`` / host placement), e.g. Reshape's shape, axes, pads,
  scalars, or
* ``None`` — an absent OPTIONAL_INPUT (use the optional-input convention).

Attr Python types map to ``aclopSetAttr*``: ``bool`` -> Bool (uint8),
``int`` -> Int, ``float`` -> Float, ``str`` -> String, ``list[int]`` ->
ListInt (int64), ``list[float]`` -> ListFloat.  ``LoweredOp.alias`` marks an op
that need not launch: its single output is a view of input 0 with another
shape (Reshape/Identity; ORT does the same).  An alias op whose output is a
graph value that the plan gave its own buffer (e.g. the trailing reshape of a
1-D Conv lowered through ``Conv2D``) must be executed as a copy.  With
``direct_outputs=True`` such trailing views are removed instead: the real op
writes the graph value directly and ``LoweredOp.shapes`` gives the descriptor
shape it must be described with; then alias ops only ever produce node-local
temporaries or outputs of Reshape-like IR nodes (which the planner also makes
views).  Ops whose type starts with ``_`` are aioge's fused host ops and lower
to themselves.

Table (ONNX/IR op -> CANN ops):

=====================  ==================================================================
Add Sub Mul Div Pow    same name (x1, x2)
Max Min (N inputs)     ``Maximum`` / ``Minimum`` chain
Sum / Mean (N)         ``Add`` chain (/ ``Div`` by N)
Sqrt Abs Neg Erf       same name (x)
Reciprocal Relu
Sigmoid Tanh
Exp, Log               ``Exp`` / ``Log`` with base=-1.0, scale=1.0, shift=0.0
Sign                   ``Greater``/``Less`` vs 0 -> ``Cast`` -> ``Sub``
LeakyRelu, PRelu       ``Relu(x) + slope * Minimum(x, 0)`` (Relu, Minimum, Mul, Add)
Elu, Selu              ``Relu`` + ``Minimum`` -> ``Exp`` -> ``Add(-1)`` -> ``Mul`` (-> ``Mul`` gamma)
Softplus               ``Relu(x) + Log(Exp(Abs(x), scale=-1), shift=1)``
Shrink                 ``Less``/``Greater`` vs ±lambd, ``Add``/``Sub`` bias, ``Fill`` 0, ``Select`` x2
Gelu (none)            ``Mul(1/sqrt2)`` -> ``Erf`` -> ``Add(1)`` -> ``Mul(x)`` -> ``Mul(0.5)``
Gelu (tanh)            ``Gelu`` (CANN's Gelu is the tanh approximation)
Clip                   ``ClipByValue(x, clip_value_min, clip_value_max)`` (const bounds)
Cast                   ``Cast`` dst_type = aclDataType number
Not                    ``Equal(x, false)``
Equal Less Greater     same name
Where                  ``Select(condition, x1, x2)`` (``BroadcastToD`` first where shapes differ)
Identity Dropout       ``Identity`` (alias; a copy when Dropout's mask is used: ``Fill(dims, true)``)
Reshape Flatten        ``Reshape(x, shape)`` (alias), shape = the static output shape
Squeeze Unsqueeze
Transpose              ``TransposeD`` perm
MatMul                 2-D: ``MatMulV2`` (transpose_x1/x2=false); batched: ``BatchMatMulV2``
                       (adj_x1/adj_x2=false); 1-D operands are reshaped to 2-D and back
Gemm                   ``MatMulV2`` transpose_x1=transA, transpose_x2=transB, bias = C when
                       C is (N,) and alpha = beta = 1; otherwise ``Mul`` alpha, ``Mul`` beta, ``Add``
Conv (1-D, 2-D)        ``Conv2D`` strides/dilations [1,1,h,w], pads [top,bottom,left,right],
                       groups, data_format "NCHW", offset_x 0 (1-D: reshaped to H=1)
ConvTranspose          ``Conv2DTranspose(input_size, x, filter, bias)`` (same attrs plus
                       output_padding [0,0,h,w]; not in acl-spec §7: GE nn_calculation_ops.h)
BatchNormalization     ``BatchNorm`` is_training=false, data_format "NCHW", epsilon;
                       5 scratch outputs; rank != 4 reshaped to 4-D
InstanceNormalization  ``ReduceMeanD`` / ``Sub`` / ``Mul`` / ``ReduceMeanD`` / ``Add`` eps /
                       ``Rsqrt`` / ``Mul`` / ``Mul`` scale / ``Add`` B
LayerNormalization     ``LayerNorm`` begin_norm_axis = begin_params_axis = axis, epsilon
                       (InvStdDev output: ``Add`` eps -> ``Rsqrt`` of the variance)
LRN                    ``Mul`` (square) -> ``Reshape`` (N,1,C,HW) -> ``AvgPoolV2`` over C
                       (exclusive=false) -> ``Reshape`` -> ``Mul`` alpha -> ``Add`` bias ->
                       ``Pow`` beta -> ``Div``
Softmax, LogSoftmax    ``SoftmaxV2`` / ``LogSoftmaxV2`` axes=[axis]
MaxPool                ``MaxPoolV3`` ksize/strides [1,1,h,w], padding_mode "CALCULATED",
                       pads [t,b,l,r], data_format "NCHW", global_pooling false, ceil_mode
AveragePool            ``AvgPoolV2`` as MaxPoolV3 plus exclusive = not count_include_pad
GlobalAveragePool      ``AvgPoolV2`` / ``MaxPoolV3`` with ksize = the spatial dims,
GlobalMaxPool          padding_mode "VALID", global_pooling true
Concat                 ``ConcatD`` concat_dim, N
Split                  equal parts: ``SplitD`` split_dim, num_split; else ``SplitV``
                       (size_splits, split_dim const inputs; num_split)
Slice                  ``StridedSlice(x, begin, end, strides)`` full-rank, clamped; end_mask
                       bit for a negative step running through index 0
Gather                 ``GatherV2(x, indices, axis)`` (axis const int32; constant indices are
                       normalized, otherwise negative_index_support=true)
Expand                 ``BroadcastToD`` shape
Tile                   ``TileD`` multiples
Pad                    ``PadV3(x, paddings, constant_values)`` paddings (rank, 2) int64,
                       paddings_contiguous=true, mode "constant"/"reflect"/"edge"; negative
                       pads crop with ``StridedSlice``
Shape                  ``Identity`` of a const input (normally folded away)
ConstantOfShape        ``Fill(dims, value)`` (const inputs, as ORT)
ReduceSum/Mean/Max/Min ``ReduceSumD`` / ``ReduceMeanD`` / ``ReduceMaxD`` / ``ReduceMinD``
                       axes, keep_dims (ReduceMeanD: noop_with_empty_axes=false);
                       a no-op reduction is an ``Identity`` copy
_FusedConv ...         themselves (host-only op types)
=====================  ==================================================================

Not lowered (raise :class:`LoweringError`): 3-D (and higher) convolution and
pooling, dilated pooling, ``Pad`` mode "wrap".
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from . import _shapes as S
from .errors import LoweringError
from .ir import Graph, Node, normalize_dtype
from .schema import get_attr, get_schema

__all__ = ("ConstInput", "LoweredOp", "LoweredNode", "lower", "lower_node", "acl_dtype")


@dataclass(frozen=True, eq=False)
class ConstInput:
    """A small host array passed as a const input."""

    value: np.ndarray

    def __repr__(self) -> str:
        return f"ConstInput({self.value.tolist()!r}, {self.value.dtype})"


InputRef = str | ConstInput | None


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


_ACL_DT = {
    "float32": 0,
    "float16": 1,
    "int8": 2,
    "int32": 3,
    "uint8": 4,
    "int16": 6,
    "uint16": 7,
    "uint32": 8,
    "int64": 9,
    "uint64": 10,
    "float64": 11,
    "bool": 12,
    "bfloat16": 27,
}


def acl_dtype(dtype: Any) -> int:
    """``aclDataType`` number of a numpy dtype."""
    dt = normalize_dtype(dtype)
    try:
        return _ACL_DT[dt.name]
    except KeyError:
        raise LoweringError(f"dtype {dt} has no aclDataType") from None


class _L:
    """Builder for one node's lowering."""

    def __init__(self, g: Graph, node: Node) -> None:
        self.g = g
        self.node = node
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
        self.temps[name] = (tuple(int(d) for d in shape), normalize_dtype(dtype))
        return name

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

    def scalar(self, v: Any, dtype: Any) -> ConstInput:
        return ConstInput(np.array(v, dtype=normalize_dtype(dtype)))

    def fail(self, msg: str) -> LoweringError:
        return LoweringError(msg, node=self.node.name, op_type=self.node.op_type)


def _ints(v: Any) -> list[int] | None:
    return None if v is None else [int(x) for x in np.asarray(v).reshape(-1)]


def _const(L: _L, i: int) -> np.ndarray | None:
    name = L.node.input(i)
    return L.g.constants.get(name) if name else None


# ----------------------------------------------------------------------- elementwise
def _same(L: _L) -> None:
    L.op(L.node.op_type, L.node.inputs, L.node.outputs)


def _exp_log(L: _L) -> None:
    L.op(L.node.op_type, L.node.inputs, L.node.outputs, base=-1.0, scale=1.0, shift=0.0)


def _chain(L: _L, cann: str, div_by_n: bool = False) -> None:
    ins, out = L.node.inputs, L.node.outputs[0]
    shape, dt = L.shape(out), L.dtype(out)
    if len(ins) == 1 and not div_by_n:
        L.op("Identity", [ins[0]], [out])  # a copy: the plan gives this output its own buffer
        return
    acc = ins[0]
    for i, x in enumerate(ins[1:]):
        last = i == len(ins) - 2 and not div_by_n
        nxt = out if last else L.tmp(S.broadcast_shapes(L.shape(acc), L.shape(x)), dt)
        L.op(cann, [acc, x], [nxt])
        acc = nxt
    if div_by_n:
        L.op("Div", [acc, L.scalar(len(ins), dt)], [out])
    del shape


def _relu_plus_neg(L: _L, x: str, slope: InputRef, out: str) -> None:
    shape, dt = L.shape(out), L.dtype(x)
    r = L.to("Relu", [x], L.shape(x), dt)
    m = L.to("Minimum", [x, L.scalar(0, dt)], L.shape(x), dt)
    neg = L.to("Mul", [m, slope], shape, dt)
    L.op("Add", [r, neg], [out])


def _leaky(L: _L) -> None:
    x = L.node.inputs[0]
    _relu_plus_neg(L, x, L.scalar(float(L.attr("alpha")), L.dtype(x)), L.node.outputs[0])


def _prelu(L: _L) -> None:
    _relu_plus_neg(L, L.node.inputs[0], L.node.inputs[1], L.node.outputs[0])


def _elu_like(L: _L) -> None:
    x, out = L.node.inputs[0], L.node.outputs[0]
    s, dt = L.shape(x), L.dtype(x)
    alpha = float(L.attr("alpha"))
    r = L.to("Relu", [x], s, dt)
    m = L.to("Minimum", [x, L.scalar(0, dt)], s, dt)
    e = L.to("Exp", [m], s, dt, base=-1.0, scale=1.0, shift=0.0)
    em1 = L.to("Add", [e, L.scalar(-1, dt)], s, dt)
    neg = L.to("Mul", [em1, L.scalar(alpha, dt)], s, dt)
    if L.node.op_type == "Elu":
        L.op("Add", [r, neg], [out])
        return
    t = L.to("Add", [r, neg], s, dt)
    L.op("Mul", [t, L.scalar(float(L.attr("gamma")), dt)], [out])


def _softplus(L: _L) -> None:
    x, out = L.node.inputs[0], L.node.outputs[0]
    s, dt = L.shape(x), L.dtype(x)
    a = L.to("Abs", [x], s, dt)
    e = L.to("Exp", [a], s, dt, base=-1.0, scale=-1.0, shift=0.0)
    lg = L.to("Log", [e], s, dt, base=-1.0, scale=1.0, shift=1.0)
    r = L.to("Relu", [x], s, dt)
    L.op("Add", [r, lg], [out])


def _sign(L: _L) -> None:
    x, out = L.node.inputs[0], L.node.outputs[0]
    s, dt = L.shape(x), L.dtype(x)
    gt = L.to("Greater", [x, L.scalar(0, dt)], s, np.bool_)
    lt = L.to("Less", [x, L.scalar(0, dt)], s, np.bool_)
    pos = L.to("Cast", [gt], s, dt, dst_type=acl_dtype(dt))
    neg = L.to("Cast", [lt], s, dt, dst_type=acl_dtype(dt))
    L.op("Sub", [pos, neg], [out])


def _shrink(L: _L) -> None:
    x, out = L.node.inputs[0], L.node.outputs[0]
    s, dt = L.shape(x), L.dtype(x)
    lam, bias = float(L.attr("lambd")), float(L.attr("bias"))
    lo = L.to("Less", [x, L.scalar(-lam, dt)], s, np.bool_)
    hi = L.to("Greater", [x, L.scalar(lam, dt)], s, np.bool_)
    plus = L.to("Add", [x, L.scalar(bias, dt)], s, dt)
    minus = L.to("Sub", [x, L.scalar(bias, dt)], s, dt)
    zero = L.to("Fill", [ConstInput(np.array(s, np.int64)), L.scalar(0, dt)], s, dt)
    upper = L.to("Select", [hi, minus, zero], s, dt)
    L.op("Select", [lo, plus, upper], [out])


def _gelu(L: _L) -> None:
    x, out = L.node.inputs[0], L.node.outputs[0]
    if L.attr("approximate") == "tanh":
        L.op("Gelu", [x], [out])
        return
    s, dt = L.shape(x), L.dtype(x)
    t = L.to("Mul", [x, L.scalar(1 / math.sqrt(2.0), dt)], s, dt)
    e = L.to("Erf", [t], s, dt)
    p = L.to("Add", [e, L.scalar(1, dt)], s, dt)
    h = L.to("Mul", [x, p], s, dt)
    L.op("Mul", [h, L.scalar(0.5, dt)], [out])


def _clip(L: _L) -> None:
    x, out = L.node.inputs[0], L.node.outputs[0]
    dt = L.dtype(x)
    lim = (np.finfo(dt).min, np.finfo(dt).max) if dt.kind == "f" else (np.iinfo(dt).min, np.iinfo(dt).max)
    bounds: list[InputRef] = []
    for i, default in ((1, -np.inf if dt.kind == "f" else lim[0]), (2, np.inf if dt.kind == "f" else lim[1])):
        name = L.node.input(i)
        if not name:
            bounds.append(L.scalar(default, dt))
        elif name in L.g.constants:
            bounds.append(ConstInput(np.asarray(L.g.constants[name], dt).reshape(())))
        else:
            bounds.append(name)
    L.op("ClipByValue", [x, *bounds], [out])


def _cast(L: _L) -> None:
    L.op("Cast", [L.node.inputs[0]], L.node.outputs, dst_type=acl_dtype(L.attr("to")))


def _not(L: _L) -> None:
    L.op("Equal", [L.node.inputs[0], ConstInput(np.array(False))], L.node.outputs)


def _where(L: _L) -> None:
    out = L.node.outputs[0]
    shape = L.shape(out)
    ins: list[InputRef] = []
    for x in L.node.inputs:
        if L.shape(x) != shape:
            x = L.to("BroadcastToD", [x], shape, L.dtype(x), shape=list(shape))
        ins.append(x)
    L.op("Select", ins, [out])


def _identity(L: _L) -> None:
    with_mask = len(L.node.outputs) > 1 and bool(L.node.outputs[1])
    # the planner makes a single-output Identity/Dropout a view; with a mask it is a copy
    L.op("Identity", [L.node.inputs[0]], [L.node.outputs[0]], alias=not with_mask)
    if with_mask:
        mask = L.node.outputs[1]
        L.op("Fill", [ConstInput(np.array(L.shape(mask), np.int64)), ConstInput(np.array(True))], [mask])


def _reshape_like(L: _L) -> None:
    L.reshape(L.node.inputs[0], L.shape(L.node.outputs[0]), out=L.node.outputs[0])


def _transpose(L: _L) -> None:
    x = L.node.inputs[0]
    perm = _ints(L.attr("perm")) or list(range(len(L.shape(x))))[::-1]
    L.op("TransposeD", [x], L.node.outputs, perm=perm)


# ----------------------------------------------------------------------- linear algebra
def _matmul(L: _L) -> None:
    a, b = L.node.inputs
    out = L.node.outputs[0]
    sa, sb, so = L.shape(a), L.shape(b), L.shape(out)
    dt = L.dtype(out)
    if len(sa) == 1:
        a = L.reshape(a, (1, sa[0]))
    if len(sb) == 1:
        b = L.reshape(b, (sb[0], 1))
    ra, rb = len(L.shape(a)), len(L.shape(b))
    full = S.matmul_shape(L.shape(a), L.shape(b))
    target = out if full == so else L.tmp(full, dt)
    if ra == 2 and rb == 2:
        L.op("MatMulV2", [a, b, None, None], [target], transpose_x1=False, transpose_x2=False, offset_x=0)
    else:
        L.op("BatchMatMulV2", [a, b, None, None], [target], adj_x1=False, adj_x2=False, offset_x=0)
    if target != out:
        L.reshape(target, so, out=out)


def _gemm(L: _L) -> None:
    a, b = L.node.inputs[:2]
    c = L.node.input(2)
    out = L.node.outputs[0]
    so, dt = L.shape(out), L.dtype(out)
    alpha, beta = float(L.attr("alpha")), float(L.attr("beta"))
    ta, tb = bool(int(L.attr("transA"))), bool(int(L.attr("transB")))
    as_bias = c and alpha == 1.0 and beta == 1.0 and L.shape(c) == (so[1],)
    if as_bias or not c or beta == 0.0:
        mm = out if alpha == 1.0 else L.tmp(so, dt)
        L.op(
            "MatMulV2",
            [a, b, c if as_bias else None, None],
            [mm],
            transpose_x1=ta,
            transpose_x2=tb,
            offset_x=0,
        )
        if alpha != 1.0:
            L.op("Mul", [mm, L.scalar(alpha, dt)], [out])
        return
    mm = L.to("MatMulV2", [a, b, None, None], so, dt, transpose_x1=ta, transpose_x2=tb, offset_x=0)
    if alpha != 1.0:
        mm = L.to("Mul", [mm, L.scalar(alpha, dt)], so, dt)
    cb = c if beta == 1.0 else L.to("Mul", [c, L.scalar(beta, dt)], L.shape(c), dt)
    L.op("Add", [mm, cb], [out])


def _spatial4(L: _L, v: Sequence[int], n_sp: int, fill: int) -> list[int]:
    """[1, 1, h, w] from per-spatial-dim values (1-D data gets H = ``fill``)."""
    return [1, 1, *([fill] if n_sp == 1 else []), *v]


def _pads4(pb: Sequence[int], pe: Sequence[int]) -> list[int]:
    """[top, bottom, left, right] from ONNX begin/end pads (1-D: top = bottom = 0)."""
    if len(pb) == 1:
        return [0, 0, pb[0], pe[0]]
    return [pb[0], pe[0], pb[1], pe[1]]


def _to4d(L: _L, x: str) -> str:
    s = L.shape(x)
    return L.reshape(x, (*s[:2], 1, s[2])) if len(s) == 3 else x


def _conv(L: _L) -> None:
    x, w = L.node.inputs[:2]
    bias = L.node.input(2) or None
    out = L.node.outputs[0]
    sx, sw = L.shape(x), L.shape(w)
    n_sp = len(sx) - 2
    if n_sp not in (1, 2):
        raise L.fail(f"{n_sp}-D convolution has no CANN lowering here (Conv2D only)")
    kernel = _ints(L.attr("kernel_shape")) or list(sw[2:])
    strides = _ints(L.attr("strides")) or [1] * n_sp
    dil = _ints(L.attr("dilations")) or [1] * n_sp
    pb, pe, _ = S.conv_geometry(sx[2:], kernel, strides, dil, _ints(L.attr("pads")), str(L.attr("auto_pad")))
    x4, w4 = _to4d(L, x), _to4d(L, w)
    target = out if n_sp == 2 else L.tmp((*L.shape(out)[:2], 1, L.shape(out)[2]), L.dtype(out))
    L.op(
        "Conv2D",
        [x4, w4, bias, None],
        [target],
        strides=_spatial4(L, strides, n_sp, 1),
        pads=_pads4(pb, pe),
        dilations=_spatial4(L, dil, n_sp, 1),
        groups=int(L.attr("group") or 1),
        data_format="NCHW",
        offset_x=0,
    )
    if target != out:
        L.reshape(target, L.shape(out), out=out)


def _conv_transpose(L: _L) -> None:
    x, w = L.node.inputs[:2]
    bias = L.node.input(2) or None
    out = L.node.outputs[0]
    sx, sw, so = L.shape(x), L.shape(w), L.shape(out)
    n_sp = len(sx) - 2
    if n_sp not in (1, 2):
        raise L.fail(f"{n_sp}-D ConvTranspose has no CANN lowering here (Conv2DTranspose only)")
    kernel = _ints(L.attr("kernel_shape")) or list(sw[2:])
    strides = _ints(L.attr("strides")) or [1] * n_sp
    dil = _ints(L.attr("dilations")) or [1] * n_sp
    pb, pe, out_sp = S.conv_transpose_geometry(
        sx[2:],
        kernel,
        strides,
        dil,
        _ints(L.attr("pads")),
        str(L.attr("auto_pad")),
        _ints(L.attr("output_padding")),
        _ints(L.attr("output_shape")),
    )
    # CANN: out = (in-1)*s + k_eff - pads + output_padding; solve for output_padding
    adj = [
        out_sp[i] - ((sx[2 + i] - 1) * strides[i] + (kernel[i] - 1) * dil[i] + 1 - pb[i] - pe[i])
        for i in range(n_sp)
    ]
    x4, w4 = _to4d(L, x), _to4d(L, w)
    so4 = so if n_sp == 2 else (*so[:2], 1, so[2])
    target = out if n_sp == 2 else L.tmp(so4, L.dtype(out))
    L.op(
        "Conv2DTranspose",
        [ConstInput(np.array(so4, np.int32)), x4, w4, bias, None],
        [target],
        strides=_spatial4(L, strides, n_sp, 1),
        pads=_pads4(pb, pe),
        dilations=_spatial4(L, dil, n_sp, 1),
        groups=int(L.attr("group") or 1),
        data_format="NCHW",
        output_padding=[0, 0, *([0] if n_sp == 1 else []), *adj],
        offset_x=0,
    )
    if target != out:
        L.reshape(target, so, out=out)


# ----------------------------------------------------------------------- normalization
def _batchnorm(L: _L) -> None:
    x, scale, b, mean, var = L.node.inputs
    out = L.node.outputs[0]
    s = L.shape(x)
    c = s[1]
    x4 = x if len(s) == 4 else L.reshape(x, (s[0], c, math.prod(s[2:]) if len(s) > 2 else 1, 1))
    target = out if len(s) == 4 else L.tmp(L.shape(x4), L.dtype(out))
    scratch = [L.tmp((c,), np.float32) for _ in range(5)]
    L.op(
        "BatchNorm",
        [x4, scale, b, mean, var],
        [target, *scratch],
        epsilon=float(L.attr("epsilon")),
        data_format="NCHW",
        is_training=False,
    )
    if target != out:
        L.reshape(target, s, out=out)


def _instnorm(L: _L) -> None:
    x, scale, b = L.node.inputs
    out = L.node.outputs[0]
    s, dt = L.shape(x), L.dtype(x)
    axes = list(range(2, len(s)))
    red = (*s[:2], *([1] * len(axes)))
    mean = L.to("ReduceMeanD", [x], red, dt, axes=axes, keep_dims=True, noop_with_empty_axes=False)
    d = L.to("Sub", [x, mean], s, dt)
    sq = L.to("Mul", [d, d], s, dt)
    var = L.to("ReduceMeanD", [sq], red, dt, axes=axes, keep_dims=True, noop_with_empty_axes=False)
    ve = L.to("Add", [var, L.scalar(float(L.attr("epsilon")), dt)], red, dt)
    inv = L.to("Rsqrt", [ve], red, dt)
    nx = L.to("Mul", [d, inv], s, dt)
    chan = (1, s[1], *([1] * len(axes)))
    sc = L.to("Mul", [nx, L.reshape(scale, chan)], s, dt)
    L.op("Add", [sc, L.reshape(b, chan)], [out])


def _layernorm(L: _L) -> None:
    x, gamma = L.node.inputs[:2]
    beta = L.node.input(2)
    s, dt = L.shape(x), L.dtype(x)
    axis = S.normalize_axis(int(L.attr("axis")), len(s))
    norm = s[axis:]
    eps = float(L.attr("epsilon"))
    if L.shape(gamma) != norm:
        gamma = L.to("BroadcastToD", [gamma], norm, L.dtype(gamma), shape=list(norm))
    beta_ref: InputRef
    if not beta:
        beta_ref = ConstInput(np.zeros(norm, dt))
    elif L.shape(beta) != norm:
        beta_ref = L.to("BroadcastToD", [beta], norm, L.dtype(beta), shape=list(norm))
    else:
        beta_ref = beta
    outs = list(L.node.outputs) + [""] * (3 - len(L.node.outputs))
    stat = (*s[:axis], *([1] * (len(s) - axis)))
    mean = outs[1] or L.tmp(stat, np.float32)
    var = L.tmp(stat, np.float32)
    L.op(
        "LayerNorm",
        [x, gamma, beta_ref],
        [outs[0], mean, var],
        begin_norm_axis=axis,
        begin_params_axis=axis,
        epsilon=eps,
    )
    if outs[2]:
        ve = L.to("Add", [var, L.scalar(eps, np.float32)], stat, np.float32)
        L.op("Rsqrt", [ve], [outs[2]])


def _lrn(L: _L) -> None:
    x, out = L.node.inputs[0], L.node.outputs[0]
    s, dt = L.shape(x), L.dtype(x)
    size = int(L.attr("size"))
    alpha, beta, bias = (float(L.attr(k)) for k in ("alpha", "beta", "bias"))
    sq = L.to("Mul", [x, x], s, dt)
    flat = (s[0], 1, s[1], math.prod(s[2:]))
    lo = (size - 1) // 2
    avg = L.to(
        "AvgPoolV2",
        [L.reshape(sq, flat)],
        flat,
        dt,
        ksize=[1, 1, size, 1],
        strides=[1, 1, 1, 1],
        padding_mode="CALCULATED",
        pads=[lo, size - 1 - lo, 0, 0],
        data_format="NCHW",
        global_pooling=False,
        ceil_mode=False,
        exclusive=False,
        divisor_override=0,
    )
    a = L.to("Mul", [L.reshape(avg, s), L.scalar(alpha, dt)], s, dt)
    ab = L.to("Add", [a, L.scalar(bias, dt)], s, dt)
    den = L.to("Pow", [ab, L.scalar(beta, dt)], s, dt)
    L.op("Div", [x, den], [out])


def _softmax(L: _L) -> None:
    x = L.node.inputs[0]
    axis = S.normalize_axis(int(L.attr("axis")), len(L.shape(x)))
    if L.node.op_type == "Softmax":
        L.op("SoftmaxV2", [x], L.node.outputs, axes=[axis], half_to_float=False)
    else:
        L.op("LogSoftmaxV2", [x], L.node.outputs, axes=[axis])


def _pool(L: _L) -> None:
    x, out = L.node.inputs[0], L.node.outputs[0]
    sx = L.shape(x)
    n_sp = len(sx) - 2
    if n_sp not in (1, 2):
        raise L.fail(f"{n_sp}-D pooling has no CANN lowering here")
    kernel = _ints(L.attr("kernel_shape")) or []
    strides = _ints(L.attr("strides")) or [1] * n_sp
    dil = _ints(L.attr("dilations")) or [1] * n_sp
    if any(d != 1 for d in dil):
        raise L.fail("dilated pooling has no CANN lowering (MaxPoolV3/AvgPoolV2 take no dilations)")
    pb, pe, _ = S.pool_geometry(
        sx[2:], kernel, strides, dil, _ints(L.attr("pads")), str(L.attr("auto_pad")), int(L.attr("ceil_mode"))
    )
    x4 = _to4d(L, x)
    so = L.shape(out)
    target = out if n_sp == 2 else L.tmp((*so[:2], 1, so[2]), L.dtype(out))
    common: dict[str, Any] = dict(
        ksize=_spatial4(L, kernel, n_sp, 1),
        strides=_spatial4(L, strides, n_sp, 1),
        padding_mode="CALCULATED",
        pads=_pads4(pb, pe),
        data_format="NCHW",
        global_pooling=False,
        ceil_mode=bool(int(L.attr("ceil_mode"))),
    )
    if L.node.op_type == "MaxPool":
        L.op("MaxPoolV3", [x4], [target], **common)
    else:
        L.op(
            "AvgPoolV2",
            [x4],
            [target],
            **common,
            exclusive=not int(L.attr("count_include_pad")),
            divisor_override=0,
        )
    if target != out:
        L.reshape(target, so, out=out)


def _global_pool(L: _L) -> None:
    x, out = L.node.inputs[0], L.node.outputs[0]
    s = L.shape(x)
    n_sp = len(s) - 2
    if n_sp not in (1, 2):
        raise L.fail(f"{n_sp}-D global pooling has no CANN lowering here")
    x4 = _to4d(L, x)
    spatial = list(L.shape(x4)[2:])
    target = out if n_sp == 2 else L.tmp((*s[:2], 1, 1), L.dtype(out))
    common: dict[str, Any] = dict(
        ksize=[1, 1, *spatial],
        strides=[1, 1, 1, 1],
        padding_mode="VALID",
        pads=[0, 0, 0, 0],
        data_format="NCHW",
        global_pooling=True,
        ceil_mode=False,
    )
    if L.node.op_type == "GlobalMaxPool":
        L.op("MaxPoolV3", [x4], [target], **common)
    else:
        L.op("AvgPoolV2", [x4], [target], **common, exclusive=True, divisor_override=0)
    if target != out:
        L.reshape(target, L.shape(out), out=out)


# ----------------------------------------------------------------------- data movement
def _concat(L: _L) -> None:
    axis = S.normalize_axis(int(L.attr("axis")), len(L.shape(L.node.inputs[0])))
    L.op("ConcatD", L.node.inputs, L.node.outputs, concat_dim=axis, N=len(L.node.inputs))


def _split(L: _L) -> None:
    x = L.node.inputs[0]
    axis = S.normalize_axis(int(L.attr("axis")), len(L.shape(x)))
    sizes = [L.shape(o)[axis] for o in L.node.outputs]
    n = len(sizes)
    if len(set(sizes)) == 1:
        L.op("SplitD", [x], L.node.outputs, split_dim=axis, num_split=n)
    else:
        L.op(
            "SplitV",
            [x, ConstInput(np.array(sizes, np.int64)), ConstInput(np.array(axis, np.int32))],
            L.node.outputs,
            num_split=n,
        )


def _strided_slice(L: _L, x: str, ranges: Sequence[tuple[int, int, int]], out: str) -> None:
    begin, end, strides = [], [], []
    end_mask = 0
    for i, (b, e, st) in enumerate(ranges):
        begin.append(b)
        strides.append(st)
        if e < 0:  # negative step through index 0: "to the end" in that direction
            end_mask |= 1 << i
            end.append(0)
        else:
            end.append(e)
    L.op(
        "StridedSlice",
        [
            x,
            ConstInput(np.array(begin, np.int64)),
            ConstInput(np.array(end, np.int64)),
            ConstInput(np.array(strides, np.int64)),
        ],
        [out],
        begin_mask=0,
        end_mask=end_mask,
        ellipsis_mask=0,
        new_axis_mask=0,
        shrink_axis_mask=0,
    )


def _slice(L: _L) -> None:
    x, out = L.node.inputs[0], L.node.outputs[0]
    vals = [L.g.constants.get(L.node.input(i)) if L.node.input(i) else None for i in range(1, 5)]
    if vals[0] is None or vals[1] is None or any(L.node.input(i) and vals[i - 1] is None for i in (3, 4)):
        raise L.fail("Slice parameters must be constants (run fold_constants)")
    ranges = S.slice_ranges(
        L.shape(x), _ints(vals[0]) or [], _ints(vals[1]) or [], _ints(vals[2]), _ints(vals[3])
    )
    _strided_slice(L, x, ranges, out)


def _gather(L: _L) -> None:
    x, idx = L.node.inputs
    axis = S.normalize_axis(int(L.attr("axis")), len(L.shape(x)))
    c = L.g.constants.get(idx)
    if c is not None:
        dim = L.shape(x)[axis]
        norm = np.where(c < 0, c + dim, c).astype(c.dtype)
        L.op(
            "GatherV2",
            [x, ConstInput(norm), ConstInput(np.array(axis, np.int32))],
            L.node.outputs,
            batch_dims=0,
        )
    else:
        L.op(
            "GatherV2",
            [x, idx, ConstInput(np.array(axis, np.int32))],
            L.node.outputs,
            batch_dims=0,
            negative_index_support=True,
        )


def _expand(L: _L) -> None:
    out = L.node.outputs[0]
    L.op("BroadcastToD", [L.node.inputs[0]], [out], shape=list(L.shape(out)))


def _tile(L: _L) -> None:
    reps = L.g.constants.get(L.node.inputs[1])
    if reps is None:
        raise L.fail("Tile repeats must be a constant")
    L.op("TileD", [L.node.inputs[0]], L.node.outputs, multiples=_ints(reps))


def _pad(L: _L) -> None:
    x, out = L.node.inputs[0], L.node.outputs[0]
    s, dt = L.shape(x), L.dtype(x)
    mode = str(L.attr("mode"))
    if mode == "wrap":
        raise L.fail("Pad mode 'wrap' has no PadV3 lowering")
    pads = _const(L, 1)
    axes = _const(L, 3) if L.node.input(3) else None
    if pads is None or (L.node.input(3) and axes is None):
        raise L.fail("Pad pads/axes must be constants")
    pairs = S.pad_pairs(len(s), _ints(pads) or [], _ints(axes))
    value: Any = 0
    if L.node.input(2):
        cv = _const(L, 2)
        if cv is None:
            raise L.fail("Pad constant_value must be a constant")
        value = cv.reshape(-1)[0] if cv.size else 0
    pos = [(max(b, 0), max(e, 0)) for b, e in pairs]
    crop = any(b < 0 or e < 0 for b, e in pairs)
    padded_shape = tuple(d + b + e for d, (b, e) in zip(s, pos, strict=False))
    target = out if not crop else L.tmp(padded_shape, dt)
    ins: list[InputRef] = [x, ConstInput(np.array(pos, np.int64).reshape(len(s), 2))]
    if mode == "constant":
        ins.append(L.scalar(value, dt))
    L.op("PadV3", ins, [target], mode=mode, paddings_contiguous=True)
    if crop:
        ranges = [(-min(b, 0), padded_shape[i] + min(e, 0), 1) for i, (b, e) in enumerate(pairs)]
        _strided_slice(L, target, ranges, out)


def _shape(L: _L) -> None:
    from .reference import shape_slice

    end = L.attr("end")
    val = np.array(
        shape_slice(L.shape(L.node.inputs[0]), int(L.attr("start")), None if end is None else int(end)),
        np.int64,
    )
    L.op("Identity", [ConstInput(val)], L.node.outputs)


def _cos(L: _L) -> None:
    out = L.node.outputs[0]
    v = L.attr("value")
    v = np.zeros(1, np.float32) if v is None else np.asarray(v)
    L.op(
        "Fill",
        [ConstInput(np.array(L.shape(out), np.int64)), ConstInput(v.reshape(-1)[:1].reshape(()))],
        [out],
    )


def _reduce(L: _L) -> None:
    from .reference import reduce_axes

    x, out = L.node.inputs[0], L.node.outputs[0]
    ax_val = _const(L, 1) if L.node.input(1) else None
    if L.node.input(1) and ax_val is None:
        raise L.fail("reduction axes must be a constant")
    axes = reduce_axes(L.node, [None, ax_val], len(L.shape(x)))
    if axes is None:
        L.op("Identity", [x], [out])  # a copy: the plan gives this output its own buffer
        return
    keep = bool(int(L.attr("keepdims")))
    cann = {
        "ReduceSum": "ReduceSumD",
        "ReduceMean": "ReduceMeanD",
        "ReduceMax": "ReduceMaxD",
        "ReduceMin": "ReduceMinD",
    }[L.node.op_type]
    extra = {"noop_with_empty_axes": False} if cann == "ReduceMeanD" else {}
    L.op(cann, [x], [out], axes=list(axes), keep_dims=keep, **extra)


def _fused(L: _L) -> None:
    L.op(L.node.op_type, L.node.inputs, L.node.outputs, **dict(L.node.attrs))


_RULES = {
    **{
        op: _same
        for op in (
            "Add",
            "Sub",
            "Mul",
            "Div",
            "Pow",
            "Sqrt",
            "Abs",
            "Neg",
            "Erf",
            "Reciprocal",
            "Relu",
            "Sigmoid",
            "Tanh",
            "Equal",
            "Less",
            "Greater",
        )
    },
    "Exp": _exp_log,
    "Log": _exp_log,
    "Max": lambda L: _chain(L, "Maximum"),
    "Min": lambda L: _chain(L, "Minimum"),
    "Sum": lambda L: _chain(L, "Add"),
    "Mean": lambda L: _chain(L, "Add", div_by_n=True),
    "Sign": _sign,
    "LeakyRelu": _leaky,
    "PRelu": _prelu,
    "Elu": _elu_like,
    "Selu": _elu_like,
    "Softplus": _softplus,
    "Shrink": _shrink,
    "Gelu": _gelu,
    "Clip": _clip,
    "Cast": _cast,
    "Not": _not,
    "Where": _where,
    "Identity": _identity,
    "Dropout": _identity,
    "Reshape": _reshape_like,
    "Flatten": _reshape_like,
    "Squeeze": _reshape_like,
    "Unsqueeze": _reshape_like,
    "Transpose": _transpose,
    "MatMul": _matmul,
    "Gemm": _gemm,
    "Conv": _conv,
    "ConvTranspose": _conv_transpose,
    "BatchNormalization": _batchnorm,
    "InstanceNormalization": _instnorm,
    "LayerNormalization": _layernorm,
    "LRN": _lrn,
    "Softmax": _softmax,
    "LogSoftmax": _softmax,
    "MaxPool": _pool,
    "AveragePool": _pool,
    "GlobalAveragePool": _global_pool,
    "GlobalMaxPool": _global_pool,
    "Concat": _concat,
    "Split": _split,
    "Slice": _slice,
    "Gather": _gather,
    "Expand": _expand,
    "Tile": _tile,
    "Pad": _pad,
    "Shape": _shape,
    "ConstantOfShape": _cos,
    "ReduceSum": _reduce,
    "ReduceMean": _reduce,
    "ReduceMax": _reduce,
    "ReduceMin": _reduce,
    "_FusedConv": _fused,
    "_FusedMatMul": _fused,
    "_FusedElementwise": _fused,
}


def lower_node(graph: Graph, node: Node, *, direct_outputs: bool = False) -> LoweredNode:
    """The CANN ops implementing ``node`` (the graph must be shape-inferred).

    ``direct_outputs``: let real ops write graph values with a descriptor shape
    override (``LoweredOp.shapes``) instead of ending in a view (see the module docstring).

    Raises:
        LoweringError: naming the node, for attrs without a CANN mapping.
    """
    get_schema(node.op_type, node)
    rule = _RULES.get(node.op_type)
    if rule is None:
        raise LoweringError("no CANN lowering", node=node.name, op_type=node.op_type)
    L = _L(graph, node)
    try:
        rule(L)
    except LoweringError:
        raise
    except ValueError as e:
        raise L.fail(str(e)) from e
    if direct_outputs:
        _write_outputs_directly(L)
    return LoweredNode(node, tuple(L.ops), L.temps)


def _write_outputs_directly(L: _L) -> None:
    """Replace ``op -> tmp; Reshape(tmp) -> graph value`` by ``op -> graph value`` with a shape override."""
    for k, view in enumerate(list(L.ops)):
        if not view.alias or view.outputs[0] in L.temps or view.inputs[0] not in L.temps:
            continue
        tmp, out = view.inputs[0], view.outputs[0]
        readers = [op for op in L.ops if tmp in op.inputs]
        producers = [i for i, op in enumerate(L.ops) if tmp in op.outputs]
        if len(readers) != 1 or len(producers) != 1:
            continue
        i = producers[0]
        prod = L.ops[i]
        shapes = {**prod.shapes, out: L.temps[tmp][0]}
        L.ops[i] = LoweredOp(
            prod.op_type,
            prod.inputs,
            tuple(out if o == tmp else o for o in prod.outputs),
            prod.attrs,
            prod.alias,
            shapes,
        )
        L.ops[k] = None  # type: ignore[call-overload]
        del L.temps[tmp]
    L.ops[:] = [op for op in L.ops if op is not None]


def lower(graph: Graph, *, direct_outputs: bool = False) -> list[LoweredNode]:
    """Lower every node, in topological order."""
    return [lower_node(graph, n, direct_outputs=direct_outputs) for n in graph.topological_order()]
