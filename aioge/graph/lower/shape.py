"""Lowering of data movement (reshape-likes, Transpose, Concat, Split, Slice, Gather, Pad, ...) and reductions."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from ... import _shapes as S
from ._base import RULES, Builder, ConstInput, InputRef, const, ints


def _identity(L: Builder) -> None:
    with_mask = len(L.node.outputs) > 1 and bool(L.node.outputs[1])
    # the planner makes a single-output Identity/Dropout a view; with a mask it is a copy
    L.op("Identity", [L.node.inputs[0]], [L.node.outputs[0]], alias=not with_mask)
    if with_mask:
        mask = L.node.outputs[1]
        L.fill(L.shape(mask), True, np.bool_, out=mask)


def _reshape_like(L: Builder) -> None:
    L.reshape(L.node.inputs[0], L.shape(L.node.outputs[0]), out=L.node.outputs[0])


def _transpose(L: Builder) -> None:
    x = L.node.inputs[0]
    perm = ints(L.attr("perm")) or list(range(len(L.shape(x))))[::-1]
    L.op("TransposeD", [x], L.node.outputs, perm=perm)



def _concat(L: Builder) -> None:
    axis = S.normalize_axis(int(L.attr("axis")), len(L.shape(L.node.inputs[0])))
    L.op("ConcatD", L.node.inputs, L.node.outputs, concat_dim=axis, N=len(L.node.inputs))


def _split(L: Builder) -> None:
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


def _strided_slice(L: Builder, x: str, ranges: Sequence[tuple[int, int, int]], out: str) -> None:
    # the rows begin, end, strides: the ranges transposed (one zip), then the ends that step back through
    # index 0 ("to the end" in that direction, negative) become end_mask bits with an end of 0
    begin, end, strides = zip(*ranges) if ranges else ((), (), ())
    end_mask = 0
    if min(end, default=0) < 0:
        end = tuple(0 if e < 0 else e for e in end)
        end_mask = sum(1 << i for i, (_, e, _) in enumerate(ranges) if e < 0)
    rows = np.array([begin, end, strides], np.int64)  # one array, three contiguous rows: one call, not three
    L.op(
        "StridedSlice",
        [x, ConstInput(rows[0]), ConstInput(rows[1]), ConstInput(rows[2])],
        [out],
        begin_mask=0,
        end_mask=end_mask,
        ellipsis_mask=0,
        new_axis_mask=0,
        shrink_axis_mask=0,
    )


def _slice(L: Builder) -> None:
    x, out = L.node.inputs[0], L.node.outputs[0]
    vals = [const(L, i) for i in range(1, 5)]
    if vals[0] is None or vals[1] is None or any(L.node.input(i) and vals[i - 1] is None for i in (3, 4)):
        raise L.fail("Slice parameters must be constants (run fold_constants)")
    ranges = S.slice_ranges(
        L.shape(x), ints(vals[0]) or [], ints(vals[1]) or [], ints(vals[2]), ints(vals[3])
    )
    _strided_slice(L, x, ranges, out)


def _gather(L: Builder) -> None:
    x, idx = L.node.inputs
    axis = S.normalize_axis(int(L.attr("axis")), len(L.shape(x)))
    c = const(L, 1)
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


def _expand(L: Builder) -> None:
    out = L.node.outputs[0]
    L.op("BroadcastToD", [L.node.inputs[0]], [out], shape=list(L.shape(out)))


def _tile(L: Builder) -> None:
    reps = const(L, 1)
    if reps is None:
        raise L.fail("Tile repeats must be a constant")
    L.op("TileD", [L.node.inputs[0]], L.node.outputs, multiples=ints(reps))


def _pad(L: Builder) -> None:
    x, out = L.node.inputs[0], L.node.outputs[0]
    s, dt = L.shape(x), L.dtype(x)
    mode = str(L.attr("mode"))
    pads = const(L, 1)
    axes = const(L, 3) if L.node.input(3) else None
    if pads is None or (L.node.input(3) and axes is None):
        raise L.fail("Pad pads/axes must be constants")
    pairs = S.pad_pairs(len(s), ints(pads) or [], ints(axes))
    value: InputRef = L.scalar(0, dt)
    if L.node.input(2):
        cv = const(L, 2)
        if cv is not None:
            value = L.scalar(cv.reshape(-1)[0] if cv.size else 0, dt)
        elif math.prod(L.shape(L.node.inputs[2])) == 1:
            value = L.reshape(L.node.inputs[2], ())
    if mode == "wrap":
        _pad_wrap(L, x, pairs, out)
        return
    pos = [(max(b, 0), max(e, 0)) for b, e in pairs]
    crop = any(b < 0 or e < 0 for b, e in pairs)
    padded_shape = tuple(d + b + e for d, (b, e) in zip(s, pos, strict=False))
    target = out if not crop else L.tmp(padded_shape, dt)
    ins: list[InputRef] = [x, ConstInput(np.array(pos, np.int64).reshape(len(s), 2))]
    if mode == "constant":
        ins.append(value)
    L.op("PadV3", ins, [target], mode=mode, paddings_contiguous=True)
    if crop:
        ranges = [(-min(b, 0), padded_shape[i] + min(e, 0), 1) for i, (b, e) in enumerate(pairs)]
        _strided_slice(L, target, ranges, out)


def _pad_wrap(L: Builder, x: str, pairs: Sequence[tuple[int, int]], out: str) -> None:
    """ONNX 'wrap' (circular) padding, which PadV3 lacks: ``TileD`` the input, then one ``StridedSlice``."""
    s, dt = L.shape(x), L.dtype(x)
    reps, ranges = [], []
    for d, (b, e) in zip(s, pairs, strict=True):
        if d == 0 or (b == 0 and e == 0):
            reps.append(1)
            ranges.append((0, d, 1))
            continue
        before = -(-max(b, 0) // d)
        after = -(-max(e, 0) // d)
        reps.append(1 + before + after)
        start = before * d - b
        ranges.append((start, start + d + b + e, 1))
    tiled = L.to("TileD", [x], [d * r for d, r in zip(s, reps, strict=True)], dt, multiples=reps)
    _strided_slice(L, tiled, ranges, out)


def _shape(L: Builder) -> None:
    from ..reference import shape_slice

    end = L.attr("end")
    val = np.array(
        shape_slice(L.shape(L.node.inputs[0]), int(L.attr("start")), None if end is None else int(end)),
        np.int64,
    )
    L.op("Identity", [ConstInput(val)], L.node.outputs)


def _cos(L: Builder) -> None:
    out = L.node.outputs[0]
    v = L.attr("value")
    v = np.zeros(1, np.float32) if v is None else np.asarray(v)
    L.fill(L.shape(out), v.reshape(-1)[0], v.dtype, out=out)


_REDUCE_D = {"ReduceSum": "ReduceSumD", "ReduceMean": "ReduceMeanD", "ReduceMax": "ReduceMaxD",
             "ReduceMin": "ReduceMinD", "ReduceProd": "ReduceProdD"}  # fmt: skip


def _reduce(L: Builder) -> None:
    """Reduce*: the CANN ``*D`` reductions, LpNormV2 (L1, L2), ReduceLogSumExp, and compositions of them."""
    from ..reference_base import reduce_axes

    x, out = L.node.inputs[0], L.node.outputs[0]
    op = L.node.op_type
    sx, dt = L.shape(x), L.dtype(x)
    ax_val = const(L, 1) if L.node.input(1) else None
    if L.node.input(1) and ax_val is None:
        raise L.fail("reduction axes must be a constant")
    axes = reduce_axes(L.node, [None, ax_val], len(sx))
    if axes is None:  # no reduction; the elementwise part of L1/L2/SumSquare/LogSum still applies
        pre = {"ReduceL1": "Abs", "ReduceL2": "Abs", "ReduceSumSquare": "Square", "ReduceLogSum": "Log"}.get(op)
        if pre is None:
            L.op("Identity", [x], [out])  # a copy: the plan gives this output its own buffer
        else:
            log: dict[str, Any] = {"base": -1.0, "scale": 1.0, "shift": 0.0} if pre == "Log" else {}
            L.op(pre, [x], [out], **log)
        return
    keep = bool(int(L.attr("keepdims")))
    so = L.shape(out)
    if any(sx[a] == 0 for a in axes):  # an empty reduction: its identity (the shape is static)
        L.fill(so, _empty_identity(op, dt), dt, out=out)
        return
    ax = list(axes)
    if dt == np.bool_ and op in ("ReduceMax", "ReduceMin"):
        L.op("ReduceAnyD" if op == "ReduceMax" else "ReduceAllD", [x], [out], axes=ax, keep_dims=keep)
    elif op in _REDUCE_D:
        extra = {"noop_with_empty_axes": False} if op == "ReduceMean" else {}
        L.op(_REDUCE_D[op], [x], [out], axes=ax, keep_dims=keep, **extra)
    elif op in ("ReduceL1", "ReduceL2") and dt.kind == "f":
        L.op("LpNormV2", [x], [out], p=1.0 if op == "ReduceL1" else 2.0, axes=ax, keepdim=keep, epsilon=0.0)
    elif op == "ReduceLogSumExp":
        L.op("ReduceLogSumExp", [x, ConstInput(np.array(ax, np.int64))], [out], keep_dims=keep,
             noop_with_empty_axes=False)  # fmt: skip
    elif op == "ReduceLogSum":
        s = L.to("ReduceSumD", [x], so, dt, axes=ax, keep_dims=keep)
        L.op("Log", [s], [out], base=-1.0, scale=1.0, shift=0.0)
    else:  # ReduceSumSquare, and integer ReduceL1
        sq = L.to("Square" if op == "ReduceSumSquare" else "Abs", [x], sx, dt)
        L.op("ReduceSumD", [sq], [out], axes=ax, keep_dims=keep)


def _empty_identity(op: str, dt: np.dtype) -> np.ndarray:
    if op in ("ReduceMax", "ReduceMin"):
        low = op == "ReduceMax"
        if dt.kind == "f":
            return np.array(-np.inf if low else np.inf, dt)
        if dt.kind == "b":
            return np.array(not low)
        info = np.iinfo(dt)
        return np.array(info.min if low else info.max, dt)
    if op == "ReduceLogSumExp" or op == "ReduceLogSum":
        return np.array(-np.inf, dt)
    if op == "ReduceMean":
        return np.array(np.nan, dt)
    return np.array(1 if op == "ReduceProd" else 0, dt)


RULES.update(
    {
        "Identity": _identity,
        "Dropout": _identity,
        "Reshape": _reshape_like,
        "Flatten": _reshape_like,
        "Squeeze": _reshape_like,
        "Unsqueeze": _reshape_like,
        "Transpose": _transpose,
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
        **{op: _reduce for op in ("ReduceProd", "ReduceL1", "ReduceL2", "ReduceLogSum", "ReduceLogSumExp",
                                  "ReduceSumSquare")},
    }
)
