"""The IR op set: arity, attributes with defaults, and dtype rules.

The IR uses ONNX op names and semantics in one canonical, opset-independent
form (the importer rewrites older opsets into it):

* axes/sizes/bounds are *inputs*: ``Squeeze(data, axes?)``,
  ``Unsqueeze(data, axes)``, ``Reduce{Sum,Mean,Max,Min}(data, axes?)``,
  ``Split(input, split?)``, ``Clip(x, min?, max?)``,
  ``Pad(data, pads, constant_value?, axes?)``,
  ``Slice(data, starts, ends, axes?, steps?)``, ``Dropout(data, ratio?, training_mode?)``;
* ``Softmax``/``LogSoftmax`` have opset-13 semantics (one axis);
* ``Cast.to`` is a numpy dtype name string (``"float32"``), not an ONNX enum;
* ``Constant`` is not an op: constants live in ``graph.constants``.

Host-only fused ops (``_FusedConv``, ``_FusedMatMul``, ``_FusedElementwise``)
are documented in :mod:`aioge.graph.passes.fuse`, the blocked-layout ops
(``_ReorderToNchwc``, ``_ReorderFromNchwc``, ``_NchwcConv2D``,
``_NchwcPool2D``) in :mod:`aioge.graph.passes.nchwc`.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

import numpy as np

from .. import dtypes
from .errors import GraphError, GraphTypeError, UnknownOpError

__all__ = (
    "OpSchema",
    "SCHEMAS",
    "get_schema",
    "get_attr",
    "check_node_signature",
    "check_node_dtypes",
    "FLOAT_TYPES",
    "INT_TYPES",
    "ELEMENTWISE_UNARY",
    "ELEMENTWISE_BINARY",
    "ALIAS_OPS",
)


class NodeLike(Protocol):
    """What the schema reads of a node (:class:`aioge.graph.Node` is one): the schema sits
    below the IR and never imports it."""

    op_type: str
    inputs: list[str]
    outputs: list[str]
    attrs: dict[str, Any]
    name: str
    domain: str

    def input(self, i: int) -> str: ...


_D = np.dtype
BOOL: np.dtype = _D("bool")
I64: np.dtype = _D("int64")
FLOAT_TYPES: frozenset[np.dtype] = dtypes.FLOAT_TYPES
INT_TYPES: frozenset[np.dtype] = dtypes.INT_TYPES
NUM_TYPES: frozenset[np.dtype] = FLOAT_TYPES | INT_TYPES
ANY_TYPES: frozenset[np.dtype] = NUM_TYPES | {BOOL}
IDX_TYPES: frozenset[np.dtype] = frozenset({_D("int32"), I64})

DT = np.dtype | None
Rule = Callable[[NodeLike, list[DT]], list[DT]]

# Elementwise ops that keep shape (unary) or broadcast (binary) and that the
# fuser may put into a _FusedElementwise program.
ELEMENTWISE_UNARY = frozenset(
    {
        "Relu",
        "LeakyRelu",
        "Sigmoid",
        "Tanh",
        "Exp",
        "Log",
        "Sqrt",
        "Abs",
        "Neg",
        "Reciprocal",
        "Erf",
        "Gelu",
        "Softplus",
        "Elu",
        "Selu",
        "Sign",
        "Clip",
        "Shrink",
    }
)
ELEMENTWISE_BINARY = frozenset({"Add", "Sub", "Mul", "Div", "Pow", "Max", "Min", "PRelu"})
# Ops whose output is a view of input 0 with another shape (no data movement).
ALIAS_OPS = frozenset({"Reshape", "Flatten", "Squeeze", "Unsqueeze", "Identity", "Dropout"})


@dataclass(frozen=True)
class OpSchema:
    """Arity, attributes and dtype rule of one IR op."""

    op_type: str
    min_inputs: int
    max_inputs: int | None  # None: variadic
    min_outputs: int = 1
    max_outputs: int | None = 1
    attrs: dict[str, Any] = field(default_factory=dict)
    rule: Rule | None = None
    free_attrs: bool = False  # fused ops carry op-specific attrs


def _err(node: NodeLike, msg: str) -> GraphTypeError:
    return GraphTypeError(msg, node=node.name, op_type=node.op_type)


def _check_in(node: NodeLike, i: int, dt: DT, allowed: frozenset[np.dtype], what: str = "") -> None:
    if dt is not None and dt not in allowed:
        kinds = "float" if allowed <= FLOAT_TYPES else "integer index" if allowed <= IDX_TYPES else "numeric"
        if allowed == {BOOL}:
            kinds = "bool"
        raise _err(node, f"input {i} {what or repr(node.input(i))} has dtype {dt}, expected a {kinds} type")


def _same(node: NodeLike, dts: list[DT], positions: Sequence[int]) -> DT:
    seen: DT = None
    seen_at = -1
    for i in positions:
        if i < len(dts) and dts[i] is not None:
            if seen is None:
                seen, seen_at = dts[i], i
            elif dts[i] != seen:
                raise _err(
                    node,
                    f"input {i} {node.input(i)!r} has dtype {dts[i]} but input {seen_at} "
                    f"{node.input(seen_at)!r} has {seen}; they must match",
                )
    return seen


def same(
    allowed: frozenset[np.dtype] = ANY_TYPES,
    tied: Sequence[int] | None = None,
    out: str = "same",
    extra: dict[int, frozenset[np.dtype]] | None = None,
) -> Rule:
    """Rule: inputs at ``tied`` (default all) share one dtype from ``allowed``.

    ``out``: "same" -> every output has that dtype; "bool" -> bool outputs.
    ``extra`` maps other input positions to their allowed dtypes.
    """

    tied_at = None if tied is None else tuple(tied)
    #: inputs past this one: every tied position is present (pos is tied_at itself, no list built)
    tied_last = -1 if not tied_at else max(tied_at)
    extra_at = tuple((extra or {}).items())

    def checked(node: NodeLike, dts: list[DT], pos: Sequence[int]) -> DT:
        """The tied dtype; raises naming the first offending input (allowed dtypes first)."""
        for i in pos:
            _check_in(node, i, dts[i], allowed)
        for i, allow in extra_at:
            if i < len(dts):
                _check_in(node, i, dts[i], allow)
        return _same(node, dts, list(pos))

    def rule(node: NodeLike, dts: list[DT]) -> list[DT]:
        n = len(dts)
        pos = range(n) if tied_at is None else tied_at if n > tied_last else [i for i in tied_at if i < n]
        t: DT = None
        for i in pos:  # one pass for the usual case: every tied dtype allowed and the same
            dt = dts[i]
            if dt is None:
                continue
            if dt not in allowed or (t is not None and dt != t):
                t = checked(node, dts, pos)  # raises
                break
            if t is None:
                t = dt
        else:
            for i, allow in extra_at:
                if i < n:
                    _check_in(node, i, dts[i], allow)
        n_out = max(1, len(node.outputs))
        if out == "bool":
            return [BOOL] * n_out
        return [t] * n_out

    return rule


def _dtype_attr(node: NodeLike, value: Any) -> np.dtype:
    """A dtype attr (``Cast.to``, ``output_dtype``) as a numpy dtype."""
    try:
        return dtypes.as_numpy(value)
    except TypeError as e:
        raise GraphError(str(e), node=node.name, op_type=node.op_type) from e


def _cast_rule(node: NodeLike, dts: list[DT]) -> list[DT]:
    to = node.attrs.get("to")
    if to is None:
        raise GraphError("Cast needs attr 'to'", node=node.name, op_type=node.op_type)
    return [_dtype_attr(node, to)]


def _where_rule(node: NodeLike, dts: list[DT]) -> list[DT]:
    _check_in(node, 0, dts[0], frozenset({BOOL}))
    return [_same(node, dts, [1, 2])]


def _shape_rule(node: NodeLike, dts: list[DT]) -> list[DT]:
    return [I64]


def _cos_rule(node: NodeLike, dts: list[DT]) -> list[DT]:
    _check_in(node, 0, dts[0], _I64)
    v = node.attrs.get("value")
    return [np.asarray(v).dtype if v is not None else _D("float32")]


def _dropout_rule(node: NodeLike, dts: list[DT]) -> list[DT]:
    _check_in(node, 0, dts[0], FLOAT_TYPES)
    if len(dts) > 2:
        _check_in(node, 2, dts[2], frozenset({BOOL}))
    return [dts[0], BOOL][: max(1, len(node.outputs))]


def _pow_rule(node: NodeLike, dts: list[DT]) -> list[DT]:
    _check_in(node, 0, dts[0], NUM_TYPES)
    _check_in(node, 1, dts[1], NUM_TYPES)
    return [dts[0]]


def _layernorm_rule(node: NodeLike, dts: list[DT]) -> list[DT]:
    t = same(FLOAT_TYPES)(node, dts)[0]
    stash = _D("float32") if int(node.attrs.get("stash_type", 1)) == 1 else t
    return [t, stash, stash][: max(1, len(node.outputs))]


def _to_bool(node: NodeLike, dts: list[DT]) -> list[DT]:
    _check_in(node, 0, dts[0], FLOAT_TYPES)
    return [BOOL]


def _to_int64(node: NodeLike, dts: list[DT]) -> list[DT]:
    return [I64] * max(1, len(node.outputs))


def _topk_rule(node: NodeLike, dts: list[DT]) -> list[DT]:
    _check_in(node, 0, dts[0], NUM_TYPES)
    _check_in(node, 1, dts[1], frozenset({I64}))
    return [dts[0], I64]


def _maxpool_rule(node: NodeLike, dts: list[DT]) -> list[DT]:
    _check_in(node, 0, dts[0], _N)
    return [dts[0], I64][: max(1, len(node.outputs))]


def _onehot_rule(node: NodeLike, dts: list[DT]) -> list[DT]:
    _check_in(node, 0, dts[0], NUM_TYPES)
    _check_in(node, 1, dts[1], NUM_TYPES)
    return [dts[2]]


def _rnn_rule(node: NodeLike, dts: list[DT]) -> list[DT]:
    t = _same(node, dts, [0, 1, 2, 3, 5, 6, 7] if node.op_type == "LSTM" else [0, 1, 2, 3, 5])
    for i in range(3):
        _check_in(node, i, dts[i], FLOAT_TYPES)
    if len(dts) > 4:
        _check_in(node, 4, dts[4], frozenset({_D("int32")}))
    return [t] * max(1, len(node.outputs))


_INT8: frozenset[np.dtype] = frozenset({_D("int8"), _D("uint8")})


def _matmul_integer_rule(node: NodeLike, dts: list[DT]) -> list[DT]:
    for i in range(len(dts)):
        _check_in(node, i, dts[i], _INT8)
    _same(node, dts, [0, 2])
    _same(node, dts, [1, 3])
    return [_D("int32")]


def _quantize_rule(node: NodeLike, dts: list[DT]) -> list[DT]:
    _check_in(node, 0, dts[0], FLOAT_TYPES | {_D("int32")})
    _check_in(node, 1, dts[1], FLOAT_TYPES)
    out = dts[2] if len(dts) > 2 and dts[2] is not None else None
    to = node.attrs.get("output_dtype", 0)  # the IR: a dtype name (the importer converts ONNX's enum), 0 = unset
    if out is None:
        out = _dtype_attr(node, to) if to else _D("uint8")
    if out not in _INT8 | {_D("int16"), _D("uint16"), _D("int32")}:
        raise _err(node, f"quantizes to {out}, expected an integer type")
    return [out]


def _dequantize_rule(node: NodeLike, dts: list[DT]) -> list[DT]:
    _check_in(node, 0, dts[0], INT_TYPES)
    _check_in(node, 1, dts[1], FLOAT_TYPES)
    _same(node, dts, [0, 2])
    return [dts[1]]


def _fused_ew_rule(node: NodeLike, dts: list[DT]) -> list[DT]:
    return [same(FLOAT_TYPES)(node, dts)[0]]


_F, _N, _A = FLOAT_TYPES, NUM_TYPES, ANY_TYPES
_I64: frozenset[np.dtype] = frozenset({I64})

_CONV_ATTRS = {
    "auto_pad": "NOTSET",
    "dilations": None,
    "group": 1,
    "kernel_shape": None,
    "pads": None,
    "strides": None,
}
_POOL_ATTRS = {
    "auto_pad": "NOTSET",
    "ceil_mode": 0,
    "dilations": None,
    "kernel_shape": None,
    "pads": None,
    "strides": None,
}
_ACT_ATTRS = {"activation": "none", "alpha": 0.01, "min": 0.0, "max": 6.0}
_F32: frozenset[np.dtype] = frozenset({_D("float32")})
# the host kernels' own attrs (CANN order): strides/dilations [1, 1, sh, sw], pads [top, bottom, left, right]
_NCHWC_CONV_ATTRS = {"strides": None, "pads": None, "dilations": None, "groups": 1}
_NCHWC_POOL_ATTRS = {
    "mode": None,
    "global": 0,
    "kernel": None,
    "strides": None,
    "pads": None,
    "dilations": None,
    "count_include_pad": 0,
}
_RESIZE_ATTRS = {
    "antialias": 0,
    "axes": None,
    "coordinate_transformation_mode": "half_pixel",
    "cubic_coeff_a": -0.75,
    "exclude_outside": 0,
    "extrapolation_value": 0.0,
    "keep_aspect_ratio_policy": "stretch",
    "mode": "nearest",
    "nearest_mode": "round_prefer_floor",
}
_RNN_ATTRS = {
    "activation_alpha": None,
    "activation_beta": None,
    "activations": None,
    "clip": None,
    "direction": "forward",
    "hidden_size": None,
    "layout": 0,
}
_REDUCE = {"keepdims": 1, "noop_with_empty_axes": 0}


def _s(
    op: str,
    mn: int,
    mx: int | None,
    rule: Rule,
    attrs: dict[str, Any] | None = None,
    mno: int = 1,
    mxo: int | None = 1,
    free: bool = False,
) -> OpSchema:
    return OpSchema(op, mn, mx, mno, mxo, attrs or {}, rule, free)


SCHEMAS: dict[str, OpSchema] = {
    s.op_type: s
    for s in [
        # elementwise unary
        *(
            _s(op, 1, 1, same(_F))
            for op in ("Sqrt", "Exp", "Log", "Erf", "Reciprocal", "Sigmoid", "Tanh", "Softplus")
        ),
        *(_s(op, 1, 1, same(_N)) for op in ("Abs", "Neg", "Sign", "Relu")),
        _s("LeakyRelu", 1, 1, same(_F), {"alpha": 0.01}),
        _s("Elu", 1, 1, same(_F), {"alpha": 1.0}),
        _s("Selu", 1, 1, same(_F), {"alpha": 1.67326319217681884765625, "gamma": 1.05070102214813232421875}),
        _s("Gelu", 1, 1, same(_F), {"approximate": "none"}),
        _s("Shrink", 1, 1, same(_N), {"bias": 0.0, "lambd": 0.5}),
        _s("Not", 1, 1, same(frozenset({BOOL}))),
        *(_s(op, 1, 1, same(_F)) for op in ("Floor", "Ceil", "Round", "HardSwish", "Mish", "Sin", "Cos")),
        _s("HardSigmoid", 1, 1, same(_F), {"alpha": 0.2, "beta": 0.5}),
        _s("IsNaN", 1, 1, _to_bool),
        _s("IsInf", 1, 1, _to_bool, {"detect_negative": 1, "detect_positive": 1}),
        _s("Identity", 1, 1, same(_A)),
        _s("Dropout", 1, 3, _dropout_rule, {"seed": 0}, 1, 2),
        _s("Cast", 1, 1, _cast_rule, {"to": None, "saturate": 1}),
        _s("Clip", 1, 3, same(_N)),
        # elementwise binary / variadic
        *(_s(op, 2, 2, same(_N)) for op in ("Add", "Sub", "Mul", "Div")),
        _s("Pow", 2, 2, _pow_rule),
        _s("PRelu", 2, 2, same(_F)),
        *(_s(op, 1, None, same(_N)) for op in ("Max", "Min", "Sum", "Mean")),
        _s("Equal", 2, 2, same(_A, out="bool")),
        *(_s(op, 2, 2, same(_N, out="bool")) for op in ("Less", "Greater", "LessOrEqual", "GreaterOrEqual")),
        *(_s(op, 2, 2, same(frozenset({BOOL}), out="bool")) for op in ("And", "Or", "Xor")),
        _s("Mod", 2, 2, same(_N), {"fmod": 0}),
        _s("Where", 3, 3, _where_rule),
        # linear algebra / nn
        _s("MatMul", 2, 2, same(_N)),
        _s("MatMulInteger", 2, 4, _matmul_integer_rule),
        _s("QuantizeLinear", 2, 3, _quantize_rule, {"axis": 1, "saturate": 1, "block_size": 0, "output_dtype": 0}),
        _s("DequantizeLinear", 2, 3, _dequantize_rule, {"axis": 1, "block_size": 0}),
        _s("Einsum", 1, None, same(_N), {"equation": None}),
        _s("Gemm", 2, 3, same(_N), {"alpha": 1.0, "beta": 1.0, "transA": 0, "transB": 0}),
        _s("Conv", 2, 3, same(_F), dict(_CONV_ATTRS)),
        _s("ConvTranspose", 2, 3, same(_F), {**_CONV_ATTRS, "output_padding": None, "output_shape": None}),
        _s("BatchNormalization", 5, 5, same(_F), {"epsilon": 1e-5, "momentum": 0.9, "training_mode": 0}),
        _s("InstanceNormalization", 3, 3, same(_F), {"epsilon": 1e-5}),
        _s("GroupNormalization", 3, 3, same(_F), {"epsilon": 1e-5, "num_groups": None, "stash_type": 1}),
        _s("LSTM", 3, 8, _rnn_rule, {**_RNN_ATTRS, "input_forget": 0}, 1, 3),
        _s("GRU", 3, 6, _rnn_rule, {**_RNN_ATTRS, "linear_before_reset": 0}, 1, 2),
        _s("RNN", 3, 6, _rnn_rule, dict(_RNN_ATTRS), 1, 2),
        _s("LayerNormalization", 2, 3, _layernorm_rule, {"axis": -1, "epsilon": 1e-5, "stash_type": 1}, 1, 3),
        _s("MaxPool", 1, 1, _maxpool_rule, {**_POOL_ATTRS, "storage_order": 0}, 1, 2),
        _s("AveragePool", 1, 1, same(_F), {**_POOL_ATTRS, "count_include_pad": 0}),
        _s("GlobalAveragePool", 1, 1, same(_F)),
        _s("GlobalMaxPool", 1, 1, same(_N)),
        _s("LRN", 1, 1, same(_F), {"alpha": 1e-4, "beta": 0.75, "bias": 1.0, "size": None}),
        _s("Softmax", 1, 1, same(_F), {"axis": -1}),
        _s("LogSoftmax", 1, 1, same(_F), {"axis": -1}),
        # shape and data movement
        _s("Flatten", 1, 1, same(_A), {"axis": 1}),
        _s("Reshape", 2, 2, same(_A, tied=[0], extra={1: _I64}), {"allowzero": 0}),
        _s("Transpose", 1, 1, same(_A), {"perm": None}),
        _s("Squeeze", 1, 2, same(_A, tied=[0], extra={1: _I64})),
        _s("Unsqueeze", 2, 2, same(_A, tied=[0], extra={1: _I64})),
        _s("Concat", 1, None, same(_A), {"axis": None}),
        _s("Split", 1, 2, same(_A, tied=[0], extra={1: _I64}), {"axis": 0, "num_outputs": None}, 1, None),
        _s("Slice", 3, 5, same(_A, tied=[0], extra={1: IDX_TYPES, 2: IDX_TYPES, 3: IDX_TYPES, 4: IDX_TYPES})),
        _s("Gather", 2, 2, same(_A, tied=[0], extra={1: IDX_TYPES}), {"axis": 0}),
        _s("Expand", 2, 2, same(_A, tied=[0], extra={1: _I64})),
        _s("Tile", 2, 2, same(_A, tied=[0], extra={1: _I64})),
        _s("Pad", 2, 4, same(_A, tied=[0, 2], extra={1: _I64, 3: IDX_TYPES}), {"mode": "constant"}),
        _s("Resize", 1, 4, same(_A, tied=[0], extra={1: _F, 2: frozenset({_D("float32")}), 3: _I64}),
           dict(_RESIZE_ATTRS)),
        _s("DepthToSpace", 1, 1, same(_A), {"blocksize": None, "mode": "DCR"}),
        _s("SpaceToDepth", 1, 1, same(_A), {"blocksize": None}),
        _s("Trilu", 1, 2, same(_A, tied=[0], extra={1: _I64}), {"upper": 1}),
        _s("Range", 3, 3, same(_N)),
        _s("CumSum", 2, 2, same(_N, tied=[0], extra={1: IDX_TYPES}), {"exclusive": 0, "reverse": 0}),
        _s("GatherElements", 2, 2, same(_A, tied=[0], extra={1: IDX_TYPES}), {"axis": 0}),
        _s("GatherND", 2, 2, same(_A, tied=[0], extra={1: _I64}), {"batch_dims": 0}),
        _s("ScatterElements", 3, 3, same(_A, tied=[0, 2], extra={1: IDX_TYPES}), {"axis": 0, "reduction": "none"}),
        _s("ScatterND", 3, 3, same(_A, tied=[0, 2], extra={1: _I64}), {"reduction": "none"}),
        _s("OneHot", 3, 3, _onehot_rule, {"axis": -1}),
        _s("NonZero", 1, 1, _to_int64),
        _s("TopK", 2, 2, _topk_rule, {"axis": -1, "largest": 1, "sorted": 1}, 2, 2),
        *(_s(op, 1, 1, _to_int64, {"axis": 0, "keepdims": 1, "select_last_index": 0}) for op in ("ArgMax", "ArgMin")),
        _s("Size", 1, 1, _to_int64),
        _s("Shape", 1, 1, _shape_rule, {"start": 0, "end": None}),
        _s("ConstantOfShape", 1, 1, _cos_rule, {"value": None}),
        *(
            _s(op, 1, 2, same(_A if op in ("ReduceMax", "ReduceMin") else _N, tied=[0], extra={1: _I64}),
               dict(_REDUCE))
            for op in ("ReduceSum", "ReduceMean", "ReduceMax", "ReduceMin", "ReduceProd")
        ),
        *(
            _s(op, 1, 2, same(_N if op in ("ReduceL1", "ReduceSumSquare") else _F, tied=[0], extra={1: _I64}),
               dict(_REDUCE))
            for op in ("ReduceL1", "ReduceL2", "ReduceLogSum", "ReduceLogSumExp", "ReduceSumSquare")
        ),
        # host-only fused ops (see passes/fuse.py)
        _s("_FusedConv", 2, 3, same(_F), {**_CONV_ATTRS, **_ACT_ATTRS}),
        _s("_FusedMatMul", 2, 3, same(_N), {"trans_a": 0, "trans_b": 0, "scale": 1.0, **_ACT_ATTRS}),
        _s("_FusedElementwise", 1, None, _fused_ew_rule, {"program": None}),
        # host-only blocked-layout ops (see passes/nchwc.py): float32 only
        _s("_ReorderToNchwc", 1, 1, same(_F32)),
        _s("_ReorderFromNchwc", 1, 1, same(_F32)),
        _s("_NchwcConv2D", 2, 4, same(_F32), {**_NCHWC_CONV_ATTRS, **_ACT_ATTRS}),
        _s("_NchwcPool2D", 1, 1, same(_F32), dict(_NCHWC_POOL_ATTRS)),
    ]
}


def get_schema(op_type: str, node: NodeLike | None = None) -> OpSchema:
    """The schema of ``op_type`` or :class:`UnknownOpError`."""
    s = SCHEMAS.get(op_type)
    if s is None:
        raise UnknownOpError(
            f"unknown op type {op_type!r}", node=node.name if node else None, op_type=op_type
        )
    return s


def get_attr(node: NodeLike, name: str) -> Any:
    """``node.attrs[name]`` or the schema default."""
    if name in node.attrs:
        return node.attrs[name]
    return get_schema(node.op_type, node).attrs.get(name)


def check_node_signature(node: NodeLike) -> None:
    """Op type known, input/output counts in range, no unknown attrs, required inputs present."""
    s = SCHEMAS.get(node.op_type) or get_schema(node.op_type, node)  # (get_schema raises for an unknown op)
    if node.domain not in ("", "ai.onnx"):
        raise UnknownOpError(f"unknown domain {node.domain!r}", node=node.name, op_type=node.op_type)
    n_in = len(node.inputs)
    if n_in < s.min_inputs or (s.max_inputs is not None and n_in > s.max_inputs):
        rng = f"{s.min_inputs}..{s.max_inputs if s.max_inputs is not None else 'N'}"
        raise GraphError(f"has {n_in} inputs, expected {rng}", node=node.name, op_type=node.op_type)
    if s.min_inputs and not all(node.inputs[: s.min_inputs]):  # (the usual case: one test, no loop)
        for i in range(s.min_inputs):
            if not node.inputs[i]:
                raise GraphError(f"required input {i} is missing", node=node.name, op_type=node.op_type)
    n_out = len(node.outputs)
    if n_out < s.min_outputs or (s.max_outputs is not None and n_out > s.max_outputs) or not node.outputs[0]:
        raise GraphError(
            f"has {n_out} outputs, expected {s.min_outputs}..{s.max_outputs or 'N'}",
            node=node.name,
            op_type=node.op_type,
        )
    if not s.free_attrs and not node.attrs.keys() <= s.attrs.keys():
        unknown = sorted(set(node.attrs) - set(s.attrs))
        if unknown:
            raise GraphError(f"unknown attribute(s) {unknown}", node=node.name, op_type=node.op_type)


def check_node_dtypes(node: NodeLike, in_dtypes: list[DT]) -> list[DT]:
    """Output dtypes for the given input dtypes (``None`` = unknown).

    Raises:
        GraphTypeError: naming the node and the offending input.
    """
    s = SCHEMAS.get(node.op_type) or get_schema(node.op_type, node)  # (get_schema raises for an unknown op)
    assert s.rule is not None
    # a rule reads its list and returns a new one: a list is handed over as it is, and a result of
    # the node's output count returned as it is (the usual case)
    outs = s.rule(node, in_dtypes if type(in_dtypes) is list else list(in_dtypes))
    n = len(node.outputs)
    if len(outs) == n:
        return outs
    if len(outs) < n:
        outs = outs + [outs[0]] * (n - len(outs))
    return outs[:n]
