"""Neural-network ops: softmax family, normalisations, convolution, pooling.

Spatial ops take ``data_format="NCHW"`` (default) or ``"NHWC"`` for ``x``
and the result; convolution weights are always ONNX layout
``(C_out, C_in / groups, kH, kW)`` (``(C_in, C_out / groups, kH, kW)`` for
the transpose).  ``pads`` follow ONNX: ``(top, left, bottom, right)``, or
``(pad_h, pad_w)``, or one int.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from .. import _shapes, dtypes
from .._layout import pads4, spatial4
from ..runtime.stream import Tensor
from ._common import FLOATS, check_dtype, emit, host_ints, int_list, normalize_axis, require_tensor

__all__ = (
    "avg_pool2d",
    "batch_norm",
    "conv2d",
    "conv_transpose2d",
    "global_avg_pool",
    "layer_norm",
    "log_softmax",
    "lrn",
    "max_pool2d",
    "rms_norm",
    "softmax",
)

_NCHW, _NHWC, _ND = int(dtypes.Format.NCHW), int(dtypes.Format.NHWC), int(dtypes.Format.ND)
IntPair = int | Sequence[int]


def _fmt(data_format: str, op: str) -> int:
    if data_format == "NCHW":
        return _NCHW
    if data_format == "NHWC":
        return _NHWC
    raise ValueError(f"{op}: data_format must be 'NCHW' or 'NHWC', got {data_format!r}")


def _spatial(x: Tensor, data_format: str, op: str) -> tuple[int, int, int, int]:
    """(N, C, H, W) of a 4-D tensor in the given layout."""
    if x.ndim != 4:
        raise ValueError(f"{op}: x must be 4-D ({data_format}), got shape {x.shape}")
    if data_format == "NCHW":
        n, c, h, w = x.shape
    else:
        n, h, w, c = x.shape
    return n, c, h, w


def _out4(n: int, c: int, h: int, w: int, data_format: str) -> tuple[int, int, int, int]:
    return (n, c, h, w) if data_format == "NCHW" else (n, h, w, c)


def _onnx_pads(pads: Any, op: str) -> tuple[int, int, int, int]:
    """ONNX pads as (top, left, bottom, right): 4 values as given, 2 as (pad_h, pad_w), 1 everywhere."""
    p = int_list(pads, None, op, "pads")
    if len(p) == 1:
        p = p * 4
    elif len(p) == 2:
        p = (p[0], p[1], p[0], p[1])
    elif len(p) != 4:
        raise ValueError(f"{op}: pads must have 1, 2 or 4 values (ONNX order top, left, bottom, right), got {len(p)}")
    if any(v < 0 for v in p):
        raise ValueError(f"{op}: pads must be >= 0, got {p}")
    return (p[0], p[1], p[2], p[3])


def _window(
    op: str,
    size: tuple[int, int],
    kernel: tuple[int, ...],
    strides: tuple[int, ...],
    dilations: tuple[int, ...],
    pads: Any,
    auto_pad: str,
    ceil_mode: bool | None = None,
) -> tuple[list[int], tuple[int, int]]:
    """CANN pads ``[top, bottom, left, right]`` and the output (H, W) of a 2-D convolution
    (``ceil_mode`` None) or pooling window, by aioge._shapes' geometry (the graph compiler's)."""
    if auto_pad in ("NOTSET", ""):
        p = _onnx_pads(pads, op)
        begin, end = [p[0], p[1]], [p[2], p[3]]
    else:
        try:
            begin, end = _shapes.auto_pads(size, kernel, strides, dilations, auto_pad)
        except ValueError as e:
            raise ValueError(f"{op}: {e}") from None
    onnx_pads = [*begin, *end]
    try:
        if ceil_mode is None:
            _, _, out = _shapes.conv_geometry(size, kernel, strides, dilations, onnx_pads)
        else:
            _, _, out = _shapes.pool_geometry(size, kernel, strides, dilations, onnx_pads, ceil_mode=int(ceil_mode))
    except ValueError:
        eff = tuple((k - 1) * d + 1 for k, d in zip(kernel, dilations, strict=True))
        padded = tuple(n + b + e for n, b, e in zip(size, begin, end, strict=True))
        dilated = f" (dilated {eff})" if eff != tuple(kernel) else ""
        raise ValueError(f"{op}: kernel {tuple(kernel)}{dilated} is larger than the padded input {padded}") from None
    return pads4(begin, end), (out[0], out[1])


def _pos(v: tuple[int, ...], op: str, what: str) -> tuple[int, ...]:
    if any(x < 1 for x in v):
        raise ValueError(f"{op}: {what} must be >= 1, got {v}")
    return v


# ------------------------------------------------------------------ softmax
def softmax(x: Any, axis: int = -1) -> Tensor:
    """``exp(x - max) / sum(exp(x - max))`` along ``axis`` (CANN ``SoftmaxV2``, attr ``axes``).

    Example:
        >>> p = aioge.ops.softmax(logits, axis=-1)
    """
    x = require_tensor(x)
    check_dtype("softmax", x.dtype, FLOATS)
    ax = normalize_axis(axis, x.ndim, "softmax")
    return emit("SoftmaxV2", [x], [(x.shape, x.dtype)], {"axes": [ax]})[0]


def log_softmax(x: Any, axis: int = -1) -> Tensor:
    """``x - max - log(sum(exp(x - max)))`` along ``axis`` (CANN ``LogSoftmaxV2``).

    Example:
        >>> lp = aioge.ops.log_softmax(logits)
    """
    x = require_tensor(x)
    check_dtype("log_softmax", x.dtype, FLOATS)
    ax = normalize_axis(axis, x.ndim, "log_softmax")
    return emit("LogSoftmaxV2", [x], [(x.shape, x.dtype)], {"axes": [ax]})[0]


# ------------------------------------------------------------ normalisation
def _param(value: Any, x: Tensor, shape: tuple[int, ...], op: str, what: str) -> Tensor:
    t = require_tensor(value, what)
    if t.dtype != x.dtype and t.dtype != np.dtype(np.float32):
        raise TypeError(f"{op}: {what} has dtype {t.dtype}, x has {x.dtype}")
    if t.size != int(np.prod(shape)) or (t.ndim and t.shape[-1] != (shape[-1] if shape else 1)):
        raise ValueError(f"{op}: {what} has shape {t.shape}, expected {shape}")
    return t


def layer_norm(x: Any, weight: Any = None, bias: Any = None, axis: int = -1, epsilon: float = 1e-5) -> Tensor:
    """ONNX ``LayerNormalization``: normalise over ``x.shape[axis:]`` (biased variance), then
    ``* weight + bias`` (CANN ``LayerNorm``: ``begin_norm_axis`` = ``begin_params_axis`` = axis).

    Example:
        >>> y = aioge.ops.layer_norm(x, gamma, beta, axis=-1, epsilon=1e-5)
    """
    x = require_tensor(x)
    check_dtype("layer_norm", x.dtype, FLOATS)
    if x.ndim == 0:
        raise ValueError("layer_norm: x must have rank >= 1")
    ax = normalize_axis(axis, x.ndim, "layer_norm")
    norm_shape = x.shape[ax:]
    g = None if weight is None else _param(weight, x, norm_shape, "layer_norm", "weight")
    b = None if bias is None else _param(bias, x, norm_shape, "layer_norm", "bias")
    if g is not None and b is not None and g.dtype != b.dtype:
        raise TypeError(f"layer_norm: weight and bias have different dtypes ({g.dtype}, {b.dtype})")
    stat = (*x.shape[:ax], *([1] * (x.ndim - ax)))
    outs = emit(
        "LayerNorm",
        [x, g, b],
        [(x.shape, x.dtype), (stat, x.dtype), (stat, x.dtype)],
        {"begin_norm_axis": ax, "begin_params_axis": ax, "epsilon": float(epsilon)},
    )
    return outs[0]


def rms_norm(x: Any, weight: Any, epsilon: float = 1e-6) -> Tensor:
    """RMS normalisation over the trailing ``weight.ndim`` dims:
    ``x / sqrt(mean(x**2) + epsilon) * weight`` (CANN ``RmsNorm``).

    Example:
        >>> y = aioge.ops.rms_norm(x, gamma)     # gamma.shape == x.shape[-1:]
    """
    x = require_tensor(x)
    check_dtype("rms_norm", x.dtype, FLOATS)
    g = require_tensor(weight, "weight")
    if g.ndim == 0 or g.ndim > x.ndim or x.shape[x.ndim - g.ndim :] != g.shape:
        raise ValueError(f"rms_norm: weight shape {g.shape} must equal the trailing dims of x {x.shape}")
    if g.dtype != x.dtype and g.dtype != np.dtype(np.float32):
        raise TypeError(f"rms_norm: weight has dtype {g.dtype}, x has {x.dtype}")
    ax = x.ndim - g.ndim
    stat = (*x.shape[:ax], *([1] * g.ndim))
    return emit("RmsNorm", [x, g], [(x.shape, x.dtype), (stat, x.dtype)], {"epsilon": float(epsilon)})[0]


def batch_norm(
    x: Any, scale: Any, bias: Any, mean: Any, var: Any, epsilon: float = 1e-5, data_format: str = "NCHW"
) -> Tensor:
    """Inference batch normalisation (ONNX ``BatchNormalization``):
    ``(x - mean) / sqrt(var + epsilon) * scale + bias`` per channel (CANN ``BatchNorm``,
    ``is_training=false``).  ``x`` is 4-D in ``data_format`` or 2-D ``(N, C)``.

    Example:
        >>> y = aioge.ops.batch_norm(x, gamma, beta, running_mean, running_var)
    """
    x = require_tensor(x)
    check_dtype("batch_norm", x.dtype, FLOATS)
    fmt = _fmt(data_format, "batch_norm")
    if x.ndim == 4:
        c = x.shape[1] if data_format == "NCHW" else x.shape[3]
    elif x.ndim == 2:
        c = x.shape[1]
        fmt = _ND
    else:
        raise ValueError(f"batch_norm: x must be 4-D or 2-D, got shape {x.shape}")
    params = [require_tensor(t, n) for t, n in ((scale, "scale"), (bias, "bias"), (mean, "mean"), (var, "var"))]
    pdt = params[0].dtype
    for t, n in zip(params, ("scale", "bias", "mean", "var"), strict=False):
        if t.shape != (c,):
            raise ValueError(f"batch_norm: {n} must have shape ({c},), got {t.shape}")
        if t.dtype != pdt or (pdt != x.dtype and pdt != np.dtype(np.float32)):
            raise TypeError(f"batch_norm: {n} has dtype {t.dtype}, expected {x.dtype} or float32 for all params")
    attrs: dict[str, Any] = {"epsilon": float(epsilon), "is_training": False}
    if x.ndim == 4:
        attrs["data_format"] = data_format
    outs = emit(
        "BatchNorm",
        [x, *params],
        [(x.shape, x.dtype)] + [((c,), pdt)] * 4,
        attrs,
        formats=[fmt, _ND, _ND, _ND, _ND, fmt, _ND, _ND, _ND, _ND],
    )
    return outs[0]


def lrn(
    x: Any, size: int, alpha: float = 1e-4, beta: float = 0.75, bias: float = 1.0, data_format: str = "NCHW"
) -> Tensor:
    """ONNX ``LRN`` across channels: ``x / (bias + alpha / size * sum(x**2 over size channels))**beta``
    (CANN ``LRN`` with ``depth_radius = (size - 1) / 2`` and ``alpha / size``).

    Example:
        >>> y = aioge.ops.lrn(x, size=5)
    """
    x = require_tensor(x)
    check_dtype("lrn", x.dtype, FLOATS)
    fmt = _fmt(data_format, "lrn")
    _spatial(x, data_format, "lrn")
    if size < 1 or size % 2 == 0:
        raise ValueError(f"lrn: size must be a positive odd number, got {size}")
    attrs = {
        "depth_radius": (size - 1) // 2,
        "alpha": float(alpha) / size,
        "beta": float(beta),
        "bias": float(bias),
        "norm_region": "ACROSS_CHANNELS",
        "data_format": data_format,
    }
    return emit("LRN", [x], [(x.shape, x.dtype)], attrs, formats=[fmt, fmt])[0]


# -------------------------------------------------------------- convolution
def _conv_operands(
    op: str, x: Any, weight: Any, layout: str, strides: IntPair, dilations: IntPair, data_format: str
) -> tuple[Tensor, Tensor, int, tuple[int, int, int, int], tuple[int, ...], tuple[int, ...]]:
    """The checks a 2-D convolution and its transpose share: ``(x, w, format, (N, C, H, W),
    strides, dilations)``; ``layout`` names the weight's leading dims in messages."""
    x = require_tensor(x)
    w = require_tensor(weight, "weight")
    check_dtype(op, x.dtype, FLOATS)
    if w.dtype != x.dtype:
        raise TypeError(f"{op}: weight has dtype {w.dtype}, x has {x.dtype}")
    fmt = _fmt(data_format, op)
    nchw = _spatial(x, data_format, op)
    if w.ndim != 4:
        raise ValueError(f"{op}: weight must be 4-D ({layout}, kH, kW), got {w.shape}")
    s = _pos(int_list(strides, 2, op, "strides"), op, "strides")
    d = _pos(int_list(dilations, 2, op, "dilations"), op, "dilations")
    return x, w, fmt, nchw, s, d


def _conv_bias(op: str, bias: Any, co: int, x: Tensor) -> Tensor | None:
    if bias is None:
        return None
    b = require_tensor(bias, "bias")
    if b.shape != (co,) or b.dtype != x.dtype:
        raise ValueError(f"{op}: bias must be ({co},) {x.dtype}, got {b.shape} {b.dtype}")
    return b


def _conv_attrs(s: tuple[int, ...], p: list[int], d: tuple[int, ...], groups: int, data_format: str) -> dict[str, Any]:
    return {
        "strides": spatial4(s, data_format),
        "pads": p,
        "dilations": spatial4(d, data_format),
        "groups": int(groups),
        "data_format": data_format,
    }


def conv2d(
    x: Any,
    weight: Any,
    bias: Any = None,
    *,
    strides: IntPair = 1,
    pads: Any = 0,
    dilations: IntPair = 1,
    groups: int = 1,
    auto_pad: str = "NOTSET",
    data_format: str = "NCHW",
) -> Tensor:
    """ONNX ``Conv`` in 2-D (CANN ``Conv2D``): ``weight`` is ``(C_out, C_in / groups, kH, kW)``,
    ``bias`` ``(C_out,)``; ``groups == C_in`` is a depthwise convolution.

    Example:
        >>> y = aioge.ops.conv2d(x, w, b, strides=2, pads=1)
    """
    x, w, fmt, (n, c, h, wd), s, d = _conv_operands(
        "conv2d", x, weight, "C_out, C_in/groups", strides, dilations, data_format
    )
    co, ci, kh, kw = w.shape
    if groups < 1 or c % groups or co % groups or ci * groups != c:
        raise ValueError(f"conv2d: weight {w.shape} does not fit {c} input channels with groups={groups}")
    p, (ho, wo) = _window("conv2d", (h, wd), (kh, kw), s, d, pads, auto_pad)
    b = _conv_bias("conv2d", bias, co, x)
    attrs = _conv_attrs(s, p, d, groups, data_format)
    return emit(
        "Conv2D",
        [x, w, b, None],
        [(_out4(n, co, ho, wo, data_format), x.dtype)],
        attrs,
        formats=[fmt, _NCHW, _ND, _ND, fmt],
    )[0]


def conv_transpose2d(
    x: Any,
    weight: Any,
    bias: Any = None,
    *,
    strides: IntPair = 1,
    pads: Any = 0,
    dilations: IntPair = 1,
    groups: int = 1,
    output_padding: IntPair = 0,
    data_format: str = "NCHW",
) -> Tensor:
    """ONNX ``ConvTranspose`` in 2-D (CANN ``Conv2DTranspose``): ``weight`` is
    ``(C_in, C_out / groups, kH, kW)``; the output size is
    ``s * (H - 1) + output_padding + d * (k - 1) + 1 - pad_begin - pad_end``.

    Example:
        >>> y = aioge.ops.conv_transpose2d(x, w, strides=2, pads=1, output_padding=1)
    """
    x, w, fmt, (n, c, h, wd), s, d = _conv_operands(
        "conv_transpose2d", x, weight, "C_in, C_out/groups", strides, dilations, data_format
    )
    wc, cog, kh, kw = w.shape
    if groups < 1 or wc != c or c % groups:
        raise ValueError(f"conv_transpose2d: weight {w.shape} does not fit {c} input channels with groups={groups}")
    co = cog * groups
    op_ = int_list(output_padding, 2, "conv_transpose2d", "output_padding")
    onnx_pads = _onnx_pads(pads, "conv_transpose2d")
    for i in range(2):
        if not 0 <= op_[i] < max(s[i], d[i]):
            raise ValueError(f"conv_transpose2d: output_padding {op_} must be in [0, max(stride, dilation))")
    try:
        _, _, (ho, wo) = _shapes.conv_transpose_geometry((h, wd), (kh, kw), s, d, onnx_pads, output_padding=op_)
    except ValueError:
        raise ValueError(
            f"conv_transpose2d: the output would be empty (input {(h, wd)}, kernel {(kh, kw)}, pads {onnx_pads})"
        ) from None
    b = _conv_bias("conv_transpose2d", bias, co, x)
    out = _out4(n, co, ho, wo, data_format)
    attrs = _conv_attrs(s, pads4(onnx_pads[:2], onnx_pads[2:]), d, groups, data_format)
    attrs["output_padding"] = spatial4(op_, data_format, fill=0)
    return emit(
        "Conv2DTranspose",
        [host_ints(out), x, w, b, None],
        [(out, x.dtype)],
        attrs,
        formats=[_ND, fmt, _NCHW, _ND, _ND, fmt],
    )[0]


# ------------------------------------------------------------------ pooling
def _pool(
    op_type: str,
    name: str,
    x: Any,
    kernel_shape: IntPair,
    strides: IntPair | None,
    pads: Any,
    ceil_mode: bool,
    auto_pad: str,
    data_format: str,
    extra: dict[str, Any],
) -> Tensor:
    x = require_tensor(x)
    allowed = FLOATS if op_type == "AvgPoolV2" else FLOATS | {np.dtype(t) for t in ("int8", "uint8", "int32", "int64")}
    check_dtype(name, x.dtype, frozenset(allowed))
    fmt = _fmt(data_format, name)
    n, c, h, w = _spatial(x, data_format, name)
    k = _pos(int_list(kernel_shape, 2, name, "kernel_shape"), name, "kernel_shape")
    s = _pos(int_list(1 if strides is None else strides, 2, name, "strides"), name, "strides")
    p, size = _window(name, (h, w), k, s, (1, 1), pads, auto_pad, bool(ceil_mode))
    attrs = {
        "ksize": spatial4(k, data_format),
        "strides": spatial4(s, data_format),
        "padding_mode": "CALCULATED",
        "pads": p,
        "data_format": data_format,
        "global_pooling": False,
        "ceil_mode": bool(ceil_mode),
        **extra,
    }
    return emit(op_type, [x], [(_out4(n, c, size[0], size[1], data_format), x.dtype)], attrs, formats=[fmt, fmt])[0]


def max_pool2d(
    x: Any,
    kernel_shape: IntPair,
    strides: IntPair | None = None,
    pads: Any = 0,
    *,
    ceil_mode: bool = False,
    auto_pad: str = "NOTSET",
    data_format: str = "NCHW",
) -> Tensor:
    """ONNX ``MaxPool`` in 2-D (CANN ``MaxPoolV3``); padding never wins a max.
    ``strides`` defaults to 1 (ONNX).

    Example:
        >>> y = aioge.ops.max_pool2d(x, kernel_shape=3, strides=2, pads=1)
    """
    return _pool("MaxPoolV3", "max_pool2d", x, kernel_shape, strides, pads, ceil_mode, auto_pad, data_format, {})


def avg_pool2d(
    x: Any,
    kernel_shape: IntPair,
    strides: IntPair | None = None,
    pads: Any = 0,
    *,
    ceil_mode: bool = False,
    count_include_pad: bool = False,
    auto_pad: str = "NOTSET",
    data_format: str = "NCHW",
) -> Tensor:
    """ONNX ``AveragePool`` in 2-D (CANN ``AvgPoolV2``, ``exclusive = not count_include_pad``).

    Example:
        >>> y = aioge.ops.avg_pool2d(x, kernel_shape=2, strides=2)
    """
    return _pool(
        "AvgPoolV2",
        "avg_pool2d",
        x,
        kernel_shape,
        strides,
        pads,
        ceil_mode,
        auto_pad,
        data_format,
        {"exclusive": not count_include_pad},
    )


def global_avg_pool(x: Any, data_format: str = "NCHW") -> Tensor:
    """ONNX ``GlobalAveragePool``: mean over H and W, keeping them as size 1
    (CANN ``AvgPoolV2`` with ``global_pooling``).

    Example:
        >>> y = aioge.ops.global_avg_pool(x)          # (N, C, H, W) -> (N, C, 1, 1)
    """
    x = require_tensor(x)
    check_dtype("global_avg_pool", x.dtype, FLOATS)
    fmt = _fmt(data_format, "global_avg_pool")
    n, c, h, w = _spatial(x, data_format, "global_avg_pool")
    if h == 0 or w == 0:
        raise ValueError("global_avg_pool: empty spatial dims")
    attrs = {
        "ksize": spatial4((h, w), data_format),
        "strides": [1, 1, 1, 1],
        "padding_mode": "VALID",
        "pads": [0, 0, 0, 0],
        "data_format": data_format,
        "global_pooling": True,
    }
    return emit("AvgPoolV2", [x], [(_out4(n, c, 1, 1, data_format), x.dtype)], attrs, formats=[fmt, fmt])[0]
