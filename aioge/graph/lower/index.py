"""Lowering of index, scan and rearrangement ops.

=====================  ==================================================================
Range                  ``Range(start, limit, delta)`` (const inputs; normally folded)
CumSum                 ``Cumsum(x, axis)`` exclusive, reverse
Trilu                  ``Triu`` / ``Tril`` diagonal = k
GatherElements         ``GatherElements(x, index)`` dim (constant indices normalized)
GatherND               ``GatherNd(x, indices)`` negative_index_support; batch_dims > 0: the
                       batch dims are merged and their index prepended (``Reshape``,
                       ``ConcatD`` with a constant iota)
ScatterElements        ``ScatterElements(data, indices, updates)`` axis, reduction
ScatterND              ``TensorScatterUpdate`` / ``TensorScatterAdd`` / ``TensorScatterMul`` /
                       ``TensorScatterMax`` / ``TensorScatterMin`` (x, indices, updates)
OneHot                 ``OneHot(x, depth, on_value, off_value)`` axis; negative indices
                       wrapped first (``Less``, ``Add``, ``Select``), float indices ``Cast``
NonZero                ``NonZero`` transpose=false, dtype int64 (only when the input is a
                       constant, i.e. folded: the output shape depends on the values)
TopK                   ``TopKV2(x, k)`` dim, largest, sorted; int32 indices ``Cast`` to int64
ArgMax, ArgMin         ``ArgMaxV2`` / ``ArgMin`` (x, dimension) dtype int64 (+ ``Reshape``
                       for keepdims; select_last_index reverses the axis first with
                       ``StridedSlice`` and maps back with ``Sub``)
DepthToSpace           ``DepthToSpace`` block_size, mode, data_format "NCHW"
SpaceToDepth           ``SpaceToDepth`` block_size, data_format "NCHW"
Size                   ``Identity`` of a const (normally folded)
=====================  ==================================================================
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from ... import _shapes as S
from ._base import RULES, Builder, ConstInput, InputRef, acl_dtype, const
from .shape import _strided_slice


def _range(L: Builder) -> None:
    vals = [const(L, i) for i in range(3)]
    if any(v is None for v in vals):
        raise L.fail("Range bounds must be constants (the output shape depends on them)")
    L.op("Range", [ConstInput(np.asarray(v).reshape(())) for v in vals if v is not None], L.node.outputs)


def _cumsum(L: Builder) -> None:
    ax = const(L, 1)
    if ax is None:
        raise L.fail("CumSum axis must be a constant")
    axis = S.normalize_axis(int(ax.reshape(-1)[0]), len(L.shape(L.node.inputs[0])))
    L.op(
        "Cumsum",
        [L.node.inputs[0], ConstInput(np.array(axis, np.int64))],
        L.node.outputs,
        exclusive=bool(int(L.attr("exclusive"))),
        reverse=bool(int(L.attr("reverse"))),
    )


def _trilu(L: Builder) -> None:
    x, out = L.node.inputs[0], L.node.outputs[0]
    upper = bool(int(L.attr("upper")))
    k = 0
    if L.node.input(1):
        kv = const(L, 1)
        if kv is None:  # Tril/Triu take the diagonal as an attr: a run-time k masks instead
            s, dt = L.shape(x), L.dtype(x)
            if 0 in s:
                L.op("Identity", [x], [out])
                return
            rows, cols = s[-2], s[-1]
            diff = np.arange(cols, dtype=np.int64).reshape(1, -1) - np.arange(rows, dtype=np.int64).reshape(-1, 1)
            kk = L.reshape(L.node.inputs[1], ())
            keep = L.to("GreaterEqual" if upper else "LessEqual", [ConstInput(diff), kk], (rows, cols), np.bool_)
            zero = ConstInput(np.zeros(s, dt))
            kb = L.to("BroadcastToD", [keep], s, np.bool_, shape=list(s))
            L.op("Select", [kb, x, zero], [out])
            return
        k = int(kv.reshape(-1)[0])
    L.op("Triu" if upper else "Tril", [x], [out], diagonal=k)


def _indices(L: Builder, i: int, dim: int) -> InputRef:
    """A constant index input normalized into [0, dim) (negative wrapped); others pass as they are."""
    c = const(L, i)
    if c is None:
        return L.node.inputs[i]
    return ConstInput(np.where(c < 0, c + dim, c).astype(c.dtype))


def _gather_elements(L: Builder) -> None:
    x = L.node.inputs[0]
    axis = S.normalize_axis(int(L.attr("axis")), len(L.shape(x)))
    L.op("GatherElements", [x, _indices(L, 1, L.shape(x)[axis])], L.node.outputs, dim=axis)


def _gather_nd(L: Builder) -> None:
    x, idx = L.node.inputs
    out = L.node.outputs[0]
    b = int(L.attr("batch_dims"))
    sx, si = L.shape(x), L.shape(idx)
    if b == 0:
        L.op("GatherNd", [x, idx], [out], negative_index_support=True)
        return
    nb = math.prod(sx[:b])
    m = math.prod(si[b:-1])
    k = si[-1]
    xf = L.reshape(x, (nb, *sx[b:]))
    if_ = L.reshape(idx, (nb, m, k))
    iota = np.broadcast_to(np.arange(nb, dtype=np.int64).reshape(nb, 1, 1), (nb, m, 1)).copy()
    full = L.to("ConcatD", [ConstInput(iota), if_], (nb, m, k + 1), np.int64, concat_dim=2, N=2)
    g = L.to("GatherNd", [xf, full], (nb, m, *sx[b + k :]), L.dtype(x), negative_index_support=True)
    L.reshape(g, L.shape(out), out=out)


def _scatter_elements(L: Builder) -> None:
    x = L.node.inputs[0]
    axis = S.normalize_axis(int(L.attr("axis")), len(L.shape(x)))
    L.op(
        "ScatterElements",
        [x, _indices(L, 1, L.shape(x)[axis]), L.node.inputs[2]],
        L.node.outputs,
        axis=axis,
        reduction=str(L.attr("reduction")),
    )


_SCATTER_ND = {"none": "TensorScatterUpdate", "add": "TensorScatterAdd", "mul": "TensorScatterMul",
               "max": "TensorScatterMax", "min": "TensorScatterMin"}  # fmt: skip


def _scatter_nd(L: Builder) -> None:
    L.op(_SCATTER_ND[str(L.attr("reduction"))], L.node.inputs, L.node.outputs)


def _onehot(L: Builder) -> None:
    idx, _, values = L.node.inputs
    out = L.node.outputs[0]
    d = const(L, 1)
    if d is None:
        raise L.fail("OneHot depth must be a constant")
    n = int(np.asarray(d).reshape(-1)[0])
    si, dt = L.shape(idx), L.dtype(out)
    axis = S.normalize_axis(int(L.attr("axis")), len(si) + 1)
    c = const(L, 0)
    ind: InputRef
    if c is not None:
        ci = c.astype(np.int64)
        ind = ConstInput(np.where(ci < 0, ci + n, ci))
    else:
        i64: str = idx
        if L.dtype(idx) != np.int64:
            i64 = L.to("Cast", [idx], si, np.int64, dst_type=acl_dtype(np.int64))
        neg = L.to("Less", [i64, L.scalar(0, np.int64)], si, np.bool_)
        wrapped = L.to("Add", [i64, L.scalar(n, np.int64)], si, np.int64)
        ind = L.to("Select", [neg, wrapped, i64], si, np.int64)
    vc = const(L, 2)
    if vc is not None:
        off, on = (ConstInput(np.asarray(v, dt)) for v in vc.reshape(-1)[:2])
        vals: list[InputRef] = [on, off]
    else:
        off_t, on_t = L.tmp((1,), dt), L.tmp((1,), dt)
        L.op("SplitD", [values], [off_t, on_t], split_dim=0, num_split=2)
        vals = [L.reshape(on_t, ()), L.reshape(off_t, ())]
    L.op("OneHot", [ind, ConstInput(np.array(n, np.int32)), *vals], [out], axis=axis)


def _nonzero(L: Builder) -> None:
    c = const(L, 0)
    if c is None:
        raise L.fail("NonZero needs a constant input (its output shape depends on the values)")
    L.op("NonZero", [ConstInput(c)], L.node.outputs, transpose=False, dtype=np.dtype(np.int64))


def _topk(L: Builder) -> None:
    x = L.node.inputs[0]
    vals, idx = L.node.outputs
    k = const(L, 1)
    if k is None:
        raise L.fail("TopK K must be a constant")
    sx = L.shape(x)
    axis = S.normalize_axis(int(L.attr("axis")), len(sx))
    so = L.shape(vals)
    i32 = L.tmp(so, np.int32)
    L.op(
        "TopKV2",
        [x, ConstInput(np.array(int(k.reshape(-1)[0]), np.int32))],
        [vals, i32],
        dim=axis,
        largest=bool(int(L.attr("largest"))),
        sorted=bool(int(L.attr("sorted"))),
    )
    L.op("Cast", [i32], [idx], dst_type=acl_dtype(np.int64))


def _arg(L: Builder) -> None:
    x, out = L.node.inputs[0], L.node.outputs[0]
    sx = L.shape(x)
    axis = S.normalize_axis(int(L.attr("axis")), len(sx))
    red = tuple(d for i, d in enumerate(sx) if i != axis)
    cann = "ArgMaxV2" if L.node.op_type == "ArgMax" else "ArgMin"
    last = bool(int(L.attr("select_last_index")))
    src = x
    if last:  # the first index of the reversed axis is the last one of the original
        src = L.tmp(sx, L.dtype(x))
        _strided_slice(L, x, [(sx[i] - 1, -1, -1) if i == axis else (0, d, 1) for i, d in enumerate(sx)], src)
    keep = L.shape(out) != red
    target = out if not keep and not last else L.tmp(red, np.int64)
    L.op(cann, [src, ConstInput(np.array(axis, np.int32))], [target], dtype=np.dtype(np.int64))
    if last:
        flipped = target
        target = out if not keep else L.tmp(red, np.int64)
        L.op("Sub", [ConstInput(np.array(sx[axis] - 1, np.int64)), flipped], [target])
    if keep:
        L.reshape(target, L.shape(out), out=out)


def _depth_space(L: Builder) -> None:
    attrs: dict[str, Any] = {"block_size": int(L.attr("blocksize")), "data_format": "NCHW"}
    if L.node.op_type == "DepthToSpace":
        attrs["mode"] = str(L.attr("mode"))
    L.op(L.node.op_type, L.node.inputs, L.node.outputs, **attrs)


def _size(L: Builder) -> None:
    L.op("Identity", [ConstInput(np.array(math.prod(L.shape(L.node.inputs[0])), np.int64))], L.node.outputs)


RULES.update(
    {
        "Range": _range,
        "CumSum": _cumsum,
        "Trilu": _trilu,
        "GatherElements": _gather_elements,
        "GatherND": _gather_nd,
        "ScatterElements": _scatter_elements,
        "ScatterND": _scatter_nd,
        "OneHot": _onehot,
        "NonZero": _nonzero,
        "TopK": _topk,
        "ArgMax": _arg,
        "ArgMin": _arg,
        "DepthToSpace": _depth_space,
        "SpaceToDepth": _depth_space,
        "Size": _size,
    }
)
