"""The one shape algebra of aioge: broadcasting, axes, convolution/pooling geometry,
slicing, reshaping, splitting, padding, matmul, einsum, resize.

Shared by the typed ops (:mod:`aioge.ops`) and the graph compiler (shape inference,
the reference executor, lowering).  All functions are pure (numpy and the standard
library only, below every other aioge module) and raise ``ValueError`` with a short
reason; callers wrap it into their own error, which names the op or the node.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

__all__ = (
    "broadcast_shapes",
    "normalize_axis",
    "normalize_axes",
    "auto_pads",
    "conv_geometry",
    "pool_geometry",
    "conv_transpose_geometry",
    "slice_ranges",
    "reshape_target",
    "squeeze_shape",
    "unsqueeze_shape",
    "split_sizes",
    "pad_pairs",
    "matmul_shape",
    "parse_einsum",
    "resize_output_shape",
)

Shape = tuple[int, ...]


def broadcast_shapes(*shapes: Sequence[int]) -> Shape:
    """numpy/ONNX multidirectional broadcast."""
    if shapes:
        first = shapes[0]
        for s in shapes:
            if s != first:
                break
        else:  # all equal (elementwise ops on one shape): that shape
            return tuple(first)
    rank = max((len(s) for s in shapes), default=0)
    out = [1] * rank
    for s in shapes:
        for i, d in enumerate(s):
            j = rank - len(s) + i
            if d == out[j] or d == 1:
                continue
            if out[j] == 1:
                out[j] = d
            else:
                raise ValueError(f"shapes {[tuple(x) for x in shapes]} do not broadcast")
    return tuple(out)


def normalize_axis(axis: int, rank: int, *, allow_end: bool = False) -> int:
    """Map a possibly negative axis into ``[0, rank)`` (``[0, rank]`` if ``allow_end``)."""
    hi = rank + 1 if allow_end else rank
    a = axis + rank if axis < 0 else axis
    if not 0 <= a < hi:
        raise ValueError(f"axis {axis} out of range for rank {rank}")
    return a


def normalize_axes(axes: Sequence[int], rank: int) -> list[int]:
    """Normalized, duplicate-checked axes."""
    out = [normalize_axis(int(a), rank) for a in axes]
    if len(set(out)) != len(out):
        raise ValueError(f"duplicate axes {list(axes)}")
    return out


def _auto_pads(in_size: int, k_eff: int, stride: int, mode: str) -> tuple[int, int, int]:
    out = -(-in_size // stride)
    total = max(0, (out - 1) * stride + k_eff - in_size)
    if mode == "SAME_UPPER":
        return total // 2, total - total // 2, out
    return total - total // 2, total // 2, out


def auto_pads(
    in_spatial: Sequence[int],
    kernel: Sequence[int],
    strides: Sequence[int],
    dilations: Sequence[int],
    auto_pad: str,
) -> tuple[list[int], list[int]]:
    """(pads_begin, pads_end) that ONNX ``auto_pad`` (``SAME_UPPER``, ``SAME_LOWER``,
    ``VALID``) gives a window op; the odd pad goes to the end with ``SAME_UPPER``."""
    if auto_pad == "VALID":
        return [0] * len(in_spatial), [0] * len(in_spatial)
    if auto_pad not in ("SAME_UPPER", "SAME_LOWER"):
        raise ValueError(f"auto_pad must be NOTSET, SAME_UPPER, SAME_LOWER or VALID, got {auto_pad!r}")
    pb, pe = [], []
    for i, size in enumerate(in_spatial):
        b, e, _ = _auto_pads(size, (kernel[i] - 1) * dilations[i] + 1, strides[i], auto_pad)
        pb.append(b)
        pe.append(e)
    return pb, pe


def _spatial_params(
    n: int,
    kernel: Sequence[int],
    strides: Sequence[int] | None,
    dilations: Sequence[int] | None,
    pads: Sequence[int] | None,
) -> tuple[list[int], list[int], list[int]]:
    strides = list(strides) if strides else [1] * n
    dilations = list(dilations) if dilations else [1] * n
    pads = list(pads) if pads else [0] * (2 * n)
    if len(kernel) != n or len(strides) != n or len(dilations) != n or len(pads) != 2 * n:
        raise ValueError(
            f"kernel {list(kernel)}, strides {strides}, dilations {dilations}, pads {pads} do not fit {n} spatial dims"
        )
    # min over each list (no generator per list): the lists are n or 2n long, empty only when n is 0
    if n and (min(strides) <= 0 or min(dilations) <= 0 or min(pads) < 0):
        raise ValueError("strides and dilations must be positive and pads non-negative")
    return strides, dilations, pads


def conv_geometry(
    in_spatial: Sequence[int],
    kernel: Sequence[int],
    strides: Sequence[int] | None,
    dilations: Sequence[int] | None,
    pads: Sequence[int] | None,
    auto_pad: str = "NOTSET",
) -> tuple[list[int], list[int], Shape]:
    """(pads_begin, pads_end, output spatial shape) of an ONNX Conv: a pooling window's
    geometry (floor mode) that must leave every output dim non-empty."""
    pb, pe, out = pool_geometry(in_spatial, kernel, strides, dilations, pads, auto_pad)
    if out and min(out) <= 0:
        raise ValueError(f"kernel {list(kernel)} does not fit input {list(in_spatial)} with pads")
    return pb, pe, out


def pool_geometry(
    in_spatial: Sequence[int],
    kernel: Sequence[int],
    strides: Sequence[int] | None,
    dilations: Sequence[int] | None,
    pads: Sequence[int] | None,
    auto_pad: str = "NOTSET",
    ceil_mode: int = 0,
) -> tuple[list[int], list[int], Shape]:
    """(pads_begin, pads_end, output spatial shape) of ONNX MaxPool/AveragePool.

    With ``ceil_mode`` a last window that would start in the end padding is dropped
    (ONNX/onnxruntime rule).
    """
    n = len(in_spatial)
    strides, dilations, pads = _spatial_params(n, kernel, strides, dilations, pads)
    pb, pe, out = [], [], []
    same, valid = auto_pad in ("SAME_UPPER", "SAME_LOWER"), auto_pad == "VALID"
    for i in range(n):
        k_eff = (kernel[i] - 1) * dilations[i] + 1
        if same:
            b, e, o = _auto_pads(in_spatial[i], k_eff, strides[i], auto_pad)
        else:
            b, e = (0, 0) if valid else (pads[i], pads[i + n])
            span = in_spatial[i] + b + e - k_eff
            if span < 0:
                raise ValueError(f"kernel {list(kernel)} does not fit input {list(in_spatial)} with pads")
            if ceil_mode:
                o = -(-span // strides[i]) + 1
                if (o - 1) * strides[i] >= in_spatial[i] + b:
                    o -= 1
            else:
                o = span // strides[i] + 1
        pb.append(b)
        pe.append(e)
        out.append(o)
    return pb, pe, tuple(out)


def conv_transpose_geometry(
    in_spatial: Sequence[int],
    kernel: Sequence[int],
    strides: Sequence[int] | None,
    dilations: Sequence[int] | None,
    pads: Sequence[int] | None,
    auto_pad: str = "NOTSET",
    output_padding: Sequence[int] | None = None,
    output_shape: Sequence[int] | None = None,
) -> tuple[list[int], list[int], Shape]:
    """(pads_begin, pads_end, output spatial shape) of ONNX ConvTranspose, as onnxruntime computes it."""
    n = len(in_spatial)
    strides, dilations, pads = _spatial_params(n, kernel, strides, dilations, pads)
    adj = list(output_padding) if output_padding else [0] * n
    if output_shape is not None and len(output_shape) not in (n, n + 2):
        raise ValueError(f"output_shape {list(output_shape)} does not fit {n} spatial dims")
    want = list(output_shape[-n:]) if output_shape else None
    pb, pe, out = [], [], []
    for i in range(n):
        k_eff = (kernel[i] - 1) * dilations[i] + 1
        full = (in_spatial[i] - 1) * strides[i] + adj[i] + k_eff
        same = auto_pad in ("SAME_UPPER", "SAME_LOWER")
        if want is not None or same:
            # onnxruntime (checked against 1.32): SAME_UPPER puts the odd pad at the tail, others at the head
            total = max(0, full - (want[i] if want is not None else in_spatial[i] * strides[i]))
            b, e = (total // 2, total - total // 2) if auto_pad == "SAME_UPPER" else (total - total // 2, total // 2)
            o = want[i] if want is not None else full - b - e
        else:
            b, e = (0, 0) if auto_pad == "VALID" else (pads[i], pads[i + n])
            o = full - b - e
        if o <= 0:
            raise ValueError("ConvTranspose output would be empty")
        pb.append(b)
        pe.append(e)
        out.append(o)
    return pb, pe, tuple(out)


def slice_ranges(
    shape: Sequence[int],
    starts: Sequence[int],
    ends: Sequence[int],
    axes: Sequence[int] | None,
    steps: Sequence[int] | None,
) -> list[tuple[int, int, int]]:
    """Per-dimension (start, stop, step) after ONNX Slice clamping.

    ``stop`` may be ``-1`` for a negative step that runs through index 0; the
    length of a dimension is ``len(range(start, stop, step))``.
    """
    rank = len(shape)
    axes = list(axes) if axes is not None else list(range(len(starts)))
    steps = list(steps) if steps is not None else [1] * len(starts)
    if not len(starts) == len(ends) == len(axes) == len(steps):
        raise ValueError("starts, ends, axes and steps must have the same length")
    out = [(0, d, 1) for d in shape]
    for s, e, a, st in zip(starts, ends, normalize_axes(axes, rank), steps, strict=False):
        d = shape[a]
        s, e, st = int(s), int(e), int(st)
        if st == 0:
            raise ValueError("Slice step must not be 0")
        s = s + d if s < 0 else s
        e = e + d if e < 0 else e
        if st > 0:
            s, e = min(max(s, 0), d), min(max(e, 0), d)
        else:
            s, e = min(max(s, 0), d - 1), min(max(e, -1), d - 1)
        out[a] = (s, e, st)
    return out


def range_len(start: int, stop: int, step: int) -> int:
    """len(range(start, stop, step))."""
    return len(range(start, stop, step))


def reshape_target(in_shape: Sequence[int], shape: Sequence[int], allowzero: int = 0) -> Shape:
    """Resolve ONNX Reshape's ``0`` and ``-1`` entries."""
    total = math.prod(in_shape)
    out = []
    neg = -1
    for i, d in enumerate(int(x) for x in shape):
        if d == 0 and not allowzero:
            if i >= len(in_shape):
                raise ValueError(f"shape {list(shape)} copies dim {i} that input {list(in_shape)} lacks")
            d = in_shape[i]
        if d == -1:
            if neg >= 0:
                raise ValueError(f"shape {list(shape)} has more than one -1")
            neg = i
            out.append(1)
            continue
        if d < 0:
            raise ValueError(f"invalid dim {d} in shape {list(shape)}")
        out.append(d)
    known = math.prod(out)
    if neg >= 0:
        if known == 0 or total % known:
            raise ValueError(f"cannot reshape {list(in_shape)} into {list(shape)}")
        out[neg] = total // known
    elif known != total:
        raise ValueError(f"cannot reshape {list(in_shape)} ({total} elements) into {list(shape)}")
    return tuple(out)


def squeeze_shape(in_shape: Sequence[int], axes: Sequence[int] | None) -> Shape:
    """Squeeze the given axes (all size-1 axes if ``None``)."""
    if axes is None:
        return tuple(d for d in in_shape if d != 1)
    ax = set(normalize_axes(axes, len(in_shape)))
    for a in ax:
        if in_shape[a] != 1:
            raise ValueError(f"cannot squeeze axis {a} of size {in_shape[a]}")
    return tuple(d for i, d in enumerate(in_shape) if i not in ax)


def unsqueeze_shape(in_shape: Sequence[int], axes: Sequence[int]) -> Shape:
    """Insert size-1 axes (axes refer to the output rank)."""
    rank = len(in_shape) + len(axes)
    if len(axes) == 1:  # the usual case (one axis): spliced in, no set or generator
        a = normalize_axis(int(axes[0]), rank)
        return (*in_shape[:a], 1, *in_shape[a:])
    ax = set(normalize_axes(axes, rank))
    it = iter(in_shape)
    return tuple(1 if i in ax else next(it) for i in range(rank))


def split_sizes(dim: int, n_outputs: int, split: Sequence[int] | None) -> list[int]:
    """Sizes of ONNX Split: explicit, or equal parts with a smaller last part."""
    if split is not None:
        split = [int(s) for s in split]
        if len(split) != n_outputs or sum(split) != dim or any(s < 0 for s in split):
            raise ValueError(f"split {split} does not cut a dim of {dim} into {n_outputs} parts")
        return split
    if n_outputs <= 0:
        raise ValueError("Split needs at least one output")
    chunk = -(-dim // n_outputs)
    sizes = [min(chunk, max(0, dim - chunk * i)) for i in range(n_outputs)]
    if sum(sizes) != dim:
        raise ValueError(f"cannot split {dim} into {n_outputs} parts")
    return sizes


def pad_pairs(rank: int, pads: Sequence[int], axes: Sequence[int] | None) -> list[tuple[int, int]]:
    """Per-dimension (begin, end) pads of ONNX Pad (pads may be negative: crop)."""
    axes = list(range(rank)) if axes is None else normalize_axes(axes, rank)
    pads = [int(p) for p in pads]
    if len(pads) != 2 * len(axes):
        raise ValueError(f"pads {pads} do not fit axes {axes}")
    out = [(0, 0)] * rank
    n = len(axes)
    for i, a in enumerate(axes):
        out[a] = (pads[i], pads[i + n])
    return out


def matmul_shape(a: Sequence[int], b: Sequence[int]) -> Shape:
    """numpy.matmul result shape."""
    if not a or not b:
        raise ValueError("MatMul operands must have rank >= 1")
    a2 = (1, *a) if len(a) == 1 else tuple(a)
    b2 = (*b, 1) if len(b) == 1 else tuple(b)
    if a2[-1] != b2[-2]:
        raise ValueError(f"MatMul inner dimensions differ: {list(a)} @ {list(b)}")
    batch = broadcast_shapes(a2[:-2], b2[:-2])
    out = (*batch, a2[-2], b2[-1])
    if len(a) == 1:
        out = out[:-2] + out[-1:]
    if len(b) == 1:
        out = out[:-1]
    return out


_EINSUM_LETTERS = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"


def parse_einsum(equation: str, shapes: Sequence[Sequence[int]]) -> tuple[list[str], str, dict[str, int]]:
    """ONNX/numpy Einsum: (input subscripts, output subscripts, letter -> size).

    Subscripts are upper- and lower-case letters (case matters: ``a`` and
    ``A`` are two axes); spaces anywhere are ignored. ``...`` is expanded into
    letters the equation does not use, one per broadcast dim (they broadcast
    numpy-style); any other letter must have one size everywhere. An implicit
    output (no ``->``) is the ellipsis dims, then the letters that appear
    exactly once in ASCII order (upper case first), as numpy does. The result
    uses only ASCII letters, so it can be handed to ``numpy.einsum``.
    """
    eq = "".join(equation.split())
    lhs, arrow, rhs = eq.partition("->")
    terms = lhs.split(",")
    if len(terms) != len(shapes):
        raise ValueError(f"equation {equation!r} has {len(terms)} operands, {len(shapes)} inputs given")
    for term in [*terms, rhs]:
        rest = term.replace("...", "", 1)
        if not all(ch in _EINSUM_LETTERS for ch in rest):
            raise ValueError(
                f"equation {equation!r}: subscripts must be letters (a-z, A-Z), with at most one '...' per operand"
            )
    ell_rank = max((len(s) - len(t.replace("...", "")) for t, s in zip(terms, shapes, strict=True) if "..." in t),
                   default=0)  # fmt: skip
    free = [ch for ch in _EINSUM_LETTERS if ch not in eq]
    if ell_rank > len(free):
        raise ValueError(f"equation {equation!r}: more than 52 distinct axes (letters and '...' dims)")
    ell = "".join(free[:ell_rank])
    ins: list[str] = []
    sizes: dict[str, int] = {}
    for term, shape in zip(terms, shapes, strict=True):
        if "..." in term:
            k = len(shape) - len(term) + 3
            if k < 0:
                raise ValueError(f"operand {term!r} of {equation!r} has rank {len(shape)}, too small")
            term = term.replace("...", ell[ell_rank - k :])
        if len(term) != len(shape):
            raise ValueError(f"operand {term!r} of {equation!r} does not match rank {len(shape)}")
        for ch, d in zip(term, shape, strict=True):
            old = sizes.get(ch)
            if old is None or (ch in ell and old == 1):
                sizes[ch] = int(d)
            elif old != d and not (ch in ell and d == 1):
                raise ValueError(f"subscript {ch!r} has sizes {old} and {d} in {equation!r}")
        ins.append(term)
    if arrow:
        out = rhs.replace("...", ell)
        if len(set(out)) != len(out) or any(ch not in sizes for ch in out):
            raise ValueError(f"bad output subscripts in {equation!r}")
    else:
        counts = {ch: sum(t.count(ch) for t in ins) for ch in sizes}
        out = ell + "".join(sorted(ch for ch in sizes if ch not in ell and counts[ch] == 1))
    return ins, out, sizes


def resize_output_shape(
    in_shape: Sequence[int],
    scales: Sequence[float] | None,
    sizes: Sequence[int] | None,
    axes: Sequence[int] | None,
    policy: str,
) -> tuple[Shape, list[float]]:
    """(output shape, full-rank scales) of ONNX Resize.

    ``scales``/``sizes`` refer to ``axes`` (default all); ``policy`` is
    keep_aspect_ratio_policy (``stretch``, ``not_larger``, ``not_smaller``).
    From scales the output is ``floor(input * scale)`` with the float32 scale
    (the roi of tf_crop_and_resize does not change it, as in the ONNX reference).
    """
    rank = len(in_shape)
    ax = normalize_axes(axes, rank) if axes is not None else list(range(rank))
    full_scales = [1.0] * rank
    out = list(in_shape)
    if sizes is not None:
        if len(sizes) != len(ax) or any(int(s) < 0 for s in sizes):
            raise ValueError(f"sizes {list(sizes)} do not fit axes {ax}")
        if policy == "stretch":
            for a, s in zip(ax, sizes, strict=True):
                out[a] = int(s)
                full_scales[a] = int(s) / in_shape[a] if in_shape[a] else 1.0
        elif policy in ("not_larger", "not_smaller"):
            ratios = [int(s) / in_shape[a] for a, s in zip(ax, sizes, strict=True) if in_shape[a]]
            r = (min if policy == "not_larger" else max)(ratios) if ratios else 1.0
            for a in ax:
                out[a] = int(in_shape[a] * r + 0.5)  # round half up, as the ONNX reference
                full_scales[a] = r
        else:
            raise ValueError(f"unknown keep_aspect_ratio_policy {policy!r}")
    elif scales is not None:
        if len(scales) != len(ax) or any(not float(s) > 0 for s in scales):
            raise ValueError(f"scales {list(scales)} must be positive and fit axes {ax}")
        for a, sc in zip(ax, scales, strict=True):
            s32 = float(np.float32(sc))
            out[a] = math.floor(in_shape[a] * s32)
            full_scales[a] = s32
    else:
        raise ValueError("Resize needs scales or sizes")
    return tuple(out), full_scales
