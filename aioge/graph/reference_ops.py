"""numpy reference kernels of the logical, rounding, activation, index, scan,
reduction, quantization, Einsum and normalization ops added after the first op set.

Registered into :data:`aioge.graph.reference.KERNELS` (which imports this
module).  Numerics follow onnxruntime: float32 computes in float32, integer
ops are exact, ties in TopK keep the lower index first.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from .. import _shapes as S
from .ir import Node
from .reference_base import Arr, _kernel, reduce_axes
from .schema import get_attr

__all__ = ("range_length",)


# ------------------------------------------------------------------ elementwise
@_kernel("And", "Or", "Xor")
def _logical(node: Node, xs: list[Any]) -> list[Arr]:
    fn = {"And": np.logical_and, "Or": np.logical_or, "Xor": np.logical_xor}[node.op_type]
    return [np.asarray(fn(xs[0], xs[1]), np.bool_)]


@_kernel("LessOrEqual", "GreaterOrEqual")
def _compare_eq(node: Node, xs: list[Any]) -> list[Arr]:
    fn = np.less_equal if node.op_type == "LessOrEqual" else np.greater_equal
    return [np.asarray(fn(xs[0], xs[1]), np.bool_)]


@_kernel("IsNaN")
def _isnan(node: Node, xs: list[Any]) -> list[Arr]:
    return [np.isnan(xs[0])]


@_kernel("IsInf")
def _isinf(node: Node, xs: list[Any]) -> list[Arr]:
    x = xs[0]
    neg, pos = int(get_attr(node, "detect_negative")), int(get_attr(node, "detect_positive"))
    return [np.isinf(x) & (((x > 0) & bool(pos)) | ((x < 0) & bool(neg)))]


@_kernel("Floor", "Ceil", "Round", "Sin", "Cos")
def _rounding(node: Node, xs: list[Any]) -> list[Arr]:
    fn = {"Floor": np.floor, "Ceil": np.ceil, "Round": np.rint, "Sin": np.sin, "Cos": np.cos}[node.op_type]
    return [np.asarray(fn(xs[0]), xs[0].dtype)]


def hard_sigmoid(x: Arr, alpha: float, beta: float) -> Arr:
    """``max(0, min(1, alpha * x + beta))`` in x's dtype."""
    y = x * np.asarray(alpha, x.dtype) + np.asarray(beta, x.dtype)
    return np.asarray(np.minimum(np.maximum(y, 0), 1), x.dtype)


@_kernel("HardSigmoid")
def _hard_sigmoid(node: Node, xs: list[Any]) -> list[Arr]:
    return [hard_sigmoid(xs[0], float(get_attr(node, "alpha")), float(get_attr(node, "beta")))]


@_kernel("HardSwish")
def _hard_swish(node: Node, xs: list[Any]) -> list[Arr]:
    x = xs[0]
    return [np.asarray(x * hard_sigmoid(x, 1.0 / 6.0, 0.5), x.dtype)]


@_kernel("Mish")
def _mish(node: Node, xs: list[Any]) -> list[Arr]:
    x = xs[0]
    sp = np.maximum(x, 0) + np.log1p(np.exp(-np.abs(x)))
    return [np.asarray(x * np.tanh(sp), x.dtype)]


@_kernel("Mod")
def _mod(node: Node, xs: list[Any]) -> list[Arr]:
    a, b = xs
    if int(get_attr(node, "fmod")):
        return [np.asarray(np.fmod(a, b), a.dtype)]
    if a.dtype.kind == "f":
        raise ValueError("Mod with fmod=0 needs integer inputs (fmod=1 for floats)")
    if np.any(b == 0):
        raise ValueError("integer Mod by zero")
    return [np.asarray(np.mod(a, b), a.dtype)]


# ------------------------------------------------------------------ reductions
@_kernel("ReduceProd", "ReduceL1", "ReduceL2", "ReduceLogSum", "ReduceLogSumExp", "ReduceSumSquare")
def _reduce_more(node: Node, xs: list[Any]) -> list[Arr]:
    x = xs[0]
    axes = reduce_axes(node, xs, x.ndim)
    op = node.op_type
    if axes is None:  # no-op: the elementwise part still applies
        f = {"ReduceL1": np.abs, "ReduceL2": np.abs, "ReduceSumSquare": np.square, "ReduceLogSum": np.log}
        return [np.asarray(f[op](x) if op in f else x, x.dtype)]
    keep = bool(int(get_attr(node, "keepdims")))
    dt = x.dtype
    if op == "ReduceProd":
        y = np.prod(x, axis=axes, keepdims=keep, dtype=dt)
    elif op == "ReduceL1":
        y = np.sum(np.abs(x), axis=axes, keepdims=keep, dtype=dt)
    elif op == "ReduceL2":
        y = np.sqrt(np.sum(x * x, axis=axes, keepdims=keep, dtype=dt))
    elif op == "ReduceSumSquare":
        y = np.sum(x * x, axis=axes, keepdims=keep, dtype=dt)
    elif op == "ReduceLogSum":
        y = np.log(np.sum(x, axis=axes, keepdims=keep, dtype=dt))
    else:  # max-shifted, as onnxruntime
        m = np.max(x, axis=axes, keepdims=True) if x.size else np.zeros([1] * x.ndim, dt)
        m = np.where(np.isfinite(m), m, 0).astype(dt)
        s = np.sum(np.exp(x - m), axis=axes, keepdims=True, dtype=dt)
        y = np.log(s) + m
        if not keep:
            y = y.reshape([d for i, d in enumerate(y.shape) if i not in axes])
    return [np.asarray(y, dt)]


# ------------------------------------------------------------------ index and scan
def range_length(start: Any, limit: Any, delta: Any) -> int:
    """Number of elements of ONNX Range (``max(ceil((limit - start) / delta), 0)``)."""
    if delta == 0:
        raise ValueError("Range delta must not be 0")
    if isinstance(start, (np.integer, int)) and isinstance(limit, (np.integer, int)):
        n = -((int(start) - int(limit)) // int(delta))  # exact integer ceil
    else:
        n = math.ceil((float(limit) - float(start)) / float(delta))
    return max(int(n), 0)


@_kernel("Range")
def _range(node: Node, xs: list[Any]) -> list[Arr]:
    start, limit, delta = (np.asarray(x).reshape(-1)[0] for x in xs)
    n = range_length(start, limit, delta)
    dt = np.asarray(xs[0]).dtype
    return [np.asarray(start + np.arange(n, dtype=dt) * delta, dt)]


@_kernel("CumSum")
def _cumsum(node: Node, xs: list[Any]) -> list[Arr]:
    x = xs[0]
    axis = S.normalize_axis(int(np.asarray(xs[1]).reshape(-1)[0]), x.ndim)
    y = np.flip(x, axis) if int(get_attr(node, "reverse")) else x
    c = np.cumsum(y, axis=axis, dtype=x.dtype)
    if int(get_attr(node, "exclusive")):
        c = np.concatenate([np.zeros_like(np.take(c, [0], axis=axis)), np.delete(c, -1, axis=axis)], axis=axis)
    if int(get_attr(node, "reverse")):
        c = np.flip(c, axis)
    return [np.ascontiguousarray(c, x.dtype)]


@_kernel("Trilu")
def _trilu(node: Node, xs: list[Any]) -> list[Arr]:
    k = int(np.asarray(xs[1]).reshape(-1)[0]) if len(xs) > 1 and xs[1] is not None else 0
    fn = np.triu if int(get_attr(node, "upper")) else np.tril
    return [np.ascontiguousarray(fn(xs[0], k))]


def _norm_index(idx: Arr, dim: int, what: str) -> Arr:
    idx = np.asarray(idx).astype(np.int64)
    if idx.size and (idx.min() < -dim or idx.max() >= dim):
        raise ValueError(f"{what} index out of range [-{dim}, {dim})")
    return np.where(idx < 0, idx + dim, idx)


@_kernel("GatherElements")
def _gather_elements(node: Node, xs: list[Any]) -> list[Arr]:
    x, idx = xs
    axis = S.normalize_axis(int(get_attr(node, "axis")), x.ndim)
    return [np.take_along_axis(x, _norm_index(idx, x.shape[axis], "GatherElements"), axis=axis)]


@_kernel("GatherND")
def _gather_nd(node: Node, xs: list[Any]) -> list[Arr]:
    x, idx = xs
    b = int(get_attr(node, "batch_dims"))
    k = idx.shape[-1]
    bshape = x.shape[:b]
    nb = math.prod(bshape)
    xb = x.reshape(nb, *x.shape[b:])
    ib = np.asarray(idx, np.int64).reshape(nb, -1, k)
    out = np.empty((nb, ib.shape[1], *x.shape[b + k :]), x.dtype)
    for j in range(k):
        ib[..., j] = _norm_index(ib[..., j], x.shape[b + j], "GatherND")
    for i in range(nb):
        out[i] = xb[i][tuple(ib[i, :, j] for j in range(k))]
    return [out.reshape(*idx.shape[:-1], *x.shape[b + k :])]


_REDUCE_UFUNC = {"add": np.add, "mul": np.multiply, "max": np.maximum, "min": np.minimum}


@_kernel("ScatterElements")
def _scatter_elements(node: Node, xs: list[Any]) -> list[Arr]:
    x, idx, upd = xs
    axis = S.normalize_axis(int(get_attr(node, "axis")), x.ndim)
    idx = _norm_index(idx, x.shape[axis], "ScatterElements")
    out = np.array(x, copy=True)
    grid: list[Arr] = list(np.indices(idx.shape, sparse=True))
    grid[axis] = idx
    red = str(get_attr(node, "reduction"))
    if red == "none":
        out[tuple(grid)] = upd  # duplicates: the last write wins, as onnxruntime
    else:
        _REDUCE_UFUNC[red].at(out, tuple(np.broadcast_arrays(*grid)), upd)
    return [out]


@_kernel("ScatterND")
def _scatter_nd(node: Node, xs: list[Any]) -> list[Arr]:
    x, idx, upd = xs
    k = idx.shape[-1]
    ii = np.asarray(idx, np.int64).reshape(-1, k).copy()
    for j in range(k):
        ii[:, j] = _norm_index(ii[:, j], x.shape[j], "ScatterND")
    u = upd.reshape(ii.shape[0], *x.shape[k:])
    out = np.array(x, copy=True)
    red = str(get_attr(node, "reduction"))
    for n in range(ii.shape[0]):
        at = tuple(ii[n])
        out[at] = u[n] if red == "none" else _REDUCE_UFUNC[red](out[at], u[n])
    return [out]


@_kernel("OneHot")
def _onehot(node: Node, xs: list[Any]) -> list[Arr]:
    idx, depth, values = xs
    d = int(np.asarray(depth).reshape(-1)[0])
    axis = S.normalize_axis(int(get_attr(node, "axis")), idx.ndim + 1)
    i = np.asarray(idx).astype(np.int64)
    i = np.where(i < 0, i + d, i)
    hot = np.expand_dims(i, axis) == np.arange(d).reshape([-1 if a == axis else 1 for a in range(idx.ndim + 1)])
    off, on = values.reshape(-1)[:2]
    return [np.where(hot, on, off).astype(values.dtype)]


@_kernel("NonZero")
def _nonzero(node: Node, xs: list[Any]) -> list[Arr]:
    return [np.array(np.nonzero(xs[0]), np.int64).reshape(xs[0].ndim, -1)]


def topk(x: Arr, k: int, axis: int, largest: bool) -> tuple[Arr, Arr]:
    """Sorted top-k along ``axis``; equal values keep the lower index first (as onnxruntime)."""
    if largest:
        rev = np.flip(x, axis)
        order = np.flip(np.argsort(rev, axis=axis, kind="stable"), axis)
        order = x.shape[axis] - 1 - order
    else:
        order = np.argsort(x, axis=axis, kind="stable")
    idx = np.take(order, np.arange(k), axis=axis)
    return np.take_along_axis(x, idx, axis=axis), idx.astype(np.int64)


@_kernel("TopK")
def _topk(node: Node, xs: list[Any]) -> list[Arr]:
    x = xs[0]
    axis = S.normalize_axis(int(get_attr(node, "axis")), x.ndim)
    v, i = topk(x, int(np.asarray(xs[1]).reshape(-1)[0]), axis, bool(int(get_attr(node, "largest"))))
    return [np.ascontiguousarray(v), np.ascontiguousarray(i)]


@_kernel("ArgMax", "ArgMin")
def _argmax(node: Node, xs: list[Any]) -> list[Arr]:
    x = xs[0]
    axis = S.normalize_axis(int(get_attr(node, "axis")), x.ndim)
    fn = np.argmax if node.op_type == "ArgMax" else np.argmin
    if int(get_attr(node, "select_last_index")):
        y = x.shape[axis] - 1 - fn(np.flip(x, axis), axis=axis)
    else:
        y = fn(x, axis=axis)
    y = np.asarray(y, np.int64)
    return [np.expand_dims(y, axis) if int(get_attr(node, "keepdims")) else y]


@_kernel("Size")
def _size(node: Node, xs: list[Any]) -> list[Arr]:
    return [np.array(xs[0].size, np.int64)]


@_kernel("DepthToSpace")
def _d2s(node: Node, xs: list[Any]) -> list[Arr]:
    x = xs[0]
    b = int(get_attr(node, "blocksize"))
    n, c, h, w = x.shape
    if str(get_attr(node, "mode")) == "DCR":
        y = x.reshape(n, b, b, c // (b * b), h, w).transpose(0, 3, 4, 1, 5, 2)
    else:
        y = x.reshape(n, c // (b * b), b, b, h, w).transpose(0, 1, 4, 2, 5, 3)
    return [np.ascontiguousarray(y.reshape(n, c // (b * b), h * b, w * b))]


@_kernel("SpaceToDepth")
def _s2d(node: Node, xs: list[Any]) -> list[Arr]:
    x = xs[0]
    b = int(get_attr(node, "blocksize"))
    n, c, h, w = x.shape
    y = x.reshape(n, c, h // b, b, w // b, b).transpose(0, 3, 5, 1, 2, 4)
    return [np.ascontiguousarray(y.reshape(n, c * b * b, h // b, w // b))]


# ------------------------------------------------------------------ linear algebra, quantization
@_kernel("Einsum")
def _einsum(node: Node, xs: list[Any]) -> list[Arr]:
    ins, out, _ = S.parse_einsum(str(get_attr(node, "equation")), [x.shape for x in xs])
    return [np.array(np.einsum(",".join(ins) + "->" + out, *xs), xs[0].dtype)]


def _zero_point(z: Any, rows: bool) -> Any:
    if z is None:
        return 0
    z = np.asarray(z).astype(np.int32)
    if z.size == 1:
        return z.reshape(())
    return z.reshape(-1, 1) if rows else z.reshape(-1)


@_kernel("MatMulInteger")
def _matmul_integer(node: Node, xs: list[Any]) -> list[Arr]:
    a = xs[0].astype(np.int32) - _zero_point(xs[2] if len(xs) > 2 else None, True)
    b = xs[1].astype(np.int32) - _zero_point(xs[3] if len(xs) > 3 else None, False)
    return [np.matmul(a, b).astype(np.int32)]


def _per_axis(v: Arr, x: Arr, axis: int, block: int = 0) -> Arr:
    """A scale/zero point broadcastable to ``x``: scalar, per ``axis``, or per block of ``block`` along it."""
    if v.size == 1 and not block:
        return v.reshape(())
    a = S.normalize_axis(axis, x.ndim)
    if block:
        return np.repeat(v, block, axis=a)[tuple(slice(0, d) for d in x.shape)]
    return v.reshape([-1 if i == a else 1 for i in range(x.ndim)])


@_kernel("QuantizeLinear")
def _quantize(node: Node, xs: list[Any]) -> list[Arr]:
    from .schema import check_node_dtypes

    x, scale = xs[0], xs[1]
    zp = xs[2] if len(xs) > 2 and xs[2] is not None else None
    (out_dt,) = check_node_dtypes(node, [x.dtype, scale.dtype, None if zp is None else zp.dtype])
    assert out_dt is not None
    axis, block = int(get_attr(node, "axis")), int(get_attr(node, "block_size") or 0)
    s = _per_axis(scale, x, axis, block).astype(np.float32)
    q = np.rint(x.astype(np.float32) / s)
    if zp is not None:
        q = q + _per_axis(zp, x, axis, block).astype(np.float32)
    info = np.iinfo(out_dt)
    return [np.clip(q, info.min, info.max).astype(out_dt)]


@_kernel("DequantizeLinear")
def _dequantize(node: Node, xs: list[Any]) -> list[Arr]:
    x, scale = xs[0], xs[1]
    zp = xs[2] if len(xs) > 2 and xs[2] is not None else None
    axis, block = int(get_attr(node, "axis")), int(get_attr(node, "block_size") or 0)
    v = x.astype(np.float32)
    if zp is not None:
        v = v - _per_axis(zp, x, axis, block).astype(np.float32)
    return [np.asarray(v * _per_axis(scale, x, axis, block).astype(np.float32), scale.dtype)]


# ------------------------------------------------------------------ normalization
@_kernel("GroupNormalization")
def _groupnorm(node: Node, xs: list[Any]) -> list[Arr]:
    x, scale, bias = xs
    g = int(get_attr(node, "num_groups"))
    n, c = x.shape[:2]
    ct = np.float32 if int(get_attr(node, "stash_type")) == 1 and x.dtype != np.float64 else x.dtype
    xg = x.astype(ct).reshape(n, g, -1)
    mean = xg.mean(axis=2, keepdims=True, dtype=ct)
    d = xg - mean
    var = (d * d).mean(axis=2, keepdims=True, dtype=ct)
    y = (d / np.sqrt(var + np.asarray(float(get_attr(node, "epsilon")), ct))).reshape(x.shape)
    if scale.shape[0] != c:  # opset 18: one scale/bias per group
        scale, bias = np.repeat(scale, c // g), np.repeat(bias, c // g)
    shp = (1, c, *([1] * (x.ndim - 2)))
    y = y * scale.astype(ct).reshape(shp) + bias.astype(ct).reshape(shp)
    return [np.asarray(y, x.dtype)]
