"""Shape functions of the index, scan, resize, recurrent, quantization and Einsum ops.

Registered into :mod:`.infer_shapes` (which imports this module); the same
rules apply: values that determine a shape (Range's bounds, TopK's K,
OneHot's depth, Resize's scales/sizes, NonZero's input) must be compile-time
values, otherwise :class:`~aioge.graph.errors.DynamicShapeError`.
"""

from __future__ import annotations

import math

import numpy as np

from ... import _shapes as S
from ..ewprogram import ACTIVATIONS
from ..reference_ops import range_length
from ..reference_resize import resize_params
from .infer_rules import Shape, _Ctx, _shape_fn, _wrap


@_shape_fn("DepthToSpace", "SpaceToDepth")
def _depth_space(c: _Ctx) -> list[Shape]:
    x = c.shape(0)
    b = c.attr("blocksize")
    if len(x) != 4 or b is None or int(b) <= 0:
        raise c.error(f"needs a 4-D input and a positive blocksize, got {x} and {b}")
    b = int(b)
    n, ch, h, w = x
    if c.node.op_type == "DepthToSpace":
        if str(c.attr("mode")) not in ("DCR", "CRD"):
            raise c.error(f"mode must be DCR or CRD, not {c.attr('mode')!r}")
        if ch % (b * b):
            raise c.error(f"{ch} channels are not divisible by blocksize^2 = {b * b}")
        return [(n, ch // (b * b), h * b, w * b)]
    if h % b or w % b:
        raise c.error(f"spatial dims {h}x{w} are not divisible by blocksize {b}")
    return [(n, ch * b * b, h // b, w // b)]


@_shape_fn("Trilu")
def _trilu(c: _Ctx) -> list[Shape]:
    x = c.shape(0)
    if len(x) < 2:
        raise c.error(f"needs rank >= 2, got {x}")
    if c.has(1) and math.prod(c.shape(1)) != 1:
        raise c.error("k must be a scalar")
    return [x]


@_shape_fn("Range")
def _range(c: _Ctx) -> list[Shape]:
    for i in range(3):
        if math.prod(c.shape(i)) != 1:
            raise c.error(f"input {i} must be a scalar, got shape {c.shape(i)}")
    vals = [c.value(i, ("start", "limit", "delta")[i]).reshape(-1)[0] for i in range(3)]
    try:
        return [(range_length(*vals),)]
    except ValueError as e:
        raise _wrap(c, e) from None


@_shape_fn("CumSum")
def _cumsum(c: _Ctx) -> list[Shape]:
    x = c.shape(0)
    ax = c.value(1, "axis")
    if ax.size != 1:
        raise c.error("axis must be a scalar")
    try:
        S.normalize_axis(int(ax.reshape(-1)[0]), len(x))
    except ValueError as e:
        raise _wrap(c, e) from None
    return [x]


@_shape_fn("GatherElements")
def _gather_elements(c: _Ctx) -> list[Shape]:
    x, idx = c.shape(0), c.shape(1)
    if len(x) != len(idx) or not x:
        raise c.error(f"data {x} and indices {idx} must have the same rank >= 1")
    try:
        a = S.normalize_axis(int(c.attr("axis")), len(x))
    except ValueError as e:
        raise _wrap(c, e) from None
    if any(i > d for j, (i, d) in enumerate(zip(idx, x, strict=True)) if j != a):
        raise c.error(f"indices {idx} exceed data {x} outside axis {a}")
    return [idx]


@_shape_fn("GatherND")
def _gather_nd(c: _Ctx) -> list[Shape]:
    x, idx = c.shape(0), c.shape(1)
    b = int(c.attr("batch_dims"))
    if not idx or not x or b < 0 or b >= min(len(x), len(idx)):
        raise c.error(f"batch_dims {b} does not fit data {x} and indices {idx}")
    k = idx[-1]
    if tuple(idx[:b]) != tuple(x[:b]):
        raise c.error(f"batch dims of indices {idx} and data {x} differ")
    if k < 1 or b + k > len(x):
        raise c.error(f"index tuples of length {k} do not fit data {x} with batch_dims {b}")
    return [(*idx[:-1], *x[b + k :])]


@_shape_fn("ScatterElements")
def _scatter_elements(c: _Ctx) -> list[Shape]:
    x, idx, upd = c.shape(0), c.shape(1), c.shape(2)
    if idx != upd or len(idx) != len(x):
        raise c.error(f"indices {idx} and updates {upd} must match and have the rank of data {x}")
    if str(c.attr("reduction")) not in ("none", "add", "mul", "max", "min"):
        raise c.error(f"unknown reduction {c.attr('reduction')!r}")
    try:
        S.normalize_axis(int(c.attr("axis")), len(x))
    except ValueError as e:
        raise _wrap(c, e) from None
    return [x]


@_shape_fn("ScatterND")
def _scatter_nd(c: _Ctx) -> list[Shape]:
    x, idx, upd = c.shape(0), c.shape(1), c.shape(2)
    if not idx or idx[-1] > len(x) or idx[-1] < 1:
        raise c.error(f"indices {idx} do not fit data {x}")
    want = (*idx[:-1], *x[idx[-1] :])
    if tuple(upd) != want:
        raise c.error(f"updates {upd} must have shape {want}")
    if str(c.attr("reduction")) not in ("none", "add", "mul", "max", "min"):
        raise c.error(f"unknown reduction {c.attr('reduction')!r}")
    return [x]


@_shape_fn("OneHot")
def _onehot(c: _Ctx) -> list[Shape]:
    idx = c.shape(0)
    if math.prod(c.shape(1)) != 1 or c.shape(2) != (2,):
        raise c.error(f"depth must be a scalar and values a pair, got {c.shape(1)} and {c.shape(2)}")
    depth = c.value(1, "depth").reshape(-1)[0]
    if not np.isfinite(depth) or int(depth) < 1:
        raise c.error(f"depth must be >= 1, got {depth}")
    try:
        a = S.normalize_axis(int(c.attr("axis")), len(idx) + 1)
    except ValueError as e:
        raise _wrap(c, e) from None
    return [(*idx[:a], int(depth), *idx[a:])]


@_shape_fn("NonZero")
def _nonzero(c: _Ctx) -> list[Shape]:
    x = c.value(0, "x (NonZero's output size depends on its values)")
    return [(x.ndim, int(np.count_nonzero(x)))]


@_shape_fn("TopK")
def _topk(c: _Ctx) -> list[Shape]:
    x = c.shape(0)
    kv = c.value(1, "K")
    if kv.size != 1:
        raise c.error("K must have one element")
    k = int(kv.reshape(-1)[0])
    try:
        a = S.normalize_axis(int(c.attr("axis")), len(x))
    except ValueError as e:
        raise _wrap(c, e) from None
    if not 0 <= k <= x[a]:
        raise c.error(f"K = {k} is outside [0, {x[a]}] for axis {a} of {x}")
    out = tuple(k if i == a else d for i, d in enumerate(x))
    return [out, out]


@_shape_fn("ArgMax", "ArgMin")
def _arg(c: _Ctx) -> list[Shape]:
    x = c.shape(0)
    try:
        a = S.normalize_axis(int(c.attr("axis")), len(x))
    except ValueError as e:
        raise _wrap(c, e) from None
    if x[a] == 0:
        raise c.error(f"cannot reduce the empty axis {a}")
    if int(c.attr("keepdims")):
        return [tuple(1 if i == a else d for i, d in enumerate(x))]
    return [tuple(d for i, d in enumerate(x) if i != a)]


@_shape_fn("Size")
def _size(c: _Ctx) -> list[Shape]:
    c.shape(0)
    return [()]


@_shape_fn("Einsum")
def _einsum(c: _Ctx) -> list[Shape]:
    eq = c.attr("equation")
    if not isinstance(eq, str):
        raise c.error("needs the equation attr")
    try:
        _, out, sizes = S.parse_einsum(eq, [c.shape(i) for i in range(len(c.node.inputs))])
    except ValueError as e:
        raise _wrap(c, e) from None
    return [tuple(sizes[ch] for ch in out)]


@_shape_fn("MatMulInteger")
def _matmul_integer(c: _Ctx) -> list[Shape]:
    a, b = c.shape(0), c.shape(1)
    try:
        out = S.matmul_shape(a, b)
    except ValueError as e:
        raise _wrap(c, e) from None
    for i, (dim, what) in ((2, (a[-2] if len(a) > 1 else 1, "rows of A")), (3, (b[-1], "columns of B"))):
        if c.has(i) and math.prod(c.shape(i)) not in (1, dim):
            raise c.error(f"zero point {i} of shape {c.shape(i)} must be a scalar or one per {what}")
    return [out]


@_shape_fn("QuantizeLinear", "DequantizeLinear")
def _quant(c: _Ctx) -> list[Shape]:
    x, s = c.shape(0), c.shape(1)
    block = int(c.attr("block_size") or 0)
    if c.has(2) and c.shape(2) != s:
        raise c.error(f"zero point {c.shape(2)} and scale {s} must have the same shape")
    if block:
        try:
            a = S.normalize_axis(int(c.attr("axis")), len(x))
        except ValueError as e:
            raise _wrap(c, e) from None
        want = tuple(-(-d // block) if i == a else d for i, d in enumerate(x))
        if block < 0 or s != want:
            raise c.error(f"blocked scale {s} must have shape {want} (block_size {block} along axis {a})")
    elif math.prod(s) != 1:
        try:
            a = S.normalize_axis(int(c.attr("axis")), len(x))
        except ValueError as e:
            raise _wrap(c, e) from None
        if s != (x[a],):
            raise c.error(f"scale {s} must be a scalar or ({x[a]},) for axis {a} of {x}")
    return [x]


@_shape_fn("GroupNormalization")
def _groupnorm(c: _Ctx) -> list[Shape]:
    x = c.shape(0)
    g = c.attr("num_groups")
    if len(x) < 2 or g is None or int(g) <= 0 or x[1] % int(g):
        raise c.error(f"num_groups {g} must divide the {x[1] if len(x) > 1 else '?'} channels of {x}")
    for i in (1, 2):
        if c.shape(i) not in ((x[1],), (int(g),)):
            raise c.error(f"input {i} has shape {c.shape(i)}, expected ({x[1]},) (or ({g},) in opset 18)")
    return [x]


@_shape_fn("LSTM", "GRU", "RNN")
def _rnn(c: _Ctx) -> list[Shape]:
    x, w, r = c.shape(0), c.shape(1), c.shape(2)
    gates = {"LSTM": 4, "GRU": 3, "RNN": 1}[c.node.op_type]
    layout = int(c.attr("layout"))
    direction = str(c.attr("direction"))
    if direction not in ("forward", "reverse", "bidirectional"):
        raise c.error(f"unknown direction {direction!r}")
    nd = 2 if direction == "bidirectional" else 1
    h = c.attr("hidden_size")
    if len(x) != 3 or len(w) != 3 or len(r) != 3:
        raise c.error(f"X {x}, W {w} and R {r} must be 3-D")
    t, b = (x[1], x[0]) if layout else (x[0], x[1])
    h = int(h) if h is not None else w[1] // gates
    if w != (nd, gates * h, x[2]) or r != (nd, gates * h, h):
        raise c.error(f"W {w} / R {r} do not fit {nd} direction(s), hidden_size {h}, input size {x[2]}")
    if c.has(3) and c.shape(3) != (nd, 2 * gates * h):
        raise c.error(f"B has shape {c.shape(3)}, expected {(nd, 2 * gates * h)}")
    if c.has(4) and c.shape(4) != (b,):
        raise c.error(f"sequence_lens has shape {c.shape(4)}, expected ({b},)")
    state = (b, nd, h) if layout else (nd, b, h)
    for i in (5, 6):
        if c.has(i) and c.shape(i) != state:
            raise c.error(f"input {i} has shape {c.shape(i)}, expected {state}")
    if c.has(7) and c.shape(7) != (nd, 3 * h):
        raise c.error(f"P has shape {c.shape(7)}, expected {(nd, 3 * h)}")
    y = (b, t, nd, h) if layout else (t, nd, b, h)
    return [y, state, state][: len(c.node.outputs)]


@_shape_fn("Resize")
def _resize(c: _Ctx) -> list[Shape]:
    x = c.shape(0)
    vals = [c.value(i, name) if c.has(i) else None for i, name in ((1, "roi"), (2, "scales"), (3, "sizes"))]
    if vals[1] is not None and vals[1].size == 0:
        vals[1] = None
    if vals[2] is not None and vals[2].size == 0:
        vals[2] = None
    try:
        out, _, _ = resize_params(c.node, x, *vals)
    except ValueError as e:
        raise _wrap(c, e) from None
    if any(d <= 0 for d in out) and 0 not in x:
        raise c.error(f"output shape {out} has an empty dimension")
    return [out]


# ------------------------------------------------------------------ NCHWc8 blocked layout (passes/nchwc.py)
def _blocked(c: _Ctx, i: int) -> Shape:
    """Input ``i`` as an NCHWc8 tensor ``[N, C/8, H, W, 8]``."""
    s = c.shape(i)
    if len(s) != 5 or s[4] != 8:
        raise c.error(f"input {i} must be NCHWc8 [N, C/8, H, W, 8], got shape {s}")
    return s


def nchwc_groups_ok(cin: int, cout: int, groups: int) -> bool:
    """Whether a convolution of these channel counts and groups has an NCHWc8 form: groups 1 or
    grouped with per-group input and output channel counts multiples of 8, or depthwise (groups ==
    cin == cout, a multiple of 8)."""
    if groups <= 0 or cin % groups or cout % groups or cin % 8 or cout % 8:
        return False
    return groups == cin == cout or ((cin // groups) % 8 == 0 and (cout // groups) % 8 == 0)


def _nchwc_ints(c: _Ctx, name: str, n: int, default: list[int], low: int) -> list[int]:
    v = c.attr(name)
    if v is None:
        out = default
    elif type(v) is list and all(type(x) is int for x in v):  # the common case: a flat list of ints
        out = list(v)
    else:
        out = [int(x) for x in np.asarray(v).reshape(-1)]
    if len(out) != n or min(out) < low:  # n >= 1: min of the n values
        raise c.error(f"{name} must be {n} ints >= {low}, got {v}")
    return out


@_shape_fn("_ReorderToNchwc")
def _reorder_to_nchwc(c: _Ctx) -> list[Shape]:
    x = c.shape(0)
    if len(x) != 4 or x[1] % 8:
        raise c.error(f"needs a 4-D NCHW input whose channel count is a multiple of 8, got shape {x}")
    n, ch, h, w = x
    return [(n, ch // 8, h, w, 8)]


@_shape_fn("_ReorderFromNchwc")
def _reorder_from_nchwc(c: _Ctx) -> list[Shape]:
    n, cb, h, w, _ = _blocked(c, 0)
    return [(n, cb * 8, h, w)]


@_shape_fn("_NchwcConv2D")
def _nchwc_conv(c: _Ctx) -> list[Shape]:
    if c.attr("activation") not in ACTIVATIONS:
        raise c.error(f"unknown activation {c.attr('activation')!r} (one of {sorted(ACTIVATIONS)})")
    n, cb, h, w, _ = _blocked(c, 0)
    cin, wt = cb * 8, c.shape(1)
    groups = int(c.attr("groups") or 1)
    if len(wt) != 4 or groups <= 0 or wt[1] * groups != cin or wt[0] % groups:
        raise c.error(f"filter {wt} with groups {groups} does not fit the {cin} input channels of {c.shape(0)}")
    cout = wt[0]
    if not nchwc_groups_ok(cin, cout, groups):
        raise c.error(f"filter {wt} with groups {groups} on input {c.shape(0)}: NCHWc8 takes groups 1, depthwise, "
                      "or groups whose input and output channel counts are multiples of 8")  # fmt: skip
    if c.has(2) and c.shape(2) != (cout,):
        raise c.error(f"bias shape {c.shape(2)} must be ({cout},)")
    st = _nchwc_ints(c, "strides", 4, [1, 1, 1, 1], 1)
    dl = _nchwc_ints(c, "dilations", 4, [1, 1, 1, 1], 1)
    t, b, left, right = _nchwc_ints(c, "pads", 4, [0, 0, 0, 0], 0)
    try:
        _, _, (ho, wo) = S.conv_geometry((h, w), wt[2:], st[2:], dl[2:], [t, left, b, right])
    except ValueError as e:
        raise _wrap(c, e) from None
    y = (n, cout // 8, ho, wo, 8)
    if c.has(3) and c.shape(3) != y:
        raise c.error(f"residual input shape {c.shape(3)} must be the output's {y}")
    return [y]


@_shape_fn("_NchwcPool2D")
def _nchwc_pool(c: _Ctx) -> list[Shape]:
    n, cb, h, w, _ = _blocked(c, 0)
    if c.attr("mode") not in ("max", "avg"):
        raise c.error(f"mode must be 'max' or 'avg', not {c.attr('mode')!r}")
    if int(c.attr("global") or 0):
        return [(n, cb, 1, 1, 8)]
    if c.attr("kernel") is None:
        raise c.error("needs a kernel (2 ints) unless global")
    k = _nchwc_ints(c, "kernel", 2, [], 1)
    st = _nchwc_ints(c, "strides", 2, [1, 1], 1)
    dl = _nchwc_ints(c, "dilations", 2, [1, 1], 1)
    t, b, left, right = _nchwc_ints(c, "pads", 4, [0, 0, 0, 0], 0)
    try:
        _, _, (ho, wo) = S.conv_geometry((h, w), k, st, dl, [t, left, b, right])
    except ValueError as e:
        raise _wrap(c, e) from None
    return [(n, cb, ho, wo, 8)]
