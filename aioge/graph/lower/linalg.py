"""Lowering of Einsum, MatMulInteger and (de)quantization into CANN ops.

=====================  ==================================================================
Einsum                 diagonals: ``Mul`` by an identity mask + ``ReduceSumD``; letters only
                       one operand has: ``ReduceSumD``; every pair of operands:
                       ``TransposeD`` to (batch, free, contracted) / (batch, contracted,
                       free), ``Reshape`` to 3-D, ``BatchMatMulV2``, ``Reshape``; the result
                       ``TransposeD`` into the output order (CANN's ``Einsum`` takes a
                       subset of equations; these ops take every one)
MatMulInteger          ``Cast`` to float64 (exact for |sum| < 2^53), ``Sub`` the zero points,
                       ``MatMulV2`` / ``BatchMatMulV2``, ``Cast`` to int32
QuantizeLinear         ``Div`` scale, ``Round`` (half to even), ``Add`` zero point,
                       ``ClipByValue`` to the type's range, ``Cast`` (CANN's ``AscendQuant``
                       multiplies by 1/scale and rounds half away: not ONNX's result)
DequantizeLinear       ``Cast`` to float32, ``Sub`` zero point, ``Mul`` scale (``Cast`` to
                       float16/bfloat16 scales' type)
=====================  ==================================================================

Per-axis scales are reshaped to broadcast along their axis; blocked scales
(``block_size``) are repeated along it at compile time (they must be constants).
"""

from __future__ import annotations

import math

import numpy as np

from ... import _shapes as S
from ._base import RULES, Builder, ConstInput, InputRef, acl_dtype, const


# ----------------------------------------------------------------------- Einsum
class _Term:
    """An operand during the contraction: its value name and one letter per axis."""

    def __init__(self, name: str, letters: str) -> None:
        self.name, self.letters = name, letters


def _transpose(L: Builder, t: _Term, order: str) -> _Term:
    if order == t.letters:
        return t
    perm = [t.letters.index(ch) for ch in order]
    s = L.shape(t.name)
    out = L.to("TransposeD", [t.name], [s[p] for p in perm], L.dtype(t.name), perm=perm)
    return _Term(out, order)


def _sum_out(L: Builder, t: _Term, drop: str) -> _Term:
    if not drop:
        return t
    axes = [t.letters.index(ch) for ch in drop]
    keep = "".join(ch for ch in t.letters if ch not in drop)
    s = L.shape(t.name)
    out = L.to("ReduceSumD", [t.name], [d for i, d in enumerate(s) if i not in axes], L.dtype(t.name),
               axes=axes, keep_dims=False)  # fmt: skip
    return _Term(out, keep)


def _diagonals(L: Builder, t: _Term) -> _Term:
    """``ii`` -> ``i``: multiply by an identity mask, then sum the second axis away."""
    while len(set(t.letters)) != len(t.letters):
        ch = next(c for c in t.letters if t.letters.count(c) > 1)
        p = t.letters.index(ch)
        q = t.letters.index(ch, p + 1)
        s = L.shape(t.name)
        mshape = [1] * len(s)
        mshape[p], mshape[q] = s[p], s[q]
        mask = np.eye(s[p], dtype=L.dtype(t.name)).reshape(mshape)
        m = L.to("Mul", [t.name, ConstInput(mask)], s, L.dtype(t.name))
        out = L.to("ReduceSumD", [m], [d for i, d in enumerate(s) if i != q], L.dtype(t.name), axes=[q],
                   keep_dims=False)  # fmt: skip
        t = _Term(out, t.letters[:q] + t.letters[q + 1 :])
    return t


def _expand(L: Builder, t: _Term, sizes: dict[str, int]) -> _Term:
    """Broadcast size-1 ellipsis dims to the size the equation gives them."""
    s = L.shape(t.name)
    want = [sizes[ch] for ch in t.letters]
    if list(s) == want:
        return t
    out = L.to("BroadcastToD", [t.name], want, L.dtype(t.name), shape=want)
    return _Term(out, t.letters)


def _contract(L: Builder, a: _Term, b: _Term, needed: set[str], sizes: dict[str, int]) -> _Term:
    batch = "".join(ch for ch in a.letters if ch in b.letters and ch in needed)
    inner = "".join(ch for ch in a.letters if ch in b.letters and ch not in needed)
    fa = "".join(ch for ch in a.letters if ch not in b.letters)
    fb = "".join(ch for ch in b.letters if ch not in a.letters)
    a = _transpose(L, _expand(L, a, sizes), batch + fa + inner)
    b = _transpose(L, _expand(L, b, sizes), batch + inner + fb)
    nb, m, k, n = (math.prod(sizes[ch] for ch in part) for part in (batch, fa, inner, fb))
    dt = L.dtype(a.name)
    a3 = L.reshape(a.name, (nb, m, k))
    b3 = L.reshape(b.name, (nb, k, n))
    y = L.to("BatchMatMulV2", [a3, b3, None, None], (nb, m, n), dt, adj_x1=False, adj_x2=False, offset_x=0)
    letters = batch + fa + fb
    return _Term(L.reshape(y, [sizes[ch] for ch in letters]), letters)


def _einsum(L: Builder) -> None:
    out = L.node.outputs[0]
    ins, target, sizes = S.parse_einsum(str(L.attr("equation")), [L.shape(x) for x in L.node.inputs])
    terms = [_diagonals(L, _Term(x, letters)) for x, letters in zip(L.node.inputs, ins, strict=True)]
    for i, t in enumerate(terms):  # letters no other operand nor the output has: sum them now
        others = set(target).union(*(o.letters for j, o in enumerate(terms) if j != i))
        terms[i] = _sum_out(L, t, "".join(ch for ch in t.letters if ch not in others))
    acc = terms[0]
    for i, t in enumerate(terms[1:], start=1):
        needed = set(target).union(*(o.letters for o in terms[i + 1 :]))
        acc = _contract(L, acc, t, needed, sizes)
    acc = _sum_out(L, acc, "".join(ch for ch in acc.letters if ch not in target))
    acc = _expand(L, _transpose(L, acc, target), sizes)
    L.op("Identity", [acc.name], [out])


# ----------------------------------------------------------------------- integer matmul, quantization
def _zero_point_f64(L: Builder, i: int, shape: tuple[int, ...]) -> InputRef:
    name = L.node.input(i)
    if not name:
        return None
    c = const(L, i)
    if c is not None:
        return ConstInput(c.astype(np.float64).reshape(shape if c.size > 1 else ()))
    zp = L.to("Cast", [name], L.shape(name), np.float64, dst_type=acl_dtype(np.float64))
    return L.reshape(zp, shape) if L.shape(name) != shape and math.prod(L.shape(name)) > 1 else zp


def _matmul_integer(L: Builder) -> None:
    a, b = L.node.inputs[:2]
    out = L.node.outputs[0]
    sa, sb, so = L.shape(a), L.shape(b), L.shape(out)
    ops: list[str] = []
    for x, zi, zshape in ((a, 2, (sa[-2] if len(sa) > 1 else 1, 1)), (b, 3, (sb[-1],))):
        f = L.to("Cast", [x], L.shape(x), np.float64, dst_type=acl_dtype(np.float64))
        zp = _zero_point_f64(L, zi, zshape)
        ops.append(L.to("Sub", [f, zp], L.shape(x), np.float64) if zp is not None else f)
    fa, fb = ops
    if len(sa) == 1:
        fa = L.reshape(fa, (1, sa[0]))
    if len(sb) == 1:
        fb = L.reshape(fb, (sb[0], 1))
    full = S.matmul_shape(L.shape(fa), L.shape(fb))
    two = len(L.shape(fa)) == 2 and len(L.shape(fb)) == 2
    y = L.to("MatMulV2" if two else "BatchMatMulV2", [fa, fb, None, None], full, np.float64,
             **({"transpose_x1": False, "transpose_x2": False} if two else {"adj_x1": False, "adj_x2": False}),
             offset_x=0)  # fmt: skip
    if full != so:
        y = L.reshape(y, so)
    L.op("Cast", [y], [out], dst_type=acl_dtype(np.int32))


def _broadcast_param(L: Builder, i: int, xshape: tuple[int, ...], dtype: np.dtype) -> InputRef:
    """Scale or zero point ``i`` broadcastable to x (scalar, per axis, or blocked), in ``dtype``."""
    name = L.node.input(i)
    if not name:
        return None
    rank = len(xshape)
    block = int(L.attr("block_size") or 0)
    c = const(L, i)
    s = L.shape(name)
    if block:
        a = S.normalize_axis(int(L.attr("axis")), rank)
        if c is not None:
            rep = np.repeat(c, block, axis=a)[tuple(slice(0, d) for d in xshape)]
            return ConstInput(rep.astype(dtype))
        return _repeat_blocks(L, name, a, block, xshape, dtype)
    if math.prod(s) == 1:
        if c is not None:
            return ConstInput(np.asarray(c, dtype).reshape(()))
        v: str = name if L.dtype(name) == dtype else L.to("Cast", [name], s, dtype, dst_type=acl_dtype(dtype))
        return L.reshape(v, ()) if s != () else v
    a = S.normalize_axis(int(L.attr("axis")), rank)
    bshape = tuple(-1 if j == a else 1 for j in range(rank))
    if c is not None:
        return ConstInput(np.asarray(c, dtype).reshape(bshape))
    v = name if L.dtype(name) == dtype else L.to("Cast", [name], s, dtype, dst_type=acl_dtype(dtype))
    return L.reshape(v, tuple(xshape[a] if j == a else 1 for j in range(rank)))


def _repeat_blocks(L: Builder, v: str, a: int, block: int, xshape: tuple[int, ...], dtype: np.dtype) -> str:
    """Each entry of ``v`` along axis ``a`` repeated ``block`` times, cut to x's extent."""
    s = L.shape(v)
    if L.dtype(v) != dtype:
        v = L.to("Cast", [v], s, dtype, dst_type=acl_dtype(dtype))
    nb = s[a]
    ins = L.reshape(v, (*s[: a + 1], 1, *s[a + 1 :]))
    wide = (*s[: a + 1], block, *s[a + 1 :])
    e = L.to("BroadcastToD", [ins], wide, dtype, shape=list(wide))
    flat = L.reshape(e, (*s[:a], nb * block, *s[a + 1 :]))
    if nb * block == xshape[a]:
        return flat
    from .shape import _strided_slice

    out = L.tmp(xshape, dtype)
    _strided_slice(L, flat, [(0, xshape[a], 1) if i == a else (0, d, 1) for i, d in enumerate(s)], out)
    return out


def _quantize(L: Builder) -> None:
    x, out = L.node.inputs[0], L.node.outputs[0]
    sx, odt = L.shape(x), L.dtype(out)
    f32 = np.dtype(np.float32)
    xf: str = x if L.dtype(x) == f32 else L.to("Cast", [x], sx, f32, dst_type=acl_dtype(f32))
    q = L.to("Div", [xf, _broadcast_param(L, 1, sx, f32)], sx, f32)
    q = L.to("Round", [q], sx, f32)
    zp = _broadcast_param(L, 2, sx, f32)
    if zp is not None:
        q = L.to("Add", [q, zp], sx, f32)
    info = np.iinfo(odt)
    q = L.to("ClipByValue", [q, L.scalar(info.min, f32), L.scalar(info.max, f32)], sx, f32)
    L.op("Cast", [q], [out], dst_type=acl_dtype(odt))


def _dequantize(L: Builder) -> None:
    x, out = L.node.inputs[0], L.node.outputs[0]
    sx, odt = L.shape(x), L.dtype(out)
    f32 = np.dtype(np.float32)
    v = L.to("Cast", [x], sx, f32, dst_type=acl_dtype(f32))
    zp = _broadcast_param(L, 2, sx, f32)
    if zp is not None:
        v = L.to("Sub", [v, zp], sx, f32)
    if odt == f32:
        L.op("Mul", [v, _broadcast_param(L, 1, sx, f32)], [out])
        return
    y = L.to("Mul", [v, _broadcast_param(L, 1, sx, f32)], sx, f32)
    L.op("Cast", [y], [out], dst_type=acl_dtype(odt))


RULES.update(
    {
        "Einsum": _einsum,
        "MatMulInteger": _matmul_integer,
        "QuantizeLinear": _quantize,
        "DequantizeLinear": _dequantize,
    }
)
