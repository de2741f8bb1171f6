"""Lowering of linear algebra, convolution, normalization, softmax and pooling (NCHW)."""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from ... import _shapes as S
from ..._layout import pads4, spatial4
from ._base import RULES, Builder, ConstInput, InputRef, acl_dtype, ints
from .shape import _strided_slice


def _matmul(L: Builder) -> None:
    a, b = L.node.inputs
    out = L.node.outputs[0]
    sa, sb, so = L.shape(a), L.shape(b), L.shape(out)
    dt = L.dtype(out)
    if len(sa) == 1:
        a = L.reshape(a, (1, sa[0]))
    if len(sb) == 1:
        b = L.reshape(b, (sb[0], 1))
    ra, rb = len(L.shape(a)), len(L.shape(b))
    full = S.matmul_shape(L.shape(a), L.shape(b))
    target = out if full == so else L.tmp(full, dt)
    if ra == 2 and rb == 2:
        L.op("MatMulV2", [a, b, None, None], [target], transpose_x1=False, transpose_x2=False, offset_x=0)
    else:
        L.op("BatchMatMulV2", [a, b, None, None], [target], adj_x1=False, adj_x2=False, offset_x=0)
    if target != out:
        L.reshape(target, so, out=out)


def _gemm(L: Builder) -> None:
    a, b = L.node.inputs[:2]
    c = L.node.input(2)
    out = L.node.outputs[0]
    so, dt = L.shape(out), L.dtype(out)
    alpha, beta = float(L.attr("alpha")), float(L.attr("beta"))
    ta, tb = bool(int(L.attr("transA"))), bool(int(L.attr("transB")))
    as_bias = c and alpha == 1.0 and beta == 1.0 and L.shape(c) == (so[1],)
    if as_bias or not c or beta == 0.0:
        mm = out if alpha == 1.0 else L.tmp(so, dt)
        L.op(
            "MatMulV2",
            [a, b, c if as_bias else None, None],
            [mm],
            transpose_x1=ta,
            transpose_x2=tb,
            offset_x=0,
        )
        if alpha != 1.0:
            L.op("Mul", [mm, L.scalar(alpha, dt)], [out])
        return
    mm = L.to("MatMulV2", [a, b, None, None], so, dt, transpose_x1=ta, transpose_x2=tb, offset_x=0)
    if alpha != 1.0:
        mm = L.to("Mul", [mm, L.scalar(alpha, dt)], so, dt)
    cb = c if beta == 1.0 else L.to("Mul", [c, L.scalar(beta, dt)], L.shape(c), dt)
    L.op("Add", [mm, cb], [out])


def _spatial4(L: Builder, v: Sequence[int], n_sp: int, fill: int) -> list[int]:
    """[1, 1, h, w] from per-spatial-dim values (1-D data gets H = ``fill``)."""
    return spatial4(v, h=fill) if n_sp == 1 else spatial4(v)


def _pads4(pb: Sequence[int], pe: Sequence[int]) -> list[int]:
    """[top, bottom, left, right] from ONNX begin/end pads (1-D: top = bottom = 0)."""
    return pads4(pb, pe)


def _to4d(L: Builder, x: str) -> str:
    s = L.shape(x)
    return L.reshape(x, (*s[:2], 1, s[2])) if len(s) == 3 else x


def _conv(L: Builder) -> None:
    x, w = L.node.inputs[:2]
    bias = L.node.input(2) or None
    out = L.node.outputs[0]
    sx, sw = L.shape(x), L.shape(w)
    n_sp = len(sx) - 2
    if n_sp == 3:
        _conv3d(L)
        return
    if n_sp not in (1, 2):
        raise L.fail(f"{n_sp}-D convolution has no CANN lowering here (Conv2D only)")
    kernel = ints(L.attr("kernel_shape")) or list(sw[2:])
    strides = ints(L.attr("strides")) or [1] * n_sp
    dil = ints(L.attr("dilations")) or [1] * n_sp
    pb, pe, _ = S.conv_geometry(sx[2:], kernel, strides, dil, ints(L.attr("pads")), str(L.attr("auto_pad")))
    x4, w4 = _to4d(L, x), _to4d(L, w)
    target = out if n_sp == 2 else L.tmp((*L.shape(out)[:2], 1, L.shape(out)[2]), L.dtype(out))
    L.op(
        "Conv2D",
        [x4, w4, bias, None],
        [target],
        strides=_spatial4(L, strides, n_sp, 1),
        pads=_pads4(pb, pe),
        dilations=_spatial4(L, dil, n_sp, 1),
        groups=int(L.attr("group") or 1),
        data_format="NCHW",
        offset_x=0,
    )
    if target != out:
        L.reshape(target, L.shape(out), out=out)


def _conv_transpose(L: Builder) -> None:
    x, w = L.node.inputs[:2]
    bias = L.node.input(2) or None
    out = L.node.outputs[0]
    sx, sw, so = L.shape(x), L.shape(w), L.shape(out)
    n_sp = len(sx) - 2
    if n_sp == 3:
        _conv_transpose3d(L)
        return
    if n_sp not in (1, 2):
        raise L.fail(f"{n_sp}-D ConvTranspose has no CANN lowering here (Conv2DTranspose only)")
    kernel = ints(L.attr("kernel_shape")) or list(sw[2:])
    strides = ints(L.attr("strides")) or [1] * n_sp
    dil = ints(L.attr("dilations")) or [1] * n_sp
    pb, pe, out_sp = S.conv_transpose_geometry(
        sx[2:],
        kernel,
        strides,
        dil,
        ints(L.attr("pads")),
        str(L.attr("auto_pad")),
        ints(L.attr("output_padding")),
        ints(L.attr("output_shape")),
    )
    # CANN: out = (in-1)*s + k_eff - pads + output_padding; solve for output_padding
    adj = [
        out_sp[i] - ((sx[2 + i] - 1) * strides[i] + (kernel[i] - 1) * dil[i] + 1 - pb[i] - pe[i])
        for i in range(n_sp)
    ]
    x4, w4 = _to4d(L, x), _to4d(L, w)
    so4 = so if n_sp == 2 else (*so[:2], 1, so[2])
    target = out if n_sp == 2 else L.tmp(so4, L.dtype(out))
    L.op(
        "Conv2DTranspose",
        [ConstInput(np.array(so4, np.int32)), x4, w4, bias, None],
        [target],
        strides=_spatial4(L, strides, n_sp, 1),
        pads=_pads4(pb, pe),
        dilations=_spatial4(L, dil, n_sp, 1),
        groups=int(L.attr("group") or 1),
        data_format="NCHW",
        output_padding=[0, 0, *([0] if n_sp == 1 else []), *adj],
        offset_x=0,
    )
    if target != out:
        L.reshape(target, so, out=out)


# ----------------------------------------------------------------------- 3-D convolutions through Conv2D
def _depth_tap_weight(L: Builder, w: str, t: int) -> InputRef:
    """w[:, :, t] of a 3-D filter (O, I, kd, kh, kw) as a 2-D filter (O, I, kh, kw)."""
    sw = L.shape(w)
    c = L.g.constants.get(w)
    if c is not None:
        return ConstInput(np.ascontiguousarray(c[:, :, t]))
    part = L.tmp((sw[0], sw[1], 1, sw[3], sw[4]), L.dtype(w))
    _strided_slice(L, w, [(0, sw[0], 1), (0, sw[1], 1), (t, t + 1, 1), (0, sw[3], 1), (0, sw[4], 1)], part)
    return L.reshape(part, (sw[0], sw[1], sw[3], sw[4]))


def _conv3d(L: Builder) -> None:
    """A 3-D Conv as Conv2D over (N * D_out) depth slices: the depth padding by PadV3, one strided
    depth slice per depth tap, their sum (or, with one group, one Conv2D over the taps stacked as channels)."""
    x, w = L.node.inputs[:2]
    bias = L.node.input(2) or None
    out = L.node.outputs[0]
    sx, sw, so = L.shape(x), L.shape(w), L.shape(out)
    dt = L.dtype(x)
    kernel = ints(L.attr("kernel_shape")) or list(sw[2:])
    strides = ints(L.attr("strides")) or [1, 1, 1]
    dil = ints(L.attr("dilations")) or [1, 1, 1]
    pb, pe, osp = S.conv_geometry(sx[2:], kernel, strides, dil, ints(L.attr("pads")), str(L.attr("auto_pad")))
    g = int(L.attr("group") or 1)
    n, c, d, h, wd = sx
    m, kd = sw[0], kernel[0]
    do = osp[0]
    xp = x
    if pb[0] or pe[0]:
        pads = np.array([[0, 0], [0, 0], [pb[0], pe[0]], [0, 0], [0, 0]], np.int64)
        xp = L.to("PadV3", [x, ConstInput(pads), L.scalar(0, dt)], (n, c, d + pb[0] + pe[0], h, wd), dt,
                  mode="constant", paddings_contiguous=True)  # fmt: skip
    conv2d = dict(strides=spatial4(strides[1:]), pads=pads4(pb[1:], pe[1:]), dilations=spatial4(dil[1:]), groups=g,
                  data_format="NCHW", offset_x=0)  # fmt: skip
    taps = []
    for t in range(kd):
        s0 = t * dil[0]
        sl = L.tmp((n, c, do, h, wd), dt)
        _strided_slice(L, xp, [(0, n, 1), (0, c, 1), (s0, s0 + (do - 1) * strides[0] + 1, strides[0]),
                               (0, h, 1), (0, wd, 1)], sl)  # fmt: skip
        tr = L.to("TransposeD", [sl], (n, do, c, h, wd), dt, perm=[0, 2, 1, 3, 4])
        taps.append(L.reshape(tr, (n * do, c, h, wd)))
    y2 = (n * do, m, so[3], so[4])
    if g == 1 and kd > 1 and L.g.constants.get(w) is not None:
        stacked = L.to("ConcatD", taps, (n * do, kd * c, h, wd), dt, concat_dim=1, N=kd)
        wc = np.asarray(L.g.constants[w])
        w2 = ConstInput(np.ascontiguousarray(wc.transpose(0, 2, 1, 3, 4).reshape(m, kd * sw[1], sw[3], sw[4])))
        acc = L.to("Conv2D", [stacked, w2, bias, None], y2, dt, **conv2d)
    else:
        acc = ""
        for t, tap in enumerate(taps):
            yt = L.to("Conv2D", [tap, _depth_tap_weight(L, w, t), bias if t == 0 else None, None], y2, dt, **conv2d)
            acc = yt if not acc else L.to("Add", [acc, yt], y2, dt)
    five = L.reshape(acc, (n, do, m, so[3], so[4]))
    L.op("TransposeD", [five], [out], perm=[0, 2, 1, 3, 4])


def _conv_transpose3d(L: Builder) -> None:
    """A 3-D ConvTranspose as Conv2DTranspose over (N * D_in) depth slices, one per depth tap, each
    placed at depth i * stride + tap * dilation (zeros between: PadV3 on a split axis), summed, cropped."""
    x, w = L.node.inputs[:2]
    bias = L.node.input(2) or None
    out = L.node.outputs[0]
    sx, sw, so = L.shape(x), L.shape(w), L.shape(out)
    dt = L.dtype(x)
    n, c, d, h, wd = sx
    kernel = ints(L.attr("kernel_shape")) or list(sw[2:])
    strides = ints(L.attr("strides")) or [1, 1, 1]
    dil = ints(L.attr("dilations")) or [1, 1, 1]
    adj = ints(L.attr("output_padding")) or [0, 0, 0]
    pb, pe, osp = S.conv_transpose_geometry(sx[2:], kernel, strides, dil, ints(L.attr("pads")),
                                            str(L.attr("auto_pad")), adj, ints(L.attr("output_shape")))  # fmt: skip
    g = int(L.attr("group") or 1)
    m = so[1]
    ho, wo = osp[1], osp[2]
    sd, kd = strides[0], kernel[0]
    full = max((d - 1) * sd + (kd - 1) * dil[0] + 1 + adj[0], pb[0] + osp[0])
    x_tr = L.to("TransposeD", [x], (n, d, c, h, wd), dt, perm=[0, 2, 1, 3, 4])
    x4 = L.reshape(x_tr, (n * d, c, h, wd))
    hw_adj = [osp[1 + i] - ((sx[3 + i] - 1) * strides[1 + i] + (kernel[1 + i] - 1) * dil[1 + i] + 1 - pb[1 + i]
                            - pe[1 + i]) for i in range(2)]  # fmt: skip
    attrs = dict(strides=spatial4(strides[1:]), pads=pads4(pb[1:], pe[1:]), dilations=spatial4(dil[1:]), groups=g,
                 data_format="NCHW", output_padding=spatial4(hw_adj, fill=0), offset_x=0)  # fmt: skip
    mhw = m * ho * wo
    acc = ""
    for t in range(kd):
        zt = L.to("Conv2DTranspose", [ConstInput(np.array((n * d, m, ho, wo), np.int32)), x4,
                                      _depth_tap_weight(L, w, t), None, None], (n * d, m, ho, wo), dt, **attrs)
        z3 = L.reshape(zt, (n, d, 1, mhw))
        if sd > 1:  # zeros between the input depths: (n, d, sd, mhw) -> (n, d * sd, mhw), cut after the last
            z3 = L.to("PadV3", [z3, ConstInput(np.array([[0, 0], [0, 0], [0, sd - 1], [0, 0]], np.int64)),
                                L.scalar(0, dt)], (n, d, sd, mhw), dt, mode="constant", paddings_contiguous=True)
            z3 = L.reshape(z3, (n, d * sd, mhw))
            span = (d - 1) * sd + 1
            cut = L.tmp((n, span, mhw), dt)
            _strided_slice(L, z3, [(0, n, 1), (0, span, 1), (0, mhw, 1)], cut)
            z3 = cut
        else:
            z3 = L.reshape(z3, (n, d, mhw))
        span = (d - 1) * sd + 1
        before = t * dil[0]
        placed = L.to("PadV3", [z3, ConstInput(np.array([[0, 0], [before, full - before - span], [0, 0]], np.int64)),
                                L.scalar(0, dt)], (n, full, mhw), dt, mode="constant", paddings_contiguous=True)
        acc = placed if not acc else L.to("Add", [acc, placed], (n, full, mhw), dt)
    cropped = L.tmp((n, osp[0], mhw), dt)
    _strided_slice(L, acc, [(0, n, 1), (pb[0], pb[0] + osp[0], 1), (0, mhw, 1)], cropped)
    five = L.reshape(cropped, (n, osp[0], m, ho, wo))
    if bias is None:
        L.op("TransposeD", [five], [out], perm=[0, 2, 1, 3, 4])
        return
    y = L.to("TransposeD", [five], so, dt, perm=[0, 2, 1, 3, 4])
    L.op("Add", [y, L.reshape(bias, (1, m, 1, 1, 1))], [out])


# ----------------------------------------------------------------------- normalization
def _batchnorm(L: Builder) -> None:
    x, scale, b, mean, var = L.node.inputs
    out = L.node.outputs[0]
    s = L.shape(x)
    c = s[1]
    x4 = x if len(s) == 4 else L.reshape(x, (s[0], c, math.prod(s[2:]) if len(s) > 2 else 1, 1))
    target = out if len(s) == 4 else L.tmp(L.shape(x4), L.dtype(out))
    scratch = [L.tmp((c,), np.float32) for _ in range(5)]
    L.op(
        "BatchNorm",
        [x4, scale, b, mean, var],
        [target, *scratch],
        epsilon=float(L.attr("epsilon")),
        data_format="NCHW",
        is_training=False,
    )
    if target != out:
        L.reshape(target, s, out=out)


def _as_nchw(L: Builder, x: str) -> str:
    """A rank-3+ NC... tensor as 4-D NCHW (spatial dims merged into H, W = 1)."""
    s = L.shape(x)
    return x if len(s) == 4 else L.reshape(x, (s[0], s[1], math.prod(s[2:]), 1))


def _instnorm(L: Builder) -> None:
    x, scale, b = L.node.inputs
    out = L.node.outputs[0]
    s, dt = L.shape(x), L.dtype(x)
    x4 = _as_nchw(L, x)
    target = out if len(s) == 4 else L.tmp(L.shape(x4), dt)
    stats = [L.tmp((s[0], s[1], 1, 1), dt) for _ in range(2)]
    L.op("InstanceNorm", [x4, scale, b], [target, *stats], data_format="NCHW", epsilon=float(L.attr("epsilon")))
    if target != out:
        L.reshape(target, s, out=out)


def _groupnorm(L: Builder) -> None:
    x, scale, b = L.node.inputs
    out = L.node.outputs[0]
    s, dt = L.shape(x), L.dtype(x)
    g = int(L.attr("num_groups"))
    c = s[1]
    gb: list[InputRef] = []
    for v in (scale, b):  # opset 18: one scale/bias per group; CANN takes one per channel
        if L.shape(v) == (c,):
            gb.append(v)
            continue
        cv = L.g.constants.get(v)
        if cv is not None:
            gb.append(ConstInput(np.repeat(cv, c // g).astype(cv.dtype)))
        else:
            e = L.to("BroadcastToD", [L.reshape(v, (g, 1))], (g, c // g), L.dtype(v), shape=[g, c // g])
            gb.append(L.reshape(e, (c,)))
    x4 = _as_nchw(L, x)
    target = out if len(s) == 4 else L.tmp(L.shape(x4), dt)
    stats = [L.tmp((s[0], g), dt) for _ in range(2)]
    L.op("GroupNorm", [x4, *gb], [target, *stats], num_groups=g, data_format="NCHW", eps=float(L.attr("epsilon")),
         is_training=False)  # fmt: skip
    if target != out:
        L.reshape(target, s, out=out)


def _layernorm(L: Builder) -> None:
    x, gamma = L.node.inputs[:2]
    beta = L.node.input(2)
    s, dt = L.shape(x), L.dtype(x)
    axis = S.normalize_axis(int(L.attr("axis")), len(s))
    norm = s[axis:]
    eps = float(L.attr("epsilon"))
    if L.shape(gamma) != norm:
        gamma = L.to("BroadcastToD", [gamma], norm, L.dtype(gamma), shape=list(norm))
    beta_ref: InputRef
    if not beta:
        beta_ref = ConstInput(np.zeros(norm, dt))
    elif L.shape(beta) != norm:
        beta_ref = L.to("BroadcastToD", [beta], norm, L.dtype(beta), shape=list(norm))
    else:
        beta_ref = beta
    outs = list(L.node.outputs) + [""] * (3 - len(L.node.outputs))
    stat = (*s[:axis], *([1] * (len(s) - axis)))
    mean = outs[1] or L.tmp(stat, np.float32)
    var = L.tmp(stat, np.float32)
    L.op(
        "LayerNorm",
        [x, gamma, beta_ref],
        [outs[0], mean, var],
        begin_norm_axis=axis,
        begin_params_axis=axis,
        epsilon=eps,
    )
    if outs[2]:
        ve = L.to("Add", [var, L.scalar(eps, np.float32)], stat, np.float32)
        L.op("Rsqrt", [ve], [outs[2]])


def _lrn(L: Builder) -> None:
    x, out = L.node.inputs[0], L.node.outputs[0]
    s, dt = L.shape(x), L.dtype(x)
    size = int(L.attr("size"))
    alpha, beta, bias = (float(L.attr(k)) for k in ("alpha", "beta", "bias"))
    sq = L.to("Mul", [x, x], s, dt)
    flat = (s[0], 1, s[1], math.prod(s[2:]))
    lo = (size - 1) // 2
    avg = L.to(
        "AvgPoolV2",
        [L.reshape(sq, flat)],
        flat,
        dt,
        ksize=[1, 1, size, 1],
        strides=[1, 1, 1, 1],
        padding_mode="CALCULATED",
        pads=[lo, size - 1 - lo, 0, 0],
        data_format="NCHW",
        global_pooling=False,
        ceil_mode=False,
        exclusive=False,
        divisor_override=0,
    )
    # x * (bias + alpha * mean)^-beta as exp(-beta * ln(bias + alpha * mean)): two vectorised
    # passes (the base is at least bias > 0), not a scalar pow per element and a division
    lg = L.to("Log", [L.reshape(avg, s)], s, dt, base=-1.0, scale=alpha, shift=bias)
    den = L.to("Exp", [lg], s, dt, base=-1.0, scale=-beta, shift=0.0)
    L.op("Mul", [x, den], [out])


def _softmax(L: Builder) -> None:
    x = L.node.inputs[0]
    axis = S.normalize_axis(int(L.attr("axis")), len(L.shape(x)))
    if L.node.op_type == "Softmax":
        L.op("SoftmaxV2", [x], L.node.outputs, axes=[axis], half_to_float=False)
    else:
        L.op("LogSoftmaxV2", [x], L.node.outputs, axes=[axis])


def _pool(L: Builder) -> None:
    x, out = L.node.inputs[0], L.node.outputs[0]
    sx = L.shape(x)
    n_sp = len(sx) - 2
    kernel = ints(L.attr("kernel_shape")) or []
    strides = ints(L.attr("strides")) or [1] * n_sp
    dil = ints(L.attr("dilations")) or [1] * n_sp
    pb, pe, out_sp = S.pool_geometry(
        sx[2:], kernel, strides, dil, ints(L.attr("pads")), str(L.attr("auto_pad")), int(L.attr("ceil_mode"))
    )
    with_indices = len(L.node.outputs) > 1 and bool(L.node.outputs[1])  # MaxPool's Indices output
    if any(d != 1 for d in dil) or n_sp not in (1, 2) or with_indices:
        _dilated_pool(L, kernel, strides, dil, pb, pe, out_sp)  # MaxPoolV3/AvgPoolV2: 2-D, no dilations
        return
    x4 = _to4d(L, x)
    so = L.shape(out)
    target = out if n_sp == 2 else L.tmp((*so[:2], 1, so[2]), L.dtype(out))
    common: dict[str, Any] = dict(
        ksize=_spatial4(L, kernel, n_sp, 1),
        strides=_spatial4(L, strides, n_sp, 1),
        padding_mode="CALCULATED",
        pads=_pads4(pb, pe),
        data_format="NCHW",
        global_pooling=False,
        ceil_mode=bool(int(L.attr("ceil_mode"))),
    )
    if L.node.op_type == "MaxPool":
        L.op("MaxPoolV3", [x4], [target], **common)
    else:
        L.op(
            "AvgPoolV2",
            [x4],
            [target],
            **common,
            exclusive=not int(L.attr("count_include_pad")),
            divisor_override=0,
        )
    if target != out:
        L.reshape(target, so, out=out)


def _dilated_pool(
    L: Builder, kernel: list[int], strides: list[int], dil: list[int], pb: list[int], pe: list[int],
    out_sp: tuple[int, ...],
) -> None:  # fmt: skip
    """Pools MaxPoolV3/AvgPoolV2 cannot express (dilated, 3-D and up, MaxPool's Indices): pad once,
    one strided slice per kernel tap, ``Maximum``/``Add`` over the taps, ``Div`` by the window counts.

    Indices (the flat input index of each window's first max, row- or column-major by
    ``storage_order``): a window's index is a per-position base (a const) plus the chosen tap's
    offset (a scalar per tap), tracked over the taps as ``o += (slice > max) * (offset - o)``."""
    x, out = L.node.inputs[0], L.node.outputs[0]
    sx, dt = L.shape(x), L.dtype(x)
    n_sp = len(sx) - 2
    is_max = L.node.op_type == "MaxPool"
    need = [(out_sp[i] - 1) * strides[i] + (kernel[i] - 1) * dil[i] + 1 for i in range(n_sp)]
    extra = [max(0, need[i] - (sx[2 + i] + pb[i] + pe[i])) for i in range(n_sp)]
    pairs = [(0, 0), (0, 0), *((pb[i], pe[i] + extra[i]) for i in range(n_sp))]
    padded = tuple(d + b + e for d, (b, e) in zip(sx, pairs, strict=True))
    fill = (-np.inf if dt.kind == "f" else np.iinfo(dt).min) if is_max else 0
    xp = x
    if any(b or e for b, e in pairs):
        xp = L.to("PadV3", [x, ConstInput(np.array(pairs, np.int64)), L.scalar(fill, dt)], padded, dt,
                  mode="constant", paddings_contiguous=True)  # fmt: skip
    so = (*sx[:2], *out_sp)
    indices = L.node.outputs[1] if is_max and len(L.node.outputs) > 1 and L.node.outputs[1] else None
    sp = sx[2:]
    if int(L.attr("storage_order") if is_max else 0):  # column-major: the first spatial dim varies fastest
        mult = [math.prod(sp[:i]) for i in range(n_sp)]
    else:
        mult = [math.prod(sp[i + 1 :]) for i in range(n_sp)]
    acc: str | None = None
    o: str | None = None  # the chosen tap's offset so far (tap 0's is 0)
    for taps in itertools.product(*(range(k) for k in kernel)):
        ranges = [(0, sx[0], 1), (0, sx[1], 1)] + [
            (taps[i] * dil[i], taps[i] * dil[i] + (out_sp[i] - 1) * strides[i] + 1, strides[i]) for i in range(n_sp)
        ]
        sl = L.tmp(so, dt)
        _strided_slice(L, xp, ranges, sl)
        if acc is None:
            acc = sl
            continue
        if indices is not None:
            off = sum(taps[i] * dil[i] * mult[i] for i in range(n_sp))
            gt = L.to("Cast", [L.to("Greater", [sl, acc], so, np.bool_)], so, np.int64, dst_type=acl_dtype(np.int64))
            if o is None:
                o = L.to("Mul", [gt, L.scalar(off, np.int64)], so, np.int64)
            else:
                step = L.to("Mul", [gt, L.to("Sub", [L.scalar(off, np.int64), o], so, np.int64)], so, np.int64)
                o = L.to("Add", [o, step], so, np.int64)
        acc = L.to("Maximum" if is_max else "Add", [acc, sl], so, dt)
    assert acc is not None
    if is_max:
        L.op("Identity", [acc], [out])
        if indices is not None:
            grids = np.meshgrid(*(np.arange(out_sp[i]) * strides[i] - pb[i] for i in range(n_sp)), indexing="ij")
            base = np.zeros(out_sp, np.int64)
            for g, m in zip(grids, mult, strict=True):
                base += g * m
            base = base.reshape(1, 1, *out_sp)
            nc = (np.arange(sx[0] * sx[1], dtype=np.int64) * math.prod(sp)).reshape(sx[0], sx[1], *[1] * n_sp)
            first: InputRef = ConstInput(base) if o is None else L.to("Add", [o, ConstInput(base)], so, np.int64)
            L.op("Add", [first, ConstInput(nc)], [indices])
        return
    # window counts: positions inside the input (count_include_pad: inside the padded input)
    ones = np.ones(sx[2:], np.float64)
    inc = int(L.attr("count_include_pad"))
    base = np.pad(ones, [(b, e) for b, e in zip(pb, pe, strict=True)], constant_values=float(inc))
    mask = np.pad(base, [(0, e) for e in extra])
    cnt = np.zeros(out_sp)
    for taps in itertools.product(*(range(k) for k in kernel)):
        cnt += mask[tuple(slice(taps[i] * dil[i], taps[i] * dil[i] + (out_sp[i] - 1) * strides[i] + 1, strides[i])
                          for i in range(n_sp))]  # fmt: skip
    L.op("Div", [acc, ConstInput(cnt.reshape(1, 1, *out_sp).astype(dt))], [out])


def _global_pool(L: Builder) -> None:
    x, out = L.node.inputs[0], L.node.outputs[0]
    s = L.shape(x)
    n_sp = len(s) - 2
    if n_sp not in (1, 2):
        raise L.fail(f"{n_sp}-D global pooling has no CANN lowering here")
    x4 = _to4d(L, x)
    spatial = list(L.shape(x4)[2:])
    target = out if n_sp == 2 else L.tmp((*s[:2], 1, 1), L.dtype(out))
    common: dict[str, Any] = dict(
        ksize=[1, 1, *spatial],
        strides=[1, 1, 1, 1],
        padding_mode="VALID",
        pads=[0, 0, 0, 0],
        data_format="NCHW",
        global_pooling=True,
        ceil_mode=False,
    )
    if L.node.op_type == "GlobalMaxPool":
        L.op("MaxPoolV3", [x4], [target], **common)
    else:
        L.op("AvgPoolV2", [x4], [target], **common, exclusive=True, divisor_override=0)
    if target != out:
        L.reshape(target, L.shape(out), out=out)


RULES.update(
    {
        "MatMul": _matmul,
        "Gemm": _gemm,
        "Conv": _conv,
        "ConvTranspose": _conv_transpose,
        "BatchNormalization": _batchnorm,
        "InstanceNormalization": _instnorm,
        "GroupNormalization": _groupnorm,
        "LayerNormalization": _layernorm,
        "LRN": _lrn,
        "Softmax": _softmax,
        "LogSoftmax": _softmax,
        "MaxPool": _pool,
        "AveragePool": _pool,
        "GlobalAveragePool": _global_pool,
        "GlobalMaxPool": _global_pool,
    }
)
