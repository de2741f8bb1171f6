"""CANN's conventions for 4-D (image) operands, in one place for the typed ops
(:mod:`aioge.ops`), the graph compiler's lowering and the runtime's descriptors.

* Which op types describe their 4-D operands as NCHW (``NCHW_OPS``); every other
  operand is ND.  A convolution's weight is always ONNX layout, described NCHW, whatever
  the activation's ``data_format``.
* The 4-value window attrs of a 2-D op (``strides``, ``dilations``, ``ksize``,
  ``output_padding``) list N, C, H, W in ``data_format`` order (:func:`spatial4`).
* ``pads`` are ``[top, bottom, left, right]`` (:func:`pads4`); ONNX orders them
  ``[top, left, bottom, right]`` (all begins, then all ends).

Pure: no other aioge module is imported.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

__all__ = ("NCHW_OPS", "data_format", "pads4", "spatial4", "conv2d_attrs")

#: op types whose 4-D operands are described as NCHW (everything else is ND)
NCHW_OPS = frozenset(
    {
        "Conv2D",
        "Conv2DTranspose",
        "DepthwiseConv2D",
        "MaxPoolV3",
        "AvgPoolV2",
        "BatchNorm",
        "LRN",
        "ResizeNearestNeighborV2",
        "ResizeBilinearV2",
        "ResizeBicubic",
        "DepthToSpace",
        "SpaceToDepth",
        "InstanceNorm",
        "GroupNorm",
        "_FusedConv",
        "_FusedConv2D",
    }
)


def data_format(op_type: str, rank: int) -> str:
    """``"NCHW"`` for the 4-D operands of :data:`NCHW_OPS`, else ``"ND"``."""
    return "NCHW" if rank == 4 and op_type in NCHW_OPS else "ND"


def spatial4(hw: Sequence[int], data_format: str = "NCHW", *, fill: int = 1, h: int = 1) -> list[int]:
    """A CANN 4-value window attr from its per-spatial-dim values: N and C get ``fill``; 1-D
    values (a 1-D op run as 2-D with H = 1) get ``h`` for H."""
    hh, ww = (h, hw[0]) if len(hw) == 1 else (hw[0], hw[1])
    return [fill, fill, int(hh), int(ww)] if data_format == "NCHW" else [fill, int(hh), int(ww), fill]


def pads4(begin: Sequence[int], end: Sequence[int]) -> list[int]:
    """CANN ``[top, bottom, left, right]`` from per-spatial-dim begin and end pads (1-D: no
    top or bottom pad)."""
    if len(begin) == 1:
        return [0, 0, int(begin[0]), int(end[0])]
    return [int(begin[0]), int(end[0]), int(begin[1]), int(end[1])]


def conv2d_attrs(attrs: Mapping[str, Any]) -> dict[str, Any]:
    """The host conv kernels' attrs (``_FusedConv2D``, ``_NchwcConv2D``) from a 2-D ``_FusedConv``'s
    explicit ONNX-style attrs: ``strides``/``dilations`` ``[1, 1, h, w]``, ``pads`` ``[top, bottom,
    left, right]``, ``groups``, and ``activation`` with the params it reads, unless it is ``"none"``."""
    st, dl = list(attrs.get("strides", [1, 1])), list(attrs.get("dilations", [1, 1]))
    pads = list(attrs.get("pads", [0, 0, 0, 0]))  # ONNX: top, left, bottom, right
    conv: dict[str, Any] = {"strides": spatial4(st), "pads": pads4(pads[:2], pads[2:]), "dilations": spatial4(dl),
                            "groups": int(attrs.get("group", 1))}  # fmt: skip
    act = str(attrs.get("activation", "none"))
    if act == "none":
        return conv
    conv["activation"] = act
    if act == "LeakyRelu":
        conv["alpha"] = float(attrs.get("alpha", 0.01))
    elif act == "Clip":
        conv["min"], conv["max"] = float(attrs.get("min", -math.inf)), float(attrs.get("max", math.inf))
    return conv
