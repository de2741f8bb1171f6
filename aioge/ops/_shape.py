"""Shape and data-movement ops.

``reshape``, ``squeeze``, ``unsqueeze`` and ``flatten`` return zero-copy
views (no device work); the others launch a CANN op.  Every fixed-size
dtype is supported.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from .. import dtypes
from ..runtime.launch import Const
from ..runtime.stream import Tensor
from ._common import (
    MOVABLE,
    check_dtype,
    const,
    emit,
    emit_on,
    host_ints,
    int_list,
    normalize_axes,
    normalize_axis,
    require_tensor,
)

if TYPE_CHECKING:
    from ..runtime.stream import Stream

__all__ = (
    "broadcast_to",
    "concat",
    "fill",
    "flatten",
    "gather",
    "pad",
    "reshape",
    "slice",
    "split",
    "squeeze",
    "tile",
    "transpose",
    "unsqueeze",
)


def reshape(x: Any, shape: Sequence[int]) -> Tensor:
    """A view of ``x`` with another shape (numpy rules: one dim may be -1); no device work.

    At the CANN level this is ``Reshape`` (x, shape); the typed function
    needs no launch because tensors are contiguous.

    Example:
        >>> y = aioge.ops.reshape(x, (2, -1))
    """
    t = require_tensor(x)
    try:
        return t.reshape(tuple(int(d) for d in shape))
    except ValueError as e:
        raise ValueError(f"reshape: {e}") from None


def flatten(x: Any, axis: int = 1) -> Tensor:
    """ONNX ``Flatten``: a 2-D view ``(prod(shape[:axis]), prod(shape[axis:]))``.

    Example:
        >>> y = aioge.ops.flatten(x)            # (N, C, H, W) -> (N, C*H*W)
    """
    x = t = require_tensor(x)
    if not -x.ndim <= axis <= x.ndim:
        raise ValueError(f"flatten: axis {axis} is out of range for rank {x.ndim}")
    a = axis + x.ndim if axis < 0 else axis
    return t.reshape(math.prod(x.shape[:a]), math.prod(x.shape[a:]))


def squeeze(x: Any, axes: int | Sequence[int] | None = None) -> Tensor:
    """A view without the given size-1 dims (all size-1 dims when None), like ``numpy.squeeze``.

    Example:
        >>> y = aioge.ops.squeeze(x, axes=0)
    """
    x = t = require_tensor(x)
    if axes is None:
        ax = tuple(d for d, n in enumerate(x.shape) if n == 1)
    else:
        ax = normalize_axes(axes, x.ndim, "squeeze")
        for a in ax:
            if x.shape[a] != 1:
                raise ValueError(f"squeeze: dim {a} of {x.shape} has size {x.shape[a]}, not 1")
    return t.reshape(tuple(n for d, n in enumerate(x.shape) if d not in ax))


def unsqueeze(x: Any, axes: int | Sequence[int]) -> Tensor:
    """A view with size-1 dims inserted at ``axes`` (positions in the result), like
    ``numpy.expand_dims`` / ONNX ``Unsqueeze``.

    Example:
        >>> y = aioge.ops.unsqueeze(x, 0)
    """
    x = t = require_tensor(x)
    ax_list = int_list(axes, None, "unsqueeze", "axes")
    out_rank = x.ndim + len(ax_list)
    ax = normalize_axes(ax_list, out_rank, "unsqueeze")
    it = iter(x.shape)
    return t.reshape(tuple(1 if d in ax else next(it) for d in range(out_rank)))


def transpose(x: Any, perm: Sequence[int] | None = None) -> Tensor:
    """Permute dims (reverse them when ``perm`` is None), like ``numpy.transpose``
    (CANN ``TransposeD``, attr ``perm``).

    Example:
        >>> y = aioge.ops.transpose(x, (0, 2, 3, 1))     # NCHW -> NHWC
    """
    x = require_tensor(x)
    check_dtype("transpose", x.dtype, MOVABLE)
    p = tuple(reversed(range(x.ndim))) if perm is None else int_list(perm, None, "transpose", "perm")
    if sorted(a % max(x.ndim, 1) for a in p) != list(range(x.ndim)) or len(p) != x.ndim:
        raise ValueError(f"transpose: perm {p} is not a permutation of the {x.ndim} dims")
    p = tuple(a % x.ndim for a in p)
    return emit("TransposeD", [x], [(tuple(x.shape[a] for a in p), x.dtype)], {"perm": list(p)})[0]


def concat(tensors: Sequence[Any], axis: int = 0) -> Tensor:
    """Join tensors along an existing axis, like ``numpy.concatenate`` (CANN ``ConcatD``,
    attrs ``concat_dim`` and ``N``).

    Example:
        >>> y = aioge.ops.concat([a, b], axis=1)
    """
    ts = [require_tensor(t, "tensors[i]") for t in tensors]
    if not ts:
        raise ValueError("concat: needs at least one tensor")
    t0 = ts[0]
    check_dtype("concat", t0.dtype, MOVABLE)
    if t0.ndim == 0:
        raise ValueError("concat: zero-rank tensors cannot be concatenated")
    ax = normalize_axis(axis, t0.ndim, "concat")
    for i, t in enumerate(ts):
        if t.dtype != t0.dtype:
            raise TypeError(f"concat: tensors[{i}] has dtype {t.dtype}, tensors[0] has {t0.dtype}")
        if t.ndim != t0.ndim or any(a != b for d, (a, b) in enumerate(zip(t.shape, t0.shape, strict=False)) if d != ax):
            raise ValueError(f"concat: tensors[{i}] has shape {t.shape}, which does not fit {t0.shape} on axis {ax}")
    shape = list(t0.shape)
    shape[ax] = sum(t.shape[ax] for t in ts)
    return emit("ConcatD", ts, [(tuple(shape), t0.dtype)], {"concat_dim": ax, "N": len(ts)})[0]


def split(x: Any, split: int | Sequence[int], axis: int = 0) -> list[Tensor]:
    """Split along ``axis`` into ``split`` equal parts (an int) or parts of the given sizes
    (ONNX ``Split``; CANN ``SplitD`` / ``SplitVD``).

    Example:
        >>> a, b = aioge.ops.split(x, 2, axis=1)
        >>> a, b, c = aioge.ops.split(x, [1, 2, 3])
    """
    x = require_tensor(x)
    check_dtype("split", x.dtype, MOVABLE)
    if x.ndim == 0:
        raise ValueError("split: x must have rank >= 1")
    ax = normalize_axis(axis, x.ndim, "split")
    d = x.shape[ax]
    if isinstance(split, (int, np.integer)):
        n = int(split)
        if n < 1 or d % n:
            raise ValueError(f"split: dim {ax} of size {d} does not split into {n} equal parts")
        sizes = [d // n] * n
        attrs: dict[str, Any] = {"split_dim": ax, "num_split": n}
        op = "SplitD"
    else:
        sizes = list(int_list(split, None, "split", "split"))
        if not sizes or any(s < 0 for s in sizes) or sum(sizes) != d:
            raise ValueError(f"split: sizes {sizes} must be >= 0 and add up to {d}")
        attrs = {"size_splits": sizes, "split_dim": ax, "num_split": len(sizes)}
        op = "SplitVD"
    shapes = []
    for s in sizes:
        sh = list(x.shape)
        sh[ax] = s
        shapes.append((tuple(sh), x.dtype))
    return emit(op, [x], shapes, attrs)


def slice(
    x: Any,
    starts: Sequence[int],
    ends: Sequence[int],
    axes: Sequence[int] | None = None,
    steps: Sequence[int] | None = None,
) -> Tensor:
    """ONNX ``Slice``: ``x[starts:ends:steps]`` on ``axes`` with Python clamping, negative
    indices and steps (CANN ``StridedSliceD`` with ``begin``/``end``/``strides`` and masks).

    Example:
        >>> y = aioge.ops.slice(x, starts=[1], ends=[-1], axes=[0])
        >>> r = aioge.ops.slice(x, [-1], [-(2**62)], steps=[-1])   # reversed along axis 0
    """
    x = require_tensor(x)
    check_dtype("slice", x.dtype, MOVABLE)
    st, en = int_list(starts, None, "slice", "starts"), int_list(ends, None, "slice", "ends")
    ax = tuple(range(len(st))) if axes is None else int_list(axes, None, "slice", "axes")
    sp = (1,) * len(st) if steps is None else int_list(steps, None, "slice", "steps")
    if not len(st) == len(en) == len(ax) == len(sp):
        raise ValueError("slice: starts, ends, axes and steps must have the same length")
    nax = [normalize_axis(a, x.ndim, "slice") for a in ax]
    if len(set(nax)) != len(nax):
        raise ValueError(f"slice: repeated axis in {ax}")
    begin, end, stride = [0] * x.ndim, list(x.shape), [1] * x.ndim
    end_mask = 0
    out = list(x.shape)
    for a, b, e, s in zip(nax, st, en, sp, strict=False):
        if s == 0:
            raise ValueError("slice: steps must be non-zero")
        r = range(x.shape[a])[b:e:s]  # Python's clamping rules (= ONNX)
        out[a] = len(r)
        stride[a] = s
        if len(r) == 0:
            begin[a], end[a] = 0, 0
            stride[a] = 1
        else:
            begin[a] = r.start
            if s < 0 and r.stop < 0:
                end_mask |= 1 << a  # runs to the start of the dim
                end[a] = 0
            else:
                end[a] = r.stop
    attrs = {
        "begin": begin,
        "end": end,
        "strides": stride,
        "begin_mask": 0,
        "end_mask": end_mask,
        "ellipsis_mask": 0,
        "new_axis_mask": 0,
        "shrink_axis_mask": 0,
    }
    return emit("StridedSliceD", [x], [(tuple(out), x.dtype)], attrs)[0]


def gather(x: Any, indices: Any, axis: int = 0) -> Tensor:
    """``numpy.take(x, indices, axis)`` / ONNX ``Gather``: negative indices count from the end;
    an out-of-range index fails the launch (CANN ``GatherV2`` with ``negative_index_support``).

    ``indices`` is an int32/int64 Tensor, or an int array-like (uploaded to x's stream).

    Example:
        >>> rows = aioge.ops.gather(table, ids, axis=0)
    """
    x = require_tensor(x)
    check_dtype("gather", x.dtype, MOVABLE)
    if type(indices) is Tensor:
        idx = indices
    else:
        arr = np.asarray(indices)
        if arr.dtype.kind not in "iu":
            raise TypeError(f"gather: indices must be integers, got {arr.dtype}")
        idx = x._memory().home().upload(arr.astype(np.int64))
    if idx.dtype not in (np.dtype(np.int32), np.dtype(np.int64)):
        raise TypeError(f"gather: indices must be int32 or int64, got {idx.dtype}")
    if x.ndim == 0:
        raise ValueError("gather: x must have rank >= 1")
    ax = normalize_axis(axis, x.ndim, "gather")
    if x.shape[ax] == 0 and idx.size:
        raise ValueError("gather: cannot gather from an empty axis")
    shape = (*x.shape[:ax], *idx.shape, *x.shape[ax + 1 :])
    if len(shape) > 8:
        raise ValueError(f"gather: result rank {len(shape)} exceeds 8")
    return emit(
        "GatherV2",
        [x, idx, host_ints([ax])],
        [(shape, x.dtype)],
        {"batch_dims": 0, "negative_index_support": True},
    )[0]


def broadcast_to(x: Any, shape: Sequence[int]) -> Tensor:
    """Broadcast to ``shape`` with numpy rules, materialised (CANN ``BroadcastToD``, attr ``shape``).

    Example:
        >>> y = aioge.ops.broadcast_to(b, (4, 3))
    """
    x = require_tensor(x)
    check_dtype("broadcast_to", x.dtype, MOVABLE)
    sh = int_list(shape, None, "broadcast_to", "shape")
    ok = len(sh) >= x.ndim and all(s >= 0 for s in sh)
    ok = ok and all(xd in (1, sd) for xd, sd in zip(reversed(x.shape), reversed(sh), strict=False))
    if not ok:
        raise ValueError(f"broadcast_to: cannot broadcast {x.shape} to {sh}")
    if len(sh) > 8:
        raise ValueError("broadcast_to: rank exceeds 8")
    return emit("BroadcastToD", [x], [(sh, x.dtype)], {"shape": list(sh)})[0]


def tile(x: Any, repeats: int | Sequence[int]) -> Tensor:
    """``numpy.tile``: repeat ``x`` along each dim (CANN ``TileD``, attr ``multiples``).

    Example:
        >>> y = aioge.ops.tile(x, (2, 1))
    """
    x = require_tensor(x)
    check_dtype("tile", x.dtype, MOVABLE)
    reps = list(int_list(repeats, None, "tile", "repeats"))
    if any(r < 0 for r in reps):
        raise ValueError(f"tile: repeats must be >= 0, got {reps}")
    if len(reps) < x.ndim:
        reps = [1] * (x.ndim - len(reps)) + reps
    if len(reps) > 8:
        raise ValueError("tile: rank exceeds 8")
    xs = (1,) * (len(reps) - x.ndim) + x.shape
    out = tuple(a * r for a, r in zip(xs, reps, strict=False))
    return emit("TileD", [x], [(out, x.dtype)], {"multiples": reps})[0]


def pad(
    x: Any, pads: Sequence[int] | Sequence[Sequence[int]], mode: str = "constant", constant_value: Any = 0
) -> Tensor:
    """ONNX ``Pad``: ``pads`` is ``[x1_begin, x2_begin, ..., x1_end, x2_end, ...]`` (or numpy-style
    ``[(before, after), ...]`` pairs); negative pads crop.  Modes ``constant``, ``reflect``,
    ``edge`` (CANN ``PadV3`` with ``paddings_contiguous = false``).

    Example:
        >>> y = aioge.ops.pad(x, [(0, 0), (1, 1)], mode="reflect")
    """
    x = require_tensor(x)
    check_dtype("pad", x.dtype, MOVABLE)
    if mode not in ("constant", "reflect", "edge"):
        raise ValueError(f"pad: mode must be constant, reflect or edge, got {mode!r}")
    p: list[Any] = list(pads)
    if p and not isinstance(p[0], (int, np.integer)):
        pairs = [tuple(int(v) for v in q) for q in p]
        if any(len(q) != 2 for q in pairs):
            raise ValueError("pad: numpy-style pads must be (before, after) pairs")
        flat = [q[0] for q in pairs] + [q[1] for q in pairs]
    else:
        flat = [int(v) for v in p]
    if len(flat) != 2 * x.ndim:
        raise ValueError(f"pad: pads must have {2 * x.ndim} values for rank {x.ndim}, got {len(flat)}")
    out = []
    for d in range(x.ndim):
        b, e, n = flat[d], flat[x.ndim + d], x.shape[d]
        o = n + b + e
        if o < 0:
            raise ValueError(f"pad: pads ({b}, {e}) crop dim {d} of size {n} below zero")
        if mode == "reflect" and (b > 0 or e > 0) and (b >= n or e >= n):
            raise ValueError(f"pad: reflect pads ({b}, {e}) must be smaller than dim {d} of size {n}")
        if mode == "edge" and n == 0 and (b > 0 or e > 0):
            raise ValueError(f"pad: edge padding of the empty dim {d}")
        out.append(o)
    if x.ndim == 0:  # nothing to pad: a copy
        return emit("Identity", [x], [(x.shape, x.dtype)])[0]
    inputs: list[Any] = [x, host_ints(flat)]
    if mode == "constant":
        inputs.append(const(np.asarray(constant_value).astype(x.dtype).reshape(())))
    return emit("PadV3", inputs, [(tuple(out), x.dtype)], {"mode": mode, "paddings_contiguous": False})[0]


def fill(shape: Sequence[int], value: Any, dtype: dtypes.DTypeLike = "float32", *, stream: Stream) -> Tensor:
    """A new tensor of ``shape`` filled with ``value`` on ``stream`` (CANN ``Fill``: dims as a
    const int64 input, value as a 1-element input).

    Example:
        >>> z = aioge.ops.fill((2, 3), 0.0, stream=s)
    """
    dt = dtypes.normalize(dtype)
    check_dtype("fill", dt, MOVABLE, "dtype")
    sh = int_list(shape, None, "fill", "shape")
    if any(d < 0 for d in sh):
        raise ValueError(f"fill: shape {sh} has a negative dim")
    if len(sh) > 8:
        raise ValueError("fill: rank exceeds 8")
    if not sh:  # a zero-length dims input cannot be const: fill one element and view it as a scalar
        return fill((1,), value, dt, stream=stream).reshape(())
    dims = Const(np.asarray(sh, np.int64))
    val = const(np.asarray(value).astype(dt).reshape(()))
    return emit_on(stream, "Fill", [dims, val], [(sh, dt)])[0]
