"""Lowering of elementwise ops (unary, binary, variadic, comparison, Cast, Where)."""

from __future__ import annotations

import math

import numpy as np

from ... import _shapes as S
from ._base import RULES, Builder, ConstInput, InputRef, Rule, acl_dtype


def _same(L: Builder) -> None:
    L.op(L.node.op_type, L.node.inputs, L.node.outputs)


def _exp_log(L: Builder) -> None:
    L.op(L.node.op_type, L.node.inputs, L.node.outputs, base=-1.0, scale=1.0, shift=0.0)


def _chain(L: Builder, cann: str, div_by_n: bool = False) -> None:
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


def _relu_plus_neg(L: Builder, x: str, slope: InputRef, out: str) -> None:
    shape, dt = L.shape(out), L.dtype(x)
    r = L.to("Relu", [x], L.shape(x), dt)
    m = L.to("Minimum", [x, L.scalar(0, dt)], L.shape(x), dt)
    neg = L.to("Mul", [m, slope], shape, dt)
    L.op("Add", [r, neg], [out])


def _leaky(L: Builder) -> None:
    L.op("LeakyRelu", L.node.inputs, L.node.outputs, negative_slope=float(L.attr("alpha")))


def _prelu(L: Builder) -> None:
    """CANN PRelu takes one slope per channel (axis 1) or a single one; other broadcasts decompose."""
    x, slope = L.node.inputs
    sx, ss = L.shape(x), L.shape(slope)
    full = (1,) * (len(sx) - len(ss)) + tuple(ss)
    c = sx[1] if len(sx) > 1 else 1
    per_channel = len(sx) >= 2 and full[1] == c and all(d == 1 for i, d in enumerate(full) if i != 1)
    if math.prod(ss) == 1 or per_channel:
        w = L.reshape(slope, (math.prod(ss),)) if ss != (math.prod(ss),) else slope
        L.op("PRelu", [x, w], L.node.outputs)
        return
    _relu_plus_neg(L, x, slope, L.node.outputs[0])


def _elu_like(L: Builder) -> None:
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


def _softplus(L: Builder) -> None:
    x, out = L.node.inputs[0], L.node.outputs[0]
    s, dt = L.shape(x), L.dtype(x)
    a = L.to("Abs", [x], s, dt)
    e = L.to("Exp", [a], s, dt, base=-1.0, scale=-1.0, shift=0.0)
    lg = L.to("Log", [e], s, dt, base=-1.0, scale=1.0, shift=1.0)
    r = L.to("Relu", [x], s, dt)
    L.op("Add", [r, lg], [out])


def _sign(L: Builder) -> None:
    x, out = L.node.inputs[0], L.node.outputs[0]
    s, dt = L.shape(x), L.dtype(x)
    gt = L.to("Greater", [x, L.scalar(0, dt)], s, np.bool_)
    lt = L.to("Less", [x, L.scalar(0, dt)], s, np.bool_)
    pos = L.to("Cast", [gt], s, dt, dst_type=acl_dtype(dt))
    neg = L.to("Cast", [lt], s, dt, dst_type=acl_dtype(dt))
    L.op("Sub", [pos, neg], [out])


def _shrink(L: Builder) -> None:
    x, out = L.node.inputs[0], L.node.outputs[0]
    s, dt = L.shape(x), L.dtype(x)
    lam, bias = float(L.attr("lambd")), float(L.attr("bias"))
    lo = L.to("Less", [x, L.scalar(-lam, dt)], s, np.bool_)
    hi = L.to("Greater", [x, L.scalar(lam, dt)], s, np.bool_)
    plus = L.to("Add", [x, L.scalar(bias, dt)], s, dt)
    minus = L.to("Sub", [x, L.scalar(bias, dt)], s, dt)
    zero = L.fill(s, 0, dt)
    upper = L.to("Select", [hi, minus, zero], s, dt)
    L.op("Select", [lo, plus, upper], [out])


def _gelu(L: Builder) -> None:
    x, out = L.node.inputs[0], L.node.outputs[0]
    if L.attr("approximate") == "tanh":
        L.op("Gelu", [x], [out])
        return
    # one node (CANN GeluV2, approximate "none"), not the five of x * 0.5 * (1 + erf(x / sqrt 2)):
    # an unfused GELU between two GEMMs of a transformer block otherwise costs five launches
    L.op("GeluV2", [x], [out], approximate="none")


def _clip(L: Builder) -> None:
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


def _cast(L: Builder) -> None:
    L.op("Cast", [L.node.inputs[0]], L.node.outputs, dst_type=acl_dtype(L.attr("to")))


def _pow(L: Builder) -> None:
    """CANN Pow takes one dtype; ONNX lets the exponent differ (cast it, or compute in float64 for an
    integer base with a float exponent, truncating back as onnxruntime does)."""
    x, y = L.node.inputs
    out = L.node.outputs[0]
    dx, dy = L.dtype(x), L.dtype(y)
    if dx == dy:
        L.op("Pow", [x, y], [out])
        return
    if dx.kind == "f" or dy.kind != "f":
        yc = L.to("Cast", [y], L.shape(y), dx, dst_type=acl_dtype(dx))
        L.op("Pow", [x, yc], [out])
        return
    f64 = np.dtype(np.float64)
    xf = L.to("Cast", [x], L.shape(x), f64, dst_type=acl_dtype(f64))
    yf = L.to("Cast", [y], L.shape(y), f64, dst_type=acl_dtype(f64)) if dy != f64 else y
    p = L.to("Pow", [xf, yf], L.shape(out), f64)
    L.op("Cast", [p], [out], dst_type=acl_dtype(dx))


def _not(L: Builder) -> None:
    L.op("LogicalNot", L.node.inputs, L.node.outputs)


def _renamed(cann: str) -> Rule:
    def rule(L: Builder) -> None:
        L.op(cann, L.node.inputs, L.node.outputs)

    return rule


def _isinf(L: Builder) -> None:
    x, out = L.node.inputs[0], L.node.outputs[0]
    neg, pos = int(L.attr("detect_negative")), int(L.attr("detect_positive"))
    s, dt = L.shape(x), L.dtype(x)
    if neg and pos:
        L.op("IsInf", [x], [out])
        return
    if not neg and not pos:
        L.fill(s, False, np.bool_, out=out)
        return
    inf = L.to("IsInf", [x], s, np.bool_)
    side = L.to("Greater" if pos else "Less", [x, L.scalar(0, dt)], s, np.bool_)
    L.op("LogicalAnd", [inf, side], [out])


def _mod(L: Builder) -> None:
    # ONNX fmod=1 is C's fmod (the sign of the dividend): CANN Mod; fmod=0 is the floor modulus: FloorMod
    L.op("Mod" if int(L.attr("fmod")) else "FloorMod", L.node.inputs, L.node.outputs)


def _hard_sigmoid(L: Builder) -> None:
    L.op("HardSigmoid", L.node.inputs, L.node.outputs, alpha=float(L.attr("alpha")), beta=float(L.attr("beta")))


def _where(L: Builder) -> None:
    out = L.node.outputs[0]
    shape = L.shape(out)
    ins: list[InputRef] = []
    for x in L.node.inputs:
        if L.shape(x) != shape:
            x = L.to("BroadcastToD", [x], shape, L.dtype(x), shape=list(shape))
        ins.append(x)
    L.op("Select", ins, [out])


for _op in ("Add", "Sub", "Mul", "Div", "Sqrt", "Abs", "Neg", "Erf", "Reciprocal", "Relu", "Sigmoid", "Tanh",
            "Equal", "Less", "Greater"):  # fmt: skip
    RULES[_op] = _same
RULES.update(
    {
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
        "Pow": _pow,
        "Where": _where,
        "And": _renamed("LogicalAnd"),
        "Or": _renamed("LogicalOr"),
        "Xor": _renamed("NotEqual"),  # on bools; CANN has no LogicalXor
        "GreaterOrEqual": _renamed("GreaterEqual"),
        "LessOrEqual": _renamed("LessEqual"),
        "IsNaN": _renamed("IsNan"),
        "IsInf": _isinf,
        "Mod": _mod,
        "HardSigmoid": _hard_sigmoid,
        **{op: _same for op in ("Floor", "Ceil", "Round", "Sin", "Cos", "HardSwish", "Mish")},
    }
)
