"""Handlers: core ATen ops -> aioge IR ops (ONNX names and semantics).

Each handler gets the conversion state, the FX node and its arguments by
schema name, and returns the node's value (a :class:`Val`, a tuple for
multi-output ops).  Ops with no IR op of their own are decomposed into ops
the IR has (``rsqrt`` -> ``Reciprocal(Sqrt)``, ``ge`` -> ``Where(Greater, True,
Equal)``, bilinear upsampling -> two ``MatMul`` with interpolation matrices,
group norm -> ``InstanceNormalization`` over groups, ...).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from ._convert import Cx, Unsupported, Val, handler, np_to_torch_dtype, numel, torch_dtype_to_np

_I64_MAX = 2**63 - 1

# ops kept out of the core-ATen decompositions: their decompositions (multi-index gathers,
# batch-norm-with-batch-stats) have no IR mapping or a worse one than the op has whole
KEEP_WHOLE = frozenset({
    "upsample_nearest1d.vec", "upsample_nearest2d.vec", "upsample_nearest1d.default", "upsample_nearest2d.default",
    "_upsample_nearest_exact1d.vec", "_upsample_nearest_exact2d.vec", "_upsample_nearest_exact1d.default",
    "_upsample_nearest_exact2d.default", "upsample_linear1d.vec", "upsample_bilinear2d.vec",
    "upsample_linear1d.default", "upsample_bilinear2d.default", "upsample_bicubic2d.vec",
    "upsample_bicubic2d.default", "instance_norm.default", "_safe_softmax.default",
})  # fmt: skip


def _i64(values: Sequence[int] | int) -> np.ndarray:
    return np.array(values, np.int64)


def _proxy(cx: Cx, v: Any) -> Any:
    import torch

    if isinstance(v, Val):
        shape, dt = cx.info[v.name]
        return torch.empty((1,) * len(shape), dtype=np_to_torch_dtype(dt))
    return v


def _result_dtype(cx: Cx, a: Any, b: Any) -> np.dtype:
    import torch

    return torch_dtype_to_np(torch.result_type(_proxy(cx, a), _proxy(cx, b)))


def used_outputs(n: Any) -> set[int]:
    """Indices ``i`` of a multi-output node whose ``getitem(n, i)`` is read by something."""
    return {int(u.args[1]) for u in n.users if u.target.__name__ == "getitem" and u.users}


def _dims(dim: Any, rank: int) -> list[int]:
    if dim is None:
        return list(range(rank))
    if isinstance(dim, int):
        dim = [dim]
    if len(dim) == 0:
        return list(range(rank))
    return sorted(d % rank if rank else 0 for d in dim)


# ----------------------------------------------------------------------- elementwise
def _binary(cx: Cx, n: Any, op: str, a: Any, b: Any, dt: np.dtype | None = None) -> Val:
    out_dt = cx.out_dtype(n)
    dt = out_dt if dt is None else dt
    return cx.emit(op, [cx.ir(a, dt), cx.ir(b, dt)], cx.out_shape(n), out_dt)


def _scaled(cx: Cx, v: Any, alpha: Any, dt: np.dtype) -> Any:
    if alpha in (None, 1):
        return v
    if not isinstance(v, Val):
        return v * alpha
    return cx.emit("Mul", [cx.ir(v, dt), cx.const(np.array(alpha, dt))], cx.shape(v), dt)


@handler("add.Tensor", "add.Scalar")
def _add(cx: Cx, n: Any, p: dict[str, Any]) -> Val:
    dt = cx.out_dtype(n)
    return _binary(cx, n, "Add", p["self"], _scaled(cx, p["other"], p.get("alpha"), dt))


@handler("sub.Tensor", "sub.Scalar")
def _sub(cx: Cx, n: Any, p: dict[str, Any]) -> Val:
    dt = cx.out_dtype(n)
    return _binary(cx, n, "Sub", p["self"], _scaled(cx, p["other"], p.get("alpha"), dt))


@handler("rsub.Tensor", "rsub.Scalar")
def _rsub(cx: Cx, n: Any, p: dict[str, Any]) -> Val:
    dt = cx.out_dtype(n)
    return _binary(cx, n, "Sub", p["other"], _scaled(cx, p["self"], p.get("alpha"), dt))


@handler("mul.Tensor", "mul.Scalar")
def _mul(cx: Cx, n: Any, p: dict[str, Any]) -> Val:
    if cx.out_dtype(n) == np.bool_:
        return _and(cx, n, p)
    return _binary(cx, n, "Mul", p["self"], p["other"])


@handler("div.Tensor", "div.Scalar", "div.Tensor_mode", "div.Scalar_mode")
def _div(cx: Cx, n: Any, p: dict[str, Any]) -> Val:
    if p.get("rounding_mode") is not None:
        raise Unsupported(f"rounding_mode={p['rounding_mode']!r} needs Floor, which the IR lacks")
    return _binary(cx, n, "Div", p["self"], p["other"])


@handler("maximum.default", "clamp_min.Tensor")
def _maximum(cx: Cx, n: Any, p: dict[str, Any]) -> Val:
    return _binary(cx, n, "Max", p["self"], p["other"] if "other" in p else p["min"])


@handler("minimum.default", "clamp_max.Tensor")
def _minimum(cx: Cx, n: Any, p: dict[str, Any]) -> Val:
    return _binary(cx, n, "Min", p["self"], p["other"] if "other" in p else p["max"])


@handler("pow.Tensor_Scalar")
def _pow_scalar(cx: Cx, n: Any, p: dict[str, Any]) -> Val:
    x, e = p["self"], p["exponent"]
    dt, shape = cx.out_dtype(n), cx.out_shape(n)
    xv = cx.ir(x, dt)
    if e == 1:
        return cx.emit("Identity", [xv], shape, dt)
    if e == 2:
        return cx.emit("Mul", [xv, xv], shape, dt)
    if e == 0.5 and dt.kind == "f":
        return cx.emit("Sqrt", [xv], shape, dt)
    if e == -1 and dt.kind == "f":
        return cx.emit("Reciprocal", [xv], shape, dt)
    return cx.emit("Pow", [xv, cx.const(np.array(e, dt))], shape, dt)


@handler("pow.Tensor_Tensor", "pow.Scalar")
def _pow(cx: Cx, n: Any, p: dict[str, Any]) -> Val:
    return _binary(cx, n, "Pow", p["self"], p["exponent"])


def _compare(cx: Cx, n: Any, op: str, a: Any, b: Any) -> Val:
    dt = _result_dtype(cx, a, b)
    return cx.emit(op, [cx.ir(a, dt), cx.ir(b, dt)], cx.out_shape(n), np.bool_)


def _or_vals(cx: Cx, a: Val, b: Val, shape: tuple[int, ...]) -> Val:
    return cx.emit("Where", [a.name, cx.const(np.array(True)), b.name], shape, np.bool_)


@handler("eq.Tensor", "eq.Scalar")
def _eq(cx: Cx, n: Any, p: dict[str, Any]) -> Val:
    return _compare(cx, n, "Equal", p["self"], p["other"])


@handler("ne.Tensor", "ne.Scalar")
def _ne(cx: Cx, n: Any, p: dict[str, Any]) -> Val:
    e = _compare(cx, n, "Equal", p["self"], p["other"])
    return cx.emit("Not", [e.name], cx.out_shape(n), np.bool_)


@handler("lt.Tensor", "lt.Scalar")
def _lt(cx: Cx, n: Any, p: dict[str, Any]) -> Val:
    return _compare(cx, n, "Less", p["self"], p["other"])


@handler("gt.Tensor", "gt.Scalar")
def _gt(cx: Cx, n: Any, p: dict[str, Any]) -> Val:
    return _compare(cx, n, "Greater", p["self"], p["other"])


@handler("le.Tensor", "le.Scalar")
def _le(cx: Cx, n: Any, p: dict[str, Any]) -> Val:
    # a <= b as (a < b) or (a == b): false for NaN, as torch
    shape = cx.out_shape(n)
    return _or_vals(cx, _compare(cx, n, "Less", p["self"], p["other"]),
                    _compare(cx, n, "Equal", p["self"], p["other"]), shape)  # fmt: skip


@handler("ge.Tensor", "ge.Scalar")
def _ge(cx: Cx, n: Any, p: dict[str, Any]) -> Val:
    shape = cx.out_shape(n)
    return _or_vals(cx, _compare(cx, n, "Greater", p["self"], p["other"]),
                    _compare(cx, n, "Equal", p["self"], p["other"]), shape)  # fmt: skip


def _bool(cx: Cx, v: Any) -> str:
    """``v != 0`` as a bool IR value (torch's truthiness for logical ops)."""
    if isinstance(v, Val) and cx.dtype(v) != np.bool_:
        dt = cx.dtype(v)
        e = cx.emit("Equal", [v.name, cx.const(np.array(0, dt))], cx.shape(v), np.bool_)
        return cx.emit("Not", [e.name], cx.shape(v), np.bool_).name
    if not isinstance(v, Val):
        import torch

        return cx.const(torch.as_tensor(v).bool())
    return v.name


@handler("logical_not.default", "bitwise_not.default")
def _not(cx: Cx, n: Any, p: dict[str, Any]) -> Val:
    if n.target.__name__.startswith("bitwise") and cx.dtype(p["self"]) != np.bool_:
        raise Unsupported("bitwise_not of integers")
    return cx.emit("Not", [_bool(cx, p["self"])], cx.out_shape(n), np.bool_)


@handler("logical_and.default", "bitwise_and.Tensor")
def _and(cx: Cx, n: Any, p: dict[str, Any]) -> Val:
    a, b = p["self"], p["other"]
    if cx.out_dtype(n) != np.bool_:
        raise Unsupported("bitwise ops on integers")
    return cx.emit("Where", [_bool(cx, a), _bool(cx, b), cx.const(np.array(False))], cx.out_shape(n), np.bool_)


@handler("logical_or.default", "bitwise_or.Tensor")
def _or(cx: Cx, n: Any, p: dict[str, Any]) -> Val:
    a, b = p["self"], p["other"]
    if cx.out_dtype(n) != np.bool_:
        raise Unsupported("bitwise ops on integers")
    return cx.emit("Where", [_bool(cx, a), cx.const(np.array(True)), _bool(cx, b)], cx.out_shape(n), np.bool_)


@handler("logical_xor.default", "bitwise_xor.Tensor")
def _xor(cx: Cx, n: Any, p: dict[str, Any]) -> Val:
    if cx.out_dtype(n) != np.bool_:
        raise Unsupported("bitwise ops on integers")
    e = cx.emit("Equal", [_bool(cx, p["self"]), _bool(cx, p["other"])], cx.out_shape(n), np.bool_)
    return cx.emit("Not", [e.name], cx.out_shape(n), np.bool_)


@handler("where.self")
def _where(cx: Cx, n: Any, p: dict[str, Any]) -> Val:
    dt = cx.out_dtype(n)
    c = _bool(cx, p["condition"])
    return cx.emit("Where", [c, cx.ir(p["self"], dt), cx.ir(p["other"], dt)], cx.out_shape(n), dt)


_UNARY = {
    "relu.default": "Relu",
    "sigmoid.default": "Sigmoid",
    "tanh.default": "Tanh",
    "exp.default": "Exp",
    "log.default": "Log",
    "sqrt.default": "Sqrt",
    "abs.default": "Abs",
    "neg.default": "Neg",
    "reciprocal.default": "Reciprocal",
    "erf.default": "Erf",
    "sign.default": "Sign",
}


def _unary(cx: Cx, n: Any, p: dict[str, Any]) -> Val:
    dt = cx.out_dtype(n)
    return cx.emit(_UNARY[n.target.__name__], [cx.ir(p["self"], dt)], cx.out_shape(n), dt)


handler(*_UNARY)(_unary)


@handler("alias.default", "detach.default", "lift_fresh_copy.default", "contiguous.default", "clone.default",
         "alias_copy.default", "detach_copy.default")  # fmt: skip
def _alias(cx: Cx, n: Any, p: dict[str, Any]) -> Any:
    return p["self"]


@handler("rsqrt.default")
def _rsqrt(cx: Cx, n: Any, p: dict[str, Any]) -> Val:
    dt, shape = cx.out_dtype(n), cx.out_shape(n)
    s = cx.emit("Sqrt", [cx.ir(p["self"], dt)], shape, dt)
    return cx.emit("Reciprocal", [s.name], shape, dt)


@handler("log1p.default")
def _log1p(cx: Cx, n: Any, p: dict[str, Any]) -> Val:
    dt, shape = cx.out_dtype(n), cx.out_shape(n)
    s = cx.emit("Add", [cx.ir(p["self"], dt), cx.const(np.array(1, dt))], shape, dt)
    return cx.emit("Log", [s.name], shape, dt)


@handler("expm1.default")
def _expm1(cx: Cx, n: Any, p: dict[str, Any]) -> Val:
    dt, shape = cx.out_dtype(n), cx.out_shape(n)
    s = cx.emit("Exp", [cx.ir(p["self"], dt)], shape, dt)
    return cx.emit("Sub", [s.name, cx.const(np.array(1, dt))], shape, dt)


@handler("isnan.default")
def _isnan(cx: Cx, n: Any, p: dict[str, Any]) -> Val:
    x = cx.ir(p["self"])
    e = cx.emit("Equal", [x, x], cx.out_shape(n), np.bool_)
    return cx.emit("Not", [e.name], cx.out_shape(n), np.bool_)


@handler("isinf.default")
def _isinf(cx: Cx, n: Any, p: dict[str, Any]) -> Val:
    x = cx.ir(p["self"])
    dt, shape = cx.dtype(p["self"]), cx.out_shape(n)
    a = cx.emit("Abs", [x], shape, dt)
    return cx.emit("Equal", [a.name, cx.const(np.array(np.inf, dt))], shape, np.bool_)


@handler("gelu.default")
def _gelu(cx: Cx, n: Any, p: dict[str, Any]) -> Val:
    dt = cx.out_dtype(n)
    return cx.emit("Gelu", [cx.ir(p["self"], dt)], cx.out_shape(n), dt, approximate=str(p["approximate"]))


@handler("leaky_relu.default")
def _leaky(cx: Cx, n: Any, p: dict[str, Any]) -> Val:
    dt = cx.out_dtype(n)
    return cx.emit("LeakyRelu", [cx.ir(p["self"], dt)], cx.out_shape(n), dt, alpha=float(p["negative_slope"]))


@handler("elu.default")
def _elu(cx: Cx, n: Any, p: dict[str, Any]) -> Val:
    dt = cx.out_dtype(n)
    if float(p["scale"]) != 1.0 or float(p["input_scale"]) != 1.0:
        raise Unsupported("elu with scale/input_scale != 1")
    return cx.emit("Elu", [cx.ir(p["self"], dt)], cx.out_shape(n), dt, alpha=float(p["alpha"]))


@handler("softplus.default")
def _softplus(cx: Cx, n: Any, p: dict[str, Any]) -> Val:
    dt = cx.out_dtype(n)
    if float(p["beta"]) != 1.0:
        raise Unsupported("softplus with beta != 1")
    # torch returns x above the threshold; the difference is below float32 resolution there
    return cx.emit("Softplus", [cx.ir(p["self"], dt)], cx.out_shape(n), dt)


@handler("silu.default")
def _silu(cx: Cx, n: Any, p: dict[str, Any]) -> Val:
    dt, shape = cx.out_dtype(n), cx.out_shape(n)
    x = cx.ir(p["self"], dt)
    s = cx.emit("Sigmoid", [x], shape, dt)
    return cx.emit("Mul", [x, s.name], shape, dt)


@handler("mish.default")
def _mish(cx: Cx, n: Any, p: dict[str, Any]) -> Val:
    dt, shape = cx.out_dtype(n), cx.out_shape(n)
    x = cx.ir(p["self"], dt)
    sp = cx.emit("Softplus", [x], shape, dt)
    t = cx.emit("Tanh", [sp.name], shape, dt)
    return cx.emit("Mul", [x, t.name], shape, dt)


def _hardsigmoid_of(cx: Cx, x: str, shape: tuple[int, ...], dt: np.dtype) -> Val:
    # relu6(x + 3) / 6, as torch computes it
    a = cx.emit("Add", [x, cx.const(np.array(3, dt))], shape, dt)
    c = cx.emit("Clip", [a.name, cx.const(np.array(0, dt)), cx.const(np.array(6, dt))], shape, dt)
    return cx.emit("Div", [c.name, cx.const(np.array(6, dt))], shape, dt)


@handler("hardsigmoid.default")
def _hardsigmoid(cx: Cx, n: Any, p: dict[str, Any]) -> Val:
    dt = cx.out_dtype(n)
    return _hardsigmoid_of(cx, cx.ir(p["self"], dt), cx.out_shape(n), dt)


@handler("hardswish.default")
def _hardswish(cx: Cx, n: Any, p: dict[str, Any]) -> Val:
    dt, shape = cx.out_dtype(n), cx.out_shape(n)
    x = cx.ir(p["self"], dt)
    a = cx.emit("Add", [x, cx.const(np.array(3, dt))], shape, dt)
    c = cx.emit("Clip", [a.name, cx.const(np.array(0, dt)), cx.const(np.array(6, dt))], shape, dt)
    m = cx.emit("Mul", [x, c.name], shape, dt)
    return cx.emit("Div", [m.name, cx.const(np.array(6, dt))], shape, dt)


@handler("clamp.default", "hardtanh.default", "clamp.Tensor")
def _clamp(cx: Cx, n: Any, p: dict[str, Any]) -> Val:
    dt, shape = cx.out_dtype(n), cx.out_shape(n)
    lo = p.get("min", p.get("min_val"))
    hi = p.get("max", p.get("max_val"))
    x = cx.ir(p["self"], dt)
    if isinstance(lo, Val) or isinstance(hi, Val) or hasattr(lo, "shape") or hasattr(hi, "shape"):
        if lo is not None:
            x = cx.emit("Max", [x, cx.ir(lo, dt)], shape, dt).name
        if hi is not None:
            x = cx.emit("Min", [x, cx.ir(hi, dt)], shape, dt).name
        return Val(x)
    ins = [x, "" if lo is None else cx.const(np.array(lo, dt)), "" if hi is None else cx.const(np.array(hi, dt))]
    while ins[-1] == "":
        ins.pop()
    return cx.emit("Clip", ins, shape, dt)


@handler("_to_copy.default", "to.dtype", "_to_dtype.default")
def _to_copy(cx: Cx, n: Any, p: dict[str, Any]) -> Any:
    dt = cx.out_dtype(n)
    x = p["self"]
    if isinstance(x, Val):
        return cx.cast(x, dt)
    return x


# ----------------------------------------------------------------------- linear algebra
@handler("addmm.default")
def _addmm(cx: Cx, n: Any, p: dict[str, Any]) -> Val:
    dt = cx.out_dtype(n)
    return cx.emit("Gemm", [cx.ir(p["mat1"], dt), cx.ir(p["mat2"], dt), cx.ir(p["self"], dt)], cx.out_shape(n), dt,
                   alpha=float(p["alpha"]), beta=float(p["beta"]))  # fmt: skip


@handler("mm.default", "bmm.default", "matmul.default")
def _mm(cx: Cx, n: Any, p: dict[str, Any]) -> Val:
    dt = cx.out_dtype(n)
    b = p.get("mat2", p.get("other"))
    return cx.emit("MatMul", [cx.ir(p["self"], dt), cx.ir(b, dt)], cx.out_shape(n), dt)


@handler("baddbmm.default")
def _baddbmm(cx: Cx, n: Any, p: dict[str, Any]) -> Val:
    dt, shape = cx.out_dtype(n), cx.out_shape(n)
    m = cx.emit("MatMul", [cx.ir(p["batch1"], dt), cx.ir(p["batch2"], dt)], shape, dt)
    m = _scaled(cx, m, p["alpha"], dt)
    c = _scaled(cx, p["self"], p["beta"], dt)
    return cx.emit("Add", [m.name, cx.ir(c, dt)], shape, dt)


@handler("convolution.default")
def _convolution(cx: Cx, n: Any, p: dict[str, Any]) -> Val:
    dt, shape = cx.out_dtype(n), cx.out_shape(n)
    x, w, b = p["input"], p["weight"], p["bias"]
    n_sp = len(cx.shape(x)) - 2
    if n_sp not in (1, 2):
        raise Unsupported(f"{n_sp}-D convolution (aioge lowers 1-D and 2-D)")
    stride, pad, dil = (list(p[k]) * (n_sp if len(p[k]) == 1 else 1) for k in ("stride", "padding", "dilation"))
    ins = [cx.ir(x, dt), cx.ir(w, dt)] + ([cx.ir(b, dt)] if b is not None else [])
    attrs: dict[str, Any] = dict(strides=[int(s) for s in stride], pads=[int(v) for v in pad] * 2,
                                 dilations=[int(d) for d in dil], group=int(p["groups"]),
                                 kernel_shape=list(cx.shape(w)[2:]))  # fmt: skip
    if p["transposed"]:
        op = [int(v) for v in p["output_padding"]]
        if any(op):
            attrs["output_padding"] = op * (n_sp if len(op) == 1 else 1)
        return cx.emit("ConvTranspose", ins, shape, dt, **attrs)
    return cx.emit("Conv", ins, shape, dt, **attrs)


# ----------------------------------------------------------------------- normalization
def _ones_or(cx: Cx, v: Any, c: int, fill: float, dt: np.dtype) -> str:
    if v is None:
        return cx.const(np.full((c,), fill, dt))
    return cx.ir(v, dt)


@handler("_native_batch_norm_legit_no_training.default")
def _batch_norm(cx: Cx, n: Any, p: dict[str, Any]) -> tuple[Any, ...]:
    x = p["input"]
    dt = cx.dtype(x)
    c = cx.shape(x)[1]
    y = cx.emit("BatchNormalization",
                [cx.ir(x), _ones_or(cx, p["weight"], c, 1.0, dt), _ones_or(cx, p["bias"], c, 0.0, dt),
                 cx.ir(p["running_mean"], dt), cx.ir(p["running_var"], dt)],
                cx.out_shape(n, 0), dt, epsilon=float(p["eps"]))  # fmt: skip
    return (y, None, None)


@handler("native_batch_norm.default")
def _native_batch_norm(cx: Cx, n: Any, p: dict[str, Any]) -> tuple[Any, ...]:
    if p.get("training", True):
        from .errors import TrainingGraphError

        raise TrainingGraphError(f"FX node {n.name!r}: batch norm in training mode (call module.eval())")
    return _batch_norm(cx, n, p)


@handler("_native_batch_norm_legit.no_stats")
def _batch_stats_norm(cx: Cx, n: Any, p: dict[str, Any]) -> tuple[Any, ...]:
    # normalisation by the batch's own statistics (no running stats to update): per channel over N and space
    x = p["input"]
    s, dt = cx.shape(x), cx.dtype(x)
    axes = [0, *range(2, len(s))]
    red = tuple(1 if i in axes else d for i, d in enumerate(s))
    xv = cx.ir(x)
    m = cx.emit("ReduceMean", [xv, cx.const(_i64(axes))], red, dt, keepdims=1)
    d = cx.emit("Sub", [xv, m.name], s, dt)
    sq = cx.emit("Mul", [d.name, d.name], s, dt)
    v = cx.emit("ReduceMean", [sq.name, cx.const(_i64(axes))], red, dt, keepdims=1)
    ve = cx.emit("Add", [v.name, cx.const(np.array(float(p["eps"]), dt))], red, dt)
    r = cx.emit("Sqrt", [ve.name], red, dt)
    y = cx.emit("Div", [d.name, r.name], s, dt)
    chan = (s[1], *([1] * (len(s) - 2)))
    if p["weight"] is not None:
        y = cx.emit("Mul", [y.name, cx.reshape(cx.ir(p["weight"], dt), chan).name], s, dt)
    if p["bias"] is not None:
        y = cx.emit("Add", [y.name, cx.reshape(cx.ir(p["bias"], dt), chan).name], s, dt)
    return (y, None, None)


@handler("instance_norm.default")
def _instance_norm(cx: Cx, n: Any, p: dict[str, Any]) -> Val:
    x = p["input"]
    dt, c = cx.dtype(x), cx.shape(x)[1]
    w, b = _ones_or(cx, p["weight"], c, 1.0, dt), _ones_or(cx, p["bias"], c, 0.0, dt)
    if not p["use_input_stats"]:  # eval with tracked running stats: a batch norm
        return cx.emit("BatchNormalization", [cx.ir(x), w, b, cx.ir(p["running_mean"], dt),
                                              cx.ir(p["running_var"], dt)], cx.out_shape(n), dt,
                       epsilon=float(p["eps"]))  # fmt: skip
    return cx.emit("InstanceNormalization", [cx.ir(x), w, b], cx.out_shape(n), dt, epsilon=float(p["eps"]))


@handler("native_layer_norm.default")
def _layer_norm(cx: Cx, n: Any, p: dict[str, Any]) -> tuple[Any, ...]:
    x = p["input"]
    dt, s = cx.dtype(x), cx.shape(x)
    norm = [int(d) for d in p["normalized_shape"]]
    axis = len(s) - len(norm)
    gamma = cx.ir(p["weight"], dt) if p["weight"] is not None else cx.const(np.ones(norm, dt))
    ins = [cx.ir(x), gamma] + ([cx.ir(p["bias"], dt)] if p["bias"] is not None else [])
    if used_outputs(n) - {0}:
        stat = (*s[:axis], *([1] * len(norm)))
        y, mean, rstd = cx.emit_multi("LayerNormalization", ins, [(s, dt), (stat, np.float32), (stat, np.float32)],
                                      axis=axis, epsilon=float(p["eps"]))  # fmt: skip
        return (y, mean, rstd)
    y = cx.emit("LayerNormalization", ins, s, dt, axis=axis, epsilon=float(p["eps"]))
    return (y, None, None)


@handler("native_group_norm.default")
def _group_norm(cx: Cx, n: Any, p: dict[str, Any]) -> tuple[Any, ...]:
    # InstanceNormalization over (N, groups, C/groups * HxW), then the per-channel affine
    x = p["input"]
    dt, s = cx.dtype(x), cx.shape(x)
    g = int(p["group"])
    c = s[1]
    grouped = cx.reshape(x, (s[0], g, numel(s[1:]) // g))
    nx = cx.emit("InstanceNormalization",
                 [grouped.name, cx.const(np.ones(g, dt)), cx.const(np.zeros(g, dt))],
                 cx.shape(grouped), dt, epsilon=float(p["eps"]))  # fmt: skip
    y = cx.reshape(nx, s)
    chan = (c, *([1] * (len(s) - 2)))
    if p["weight"] is not None:
        y = cx.emit("Mul", [y.name, cx.reshape(cx.ir(p["weight"], dt), chan).name], s, dt)
    if p["bias"] is not None:
        y = cx.emit("Add", [y.name, cx.reshape(cx.ir(p["bias"], dt), chan).name], s, dt)
    return (y, None, None)


@handler("_softmax.default", "_log_softmax.default", "softmax.int", "log_softmax.int")
def _softmax(cx: Cx, n: Any, p: dict[str, Any]) -> Val:
    dt = cx.out_dtype(n)
    op = "LogSoftmax" if "log" in n.target.__name__ else "Softmax"
    return cx.emit(op, [cx.ir(p["self"], dt)], cx.out_shape(n), dt, axis=int(p["dim"]))


@handler("_safe_softmax.default")
def _safe_softmax(cx: Cx, n: Any, p: dict[str, Any]) -> Val:
    # softmax whose rows of all -inf give 0 (scaled_dot_product_attention's): the decomposition
    # spends 7 nodes on the row test (eq, not, cast, any, not...); max(row) == -inf is it in 2
    # (a NaN row stays NaN either way)
    dt = cx.out_dtype(n)
    x = cx.ir(p["self"], dt)
    shape = cx.out_shape(n)
    axis = int(p["dim"]) % len(shape) if shape else 0
    s = cx.emit("Softmax", [x], shape, dt, axis=axis)
    red = tuple(1 if i == axis else d for i, d in enumerate(shape))
    m = cx.emit("ReduceMax", [x, cx.const(_i64([axis]))], red, dt, keepdims=1)
    dead = cx.emit("Equal", [m.name, cx.const(np.array(-np.inf, dt))], red, np.bool_)
    return cx.emit("Where", [dead.name, cx.const(np.array(0, dt)), s.name], shape, dt)


# ----------------------------------------------------------------------- pooling
def _pool_common(cx: Cx, p: dict[str, Any], n_sp: int) -> dict[str, Any]:
    k = [int(v) for v in p["kernel_size"]] * (n_sp if len(p["kernel_size"]) == 1 else 1)
    st = [int(v) for v in (p["stride"] or k)] * (n_sp if len(p["stride"] or k) == 1 else 1)
    pad = [int(v) for v in p["padding"]] * (n_sp if len(p["padding"]) == 1 else 1)
    return dict(kernel_shape=k, strides=st, pads=pad * 2, ceil_mode=int(bool(p["ceil_mode"])))


@handler("max_pool2d_with_indices.default", "max_pool2d.default", "max_pool1d.default")
def _max_pool(cx: Cx, n: Any, p: dict[str, Any]) -> Any:
    x = p["self"]
    n_sp = len(cx.shape(x)) - 2
    attrs = _pool_common(cx, p, n_sp)
    dil = [int(v) for v in p["dilation"]]
    if any(d != 1 for d in dil):
        attrs["dilations"] = dil * (n_sp if len(dil) == 1 else 1)
    multi = isinstance(cx.meta(n), (tuple, list))
    if multi and 1 in used_outputs(n):
        raise Unsupported("max pooling indices (the IR's MaxPool has no Indices output yet)")
    shape = cx.out_shape(n, 0) if multi else cx.out_shape(n)
    y = cx.emit("MaxPool", [cx.ir(x)], shape, cx.dtype(x), **attrs)
    return (y, None) if multi else y


@handler("avg_pool2d.default", "avg_pool1d.default")
def _avg_pool(cx: Cx, n: Any, p: dict[str, Any]) -> Val:
    x = p["self"]
    n_sp = len(cx.shape(x)) - 2
    if p.get("divisor_override") is not None:
        raise Unsupported("avg_pool2d divisor_override")
    attrs = _pool_common(cx, p, n_sp)
    if attrs["ceil_mode"] and p["count_include_pad"] and any(attrs["pads"]):
        raise Unsupported("avg pooling with ceil_mode, padding and count_include_pad (torch's divisor differs)")
    return cx.emit("AveragePool", [cx.ir(x)], cx.out_shape(n), cx.dtype(x),
                   count_include_pad=int(bool(p["count_include_pad"])), **attrs)  # fmt: skip


def _adaptive_matrix(n_in: int, n_out: int) -> np.ndarray:
    """(n_out, n_in) averaging matrix of adaptive pooling's bins."""
    m = np.zeros((n_out, n_in), np.float64)
    for i in range(n_out):
        a, b = (i * n_in) // n_out, -(-((i + 1) * n_in) // n_out)
        m[i, a:b] = 1.0 / (b - a)
    return m


@handler("_adaptive_avg_pool2d.default", "adaptive_avg_pool2d.default", "_adaptive_avg_pool1d.default",
         "adaptive_avg_pool1d.default")  # fmt: skip
def _adaptive_avg(cx: Cx, n: Any, p: dict[str, Any]) -> Val:
    x = p["self"]
    s, dt = cx.shape(x), cx.dtype(x)
    out = cx.out_shape(n)
    sp_in, sp_out = s[2:], out[2:]
    if all(o == 1 for o in sp_out):
        return cx.emit("GlobalAveragePool", [cx.ir(x)], out, dt)
    if all(i % o == 0 for i, o in zip(sp_in, sp_out)):
        k = [i // o for i, o in zip(sp_in, sp_out)]
        return cx.emit("AveragePool", [cx.ir(x)], out, dt, kernel_shape=k, strides=k)
    return _separable(cx, cx.ir(x), s, dt, [_adaptive_matrix(i, o) for i, o in zip(sp_in, sp_out)])


def _separable(cx: Cx, x: str, s: tuple[int, ...], dt: np.dtype, mats: list[np.ndarray]) -> Val:
    """Apply (out, in) matrices along the trailing spatial dims: y = A_h . x . A_w^T."""
    cur, shape = x, tuple(s)
    n_sp = len(mats)
    for j, m in enumerate(mats):
        axis = len(s) - n_sp + j
        if m.shape[0] == m.shape[1] and np.array_equal(m, np.eye(m.shape[0])):
            continue
        if axis == len(s) - 1:
            shape = (*shape[:-1], m.shape[0])
            cur = cx.emit("MatMul", [cur, cx.const(m.T.astype(dt))], shape, dt).name
        else:
            new = (*shape[:axis], m.shape[0], *shape[axis + 1:])
            # move the axis last, apply, move back
            perm = [i for i in range(len(s)) if i != axis] + [axis]
            tshape = tuple(shape[i] for i in perm)
            t = cx.emit("Transpose", [cur], tshape, dt, perm=perm)
            mshape = (*tshape[:-1], m.shape[0])
            mm = cx.emit("MatMul", [t.name, cx.const(m.T.astype(dt))], mshape, dt)
            inv = [perm.index(i) for i in range(len(s))]
            cur = cx.emit("Transpose", [mm.name], new, dt, perm=inv).name
            shape = new
    if cur == x:
        return cx.emit("Identity", [x], s, dt)
    return Val(cur)


# ----------------------------------------------------------------------- resampling
def _scale_for(in_size: int, out_size: int, scale: float | None, align_corners: bool) -> float:
    if align_corners:
        return (in_size - 1) / (out_size - 1) if out_size > 1 else 0.0
    return 1.0 / scale if scale else in_size / out_size


def _linear_matrix(n_in: int, n_out: int, scale: float | None, align_corners: bool) -> np.ndarray:
    m = np.zeros((n_out, n_in), np.float64)
    r = _scale_for(n_in, n_out, scale, align_corners)
    for i in range(n_out):
        src = r * i if align_corners else max(r * (i + 0.5) - 0.5, 0.0)
        i0 = min(math.floor(src), n_in - 1)
        i1 = min(i0 + 1, n_in - 1)
        lam = src - i0
        m[i, i0] += 1.0 - lam
        m[i, i1] += lam
    return m


def _cubic_matrix(n_in: int, n_out: int, scale: float | None, align_corners: bool) -> np.ndarray:
    a = -0.75  # torch's bicubic coefficient

    def w(t: float) -> float:
        t = abs(t)
        if t <= 1:
            return ((a + 2) * t - (a + 3)) * t * t + 1
        if t < 2:
            return ((a * t - 5 * a) * t + 8 * a) * t - 4 * a
        return 0.0

    m = np.zeros((n_out, n_in), np.float64)
    r = _scale_for(n_in, n_out, scale, align_corners)
    for i in range(n_out):
        src = r * i if align_corners else r * (i + 0.5) - 0.5
        f = math.floor(src)
        t = src - f
        for k in range(-1, 3):
            m[i, min(max(f + k, 0), n_in - 1)] += w(t - k)
    return m


def _upsample_scales(p: dict[str, Any], n_sp: int) -> list[float | None]:
    sf = p.get("scale_factors")
    if sf is None:
        keys = ["scales_h", "scales_w"] if n_sp == 2 else ["scales"]
        vals = [p.get(k) for k in keys]
        if n_sp == 2 and p.get("scales_d") is not None:
            vals = [p.get("scales_d"), *vals]
        return vals
    return [float(v) for v in sf]


@handler("upsample_nearest2d.vec", "upsample_nearest1d.vec", "upsample_nearest2d.default",
         "upsample_nearest1d.default", "_upsample_nearest_exact2d.vec", "_upsample_nearest_exact1d.vec",
         "_upsample_nearest_exact2d.default", "_upsample_nearest_exact1d.default")  # fmt: skip
def _upsample_nearest(cx: Cx, n: Any, p: dict[str, Any]) -> Val:
    x = p["input"] if "input" in p else p["self"]
    s, dt, out = cx.shape(x), cx.dtype(x), cx.out_shape(n)
    n_sp = len(s) - 2
    scales = _upsample_scales(p, n_sp)
    exact = "exact" in n.target.__name__
    factors = [o // i if o % i == 0 else 0 for i, o in zip(s[2:], out[2:])]
    xv = cx.ir(x)
    if all(factors) and all(sc is None or sc == f for sc, f in zip(scales, factors)):
        # integer factors: every input pixel repeated (Reshape + Expand + Reshape, no gather)
        inter = [d for i in range(n_sp) for d in (s[2 + i], 1)]
        big = [d for i in range(n_sp) for d in (s[2 + i], factors[i])]
        r = cx.reshape(xv, (*s[:2], *inter))
        e = cx.emit("Expand", [r.name, cx.const(_i64([*s[:2], *big]))], (*s[:2], *big), dt)
        return cx.reshape(e, out)
    cur, shape = xv, s
    for j in range(n_sp):
        i_sz, o_sz = s[2 + j], out[2 + j]
        if i_sz == o_sz:
            continue
        sc = scales[j]
        ratio = 1.0 / sc if sc else i_sz / o_sz
        src = np.floor((np.arange(o_sz) + (0.5 if exact else 0.0)) * ratio).astype(np.int64)
        idx = np.minimum(src, i_sz - 1)
        shape = (*shape[: 2 + j], o_sz, *shape[3 + j:])
        cur = cx.emit("Gather", [cur, cx.const(idx)], shape, dt, axis=2 + j).name
    return Val(cur) if cur != xv else cx.emit("Identity", [xv], s, dt)


@handler("upsample_bilinear2d.vec", "upsample_linear1d.vec", "upsample_bilinear2d.default",
         "upsample_linear1d.default", "upsample_bicubic2d.vec", "upsample_bicubic2d.default")  # fmt: skip
def _upsample_linear(cx: Cx, n: Any, p: dict[str, Any]) -> Val:
    x = p["input"] if "input" in p else p["self"]
    s, dt, out = cx.shape(x), cx.dtype(x), cx.out_shape(n)
    n_sp = len(s) - 2
    if dt.kind != "f":
        raise Unsupported("linear upsampling of a non-float tensor")
    scales = _upsample_scales(p, n_sp)
    ac = bool(p["align_corners"])
    make = _cubic_matrix if "bicubic" in n.target.__name__ else _linear_matrix
    mats = [make(s[2 + j], out[2 + j], scales[j], ac) for j in range(n_sp)]
    return _separable(cx, cx.ir(x), s, dt, mats)


# ----------------------------------------------------------------------- reductions
def _reduce(cx: Cx, n: Any, op: str, x: Any, dim: Any, keepdim: bool, dt: np.dtype | None = None) -> Val:
    s = cx.shape(x)
    axes = _dims(dim, len(s))
    out_dt = cx.out_dtype(n)
    xv = cx.ir(x, dt or out_dt)
    return cx.emit(op, [xv, cx.const(_i64(axes))], cx.out_shape(n), dt or out_dt, keepdims=int(bool(keepdim)))


@handler("mean.dim", "mean.default")
def _mean(cx: Cx, n: Any, p: dict[str, Any]) -> Val:
    return _reduce(cx, n, "ReduceMean", p["self"], p.get("dim"), bool(p.get("keepdim")))


@handler("sum.dim_IntList", "sum.default")
def _sum(cx: Cx, n: Any, p: dict[str, Any]) -> Val:
    if cx.out_dtype(n) == np.bool_:
        raise Unsupported("sum of bools")
    return _reduce(cx, n, "ReduceSum", p["self"], p.get("dim"), bool(p.get("keepdim")))


@handler("amax.default", "amin.default")
def _amax(cx: Cx, n: Any, p: dict[str, Any]) -> Val:
    op = "ReduceMax" if n.target.__name__.startswith("amax") else "ReduceMin"
    if cx.out_dtype(n) == np.bool_:
        raise Unsupported(f"{op} of bools")
    return _reduce(cx, n, op, p["self"], p.get("dim"), bool(p.get("keepdim")))


@handler("max.dim", "min.dim")
def _max_dim(cx: Cx, n: Any, p: dict[str, Any]) -> tuple[Any, ...]:
    if 1 in used_outputs(n):
        raise Unsupported("the indices output (ArgMax/ArgMin are not in the IR yet)")
    op = "ReduceMax" if n.target.__name__.startswith("max") else "ReduceMin"
    x = p["self"]
    y = cx.emit(op, [cx.ir(x), cx.const(_i64([int(p["dim"]) % len(cx.shape(x))]))], cx.out_shape(n, 0),
                cx.dtype(x), keepdims=int(bool(p["keepdim"])))  # fmt: skip
    return (y, None)


@handler("max.default", "min.default")
def _max_all(cx: Cx, n: Any, p: dict[str, Any]) -> Val:
    op = "ReduceMax" if n.target.__name__.startswith("max") else "ReduceMin"
    return _reduce(cx, n, op, p["self"], None, False)


@handler("any.dim", "any.dims", "any.default", "all.dim", "all.dims", "all.default")
def _any(cx: Cx, n: Any, p: dict[str, Any]) -> Val:
    # bools as 0/1 floats: any = max > 0, all = min > 0
    x = p["self"]
    f = cx.emit("Cast", [_bool(cx, x)], cx.shape(x), np.float32, to="float32")
    op = "ReduceMax" if n.target.__name__.startswith("any") else "ReduceMin"
    dim = p.get("dim") if "dim" in p else None
    axes = _dims(dim, len(cx.shape(x)))
    r = cx.emit(op, [f.name, cx.const(_i64(axes))], cx.out_shape(n), np.float32, keepdims=int(bool(p.get("keepdim"))))
    return cx.emit("Greater", [r.name, cx.const(np.array(0, np.float32))], cx.out_shape(n), np.bool_)


@handler("var.correction", "var.dim")
def _var(cx: Cx, n: Any, p: dict[str, Any]) -> Val:
    x = p["self"]
    s, dt = cx.shape(x), cx.out_dtype(n)
    axes = _dims(p.get("dim"), len(s))
    corr = p.get("correction")
    if corr is None:
        corr = 1 if p.get("unbiased", True) else 0
    cnt = numel([s[a] for a in axes])
    xv = cx.ir(x, dt)
    red = tuple(1 if i in axes else d for i, d in enumerate(s))
    m = cx.emit("ReduceMean", [xv, cx.const(_i64(axes))], red, dt, keepdims=1)
    d = cx.emit("Sub", [xv, m.name], s, dt)
    sq = cx.emit("Mul", [d.name, d.name], s, dt)
    v = cx.emit("ReduceMean", [sq.name, cx.const(_i64(axes))], cx.out_shape(n), dt,
                keepdims=int(bool(p.get("keepdim"))))  # fmt: skip
    if corr:
        v = cx.emit("Mul", [v.name, cx.const(np.array(cnt / max(cnt - float(corr), 0.0), dt))], cx.out_shape(n), dt)
    return v


# ----------------------------------------------------------------------- shapes and data movement
# Dynamo's graphs are functionalized: every view op comes as its ``*_copy`` twin (``view_copy``,
# ``unbind_copy``, ...), which torch.export's graphs do not have; each maps as its twin does
@handler("view.default", "_unsafe_view.default", "reshape.default", "view_copy.default", "squeeze.dims",
         "squeeze.dim", "squeeze.default", "unsqueeze.default", "flatten.using_ints", "unflatten.int",
         "squeeze_copy.dims", "squeeze_copy.dim", "squeeze_copy.default", "unsqueeze_copy.default",
         "_reshape_alias.default", "_reshape_alias_copy.default", "_reshape_copy.default")  # fmt: skip
def _view(cx: Cx, n: Any, p: dict[str, Any]) -> Val:
    return cx.reshape(p["self"], cx.out_shape(n))


@handler("as_strided.default", "as_strided_copy.default")
def _as_strided(cx: Cx, n: Any, p: dict[str, Any]) -> Val:
    # only the layout-preserving case (a view of a contiguous tensor with contiguous strides)
    size = [int(cx.pins.int(d)) for d in p["size"]]
    stride = [int(cx.pins.int(d)) for d in p["stride"]]
    x = p["self"]
    expect, acc = [], 1
    for d in reversed(size):
        expect.append(acc)
        acc *= d
    expect.reverse()
    ok = numel(size) == numel(cx.shape(x)) and not p.get("storage_offset")
    ok = ok and all(d == 1 or st == e for d, st, e in zip(size, stride, expect))
    if not ok:
        raise Unsupported("as_strided with a non-contiguous layout")
    return cx.reshape(x, size)


@handler("permute.default", "permute_copy.default")
def _permute(cx: Cx, n: Any, p: dict[str, Any]) -> Val:
    x = p["self"]
    r = len(cx.shape(x))
    perm = [int(d) % r for d in p["dims"]]
    if perm == list(range(r)):
        return Val(cx.ir(x))
    return cx.emit("Transpose", [cx.ir(x)], cx.out_shape(n), cx.dtype(x), perm=perm)


@handler("transpose.int", "t.default", "transpose_copy.int", "t_copy.default")
def _transpose(cx: Cx, n: Any, p: dict[str, Any]) -> Val:
    x = p["self"]
    r = len(cx.shape(x))
    perm = list(range(r))
    if r >= 2:
        d0 = int(p.get("dim0", 0)) % r
        d1 = int(p.get("dim1", 1)) % r
        perm[d0], perm[d1] = perm[d1], perm[d0]
    if perm == list(range(r)):
        return Val(cx.ir(x))
    return cx.emit("Transpose", [cx.ir(x)], cx.out_shape(n), cx.dtype(x), perm=perm)


@handler("expand.default", "expand_copy.default")
def _expand(cx: Cx, n: Any, p: dict[str, Any]) -> Val:
    x = p["self"]
    out = cx.out_shape(n)
    xv = cx.ir(x)
    if cx.shape(Val(xv)) == out:
        return Val(xv)
    return cx.emit("Expand", [xv, cx.const(_i64(out))], out, cx.dtype(Val(xv)))


@handler("repeat.default")
def _repeat(cx: Cx, n: Any, p: dict[str, Any]) -> Val:
    x = p["self"]
    reps = [int(cx.pins.int(r)) for r in p["repeats"]]
    s = cx.shape(x)
    xv = cx.reshape(x, (1,) * (len(reps) - len(s)) + s) if len(reps) > len(s) else Val(cx.ir(x))
    return cx.emit("Tile", [xv.name, cx.const(_i64(reps))], cx.out_shape(n), cx.dtype(x))


@handler("cat.default", "concat.default")
def _cat(cx: Cx, n: Any, p: dict[str, Any]) -> Val:
    dt, out = cx.out_dtype(n), cx.out_shape(n)
    parts = [t for t in p["tensors"] if not (len(cx.shape(t)) == 1 and cx.shape(t)[0] == 0 and len(out) != 1)]
    axis = int(p["dim"]) % len(out)
    parts = [t for t in parts if cx.shape(t)[axis] != 0]
    if len(parts) == 1:
        return Val(cx.ir(parts[0], dt))
    return cx.emit("Concat", [cx.ir(t, dt) for t in parts], out, dt, axis=axis)


@handler("split_with_sizes.default", "split.Tensor", "split_with_sizes_copy.default", "split_copy.Tensor",
         "unsafe_split.Tensor", "unsafe_split_with_sizes.default", "unbind.int", "unbind_copy.int",
         "chunk.default", "unsafe_chunk.default")  # fmt: skip
def _split(cx: Cx, n: Any, p: dict[str, Any]) -> tuple[Any, ...]:
    x = p["self"]
    s, dt = cx.shape(x), cx.dtype(x)
    axis = int(p.get("dim", 0)) % len(s)
    kinds = [cx.out_shape(n, i) for i in range(len(cx.meta(n)))]
    name = n.target.__name__
    sizes = [k[axis] if not name.startswith("unbind") else 1 for k in kinds]
    if len(sizes) == 1:
        return (cx.reshape(x, kinds[0]),)
    outs = cx.emit_multi("Split", [cx.ir(x), cx.const(_i64(sizes))],
                         [((*s[:axis], sz, *s[axis + 1:]), dt) for sz in sizes], axis=axis)  # fmt: skip
    if name.startswith("unbind"):
        outs = [cx.reshape(o, k) for o, k in zip(outs, kinds)]
    return tuple(outs)


@handler("slice.Tensor", "slice_copy.Tensor")
def _slice(cx: Cx, n: Any, p: dict[str, Any]) -> Val:
    x = p["self"]
    s = cx.shape(x)
    axis = int(p["dim"]) % len(s)
    d = s[axis]
    start = 0 if p["start"] is None else cx.pins.int(p["start"])
    end = d if p["end"] is None else min(cx.pins.int(p["end"]), _I64_MAX)
    step = int(p["step"])
    start, end = (start + d if start < 0 else start), (end + d if end < 0 else end)
    start, end = min(max(start, 0), d), min(max(end, 0), d)
    if start == 0 and end == d and step == 1:
        return Val(cx.ir(x))
    return cx.emit("Slice", [cx.ir(x), cx.const(_i64([start])), cx.const(_i64([end])), cx.const(_i64([axis])),
                             cx.const(_i64([step]))], cx.out_shape(n), cx.dtype(x))  # fmt: skip


@handler("select.int", "select_copy.int")
def _select(cx: Cx, n: Any, p: dict[str, Any]) -> Val:
    x = p["self"]
    s = cx.shape(x)
    axis = int(p["dim"]) % len(s)
    idx = cx.pins.int(p["index"]) % s[axis]
    return cx.emit("Gather", [cx.ir(x), cx.const(np.array(idx, np.int64))], cx.out_shape(n), cx.dtype(x), axis=axis)


@handler("narrow.default", "narrow_copy.default")
def _narrow(cx: Cx, n: Any, p: dict[str, Any]) -> Val:
    start = cx.pins.int(p["start"])
    return _slice(cx, n, {"self": p["self"], "dim": p["dim"], "start": start,
                          "end": start + cx.pins.int(p["length"]), "step": 1})  # fmt: skip


@handler("diagonal.default", "diagonal_copy.default")
def _diagonal(cx: Cx, n: Any, p: dict[str, Any]) -> Val:
    """The (d1, d2) axes moved last and flattened, then one ``Gather`` of the diagonal's flat indices."""
    x = p["self"]
    s = cx.shape(x)
    r = len(s)
    d1, d2 = int(p.get("dim1", 0)) % r, int(p.get("dim2", 1)) % r
    off = int(p.get("offset", 0))
    rest = [a for a in range(r) if a not in (d1, d2)]
    t = Val(cx.ir(x))
    perm = [*rest, d1, d2]
    if perm != list(range(r)):
        t = cx.emit("Transpose", [t.name], [s[a] for a in perm], cx.dtype(x), perm=perm)
    a, b = s[d1], s[d2]
    flat = cx.reshape(t, [s[i] for i in rest] + [a * b])
    out = cx.out_shape(n)
    rows = np.arange(out[-1]) + max(-off, 0)
    idx = rows * b + rows + off  # (row, row + off) in the flat (a, b) plane
    return cx.emit("Gather", [flat.name, cx.const(idx.astype(np.int64))], out, cx.dtype(x), axis=len(rest))


@handler("unfold.default", "unfold_copy.default")
def _unfold(cx: Cx, n: Any, p: dict[str, Any]) -> Val:
    """Windows of ``size`` every ``step`` along ``dimension``: one ``Gather`` of a (windows, size) index
    table, then the window axis moved last."""
    x = p["self"]
    s = cx.shape(x)
    r = len(s)
    if r == 0:
        return cx.reshape(x, cx.out_shape(n))
    axis = int(p["dimension"]) % r
    size, step = int(p["size"]), int(p["step"])
    count = (s[axis] - size) // step + 1
    idx = np.arange(count)[:, None] * step + np.arange(size)[None, :]
    g_shape = (*s[:axis], count, size, *s[axis + 1 :])
    g = cx.emit("Gather", [cx.ir(x), cx.const(idx.astype(np.int64))], g_shape, cx.dtype(x), axis=axis)
    if axis == r - 1:
        return g
    perm = [*range(axis + 1), *range(axis + 2, r + 1), axis + 1]
    return cx.emit("Transpose", [g.name], cx.out_shape(n), cx.dtype(x), perm=perm)


@handler("flip.default")
def _flip(cx: Cx, n: Any, p: dict[str, Any]) -> Val:
    x = p["self"]
    r = len(cx.shape(x))
    axes = sorted({int(d) % r for d in p["dims"]})
    k = len(axes)
    return cx.emit("Slice", [cx.ir(x), cx.const(_i64([-1] * k)), cx.const(_i64([-(2**63)] * k)),
                             cx.const(_i64(axes)), cx.const(_i64([-1] * k))], cx.out_shape(n), cx.dtype(x))  # fmt: skip


@handler("embedding.default")
def _embedding(cx: Cx, n: Any, p: dict[str, Any]) -> Val:
    w, idx = p["weight"], p["indices"]
    return cx.emit("Gather", [cx.ir(w), cx.ir(idx)], cx.out_shape(n), cx.dtype(w), axis=0)


@handler("index.Tensor", "index_select.default")
def _index(cx: Cx, n: Any, p: dict[str, Any]) -> Val:
    x = p["self"]
    if "indices" in p:
        idx = list(p["indices"])
        real = [(i, t) for i, t in enumerate(idx) if t is not None]
        if len(real) != 1:
            raise Unsupported("indexing with several index tensors (GatherND is not in the IR yet)")
        axis, t = real[0]
    else:
        axis, t = int(p["dim"]) % len(cx.shape(x)), p["index"]
    if cx.dtype(t) == np.bool_:
        raise Unsupported("boolean mask indexing (NonZero is not in the IR yet)")
    return cx.emit("Gather", [cx.ir(x), cx.ir(t)], cx.out_shape(n), cx.dtype(x), axis=axis)


@handler("constant_pad_nd.default", "pad.default")
def _pad(cx: Cx, n: Any, p: dict[str, Any]) -> Val:
    x = p["self"]
    s, dt = cx.shape(x), cx.dtype(x)
    mode = p.get("mode", "constant") or "constant"
    if mode not in ("constant", "reflect", "replicate"):
        raise Unsupported(f"pad mode {mode!r}")
    pad = [cx.pins.int(v) for v in p["pad"]]
    r = len(s)
    begins, ends = [0] * r, [0] * r
    for i in range(len(pad) // 2):
        axis = r - 1 - i
        begins[axis], ends[axis] = pad[2 * i], pad[2 * i + 1]
    value = p.get("value")
    ins = [cx.ir(x), cx.const(_i64(begins + ends))]
    if mode == "constant":
        ins.append(cx.const(np.array(0 if value is None else value, dt)))
    onnx_mode = {"constant": "constant", "reflect": "reflect", "replicate": "edge"}[mode]
    return cx.emit("Pad", ins, cx.out_shape(n), dt, mode=onnx_mode)


@handler("reflection_pad2d.default", "replication_pad2d.default", "reflection_pad1d.default",
         "replication_pad1d.default")  # fmt: skip
def _pad_mode(cx: Cx, n: Any, p: dict[str, Any]) -> Val:
    mode = "reflect" if n.target.__name__.startswith("reflection") else "replicate"
    return _pad(cx, n, {"self": p["self"], "pad": p["padding"], "mode": mode})


@handler("copy.default")
def _copy(cx: Cx, n: Any, p: dict[str, Any]) -> Val:
    # functional copy: the result is `src` in `self`'s shape and dtype
    out, dt = cx.out_shape(n), cx.out_dtype(n)
    src = cx.ir(p["src"], dt)
    if cx.info[src][0] == out:
        return Val(src)
    return cx.emit("Expand", [src, cx.const(_i64(out))], out, dt)


@handler("fill.Scalar", "fill.Tensor")
def _fill(cx: Cx, n: Any, p: dict[str, Any]) -> Any:
    import torch

    v = p["value"]
    if isinstance(v, Val):
        return cx.emit("Expand", [cx.ir(v, cx.out_dtype(n)), cx.const(_i64(cx.out_shape(n)))], cx.out_shape(n),
                       cx.out_dtype(n))  # fmt: skip
    return torch.full(cx.out_shape(n), v, dtype=np_to_torch_dtype(cx.out_dtype(n)))


@handler("native_dropout.default", "dropout.default")
def _dropout(cx: Cx, n: Any, p: dict[str, Any]) -> Any:
    if p.get("train"):
        from .errors import TrainingGraphError

        raise TrainingGraphError(f"FX node {n.name!r}: dropout is active (call module.eval())")
    return (p["input"], None) if "native" in n.target.__name__ else p["input"]
