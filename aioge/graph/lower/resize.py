"""Lowering of Resize (Upsample is imported as Resize).

CANN's ``Resize(x, roi, scales, sizes)`` has ONNX-11 semantics with the attrs
``coordinate_transformation_mode``, ``cubic_coeff_a``, ``exclude_outside``,
``extrapolation_value``, ``mode``, ``nearest_mode``.  The newer ONNX inputs are
resolved at compile time: ``axes`` are expanded to full rank (scale 1 and roi
[0, 1] elsewhere); ``keep_aspect_ratio_policy`` gives the output ``sizes``
*and* the per-axis ``scales`` the coordinates use (the host kernel takes both:
sizes is the output shape, scales the coordinate scale).  ``antialias=1`` is
passed as an ``antialias`` attr that only the host runtime's kernel knows (a
:class:`~aioge.graph.errors.LoweringError` for other targets).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..reference_resize import resize_params
from ._base import RULES, Builder, ConstInput, InputRef, const


def _resize(L: Builder) -> None:
    x, out = L.node.inputs[0], L.node.outputs[0]
    sx = L.shape(x)
    vals: list[np.ndarray | None] = []
    for i, what in ((1, "roi"), (2, "scales"), (3, "sizes")):
        if not L.node.input(i):
            vals.append(None)
            continue
        c = const(L, i)
        if c is None:
            raise L.fail(f"Resize {what} must be a constant (the output shape depends on it)")
        vals.append(c)
    shape, scales, roi = resize_params(L.node, sx, *vals)
    if shape != L.shape(out):
        raise L.fail(f"Resize output {L.shape(out)} does not match the computed {shape}")
    given_sizes = vals[2] is not None and np.asarray(vals[2]).size > 0
    policy = str(L.attr("keep_aspect_ratio_policy"))
    ins: list[InputRef] = [x, ConstInput(np.array(roi, np.float32)) if roi is not None else None]
    if given_sizes and policy == "stretch":
        ins += [None, ConstInput(np.array(shape, np.int64))]
    elif given_sizes:
        ins += [ConstInput(np.array(scales, np.float32)), ConstInput(np.array(shape, np.int64))]
    else:
        ins += [ConstInput(np.array(scales, np.float32)), None]
    attrs: dict[str, Any] = {
        "coordinate_transformation_mode": str(L.attr("coordinate_transformation_mode")),
        "cubic_coeff_a": float(L.attr("cubic_coeff_a")),
        "exclude_outside": int(L.attr("exclude_outside")),
        "extrapolation_value": float(L.attr("extrapolation_value")),
        "mode": str(L.attr("mode")),
        "nearest_mode": str(L.attr("nearest_mode")),
    }
    if int(L.attr("antialias")):
        if not L.target.host_ops:
            raise L.fail(f"antialias has no CANN Resize attr (the {L.target.name!r} target cannot run it)")
        attrs["antialias"] = 1
    L.op("Resize", ins, [out], **attrs)


RULES.update({"Resize": _resize})
