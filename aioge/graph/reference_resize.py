"""ONNX Resize (and Upsample, which the importer rewrites into it): the numpy reference.

Separable: every resized axis is interpolated on its own, with per-output
(index, weight) taps computed by :func:`axis_taps` -- the same taps the host
kernel (``cffi_build/hostrt/kernels/resize.c``) computes.  Modes ``nearest``
(``round_prefer_floor``, ``round_prefer_ceil``, ``floor``, ``ceil``),
``linear`` and ``cubic`` (``cubic_coeff_a``), every
``coordinate_transformation_mode`` (``half_pixel``, ``half_pixel_symmetric``,
``pytorch_half_pixel``, ``align_corners``, ``asymmetric``,
``tf_half_pixel_for_nn``, ``tf_crop_and_resize`` with ``extrapolation_value``),
``exclude_outside``, ``antialias`` (linear/cubic downscaling), ``axes`` and
``keep_aspect_ratio_policy``.  Interpolation runs in float64 and is cast back
(integers rounded half to even and saturated), as the ONNX reference does.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from .. import _shapes as S
from .ir import Node
from .reference_base import Arr, _attrs, _kernel
from .schema import get_attr

__all__ = ("resize_params", "axis_taps", "resize_array", "source_coordinate")


def resize_params(
    node: Node, x_shape: Sequence[int], roi: Any, scales: Any, sizes: Any
) -> tuple[tuple[int, ...], list[float], list[float] | None]:
    """(output shape, full-rank scales, full-rank roi or None) of a Resize node.

    Raises:
        ValueError: scales/sizes/roi that do not fit.
    """
    rank = len(x_shape)
    axes_attr = get_attr(node, "axes")
    axes = S.normalize_axes([int(a) for a in axes_attr], rank) if axes_attr is not None else list(range(rank))
    ctm = str(get_attr(node, "coordinate_transformation_mode"))
    roi_v = None if roi is None or np.asarray(roi).size == 0 else [float(v) for v in np.asarray(roi).reshape(-1)]
    sc = None if scales is None or np.asarray(scales).size == 0 else [float(v) for v in np.asarray(scales).reshape(-1)]
    sz = None if sizes is None or np.asarray(sizes).size == 0 else [int(v) for v in np.asarray(sizes).reshape(-1)]
    if sc is not None and sz is not None:
        raise ValueError("Resize takes scales or sizes, not both")
    if roi_v is not None and len(roi_v) != 2 * len(axes):
        raise ValueError(f"roi has {len(roi_v)} values, expected {2 * len(axes)}")
    full_roi = None
    if ctm == "tf_crop_and_resize":
        if roi_v is None:
            raise ValueError("tf_crop_and_resize needs roi")
        full_roi = [0.0] * rank + [1.0] * rank
        for i, a in enumerate(axes):
            full_roi[a], full_roi[rank + a] = roi_v[i], roi_v[len(axes) + i]
    out, full_scales = S.resize_output_shape(x_shape, sc, sz, axes, str(get_attr(node, "keep_aspect_ratio_policy")))
    return out, full_scales, full_roi


def source_coordinate(ctm: str, y: Arr, scale: float, in_len: int, out_len: int, roi: tuple[float, float]) -> Arr:
    """Input coordinates of output positions ``y`` along one axis (float64)."""
    out_w = scale * in_len  # the (fractional) output length the scale implies
    if ctm == "align_corners":
        return np.zeros_like(y) if out_w == 1 else y * (in_len - 1) / (out_w - 1)
    if ctm == "asymmetric":
        return y / scale
    if ctm == "tf_half_pixel_for_nn":
        return (y + 0.5) / scale
    if ctm == "tf_crop_and_resize":
        start, end = roi
        if out_w == 1:
            return np.full_like(y, (end - start) * (in_len - 1) / 2 + start * (in_len - 1))
        return y * (end - start) * (in_len - 1) / (out_w - 1) + start * (in_len - 1)
    if ctm == "pytorch_half_pixel":
        return np.full_like(y, -0.5) if out_w == 1 else (y + 0.5) / scale - 0.5
    if ctm == "half_pixel":
        return (y + 0.5) / scale - 0.5
    if ctm == "half_pixel_symmetric":
        offset = in_len / 2 * (1 - out_len / out_w)
        return offset + (y + 0.5) / scale - 0.5
    raise ValueError(f"unknown coordinate_transformation_mode {ctm!r}")


def _cubic(x: Arr, a: float) -> Arr:
    x = np.abs(x)
    x2, x3 = x * x, x * x * x
    near = (a + 2) * x3 - (a + 3) * x2 + 1
    far = a * x3 - 5 * a * x2 + 8 * a * x - 4 * a
    return np.where(x <= 1, near, np.where(x < 2, far, 0.0))


def axis_taps(
    mode: str, nearest_mode: str, ctm: str, scale: float, in_len: int, out_len: int,
    roi: tuple[float, float], cubic_a: float, exclude_outside: bool, antialias: bool,
) -> tuple[Arr, Arr, Arr]:  # fmt: skip
    """(indices [out, n] clamped into the input, weights [out, n], extrapolated [out]) of one axis."""
    y = np.arange(out_len, dtype=np.float64)
    x = source_coordinate(ctm, y, scale, in_len, out_len, roi)
    extrap = (x < 0) | (x > in_len - 1) if ctm == "tf_crop_and_resize" else np.zeros(out_len, bool)
    x0 = np.floor(x)
    ratio = np.where(x == x0, 1.0, x - x0)  # in (0, 1]: the left neighbour is x0 (or x - 1 at an integer)
    left = np.where(x == x0, x0 - 1, x0).astype(np.int64)
    if mode == "nearest":
        if nearest_mode == "round_prefer_floor":
            right = ratio > 0.5
        elif nearest_mode == "round_prefer_ceil":
            right = ratio >= 0.5
        elif nearest_mode == "floor":
            right = ratio == 1.0
        elif nearest_mode == "ceil":
            right = np.ones(out_len, bool)
        else:
            raise ValueError(f"unknown nearest_mode {nearest_mode!r}")
        idx = (left + right.astype(np.int64)).reshape(-1, 1)
        w = np.ones((out_len, 1))
    else:
        # taps left + offs, from the filter's support stretched by 1/scale when antialiasing a downscale
        s = min(scale, 1.0) if antialias else 1.0
        support = 1.0 if mode == "linear" else 2.0
        start = int(math.floor(-support / s) + 1)
        offs = np.arange(start, 2 - start)
        idx = left[:, None] + offs[None, :]
        d = (offs[None, :] - ratio[:, None]) * s  # x sits at left + ratio
        if mode == "linear":
            w = np.clip(1 - np.abs(d), 0, 1)
        elif mode == "cubic":
            w = _cubic(d, cubic_a)
        else:
            raise ValueError(f"unknown mode {mode!r}")
        if antialias:
            w = w / w.sum(axis=1, keepdims=True)
    if exclude_outside:
        w = np.where((idx < 0) | (idx >= in_len), 0.0, w)
        tot = w.sum(axis=1, keepdims=True)
        w = w / np.where(tot == 0, 1.0, tot)
    return np.clip(idx, 0, max(in_len - 1, 0)), w, extrap


def resize_array(
    x: Arr, out_shape: Sequence[int], scales: Sequence[float], roi: Sequence[float] | None, attrs: dict[str, Any]
) -> Arr:
    """Resize ``x`` to ``out_shape`` (full-rank scales and roi; see the module docstring)."""
    rank = x.ndim
    y = x.astype(np.float64)
    extrap_mask = np.zeros(tuple(out_shape), bool) if attrs["coordinate_transformation_mode"] == "tf_crop_and_resize" \
        else None  # fmt: skip
    for a in range(rank):
        r = (roi[a], roi[rank + a]) if roi is not None else (0.0, 1.0)
        if out_shape[a] == x.shape[a] and math.isclose(scales[a], 1.0) and r == (0.0, 1.0):
            continue
        if out_shape[a] == 0 or x.shape[a] == 0:
            y = np.zeros((*y.shape[:a], out_shape[a], *y.shape[a + 1 :]))
            continue
        idx, w, ex = axis_taps(
            str(attrs["mode"]), str(attrs["nearest_mode"]), str(attrs["coordinate_transformation_mode"]),
            float(scales[a]), x.shape[a], int(out_shape[a]), r, float(attrs["cubic_coeff_a"]),
            bool(int(attrs["exclude_outside"])), bool(int(attrs["antialias"])),
        )  # fmt: skip
        g = np.take(y, idx, axis=a)  # (..., out, n, ...)
        shp = (1,) * a + w.shape + (1,) * (rank - a - 1)
        y = (g * w.reshape(shp)).sum(axis=a + 1)
        if extrap_mask is not None and ex.any():
            extrap_mask |= ex.reshape((1,) * a + (-1,) + (1,) * (rank - a - 1))
    if extrap_mask is not None:
        y = np.where(extrap_mask, float(attrs["extrapolation_value"]), y)
    if x.dtype.kind in "iu":
        info = np.iinfo(x.dtype)
        return np.clip(np.rint(y), info.min, info.max).astype(x.dtype)
    return np.ascontiguousarray(y, dtype=x.dtype)


@_kernel("Resize")
def _resize(node: Node, xs: list[Any]) -> list[Arr]:

    x = xs[0]
    get = [xs[i] if len(xs) > i else None for i in (1, 2, 3)]
    out, scales, roi = resize_params(node, x.shape, *get)
    attrs = _attrs(node)
    if attrs["mode"] == "nearest" and int(attrs["antialias"]):
        raise ValueError("antialias does not apply to mode 'nearest'")
    return [resize_array(x, out, scales, roi, attrs)]
