"""numpy reference executor for every IR op (and the fused host ops).

Used by constant folding and as the test oracle.  It follows onnxruntime's
numerics: float32 ops compute in float32 (only ``Erf``/``Gelu`` go through
float64 internally, because numpy has no erf), integer ``Div`` truncates,
pooling and ConvTranspose padding follow onnxruntime's rules.

Example:
    >>> out = run_reference(graph, {"x": np.ones((1, 3, 8, 8), np.float32)})
    >>> out["y"].shape
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np
from numpy.lib.stride_tricks import as_strided

from .. import _shapes as S

# the kernels of the newer op families register themselves into KERNELS when loaded
from . import reference_ops, reference_resize, reference_rnn  # noqa: F401
from .errors import GraphError
from .ewprogram import BINARY, UNARY, apply_activation, apply_binary, apply_unary, gelu, run_program
from .ir import Graph, Node, normalize_dtype
from .reference_base import KERNELS, Arr, _attrs, _ints, _kernel, reduce_axes
from .schema import get_attr

__all__ = ("run_reference", "evaluate_node", "KERNELS", "to_nchwc", "from_nchwc")

# ------------------------------------------------------------------ elementwise
_UNARY_PARAMS: dict[str, Callable[[Node], tuple[float, ...]]] = {
    "LeakyRelu": lambda n: (float(get_attr(n, "alpha")),),
    "Elu": lambda n: (float(get_attr(n, "alpha")),),
    "Selu": lambda n: (float(get_attr(n, "alpha")), float(get_attr(n, "gamma"))),
    "Shrink": lambda n: (float(get_attr(n, "bias")), float(get_attr(n, "lambd"))),
}


@_kernel(*(op for op in UNARY if op not in ("Clip", "Gelu", "GeluTanh")))
def _unary(node: Node, xs: list[Any]) -> list[Arr]:
    get = _UNARY_PARAMS.get(node.op_type)
    params = get(node) if get is not None else ()
    return [apply_unary(node.op_type, xs[0], params)]


@_kernel("Gelu")
def _gelu(node: Node, xs: list[Any]) -> list[Arr]:
    return [gelu(xs[0], str(get_attr(node, "approximate")))]


@_kernel("Clip")
def _clip(node: Node, xs: list[Any]) -> list[Arr]:
    x = xs[0]
    lo = xs[1] if len(xs) > 1 and xs[1] is not None else None
    hi = xs[2] if len(xs) > 2 and xs[2] is not None else None
    y = x
    if lo is not None:
        y = np.maximum(y, np.asarray(lo, x.dtype).reshape(()))
    if hi is not None:
        y = np.minimum(y, np.asarray(hi, x.dtype).reshape(()))
    return [np.asarray(y, x.dtype)]


@_kernel(*(op for op in BINARY if op not in ("Max", "Min")))
def _binary(node: Node, xs: list[Any]) -> list[Arr]:
    return [apply_binary(node.op_type, xs[0], xs[1])]


@_kernel("Max", "Min", "Sum", "Mean")
def _variadic(node: Node, xs: list[Any]) -> list[Arr]:
    fn = {"Max": np.maximum, "Min": np.minimum, "Sum": np.add, "Mean": np.add}[node.op_type]
    acc = xs[0]
    for x in xs[1:]:
        acc = fn(acc, x)
    if node.op_type == "Mean":
        acc = _binary_div(acc, np.asarray(len(xs), acc.dtype))
    return [np.asarray(acc, xs[0].dtype)]


def _binary_div(a: Arr, b: Arr) -> Arr:
    return apply_binary("Div", a, b)


@_kernel("Equal", "Less", "Greater")
def _compare(node: Node, xs: list[Any]) -> list[Arr]:
    fn = {"Equal": np.equal, "Less": np.less, "Greater": np.greater}[node.op_type]
    return [np.asarray(fn(xs[0], xs[1]), np.bool_)]


@_kernel("Not")
def _not(node: Node, xs: list[Any]) -> list[Arr]:
    return [np.logical_not(xs[0])]


@_kernel("Where")
def _where(node: Node, xs: list[Any]) -> list[Arr]:
    return [np.where(xs[0], xs[1], xs[2]).astype(xs[1].dtype, copy=False)]


@_kernel("Cast")
def _cast(node: Node, xs: list[Any]) -> list[Arr]:
    return [xs[0].astype(normalize_dtype(get_attr(node, "to")))]


@_kernel("Identity")
def _identity(node: Node, xs: list[Any]) -> list[Arr]:
    return [xs[0]]


@_kernel("Dropout")
def _dropout(node: Node, xs: list[Any]) -> list[Arr]:
    # inference only: the importer/shape inference reject training_mode=True
    out = [xs[0]]
    if len(node.outputs) > 1:
        out.append(np.ones(xs[0].shape, np.bool_))
    return out


# ------------------------------------------------------------------ linear algebra
@_kernel("MatMul")
def _matmul(node: Node, xs: list[Any]) -> list[Arr]:
    return [np.matmul(xs[0], xs[1])]


def _gemm(a: Arr, b: Arr, c: Arr | None, alpha: float, beta: float, ta: int, tb: int) -> Arr:
    a = a.T if ta else a
    b = b.T if tb else b
    y = a @ b
    if alpha != 1.0:
        y = y * np.asarray(alpha, y.dtype)
    if c is not None and beta != 0.0:
        y = y + (c if beta == 1.0 else c * np.asarray(beta, c.dtype))
    return np.asarray(y, a.dtype)


@_kernel("Gemm")
def _gemm_k(node: Node, xs: list[Any]) -> list[Arr]:
    c = xs[2] if len(xs) > 2 else None
    return [
        _gemm(
            xs[0],
            xs[1],
            c,
            float(get_attr(node, "alpha")),
            float(get_attr(node, "beta")),
            int(get_attr(node, "transA")),
            int(get_attr(node, "transB")),
        )
    ]


def conv_nd(x: Arr, w: Arr, b: Arr | None, attrs: Mapping[str, Any]) -> Arr:
    """ONNX Conv over any number of spatial dims (im2col + matmul in x.dtype)."""
    n_sp = x.ndim - 2
    kernel = _ints(attrs.get("kernel_shape")) or list(w.shape[2:])
    strides = _ints(attrs.get("strides")) or [1] * n_sp
    dil = _ints(attrs.get("dilations")) or [1] * n_sp
    group = int(attrs.get("group", 1) or 1)
    pb, pe, out_sp = S.conv_geometry(
        x.shape[2:], kernel, strides, dil, _ints(attrs.get("pads")), str(attrs.get("auto_pad", "NOTSET"))
    )
    n, c = x.shape[:2]
    m = w.shape[0]
    cg, mg = c // group, m // group
    k = math.prod(kernel)
    p = math.prod(out_sp)
    if k == 1 and all(s == 1 for s in strides) and not any(pb) and not any(pe):
        cols = x.reshape(n, group, cg, p).transpose(1, 0, 3, 2).reshape(group, n * p, cg)
    else:
        xp = np.pad(x, [(0, 0), (0, 0), *zip(pb, pe, strict=False)]) if any(pb) or any(pe) else x
        xp = np.ascontiguousarray(xp)
        st = xp.strides
        win = as_strided(
            xp,
            (n, group, cg, *out_sp, *kernel),
            (
                st[0],
                st[1] * cg,
                st[1],
                *(st[2 + i] * strides[i] for i in range(n_sp)),
                *(st[2 + i] * dil[i] for i in range(n_sp)),
            ),
            writeable=False,
        )
        # -> (group, n, *out, cg, *kernel) -> (group, n*p, cg*k)
        perm = (1, 0, *range(3, 3 + n_sp), 2, *range(3 + n_sp, 3 + 2 * n_sp))
        cols = win.transpose(perm).reshape(group, n * p, cg * k)
    wg = w.reshape(group, mg, cg * k).transpose(0, 2, 1)
    y = np.matmul(cols, wg)  # (group, n*p, mg)
    y = y.reshape(group, n, p, mg).transpose(1, 0, 3, 2).reshape(n, m, *out_sp)
    if b is not None:
        y = y + b.reshape(1, m, *([1] * n_sp))
    return np.ascontiguousarray(y, dtype=x.dtype)


@_kernel("Conv")
def _conv(node: Node, xs: list[Any]) -> list[Arr]:
    return [conv_nd(xs[0], xs[1], xs[2] if len(xs) > 2 else None, _attrs(node))]


def conv_transpose_nd(x: Arr, w: Arr, b: Arr | None, attrs: Mapping[str, Any]) -> Arr:
    """ONNX ConvTranspose (col2im), with onnxruntime's padding rules."""
    n_sp = x.ndim - 2
    in_sp = x.shape[2:]
    kernel = _ints(attrs.get("kernel_shape")) or list(w.shape[2:])
    strides = _ints(attrs.get("strides")) or [1] * n_sp
    dil = _ints(attrs.get("dilations")) or [1] * n_sp
    adj = _ints(attrs.get("output_padding")) or [0] * n_sp
    group = int(attrs.get("group", 1) or 1)
    pb, _pe, out_sp = S.conv_transpose_geometry(
        in_sp,
        kernel,
        strides,
        dil,
        _ints(attrs.get("pads")),
        str(attrs.get("auto_pad", "NOTSET")),
        adj,
        _ints(attrs.get("output_shape")),
    )
    n, c = x.shape[:2]
    cg = c // group
    mg = w.shape[1]
    p = math.prod(in_sp)
    k = math.prod(kernel)
    xg = x.reshape(n, group, cg, p).transpose(1, 0, 3, 2)  # (g, n, p, cg)
    wg = w.reshape(group, cg, mg * k)
    cols = np.matmul(xg, wg[:, None]).reshape(group, n, *in_sp, mg, *kernel)
    full = [(in_sp[i] - 1) * strides[i] + (kernel[i] - 1) * dil[i] + 1 + adj[i] for i in range(n_sp)]
    size = [max(full[i], pb[i] + out_sp[i]) for i in range(n_sp)]
    out = np.zeros((group, n, mg, *size), x.dtype)
    # move mg in front of the spatial axes: (g, n, mg, *in, *kernel)
    cols = np.moveaxis(cols, 2 + n_sp, 2)
    for kk in itertools.product(*(range(kd) for kd in kernel)):
        dst = tuple(
            slice(kk[i] * dil[i], kk[i] * dil[i] + (in_sp[i] - 1) * strides[i] + 1, strides[i])
            for i in range(n_sp)
        )
        out[(slice(None), slice(None), slice(None), *dst)] += cols[(Ellipsis, *kk)]
    crop = tuple(slice(pb[i], pb[i] + out_sp[i]) for i in range(n_sp))
    y = out[(slice(None), slice(None), slice(None), *crop)]
    y = y.transpose(1, 0, 2, *range(3, 3 + n_sp)).reshape(n, group * mg, *out_sp)
    if b is not None:
        y = y + b.reshape(1, -1, *([1] * n_sp))
    return np.ascontiguousarray(y, dtype=x.dtype)


@_kernel("ConvTranspose")
def _conv_t(node: Node, xs: list[Any]) -> list[Arr]:
    return [conv_transpose_nd(xs[0], xs[1], xs[2] if len(xs) > 2 else None, _attrs(node))]


# ------------------------------------------------------------------ normalization
def _chan(v: Arr, rank: int) -> Arr:
    return v.reshape(1, -1, *([1] * (rank - 2)))


@_kernel("BatchNormalization")
def _bn(node: Node, xs: list[Any]) -> list[Arr]:
    x, scale, bias, mean, var = xs
    eps = np.asarray(float(get_attr(node, "epsilon")), x.dtype)
    s = (scale / np.sqrt(var + eps)).astype(x.dtype)
    y = x * _chan(s, x.ndim) + _chan((bias - mean * s).astype(x.dtype), x.ndim)
    return [np.asarray(y, x.dtype)]


@_kernel("InstanceNormalization")
def _instnorm(node: Node, xs: list[Any]) -> list[Arr]:
    x, scale, bias = xs
    axes = tuple(range(2, x.ndim))
    eps = np.asarray(float(get_attr(node, "epsilon")), x.dtype)
    mean = x.mean(axis=axes, keepdims=True, dtype=x.dtype)
    d = x - mean
    var = (d * d).mean(axis=axes, keepdims=True, dtype=x.dtype)
    y = d / np.sqrt(var + eps) * _chan(scale, x.ndim) + _chan(bias, x.ndim)
    return [np.asarray(y, x.dtype)]


@_kernel("LayerNormalization")
def _layernorm(node: Node, xs: list[Any]) -> list[Arr]:
    x, scale = xs[0], xs[1]
    bias = xs[2] if len(xs) > 2 else None
    axis = S.normalize_axis(int(get_attr(node, "axis")), x.ndim)
    axes = tuple(range(axis, x.ndim))
    ct = np.float32 if int(get_attr(node, "stash_type")) == 1 and x.dtype != np.float64 else x.dtype
    xc = x.astype(ct, copy=False)
    mean = xc.mean(axis=axes, keepdims=True, dtype=ct)
    d = xc - mean
    var = (d * d).mean(axis=axes, keepdims=True, dtype=ct)
    inv = np.asarray(1, ct) / np.sqrt(var + np.asarray(float(get_attr(node, "epsilon")), ct))
    y = d * inv * scale.astype(ct, copy=False)
    if bias is not None:
        y = y + bias.astype(ct, copy=False)
    return [y.astype(x.dtype), mean, inv][: len(node.outputs)]


@_kernel("LRN")
def _lrn(node: Node, xs: list[Any]) -> list[Arr]:
    x = xs[0]
    size = int(get_attr(node, "size"))
    alpha, beta, bias = (float(get_attr(node, k)) for k in ("alpha", "beta", "bias"))
    sq = x * x
    lo, hi = (size - 1) // 2, size - 1 - (size - 1) // 2
    padded = np.pad(sq, [(0, 0), (lo, hi)] + [(0, 0)] * (x.ndim - 2))
    csum = np.cumsum(padded, axis=1, dtype=x.dtype)
    csum = np.concatenate([np.zeros_like(csum[:, :1]), csum], axis=1)
    c = x.shape[1]
    win = csum[:, size : size + c] - csum[:, :c]
    den = (np.asarray(bias, x.dtype) + np.asarray(alpha / size, x.dtype) * win) ** np.asarray(beta, x.dtype)
    return [np.asarray(x / den, x.dtype)]


@_kernel("Softmax", "LogSoftmax")
def _softmax(node: Node, xs: list[Any]) -> list[Arr]:
    x = xs[0]
    axis = S.normalize_axis(int(get_attr(node, "axis")), x.ndim)
    m = np.max(x, axis=axis, keepdims=True)
    e = np.exp(x - m)
    s = np.sum(e, axis=axis, keepdims=True, dtype=x.dtype)
    if node.op_type == "Softmax":
        return [np.asarray(e / s, x.dtype)]
    return [np.asarray(x - m - np.log(s), x.dtype)]


# ------------------------------------------------------------------ pooling
def pool_nd(x: Arr, attrs: Mapping[str, Any], kind: str) -> Arr:
    """ONNX MaxPool / AveragePool (``kind`` "max" or "avg")."""
    n_sp = x.ndim - 2
    kernel = _ints(attrs.get("kernel_shape"))
    if not kernel:
        raise ValueError("pooling needs kernel_shape")
    strides = _ints(attrs.get("strides")) or [1] * n_sp
    dil = _ints(attrs.get("dilations")) or [1] * n_sp
    pb, pe, out_sp = S.pool_geometry(
        x.shape[2:],
        kernel,
        strides,
        dil,
        _ints(attrs.get("pads")),
        str(attrs.get("auto_pad", "NOTSET")),
        int(attrs.get("ceil_mode", 0)),
    )
    # extra end padding so the last (ceil-mode) window is addressable
    need = [(out_sp[i] - 1) * strides[i] + (kernel[i] - 1) * dil[i] + 1 for i in range(n_sp)]
    extra = [max(0, need[i] - (x.shape[2 + i] + pb[i] + pe[i])) for i in range(n_sp)]
    if kind in ("max", "argmax"):
        fill = -np.inf if x.dtype.kind == "f" else np.iinfo(x.dtype).min
    else:
        fill = 0
    pads = [(0, 0), (0, 0), *((pb[i], pe[i] + extra[i]) for i in range(n_sp))]
    xp = np.ascontiguousarray(np.pad(x, pads, constant_values=fill))

    def windows(a: Arr) -> Arr:
        st = a.strides
        return as_strided(
            a,
            (*a.shape[:2], *out_sp, *kernel),
            (
                st[0],
                st[1],
                *(st[2 + i] * strides[i] for i in range(n_sp)),
                *(st[2 + i] * dil[i] for i in range(n_sp)),
            ),
            writeable=False,
        )

    axes = tuple(range(2 + n_sp, 2 + 2 * n_sp))
    if kind == "argmax":  # flat input index of the (first) max of each window, as MaxPool's Indices
        win = windows(xp).reshape(*xp.shape[:2], *out_sp, -1)
        tap = np.argmax(win, axis=-1)  # first max, as onnxruntime
        taps = np.unravel_index(tap, kernel)
        pos = [np.arange(out_sp[i]).reshape([-1 if j == i else 1 for j in range(n_sp)]) * strides[i]
               + taps[i] * dil[i] - pb[i] for i in range(n_sp)]  # fmt: skip
        sp = x.shape[2:]
        order = range(n_sp - 1, -1, -1) if int(attrs.get("storage_order", 0)) else range(n_sp)
        flat = np.zeros(tap.shape, np.int64)
        for i in order:
            flat = flat * sp[i] + pos[i]
        nc = np.arange(x.shape[0] * x.shape[1], dtype=np.int64).reshape(x.shape[0], x.shape[1], *[1] * n_sp)
        return np.ascontiguousarray(flat + nc * int(np.prod(sp)))
    if kind == "max":
        return np.ascontiguousarray(windows(xp).max(axis=axes))
    total = windows(xp).sum(axis=axes, dtype=x.dtype)
    ones_shape = (1, 1, *x.shape[2:])
    if int(attrs.get("count_include_pad", 0)):
        cnt = np.ones((1, 1, *(x.shape[2 + i] + pb[i] + pe[i] for i in range(n_sp))), x.dtype)
        cnt = np.pad(cnt, [(0, 0), (0, 0), *((0, e) for e in extra)])
    else:
        cnt = np.pad(
            np.ones(ones_shape, x.dtype), [(0, 0), (0, 0), *((pb[i], pe[i] + extra[i]) for i in range(n_sp))]
        )
    div = windows(np.ascontiguousarray(cnt)).sum(axis=axes, dtype=x.dtype)
    return np.ascontiguousarray(total / div, dtype=x.dtype)


@_kernel("MaxPool")
def _maxpool(node: Node, xs: list[Any]) -> list[Arr]:
    y = pool_nd(xs[0], _attrs(node), "max")
    return [y, pool_nd(xs[0], _attrs(node), "argmax")] if len(node.outputs) > 1 else [y]


@_kernel("AveragePool")
def _avgpool(node: Node, xs: list[Any]) -> list[Arr]:
    return [pool_nd(xs[0], _attrs(node), "avg")]


@_kernel("GlobalAveragePool", "GlobalMaxPool")
def _global_pool(node: Node, xs: list[Any]) -> list[Arr]:
    x = xs[0]
    axes = tuple(range(2, x.ndim))
    if node.op_type == "GlobalMaxPool":
        return [x.max(axis=axes, keepdims=True)]
    return [x.mean(axis=axes, keepdims=True, dtype=x.dtype)]


# ------------------------------------------------------------------ shape ops
@_kernel("Flatten")
def _flatten(node: Node, xs: list[Any]) -> list[Arr]:
    x = xs[0]
    axis = S.normalize_axis(int(get_attr(node, "axis")), x.ndim, allow_end=True)
    return [x.reshape(math.prod(x.shape[:axis]), math.prod(x.shape[axis:]))]


@_kernel("Reshape")
def _reshape(node: Node, xs: list[Any]) -> list[Arr]:
    return [
        xs[0].reshape(S.reshape_target(xs[0].shape, _ints(xs[1]) or [], int(get_attr(node, "allowzero"))))
    ]


@_kernel("Transpose")
def _transpose(node: Node, xs: list[Any]) -> list[Arr]:
    perm = _ints(get_attr(node, "perm"))
    return [np.ascontiguousarray(np.transpose(xs[0], perm))]


@_kernel("Squeeze")
def _squeeze(node: Node, xs: list[Any]) -> list[Arr]:
    axes = _ints(xs[1]) if len(xs) > 1 and xs[1] is not None else None
    return [xs[0].reshape(S.squeeze_shape(xs[0].shape, axes))]


@_kernel("Unsqueeze")
def _unsqueeze(node: Node, xs: list[Any]) -> list[Arr]:
    return [xs[0].reshape(S.unsqueeze_shape(xs[0].shape, _ints(xs[1]) or []))]


@_kernel("Concat")
def _concat(node: Node, xs: list[Any]) -> list[Arr]:
    axis = S.normalize_axis(int(get_attr(node, "axis")), xs[0].ndim)
    return [np.concatenate(xs, axis=axis)]


@_kernel("Split")
def _split(node: Node, xs: list[Any]) -> list[Arr]:
    x = xs[0]
    axis = S.normalize_axis(int(get_attr(node, "axis")), x.ndim)
    split = _ints(xs[1]) if len(xs) > 1 and xs[1] is not None else None
    sizes = S.split_sizes(x.shape[axis], len(node.outputs), split)
    return [np.ascontiguousarray(p) for p in np.split(x, np.cumsum(sizes)[:-1], axis=axis)]


def slice_array(
    x: Arr,
    starts: Sequence[int],
    ends: Sequence[int],
    axes: Sequence[int] | None,
    steps: Sequence[int] | None,
) -> Arr:
    """ONNX Slice."""
    idx = tuple(
        slice(s, e if e >= 0 else None, st) for s, e, st in S.slice_ranges(x.shape, starts, ends, axes, steps)
    )
    return np.ascontiguousarray(x[idx])


@_kernel("Slice")
def _slice(node: Node, xs: list[Any]) -> list[Arr]:
    opt = [_ints(xs[i]) if len(xs) > i and xs[i] is not None else None for i in (3, 4)]
    return [slice_array(xs[0], _ints(xs[1]) or [], _ints(xs[2]) or [], opt[0], opt[1])]


@_kernel("Gather")
def _gather(node: Node, xs: list[Any]) -> list[Arr]:
    x, idx = xs
    axis = S.normalize_axis(int(get_attr(node, "axis")), x.ndim)
    dim = x.shape[axis]
    if type(idx) is np.ndarray and idx.ndim == 0 and idx.dtype.kind == "i":
        # one signed index (shape arithmetic: a dim of a Shape): Python int arithmetic, the same result
        k = int(idx)
        if k < -dim or k >= dim:
            raise ValueError(f"Gather index out of range [-{dim}, {dim})")
        return [x[k] if x.ndim == 1 else np.take(x, k + dim if k < 0 else k, axis=axis)]
    idx = np.asarray(idx).astype(np.int64)
    lo = idx.min() if idx.size else 0
    if idx.size and (lo < -dim or idx.max() >= dim):
        raise ValueError(f"Gather index out of range [-{dim}, {dim})")
    return [np.take(x, np.where(idx < 0, idx + dim, idx) if lo < 0 else idx, axis=axis)]


@_kernel("Expand")
def _expand(node: Node, xs: list[Any]) -> list[Arr]:
    x = xs[0]
    shape = S.broadcast_shapes(x.shape, tuple(_ints(xs[1]) or ()))
    if shape == x.shape and x.flags.c_contiguous:  # nothing to broadcast: the same copy, no view first
        return [np.array(x)]
    return [np.array(np.broadcast_to(x, shape))]


@_kernel("Tile")
def _tile(node: Node, xs: list[Any]) -> list[Arr]:
    reps = _ints(xs[1]) or []
    if len(reps) != xs[0].ndim:
        raise ValueError(f"Tile repeats {reps} do not match rank {xs[0].ndim}")
    return [np.tile(xs[0], reps)]


def pad_array(x: Arr, pairs: Sequence[tuple[int, int]], mode: str, value: Any) -> Arr:
    """ONNX Pad with (begin, end) per dim; negative pads crop."""
    pos = [(max(b, 0), max(e, 0)) for b, e in pairs]
    if mode == "constant":
        y = np.pad(x, pos, mode="constant", constant_values=np.asarray(value, x.dtype).item())
    elif mode in ("reflect", "edge", "wrap"):
        y = np.pad(x, pos, mode=mode)  # type: ignore[call-overload]
    else:
        raise ValueError(f"unknown Pad mode {mode!r}")
    crop = tuple(slice(-min(b, 0), y.shape[i] + min(e, 0)) for i, (b, e) in enumerate(pairs))
    return np.ascontiguousarray(y[crop])


@_kernel("Pad")
def _pad(node: Node, xs: list[Any]) -> list[Arr]:
    x = xs[0]
    value = xs[2].reshape(-1)[0] if len(xs) > 2 and xs[2] is not None and xs[2].size else 0
    axes = _ints(xs[3]) if len(xs) > 3 and xs[3] is not None else None
    pairs = S.pad_pairs(x.ndim, _ints(xs[1]) or [], axes)
    return [pad_array(x, pairs, str(get_attr(node, "mode")), value)]


def shape_slice(shape: Sequence[int], start: int, end: int | None) -> list[int]:
    """ONNX Shape's start/end clamping."""
    r = len(shape)
    s = start + r if start < 0 else start
    e = r if end is None else (end + r if end < 0 else end)
    return list(shape[min(max(s, 0), r) : min(max(e, 0), r)])


@_kernel("Shape")
def _shape(node: Node, xs: list[Any]) -> list[Arr]:
    end = get_attr(node, "end")
    return [
        np.array(
            shape_slice(xs[0].shape, int(get_attr(node, "start")), None if end is None else int(end)),
            np.int64,
        )
    ]


@_kernel("ConstantOfShape")
def _cos(node: Node, xs: list[Any]) -> list[Arr]:
    v = get_attr(node, "value")
    v = np.zeros(1, np.float32) if v is None else np.asarray(v)
    shape, fill = tuple(_ints(xs[0]) or []), v.reshape(-1)[0]
    out = np.empty(shape, v.dtype)
    out.fill(fill)  # np.full's work, without its Python frame (this runs for every weight fill of a model)
    return [out]


@_kernel("ReduceSum", "ReduceMean", "ReduceMax", "ReduceMin")
def _reduce(node: Node, xs: list[Any]) -> list[Arr]:
    x = xs[0]
    axes = reduce_axes(node, xs, x.ndim)
    if axes is None:
        return [x]
    keep = bool(int(get_attr(node, "keepdims")))
    op = node.op_type
    if op == "ReduceSum":
        y = np.sum(x, axis=axes, keepdims=keep, dtype=x.dtype)
    elif op == "ReduceMean":
        y = np.mean(x, axis=axes, keepdims=keep, dtype=x.dtype)
    elif x.size == 0:  # the identity of max/min: the lowest/highest value of the dtype
        info = np.finfo(x.dtype) if x.dtype.kind == "f" else np.iinfo(x.dtype) if x.dtype.kind in "iu" else None
        if info is None:
            fill: Any = op == "ReduceMin"
        elif x.dtype.kind == "f":
            fill = -np.inf if op == "ReduceMax" else np.inf
        else:
            fill = info.min if op == "ReduceMax" else info.max
        shape = np.sum(np.zeros(x.shape, np.int8), axis=axes, keepdims=keep).shape
        y = np.full(shape, fill, x.dtype)
    elif op == "ReduceMax":
        y = np.max(x, axis=axes, keepdims=keep)
    else:
        y = np.min(x, axis=axes, keepdims=keep)
    return [np.asarray(y, x.dtype)]


# ------------------------------------------------------------------ fused host ops
@_kernel("_FusedConv")
def _fused_conv(node: Node, xs: list[Any]) -> list[Arr]:
    attrs = _attrs(node)
    y = conv_nd(xs[0], xs[1], xs[2] if len(xs) > 2 and xs[2] is not None else None, attrs)
    return [apply_activation(y, attrs)]


def to_nchwc(x: Arr) -> Arr:
    """NCHW ``[N, C, H, W]`` (C % 8 == 0) -> NCHWc8 ``[N, C/8, H, W, 8]``: channel c at block c // 8, lane c % 8."""
    n, c, h, w = x.shape
    if c % 8:
        raise ValueError(f"NCHWc8 needs a channel count that is a multiple of 8, got shape {list(x.shape)}")
    return np.ascontiguousarray(x.reshape(n, c // 8, 8, h, w).transpose(0, 1, 3, 4, 2))


def from_nchwc(x: Arr) -> Arr:
    """NCHWc8 ``[N, C/8, H, W, 8]`` -> NCHW ``[N, C, H, W]``."""
    if x.ndim != 5 or x.shape[4] != 8:
        raise ValueError(f"an NCHWc8 tensor is [N, C/8, H, W, 8], got shape {list(x.shape)}")
    n, cb, h, w, _ = x.shape
    return np.ascontiguousarray(x.transpose(0, 1, 4, 2, 3).reshape(n, cb * 8, h, w))


def _onnx_window(attrs: Mapping[str, Any], four: bool) -> dict[str, Any]:
    """ONNX ``strides``/``dilations``/``pads`` from the host kernels' (``[1, 1, h, w]`` when ``four``,
    pads ``[top, bottom, left, right]``)."""
    ones = [1] * (4 if four else 2)
    st = _ints(attrs.get("strides")) or ones
    dl = _ints(attrs.get("dilations")) or ones
    top, bottom, left, right = _ints(attrs.get("pads")) or [0, 0, 0, 0]
    if four:
        st, dl = st[2:], dl[2:]
    return {"strides": st, "dilations": dl, "pads": [top, left, bottom, right]}


@_kernel("_ReorderToNchwc")
def _reorder_to(node: Node, xs: list[Any]) -> list[Arr]:
    return [to_nchwc(xs[0])]


@_kernel("_ReorderFromNchwc")
def _reorder_from(node: Node, xs: list[Any]) -> list[Arr]:
    return [from_nchwc(xs[0])]


@_kernel("_NchwcConv2D")
def _nchwc_conv(node: Node, xs: list[Any]) -> list[Arr]:
    attrs = _attrs(node)
    x, w = from_nchwc(xs[0]), xs[1]
    b = xs[2] if len(xs) > 2 and xs[2] is not None else None
    onnx = {"kernel_shape": list(w.shape[2:]), "group": int(attrs.get("groups", 1)), **_onnx_window(attrs, True)}
    y = conv_nd(x, w, b, onnx)
    if len(xs) > 3 and xs[3] is not None:
        y = y + from_nchwc(xs[3])
    return [to_nchwc(apply_activation(y, attrs))]


@_kernel("_NchwcPool2D")
def _nchwc_pool(node: Node, xs: list[Any]) -> list[Arr]:
    attrs = _attrs(node)
    x = from_nchwc(xs[0])
    mode = str(attrs.get("mode"))
    if mode not in ("max", "avg"):
        raise ValueError(f"mode must be 'max' or 'avg', not {mode!r}")
    if int(attrs.get("global", 0)):
        y = x.max(axis=(2, 3), keepdims=True) if mode == "max" else x.mean(axis=(2, 3), keepdims=True, dtype=x.dtype)
        return [to_nchwc(y)]
    onnx = {"kernel_shape": _ints(attrs.get("kernel")), "count_include_pad": int(attrs.get("count_include_pad", 0)),
            **_onnx_window(attrs, False)}  # fmt: skip
    return [to_nchwc(pool_nd(x, onnx, mode))]


def fused_matmul(a: Arr, b: Arr, bias: Arr | None, attrs: Mapping[str, Any]) -> Arr:
    """``act(scale * (op(a) @ op(b)) + bias)`` with op = transpose of the last two axes if trans_*."""
    if int(attrs.get("trans_a", 0)):
        a = np.swapaxes(a, -1, -2)
    if int(attrs.get("trans_b", 0)):
        b = np.swapaxes(b, -1, -2)
    y = np.matmul(a, b)
    scale = float(attrs.get("scale", 1.0))
    if scale != 1.0:
        y = y * np.asarray(scale, y.dtype)
    if bias is not None:
        y = y + bias
    return apply_activation(np.asarray(y, a.dtype), dict(attrs))


@_kernel("_FusedMatMul")
def _fused_mm(node: Node, xs: list[Any]) -> list[Arr]:
    return [fused_matmul(xs[0], xs[1], xs[2] if len(xs) > 2 and xs[2] is not None else None, _attrs(node))]


@_kernel("_FusedElementwise")
def _fused_ew(node: Node, xs: list[Any]) -> list[Arr]:
    shape = S.broadcast_shapes(*(x.shape for x in xs))
    return [run_program(get_attr(node, "program"), xs, shape, xs[0].dtype)]


# ------------------------------------------------------------------ driver
#: kernels that only pick, join, reshape or fill elements (no arithmetic but integer index arithmetic,
#: no cast: no floating-point error to silence), run without ``np.errstate`` (a context manager costs
#: about a microsecond; shape arithmetic evaluates these on every load)
_NO_FLOAT_ERRORS = frozenset(
    {"Shape", "Unsqueeze", "Squeeze", "Reshape", "Flatten", "Concat", "Identity", "Transpose", "Expand"}
    | {"ConstantOfShape", "Gather", "Slice", "Split", "Tile"}
)


def evaluate_node(node: Node, inputs: Sequence[Arr | None]) -> list[Arr]:
    """Run one node on numpy inputs (``None`` for absent optional inputs).

    Raises:
        GraphError: naming the node, if the kernel rejects its inputs.
    """
    fn = KERNELS.get(node.op_type)
    if fn is None:
        raise GraphError("no reference kernel", node=node.name, op_type=node.op_type)
    try:
        if node.op_type in _NO_FLOAT_ERRORS:
            return fn(node, list(inputs))
        with np.errstate(all="ignore"):
            return fn(node, list(inputs))
    except GraphError:
        raise
    except (ValueError, IndexError, TypeError) as e:
        raise GraphError(str(e), node=node.name, op_type=node.op_type) from e


def run_reference(
    graph: Graph, feeds: Mapping[str, Any], *, outputs: Sequence[str] | None = None
) -> dict[str, Arr]:
    """Execute ``graph`` with numpy and return ``{output name: array}``.

    ``feeds`` maps every graph input name to an array of the declared shape;
    its dtype must match (Python scalars/lists are converted).  ``outputs``
    selects other values to return (any value name), default the graph outputs.

    Raises:
        GraphError: for missing/extra feeds, wrong shapes or dtypes, or a node that fails.
    """
    env: dict[str, Arr] = dict(graph.constants)
    missing = [i for i in graph.inputs if i not in feeds]
    extra = [k for k in feeds if k not in graph.inputs]
    if missing or extra:
        raise GraphError(f"feeds do not match graph inputs: missing {missing}, unexpected {extra}")
    for name in graph.inputs:
        v = graph.values[name]
        arr = np.asarray(feeds[name])
        if v.dtype is not None and arr.dtype != v.dtype:
            if isinstance(feeds[name], np.ndarray):
                raise GraphError(f"feed {name!r} has dtype {arr.dtype}, the graph input is {v.dtype}")
            arr = arr.astype(v.dtype)
        if v.shape is not None and tuple(arr.shape) != tuple(v.shape):
            raise GraphError(f"feed {name!r} has shape {arr.shape}, the graph input is {v.shape}")
        env[name] = arr
    wanted = list(outputs) if outputs is not None else list(graph.outputs)
    order = graph.topological_order()
    last_use: dict[str, int] = {}
    for i, n in enumerate(order):
        for x in n.inputs:
            if x:
                last_use[x] = i
    keep = set(wanted) | set(graph.constants) | set(graph.inputs)
    for i, n in enumerate(order):
        ins = [env[x] if x else None for x in n.inputs]
        outs = evaluate_node(n, ins)
        for name, arr in zip(n.outputs, outs, strict=False):
            if name:
                env[name] = arr
        for x in n.inputs:
            if x and last_use.get(x) == i and x not in keep:
                env.pop(x, None)
    result = {}
    for name in wanted:
        if name not in env:
            raise GraphError(f"value {name!r} was not computed")
        arr = env[name]
        result[name] = arr.copy() if name in graph.constants or name in graph.inputs else arr
    return result
