"""Shape and dtype inference.

Fills in ``shape`` and ``dtype`` of every Value, in topological order, and
returns a new graph whose ``nodes`` are topologically sorted.  Inputs that
determine a shape (Reshape's shape, Slice's starts, Pad's pads, ...) must be
known at compile time: constants, or values computable from constants and
static shapes (``Shape`` of anything, arithmetic on such values).  Inference
evaluates those small values on the fly with the reference executor but does
not change the graph (``fold_constants`` does that).

Errors name the node: :class:`ShapeInferenceError` for shapes or attrs that do
not fit, :class:`GraphTypeError` for dtypes, :class:`DynamicShapeError` when a
shape-determining input is not a compile-time value.
"""

from __future__ import annotations

import math
import weakref
from collections.abc import Mapping
from operator import is_
from typing import Any, cast

import numpy as np

from ... import _shapes as S
from ..errors import DynamicShapeError, GraphError, GraphTypeError, ShapeInferenceError
from ..ewprogram import ACTIVATIONS, validate_program
from ..ir import Graph, Node, normalize_dtype, register_shape_inference
from ..reference import evaluate_node, shape_slice
from ..reference_base import reduce_axes
from ..schema import ELEMENTWISE_UNARY, check_node_dtypes, check_node_signature, get_attr
from . import infer_ops  # noqa: F401  (registers the shape functions of the newer ops)
from ._util import working_copy
from .infer_rules import _SHAPE_FNS, Shape, _Ctx, _shape_fn, _wrap

__all__ = ("infer_shapes", "known_values", "MAX_PROPAGATED_ELEMENTS", "MAX_TENSOR_BYTES")

#: values up to this many elements are evaluated during inference (shape arithmetic)
MAX_PROPAGATED_ELEMENTS = 1 << 16


def _ints_attr(v: Any) -> list[int] | None:
    if type(v) is list and all(type(x) is int for x in v):  # the common case: a flat list of ints
        return list(v)
    return None if v is None else [int(x) for x in np.asarray(v).reshape(-1)]


@_shape_fn(
    *(ELEMENTWISE_UNARY - {"Clip"}),
    "Not",
    "Identity",
    "Cast",
    "Softmax",
    "LogSoftmax",
    "LRN",
    *("Floor", "Ceil", "Round", "HardSigmoid", "HardSwish", "Mish", "Sin", "Cos", "IsNaN", "IsInf"),
)
def _same_shape(c: _Ctx) -> list[Shape]:
    s = c.shape(0)
    if c.node.op_type in ("Softmax", "LogSoftmax"):
        S.normalize_axis(int(c.attr("axis")), len(s))
    if c.node.op_type == "LRN":
        if len(s) < 3 or c.attr("size") is None or int(c.attr("size")) <= 0:
            raise c.error("LRN needs rank >= 3 and a positive size")
    return [s]


@_shape_fn("Clip")
def _clip(c: _Ctx) -> list[Shape]:
    for i in (1, 2):
        if c.has(i) and math.prod(c.shape(i)) != 1:
            raise c.error(f"Clip bound {i} must be a scalar, got shape {c.shape(i)}")
    return [c.shape(0)]


@_shape_fn("Dropout")
def _dropout(c: _Ctx) -> list[Shape]:
    if c.has(2) and bool(c.value(2, "training_mode").reshape(-1)[0]):
        raise c.error("training mode is not supported (inference only)")
    return [c.shape(0)] * len(c.node.outputs)


@_shape_fn(
    "Add",
    "Sub",
    "Mul",
    "Div",
    "Pow",
    "Max",
    "Min",
    "Sum",
    "Mean",
    "Equal",
    "Less",
    "Greater",
    "LessOrEqual",
    "GreaterOrEqual",
    "And",
    "Or",
    "Xor",
    "Mod",
    "Where",
    "_FusedElementwise",
)
def _broadcast(c: _Ctx) -> list[Shape]:
    # every input's shape as it is, unless one is missing (then c.shape raises naming it)
    shapes = cast("list[Shape]", c.shapes) if None not in c.shapes else [c.shape(i) for i in range(len(c.node.inputs))]
    try:
        out = S.broadcast_shapes(*shapes)
    except ValueError as e:
        raise _wrap(c, e) from None
    if c.node.op_type == "_FusedElementwise":
        prog = c.attr("program")
        try:
            validate_program(prog or [], len(c.node.inputs))
        except ValueError as e:
            raise c.error(f"bad program: {e}") from None
    return [out]


@_shape_fn("PRelu")
def _prelu(c: _Ctx) -> list[Shape]:
    x, slope = c.shape(0), c.shape(1)
    try:
        if S.broadcast_shapes(x, slope) != x:
            raise ValueError
    except ValueError:
        raise c.error(f"slope shape {slope} does not broadcast to input shape {x}") from None
    return [x]


@_shape_fn("MatMul")
def _matmul(c: _Ctx) -> list[Shape]:
    try:
        return [S.matmul_shape(c.shape(0), c.shape(1))]
    except ValueError as e:
        raise _wrap(c, e) from None


@_shape_fn("Gemm")
def _gemm(c: _Ctx) -> list[Shape]:
    a, b = c.shape(0), c.shape(1)
    if len(a) != 2 or len(b) != 2:
        raise c.error(f"Gemm needs 2-D A and B, got {a} and {b}")
    m, k = (a[1], a[0]) if int(c.attr("transA")) else a
    k2, n = (b[1], b[0]) if int(c.attr("transB")) else b
    if k != k2:
        raise c.error(f"inner dimensions differ: A gives {k}, B gives {k2}")
    if c.has(2):
        try:
            if S.broadcast_shapes((m, n), c.shape(2)) != (m, n):
                raise ValueError
        except ValueError:
            raise c.error(f"C of shape {c.shape(2)} does not broadcast to {(m, n)}") from None
    return [(m, n)]


def _check_activation(c: _Ctx) -> None:
    act = c.attr("activation")
    if act not in ACTIVATIONS:
        raise c.error(f"unknown activation {act!r} (one of {sorted(ACTIVATIONS)})")


@_shape_fn("_FusedMatMul")
def _fused_matmul(c: _Ctx) -> list[Shape]:
    _check_activation(c)
    a, b = list(c.shape(0)), list(c.shape(1))
    if len(a) < 2 or len(b) < 2:
        raise c.error("_FusedMatMul needs operands of rank >= 2")
    if int(c.attr("trans_a")):
        a[-1], a[-2] = a[-2], a[-1]
    if int(c.attr("trans_b")):
        b[-1], b[-2] = b[-2], b[-1]
    try:
        out = S.matmul_shape(a, b)
        if c.has(2) and S.broadcast_shapes(out, c.shape(2)) != out:
            raise ValueError(f"bias {c.shape(2)} does not broadcast to {out}")
    except ValueError as e:
        raise _wrap(c, e) from None
    return [out]


def _window_attrs(c: _Ctx) -> tuple[list[int] | None, list[int] | None, list[int] | None, str]:
    """(strides, dilations, pads, auto_pad) of a convolution or pooling node."""
    return (
        _ints_attr(c.attr("strides")),
        _ints_attr(c.attr("dilations")),
        _ints_attr(c.attr("pads")),
        str(c.attr("auto_pad")),
    )


def _conv_common(c: _Ctx, transpose: bool) -> tuple[Shape, Shape, list[int], int]:
    x, w = c.shape(0), c.shape(1)
    if len(x) < 3 or len(w) != len(x):
        raise c.error(f"input {x} and weight {w} must have the same rank >= 3")
    group = int(c.attr("group") or 1)
    kernel = _ints_attr(c.attr("kernel_shape")) or list(w[2:])
    if list(w[2:]) != kernel:
        raise c.error(f"kernel_shape {kernel} does not match weight shape {w}")
    if group <= 0 or x[1] % group:
        raise c.error(f"group {group} does not divide {x[1]} input channels")
    if transpose:
        if w[0] != x[1]:
            raise c.error(f"weight {w} expects {w[0]} input channels, input has {x[1]}")
    elif w[1] * group != x[1] or w[0] % group:
        raise c.error(f"weight {w} with group {group} does not fit {x[1]} input channels")
    return x, w, kernel, group


@_shape_fn("Conv", "_FusedConv")
def _conv(c: _Ctx) -> list[Shape]:
    if c.node.op_type == "_FusedConv":
        _check_activation(c)
    x, w, kernel, _ = _conv_common(c, False)
    if c.has(2) and c.shape(2) != (w[0],):
        raise c.error(f"bias shape {c.shape(2)} must be ({w[0]},)")
    try:
        _, _, out = S.conv_geometry(x[2:], kernel, *_window_attrs(c))
    except ValueError as e:
        raise _wrap(c, e) from None
    return [(x[0], w[0], *out)]


@_shape_fn("ConvTranspose")
def _conv_t(c: _Ctx) -> list[Shape]:
    x, w, kernel, group = _conv_common(c, True)
    m = w[1] * group
    if c.has(2) and c.shape(2) != (m,):
        raise c.error(f"bias shape {c.shape(2)} must be ({m},)")
    try:
        _, _, out = S.conv_transpose_geometry(
            x[2:], kernel, *_window_attrs(c), _ints_attr(c.attr("output_padding")), _ints_attr(c.attr("output_shape"))
        )
    except ValueError as e:
        raise _wrap(c, e) from None
    return [(x[0], m, *out)]


@_shape_fn("MaxPool", "AveragePool")
def _pool(c: _Ctx) -> list[Shape]:
    x = c.shape(0)
    kernel = _ints_attr(c.attr("kernel_shape"))
    if len(x) < 3 or not kernel:
        raise c.error("pooling needs rank >= 3 and kernel_shape")
    try:
        _, _, out = S.pool_geometry(x[2:], kernel, *_window_attrs(c), int(c.attr("ceil_mode")))
    except ValueError as e:
        raise _wrap(c, e) from None
    return [(x[0], x[1], *out)] * max(1, len(c.node.outputs))  # MaxPool's Indices: the same shape


@_shape_fn("GlobalAveragePool", "GlobalMaxPool")
def _gpool(c: _Ctx) -> list[Shape]:
    x = c.shape(0)
    if len(x) < 3:
        raise c.error("global pooling needs rank >= 3")
    return [(x[0], x[1], *([1] * (len(x) - 2)))]


@_shape_fn("BatchNormalization", "InstanceNormalization")
def _norm(c: _Ctx) -> list[Shape]:
    x = c.shape(0)
    if len(x) < 2:
        raise c.error("needs rank >= 2")
    if c.node.op_type == "BatchNormalization" and int(c.attr("training_mode")):
        raise c.error("training_mode=1 is not supported (inference only)")
    per_channel = (x[1],)
    for i in range(1, len(c.node.inputs)):
        if c.shape(i) != per_channel:
            raise c.error(f"input {i} has shape {c.shape(i)}, expected ({x[1]},)")
    return [x]


@_shape_fn("LayerNormalization")
def _layernorm(c: _Ctx) -> list[Shape]:
    x = c.shape(0)
    try:
        axis = S.normalize_axis(int(c.attr("axis")), len(x))
        norm = x[axis:]
        for i in range(1, len(c.node.inputs)):
            if c.has(i) and S.broadcast_shapes(norm, c.shape(i)) != norm:
                raise ValueError(f"input {i} of shape {c.shape(i)} does not broadcast to {norm}")
    except ValueError as e:
        raise _wrap(c, e) from None
    stat = (*x[:axis], *([1] * (len(x) - axis)))
    return [x, stat, stat][: len(c.node.outputs)]


@_shape_fn("Flatten")
def _flatten(c: _Ctx) -> list[Shape]:
    x = c.shape(0)
    try:
        a = S.normalize_axis(int(c.attr("axis")), len(x), allow_end=True)
    except ValueError as e:
        raise _wrap(c, e) from None
    return [(math.prod(x[:a]), math.prod(x[a:]))]


@_shape_fn("Reshape")
def _reshape(c: _Ctx) -> list[Shape]:
    try:
        return [S.reshape_target(c.shape(0), c.ints(1, "shape"), int(c.attr("allowzero")))]
    except ValueError as e:
        raise _wrap(c, e) from None


@_shape_fn("Transpose")
def _transpose(c: _Ctx) -> list[Shape]:
    x = c.shape(0)
    perm = _ints_attr(c.attr("perm"))
    if perm is None:  # the default: the axes reversed
        return [tuple(x[::-1])]
    if sorted(perm) != list(range(len(x))):
        raise c.error(f"perm {perm} is not a permutation of {len(x)} axes")
    return [tuple([x[p] for p in perm])]


@_shape_fn("Squeeze")
def _squeeze(c: _Ctx) -> list[Shape]:
    try:
        return [S.squeeze_shape(c.shape(0), c.opt_ints(1, "axes"))]
    except ValueError as e:
        raise _wrap(c, e) from None


@_shape_fn("Unsqueeze")
def _unsqueeze(c: _Ctx) -> list[Shape]:
    try:
        return [S.unsqueeze_shape(c.shape(0), c.ints(1, "axes"))]
    except ValueError as e:
        raise _wrap(c, e) from None


@_shape_fn("Concat")
def _concat(c: _Ctx) -> list[Shape]:
    shapes = (
        cast("list[Shape]", c.shapes) if None not in c.shapes else [c.shape(i) for i in range(len(c.node.inputs))]
    )
    ax = c.attr("axis")
    if ax is None:
        raise c.error("Concat needs attr 'axis'")
    first = shapes[0]
    try:
        axis = S.normalize_axis(int(ax), len(first))
    except ValueError as e:
        raise _wrap(c, e) from None
    head, tail = first[:axis], first[axis + 1 :]
    for i, s in enumerate(shapes):
        # two slice comparisons decide the usual case (shapes of one sequence type); the elementwise
        # walk decides any other
        if s is first or (s[:axis] == head and s[axis + 1 :] == tail and len(s) == len(first)):
            continue
        if len(s) != len(first) or any(a != b for j, (a, b) in enumerate(zip(s, first, strict=False)) if j != axis):
            raise c.error(f"input {i} of shape {s} does not concatenate with {first} on axis {axis}")
    out = list(shapes[0])
    out[axis] = sum(s[axis] for s in shapes)
    return [tuple(out)]


@_shape_fn("Split")
def _split(c: _Ctx) -> list[Shape]:
    x = c.shape(0)
    try:
        axis = S.normalize_axis(int(c.attr("axis")), len(x))
        sizes = S.split_sizes(x[axis], len(c.node.outputs), c.opt_ints(1, "split"))
    except ValueError as e:
        raise _wrap(c, e) from None
    return [(*x[:axis], s, *x[axis + 1 :]) for s in sizes]


@_shape_fn("Slice")
def _slice(c: _Ctx) -> list[Shape]:
    x = c.shape(0)
    try:
        rng = S.slice_ranges(
            x, c.ints(1, "starts"), c.ints(2, "ends"), c.opt_ints(3, "axes"), c.opt_ints(4, "steps")
        )
    except ValueError as e:
        raise _wrap(c, e) from None
    return [tuple(S.range_len(*r) for r in rng)]


@_shape_fn("Gather")
def _gather(c: _Ctx) -> list[Shape]:
    x, idx = c.shape(0), c.shape(1)
    try:
        a = S.normalize_axis(int(c.attr("axis")), len(x))
    except ValueError as e:
        raise _wrap(c, e) from None
    return [(*x[:a], *idx, *x[a + 1 :])]


@_shape_fn("Expand")
def _expand(c: _Ctx) -> list[Shape]:
    target = c.ints(1, "shape")
    if target and min(target) < 0:
        raise c.error(f"shape {target} has a negative dimension")
    try:  # (as a tuple: equal to the input's shape, broadcast_shapes returns at its first comparison)
        return [S.broadcast_shapes(c.shape(0), tuple(target))]
    except ValueError as e:
        raise _wrap(c, e) from None


@_shape_fn("Tile")
def _tile(c: _Ctx) -> list[Shape]:
    x, reps = c.shape(0), c.ints(1, "repeats")
    if len(reps) != len(x) or any(r < 0 for r in reps):
        raise c.error(f"repeats {reps} do not fit rank {len(x)}")
    return [tuple(d * r for d, r in zip(x, reps, strict=False))]


@_shape_fn("Pad")
def _pad(c: _Ctx) -> list[Shape]:
    x = c.shape(0)
    mode = str(c.attr("mode"))
    if mode not in ("constant", "reflect", "edge", "wrap"):
        raise c.error(f"unknown mode {mode!r}")
    if c.has(2) and math.prod(c.shape(2)) != 1:
        raise c.error("constant_value must be a scalar")
    try:
        pairs = S.pad_pairs(len(x), c.ints(1, "pads"), c.opt_ints(3, "axes"))
    except ValueError as e:
        raise _wrap(c, e) from None
    out = tuple(d + b + e for d, (b, e) in zip(x, pairs, strict=False))
    if any(d < 0 for d in out):
        raise c.error(f"negative pads crop {x} below zero")
    if mode == "reflect" and any(
        max(b, e) >= d and (b > 0 or e > 0) for d, (b, e) in zip(x, pairs, strict=False)
    ):
        raise c.error("reflect pads must be smaller than the padded dimension")
    return [out]


@_shape_fn("Shape")
def _shape(c: _Ctx) -> list[Shape]:
    end = c.attr("end")
    return [(len(shape_slice(c.shape(0), int(c.attr("start")), None if end is None else int(end))),)]


@_shape_fn("ConstantOfShape")
def _cos(c: _Ctx) -> list[Shape]:
    if len(c.shape(0)) != 1:
        raise c.error(f"shape must be a 1-D tensor, got one of shape {c.shape(0)}")
    dims = c.ints(0, "shape")
    if dims and min(dims) < 0:
        raise c.error(f"negative dimension in {dims}")
    v = c.attr("value")
    if v is not None and np.asarray(v).size != 1:
        raise c.error("value must have exactly one element")
    return [tuple(dims)]


@_shape_fn(
    *("ReduceSum", "ReduceMean", "ReduceMax", "ReduceMin", "ReduceProd"),
    *("ReduceL1", "ReduceL2", "ReduceLogSum", "ReduceLogSumExp", "ReduceSumSquare"),
)
def _reduce(c: _Ctx) -> list[Shape]:
    x = c.shape(0)
    xs: list[Any] = [None, c.value(1, "axes") if c.has(1) else None]
    try:
        axes = reduce_axes(c.node, xs, len(x))
    except ValueError as e:
        raise _wrap(c, e) from None
    if axes is None:
        return [x]
    if int(c.attr("keepdims")):
        return [tuple(1 if i in axes else d for i, d in enumerate(x))]
    return [tuple(d for i, d in enumerate(x) if i not in axes)]


def _infer_node(node: Node, shapes: list[Shape | None], values: list[np.ndarray | None]) -> list[Shape]:
    fn = _SHAPE_FNS.get(node.op_type)
    if fn is None:
        raise ShapeInferenceError("no shape function", node=node.name, op_type=node.op_type)
    try:
        out = fn(_Ctx(node, shapes, values))
    except (ValueError, IndexError) as e:
        if isinstance(e, GraphError):
            raise
        raise ShapeInferenceError(str(e), node=node.name, op_type=node.op_type) from e
    if len(out) != len(node.outputs):
        raise ShapeInferenceError(
            f"produces {len(out)} outputs, node declares {len(node.outputs)}",
            node=node.name,
            op_type=node.op_type,
        )
    return [tuple(map(int, out[0]))] if len(out) == 1 else [tuple(map(int, s)) for s in out]


def known_values(graph: Graph) -> dict[str, np.ndarray]:
    """Compile-time values: constants plus small values computable from them and static shapes.

    Requires inferred shapes for ``Shape`` nodes (run :func:`infer_shapes`).
    """
    known: dict[str, np.ndarray] = dict(graph.constants)
    for node in graph.topological_order():
        _propagate(graph, node, known)
    return known


def _propagate(graph: Graph, node: Node, known: dict[str, np.ndarray]) -> None:
    values, get = graph.values, known.get
    _propagate_values(
        node,
        known,
        [get(x) if x else None for x in node.inputs],
        values[node.inputs[0]].shape if node.op_type == "Shape" else None,
        [values[o].shape for o in node.outputs if o],
    )


def _propagate_values(
    node: Node,
    known: dict[str, np.ndarray],
    in_values: list[np.ndarray | None],
    in_shape0: Shape | None,
    out_shapes: list[Shape | None],
) -> dict[str, np.ndarray] | None:
    """``node``'s outputs' compile-time values into ``known`` (and returned) when they are computable:
    ``in_values`` are its inputs' (``known``'s, None for an absent or unknown input), ``in_shape0``
    the shape of a ``Shape`` node's input, ``out_shapes`` those of its present outputs."""
    if node.op_type == "Shape":
        if in_shape0 is None:
            return None
        end = get_attr(node, "end")
        start = int(get_attr(node, "start"))
        arr = np.array(shape_slice(in_shape0, start, None if end is None else int(end)), np.int64)
        known[node.outputs[0]] = arr
        return {node.outputs[0]: arr}
    # plain loops, not any() over generators: this runs for every node, most of which return here
    for x, v in zip(node.inputs, in_values, strict=True):
        if v is None:
            if x:
                return None  # an input without a compile-time value
        elif v.size > 4 * MAX_PROPAGATED_ELEMENTS:
            return None
    for s in out_shapes:
        if s is None or math.prod(s) > MAX_PROPAGATED_ELEMENTS:
            return None
    res = evaluate_node(node, in_values)
    out = {name: arr for name, arr in zip(node.outputs, res, strict=False) if name}
    known.update(out)
    return out


#: the largest tensor aioge describes: 2^62 bytes (every size stays an int64 / size_t with room to spare)
MAX_TENSOR_BYTES = 1 << 62


def _check_size(shape: Shape, dtype: np.dtype, kind: str, name: str, node: Node | None) -> None:
    """Negative dims and sizes past :data:`MAX_TENSOR_BYTES` (hostile models) are shape errors, not overflows.

    ``kind`` and ``name`` (``"output"``, ``"y"``) name the value in the error (formatted only for one)."""
    nbytes = math.prod(shape) * dtype.itemsize  # Python ints: exact
    if nbytes <= MAX_TENSOR_BYTES and (not shape or min(shape) >= 0):
        return
    what = f"{kind} {name!r}"
    where = {"node": node.name, "op_type": node.op_type} if node is not None else {}
    if any(d < 0 for d in shape):
        raise ShapeInferenceError(f"{what} has a negative dimension in {shape}", **where)
    raise ShapeInferenceError(f"{what} of shape {shape} would need {nbytes} bytes (more than 2^62)", **where)


def infer_shapes(graph: Graph, *, declared_dtypes: bool = False) -> Graph:
    """Return a copy of ``graph`` with every Value's shape and dtype inferred.

    ``declared_dtypes``: a dtype a Value already has must be the one its node produces (a
    :class:`GraphTypeError` otherwise, as :meth:`Graph.validate` raises); by default an inferred
    dtype replaces it.  With it, ``validate(shapes=False)`` before this adds only the structural
    checks (``Graph._validate_structure(signatures=False)``): this checks each node's signature
    and dtypes.

    Raises:
        GraphError subclasses naming the node (see the module docstring).
    """
    return _infer(working_copy(graph), declared_dtypes, None, _MEMO.get(graph, {}))


def infer_in_place(
    g: Graph, *, declared_dtypes: bool = False, checked: Mapping[str, Any] | None = None, ordered: bool = False
) -> Graph:
    """:func:`infer_shapes` of a graph nobody else holds yet (the importer's): in place, no copy.

    ``checked``: value name -> the dtype its producer's dtype check gave (the importer checks each
    node's dtypes as it emits it, see ``check_node_dtypes``); a node whose input dtypes are the ones
    it was checked with is not checked again -- the check gives the same dtypes (or raised then).
    ``ordered``: the caller built ``g.nodes`` so that each node reads only values defined before it
    (the importer saw each input defined as it emitted the node): the list is its topological order
    as it is (``Graph.topological_order`` would return it unchanged), not looked at again.
    """
    return _infer(g, declared_dtypes, checked, _MEMO.get(g, {}), ordered)


def _infer(
    g: Graph,
    declared_dtypes: bool,
    checked: Mapping[str, Any] | None,
    prior: Mapping[str, _Inferred],
    ordered: bool = False,
) -> Graph:
    for name in g.inputs:
        v = g.values[name]
        if name in g.symbolic:
            raise DynamicShapeError(
                f"graph input {name!r} has symbolic dims {g.symbolic[name]}: graph.specialize(shapes) makes a "
                "static graph (dev.compile of a dynamic graph specialises per concrete shape)"
            )
        if v.shape is None or v.dtype is None:
            raise DynamicShapeError(f"graph input {name!r} needs a static shape and dtype")
    for name in g.inputs:
        v = g.values[name]
        assert v.shape is not None and v.dtype is not None
        _check_size(v.shape, v.dtype, "graph input", name, None)
    carried = _CARRIED.pop(g, None)
    if carried:
        prior = {**prior, **carried}
    order = list(g.nodes) if ordered else g.topological_order()
    known: dict[str, np.ndarray] = dict(g.constants)
    memo: dict[str, _Inferred] = {}
    values, known_get = g.values, known.get
    checked_get = checked.get if checked is not None else None
    for node in order:
        inputs, outputs = node.inputs, node.outputs
        # one loop, not a comprehension per list (each is a function call in this Python); it also
        # finds whether every present input has a compile-time value (else no output has one) and
        # whether the input dtypes are the ones the node's dtypes were checked with (_checked_dtypes)
        in_dtypes: list[Any] = []
        in_shapes: list[Any] = []
        in_values: list[Any] = []
        all_known = True
        as_checked = checked_get is not None
        for x in inputs:
            if x:
                v = values[x]
                dt = v.dtype
                in_dtypes.append(dt)
                in_shapes.append(v.shape)
                a = known_get(x)
                in_values.append(a)
                if a is None:
                    all_known = False
                if as_checked:
                    c = checked_get(x)  # type: ignore[misc]
                    if not (dt is c or dt == c):
                        as_checked = False
            else:
                in_dtypes.append(None)
                in_shapes.append(None)
                in_values.append(None)
        # tuples from here on: the memo entry keeps them, and a tuple of untracked objects (names,
        # shapes, dtypes, arrays, None) is one the cyclic collector stops visiting
        key = (tuple(in_dtypes), tuple(in_shapes), tuple(in_values))
        hit = prior.get(node.name) if prior else None
        if hit is not None and _applies(hit, node, *key):
            for o, s, dt in hit[_OUTS]:
                v = values[o]
                if v.shape is not None and v.shape != s and tuple(v.shape) != s:
                    raise ShapeInferenceError(
                        f"output {o!r} was declared {v.shape}, inferred {s}", node=node.name, op_type=node.op_type
                    )
                v.shape, v.dtype = s, dt
            if hit[_KNOWN]:
                known.update(hit[_KNOWN])
            memo[node.name] = hit
            continue
        check_node_signature(node)
        if None in in_shapes or None in in_dtypes:  # an absent input, or one not inferred yet
            for x in inputs:
                vin = values[x] if x else None
                if vin is not None and not vin.known:
                    raise GraphError(
                        f"input {x!r} has no shape (not produced before this node?)",
                        node=node.name,
                        op_type=node.op_type,
                    )
        dtypes = _checked_outputs(node, checked_get) if as_checked else None
        if dtypes is None:
            dtypes = check_node_dtypes(node, in_dtypes)
        shapes = _infer_node(node, in_shapes, in_values)
        outs: list[tuple[str, Any, Any]] = []
        out_shapes: list[Any] = []
        for o, s, dt in zip(outputs, shapes, dtypes, strict=False):
            if not o:
                continue
            v = values[o]
            if v.shape is not None and tuple(v.shape) != s:
                raise ShapeInferenceError(
                    f"output {o!r} was declared {v.shape}, inferred {s}", node=node.name, op_type=node.op_type
                )
            if dt is None:
                raise ShapeInferenceError(
                    f"cannot infer the dtype of {o!r}", node=node.name, op_type=node.op_type
                )
            if not isinstance(dt, np.dtype):  # a numpy dtype is its own normal form
                dt = normalize_dtype(dt)
            if declared_dtypes and v.dtype is not None and v.dtype is not dt and v.dtype != dt:
                raise GraphTypeError(
                    f"output {o!r} is declared {v.dtype} but the op produces {dt}", node=node.name, op_type=node.op_type
                )
            if s and (min(s) < 0 or math.prod(s) * dt.itemsize > MAX_TENSOR_BYTES):
                _check_size(s, dt, "output", o, node)  # raises
            v.shape, v.dtype = s, dt
            outs.append((o, s, dt))
            out_shapes.append(s)
        out_values = (
            _propagate_values(node, known, in_values, in_shapes[0] if in_shapes else None, out_shapes)
            if all_known or node.op_type == "Shape"
            else None  # an input without a compile-time value: _propagate_values computes nothing
        )
        memo[node.name] = (
            node.op_type, node.domain, tuple(outputs), tuple(node.attrs), tuple(node.attrs.values()),
            *key, tuple(outs), tuple(out_values.items()) if out_values else (),
        )  # fmt: skip
    g.nodes = order
    for o in g.outputs:
        if not g.values[o].known:
            raise ShapeInferenceError(f"graph output {o!r} has no inferred shape")
    _MEMO[g] = memo
    if not g._scratch:  # optimize's working graph: optimize never takes its own result as "inferred"
        _INFERRED[g] = _snapshot(g)
    return g


def _checked_outputs(node: Node, get: Any) -> list[Any] | None:
    """The output dtypes ``node``'s dtype check gave (``get``: ``checked.get``; None: not all
    recorded).  For a node whose input dtypes are the ones it was checked with (``_infer`` compares
    them as it reads the inputs): the check gives these again."""
    outs: list[Any] = []
    for o in node.outputs:
        if not o:
            outs.append(None)
            continue
        dt = get(o)
        if dt is None:
            return None
        outs.append(dt)
    return outs


#: One node's inference, reused for a node of that name that it applies to (:func:`_applies`).
#:
#: What it was inferred from: op type, domain, output names, attr names, attr values (by identity:
#: attr values are never edited in place), the inputs' dtypes, shapes and compile-time values (big
#: ones, weights, by identity, small ones by value; input names do not matter: their presence,
#: dtypes, shapes and values do, and a node inferred without an error raises none again); what it
#: gave: ``[_OUTS]`` (name, shape, dtype of each output) and ``[_KNOWN]`` (the outputs' compile-time
#: values, ``_propagate``: (name, array) pairs).
#:
#: A plain tuple of tuples (no list, dict or tuple subclass): an entry lives as long as its graph,
#: and a plain tuple holding only names, shapes, dtypes, arrays and None is one the cyclic
#: collector stops visiting once it has seen it (it visits each list, dict and instance of a tuple
#: subclass in every collection of its generation, and a tuple holding one of those with it).
_Inferred = tuple[Any, ...]
_OUTS = 8
_KNOWN = 9


def _applies(
    e: _Inferred, node: Node, in_dtypes: tuple[Any, ...], in_shapes: tuple[Any, ...], in_values: tuple[Any, ...]
) -> bool:
    """Whether ``node``, fed these, is what memo entry ``e`` was inferred from (so it infers the same)."""
    if e[0] != node.op_type or e[1] != node.domain or e[5] != in_dtypes or e[6] != in_shapes:
        return False
    attrs = node.attrs
    if attrs:
        if e[3] != tuple(attrs) or not all(map(is_, e[4], attrs.values())):  # the same names: the same count
            return False
    elif e[3]:  # (a node without attrs, the usual one: no tuples of them made)
        return False
    outs = node.outputs
    if len(outs) == 1:
        if len(e[2]) != 1 or e[2][0] != outs[0]:
            return False
    elif e[2] != tuple(outs):
        return False
    if all(map(is_, e[7], in_values)):  # the usual case: the same arrays (or None) throughout
        return True
    for x, y in zip(e[7], in_values, strict=True):
        if x is not y and not _same_value(x, y):
            return False
    return True




def _same_value(a: np.ndarray | None, b: np.ndarray | None) -> bool:
    """The same compile-time value: the same array, or two small equal ones (folding remakes the
    shape arithmetic's arrays); a big one (a weight) only by identity, never compared in full."""
    if a is b:
        return True
    if a is None or b is None or a.size > 16:
        return False
    return a.dtype == b.dtype and a.shape == b.shape and a.tobytes() == b.tobytes()


#: graphs returned by infer_shapes -> each node's inference there (by node name): infer_shapes of
#: that graph, or of a copy it was carried to (:func:`carry_inference`), reuses what still applies
#: -- optimize's final inference re-infers only the nodes its passes changed or fed differently
_MEMO: weakref.WeakKeyDictionary[Graph, dict[str, _Inferred]] = weakref.WeakKeyDictionary()


def inferred_outputs(graph: Graph, node: Node, in_values: list[np.ndarray | None]) -> list[Any] | None:
    """``node``'s output values as the shape inference of ``graph`` (or of the graph it was carried
    from, :func:`carry_inference`) computed them (``_propagate``'s ``evaluate_node``), when the node
    as it is now, fed ``in_values`` (each input's value, None for an absent one), is what they were
    computed from (:func:`_applies`): the same evaluation, not run again.  Listed as
    ``node.outputs`` (None for an absent output); None when inference did not compute them all."""
    memo = _MEMO.get(graph)
    hit = memo.get(node.name) if memo is not None else None
    if hit is None:
        return None
    known, outputs = hit[_KNOWN], node.outputs
    if len(known) == 1 and len(outputs) == 1 and known[0][0] == outputs[0]:  # the usual case: one output
        outs = [known[0][1]]
    else:
        get = dict(known).get
        outs = [get(o) if o else None for o in outputs]
        for o, a in zip(outputs, outs, strict=True):
            if o and a is None:
                return None
    values = graph.values
    in_dtypes: list[Any] = []
    in_shapes: list[Any] = []
    for x in node.inputs:
        if x:
            v = values[x]
            in_dtypes.append(v.dtype)
            in_shapes.append(v.shape)
        else:
            in_dtypes.append(None)
            in_shapes.append(None)
    return outs if _applies(hit, node, tuple(in_dtypes), tuple(in_shapes), tuple(in_values)) else None


def carry_inference(src: Graph, dst: Graph) -> None:
    """Let :func:`infer_shapes` of ``dst`` (a copy of ``src``) reuse ``src``'s node inferences."""
    memo = _MEMO.get(src)
    if memo is not None:
        _MEMO[dst] = memo


#: optimize's working graphs -> the nodes its passes emitted with their outputs' shapes and dtypes
#: given (see :func:`carry_node`): taken up, by the next inference of that graph, as its memo is
_CARRIED: weakref.WeakKeyDictionary[Graph, dict[str, _Inferred]] = weakref.WeakKeyDictionary()


def carry_node(g: Graph, node: Node) -> None:
    """Let the next inference of ``g`` (``optimize``'s working graph) take ``node``, just emitted by a
    rewrite, as inferred from what it reads now: its outputs have the shapes and dtypes their Values
    were given.  For a rewrite that gives each output Value the shape and dtype the node computes:
    inferring the node would only confirm them (the final inference checks a declared shape against
    the inferred one, and a graph where they differed would not compile).  As for any memo entry, a
    node fed differently by then (an input's dtype, shape or value) is inferred again.  Not recorded
    for a node whose inputs are all constants (inference would also compute its outputs' values),
    nor outside ``optimize`` (a graph not marked as its working graph)."""
    if not g._scratch:
        return
    values, consts = g.values, g.constants
    in_dtypes: list[Any] = []
    in_shapes: list[Any] = []
    in_values: list[Any] = []
    computed = False
    for x in node.inputs:
        if x:
            v = values[x]
            in_dtypes.append(v.dtype)
            in_shapes.append(v.shape)
            a = consts.get(x)
            in_values.append(a)
            computed = computed or a is None
        else:
            in_dtypes.append(None)
            in_shapes.append(None)
            in_values.append(None)
    if not computed:
        return
    outs = []
    for o in node.outputs:
        if o:
            v = values[o]
            if v.shape is None or v.dtype is None:
                return
            outs.append((o, v.shape, v.dtype))
    entry = (
        node.op_type, node.domain, tuple(node.outputs), tuple(node.attrs), tuple(node.attrs.values()),
        tuple(in_dtypes), tuple(in_shapes), tuple(in_values), tuple(outs), (),
    )  # fmt: skip
    carried = _CARRIED.get(g)
    if carried is None:
        carried = _CARRIED[g] = {}
    carried[node.name] = entry


#: graphs returned by infer_shapes -> what they held then (see :func:`is_inferred`)
_INFERRED: weakref.WeakKeyDictionary[Graph, tuple[Any, ...]] = weakref.WeakKeyDictionary()


def _snapshot(g: Graph) -> tuple[Any, ...]:
    """Everything shape inference reads or writes, by value (constants by identity: they are read-only).

    Tuples throughout: it lives as long as the graph, and tuples holding only names, shapes,
    dtypes and numbers are ones the cyclic collector stops visiting after it has seen them once
    (lists and dicts it visits in every collection).  Each node's fields as ``(op_type, domain,
    name, inputs, outputs, attr count)``; the attrs of the nodes that have any apart, as ``(index,
    attrs)``, ``attrs`` being ``(name, value, was a list)`` in the dict's order, a list value as a
    tuple of its items (:func:`_same_as` compares them as the dict of the attrs with a copy of each
    list would compare); the values as their names and their ``(shape, dtype)`` pairs, in the
    dict's order (one comparison each, :func:`_same_as`)."""
    nodes = tuple([(n.op_type, n.domain, n.name, tuple(n.inputs), tuple(n.outputs), len(n.attrs)) for n in g.nodes])
    attrs = tuple([
        (i, tuple([(k, tuple(v), True) if isinstance(v, list) else (k, v, False) for k, v in n.attrs.items()]))
        for i, n in enumerate(g.nodes) if n.attrs
    ])  # fmt: skip
    vals = g.values.values()
    values = (tuple(g.values), tuple([(v.shape, v.dtype) for v in vals]))
    return (nodes, attrs, values, tuple([id(a) for a in g.constants.values()]), tuple(g.constants), tuple(g.inputs),
            tuple(g.outputs), dict(g.symbolic))  # fmt: skip


def is_inferred(graph: Graph) -> bool:
    """Whether ``graph`` is a result of :func:`infer_shapes` left as it was returned (validated,
    every shape inferred): inferring it again would give the same graph."""
    snap = _INFERRED.get(graph)
    if snap is None:
        return False
    try:
        return _same_as(snap, graph)
    except (ValueError, TypeError):  # an attr array replaced by another: compared elementwise
        return False


def _same_as(snap: tuple[Any, ...], g: Graph) -> bool:
    """Whether ``g`` holds what ``snap`` (a :func:`_snapshot`) recorded.  The nodes' fields and the
    values' records compare as one tuple each (built in one comprehension, compared in C; the first
    difference ends it); attrs only for the nodes that have any.  A node's attrs compare as
    ``dict(attrs) == n.attrs`` would for the attrs at snapshot time with each list copied: the same
    names, each value the same object or equal, a list value equal to a list of its items.  The
    values compare as the dicts would: in another order, name by name."""
    nodes, attrs, (vnames, vrecs), const_ids, const_names, inputs, outputs, symbolic = snap
    gnodes, gvalues = g.nodes, g.values
    if len(nodes) != len(gnodes) or len(vnames) != len(gvalues) or len(const_names) != len(g.constants):
        return False
    heads = [(n.op_type, n.domain, n.name, tuple(n.inputs), tuple(n.outputs), len(n.attrs)) for n in gnodes]
    if tuple(heads) != nodes:
        return False
    for i, was in attrs:
        now = gnodes[i].attrs
        for k, v, was_list in was:  # (the counts are equal: compared with the nodes' fields)
            x = now.get(k, _ABSENT)
            if x is _ABSENT:
                return False
            if was_list:
                if not (len(v) == len(x) and v == tuple(x) if type(x) is list else list(v) == x):
                    return False
            elif not (v is x or v == x):
                return False
    if tuple(gvalues) == vnames:
        if tuple([(v.shape, v.dtype) for v in gvalues.values()]) != vrecs:
            return False
    else:  # the same count in another order (or other names): name by name
        get = gvalues.get
        for k, (shape, dtype) in zip(vnames, vrecs, strict=True):
            v = get(k)
            if v is None or v.shape != shape or v.dtype != dtype:
                return False
    same = tuple(g.constants) == const_names and tuple([id(a) for a in g.constants.values()]) == const_ids
    return bool(same and inputs == tuple(g.inputs) and outputs == tuple(g.outputs) and symbolic == dict(g.symbolic))


_ABSENT = object()


register_shape_inference(infer_shapes)  # Graph.validate(shapes=True) runs it
