"""Operator fusion that pays on the host.

Three rewrites, applied in this order by :func:`fuse`:

1. **Conv + BatchNormalization folding** (:func:`fold_conv_batchnorm`): a
   ``Conv`` with constant weights whose only consumer is an inference
   ``BatchNormalization`` with constant parameters becomes one ``Conv`` with
   ``W' = W * s`` and ``B' = (B - mean) * s + beta``, ``s = scale / sqrt(var + eps)``
   (``s`` and ``B'`` computed in float64; ``W * s`` in float32 for float32 weights, as
   onnxruntime folds, else in float64; stored in the weight dtype).  So does a chain of
   ``Mul``/``Div``/``Add``/``Sub`` by constants that are per output channel
   (shape ``(C, 1, ...)`` aligned to the conv's output, or one element), each
   the only consumer of the value before it: BatchNormalization as older
   exporters (Caffe2, inception_v2) write it.  ``Mul``/``Div`` scale ``W``
   and ``B``, ``Add``/``Sub`` shift ``B``; a ``Div`` by a channel holding 0
   stops the chain (its infinities are the graph's to produce).

2. **Bias + activation fusion** (:func:`fuse_bias_activation`), after exporters' decomposed erf
   and tanh Gelu became one ``Gelu`` (:func:`fuse_gelu`): ``Conv``,
   ``MatMul`` or ``Gemm``, [for MatMul/Gemm without a C input: optionally
   followed by ``Mul``/``Div`` by a scalar constant], optionally followed by
   an ``Add`` of a constant bias, optionally followed by an activation, becomes

   * ``_FusedConv(X, W, B?)`` — ONNX Conv semantics with every geometry attr
     explicit: ``kernel_shape``, ``strides``, ``dilations`` (one int per
     spatial dim), ``pads`` (ONNX order: all begins, then all ends; any
     ``auto_pad`` is resolved), ``group``; plus the activation attrs below;
     ``B`` has shape ``(M,)``;
   * ``_FusedMatMul(A, B, bias?)`` — ``Y = act(scale * (op(A) @ op(B)) + bias)``
     with numpy matmul broadcasting over leading dims; attrs ``trans_a`` and
     ``trans_b`` (0/1: ``op`` swaps the last two axes), ``scale`` (float:
     Gemm's alpha times an absorbed scalar Mul / divided by a Div), and the
     activation attrs; ``bias`` has shape ``(N,)``
     (Gemm's ``beta * C`` is folded into it).

   Activation attrs: ``activation`` (str) is one of ``"none"``, ``"Relu"``,
   ``"LeakyRelu"`` (reads ``alpha``: float slope), ``"Sigmoid"``, ``"Tanh"``,
   ``"Gelu"`` (erf form), ``"GeluTanh"`` (tanh approximation), ``"Clip"``
   (reads ``min`` and ``max``: floats, ``-inf``/``inf`` for an absent bound;
   ``Clip(0, 6)`` is ReLU6), ``"Swish"`` (``x * sigmoid(x)``: a ``Sigmoid`` of
   the product's output and the ``Mul`` of the two, EfficientNet's and SiLU's
   form), ``"HardSwish"``.  Only the attrs an activation reads are set.

   A fusion happens only if every intermediate value has exactly one consumer
   and is not a graph output, and it needs at least one absorbed node, except
   for a ``Gemm`` whose alpha is not 1 or whose constant C is not a plain
   ``(N,)`` bias (alone it would lower to a product plus ``Mul``/``Add``).

3. **Elementwise chains** (:func:`fuse_elementwise`): a tree of elementwise
   ops (Relu LeakyRelu Sigmoid Tanh Exp Log Sqrt Abs Neg Reciprocal Erf Gelu
   Softplus Elu Selu Sign Clip Shrink, Add Sub Mul Div Pow Max Min PRelu) of
   one float dtype, where each inner value has one consumer and is not a
   graph output, with at least two nodes, becomes one ``_FusedElementwise``
   whose inputs are the tree's external inputs (deduplicated) and whose
   ``program`` attr is a register program.  **Program format**
   (interpreted by a C kernel; see :mod:`aioge.graph.ewprogram`):

   * registers ``0..k-1`` are the node's ``k`` inputs, each broadcast (numpy
     rules) to the output shape;
   * ``program`` is a list of steps ``(opcode, srcs, params)``: ``opcode`` a
     str from ``ewprogram.OPCODES``, ``srcs`` a tuple of 1 (unary) or 2
     (binary) register numbers, ``params`` a tuple of floats —
     ``LeakyRelu (alpha,)``, ``Elu (alpha,)``, ``Selu (alpha, gamma)``,
     ``Clip (min, max)`` (``±inf`` when absent), ``Shrink (bias, lambd)``,
     none for the rest; ``Gelu`` is the erf form, ``GeluTanh`` the tanh form;
     ``PRelu`` srcs are ``(x, slope)``;
   * step ``i`` writes register ``k + i``; the result is the last register;
   * all registers have the output dtype; compute in that dtype;
   * inputs + steps <= :data:`EW_MAX_REGISTERS` (the kernel's register file): a
     longer tree is cut into several nodes, each within it.

   ``ewprogram.encode_program`` packs it as ``int32[n, 4]`` rows
   ``(opcode id, src0, src1 or -1, n_params)`` and ``float64[n, 2]`` params.

All rewrites need inferred shapes and return a new graph.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from ... import _shapes as S
from ..ewprogram import Step
from ..ir import Graph, Node, Value
from ..schema import ELEMENTWISE_BINARY, ELEMENTWISE_UNARY, FLOAT_TYPES, get_attr
from ._util import node_order, require_shapes, scalar_constant, single_consumer, working_copy
from .infer_shapes import carry_node

__all__ = ("fuse", "fold_conv_batchnorm", "fuse_bias_activation", "fuse_elementwise", "fuse_gelu")


def fuse(
    graph: Graph, *, conv_bn: bool = True, bias_activation: bool = True, elementwise: bool = True, tidy: bool = False
) -> Graph:
    """Apply the enabled fusions (see the module docstring); returns a new graph.

    ``tidy``: ``graph``'s nodes are in topological order and nothing unreferenced is left
    (``optimize``'s working graph, see ``simplify_pass``): then the order is not checked again, and a
    fusion that finds nothing does not prune.  Every fusion keeps its result's nodes in the order of
    its input's (a fused node takes the place of a node it replaces), so a tidy input stays tidy."""
    # each fusion leaves what it made unreferenced in place, and one prune at the end drops it all
    g, changed = graph, False
    if conv_bn:
        g, c = _fold_conv_batchnorm(g, tidy)
        changed = changed or c
    if bias_activation:
        g, c = _fuse_bias_activation(fuse_gelu(g), tidy)
        changed = changed or c
    if elementwise:
        g, c = _fuse_elementwise(g, tidy)
        changed = changed or c
    if changed or (not tidy and (conv_bn or bias_activation or elementwise)):
        g.prune_values()
    return g


def _pruned(result: tuple[Graph, bool], tidy: bool) -> Graph:
    """A fusion's graph (its ``(graph, changed)``), its unreferenced values pruned unless the
    input was ``tidy`` and the fusion changed nothing (the public fusions' last step)."""
    g, changed = result
    if changed or not tidy:
        g.prune_values()
    return g


# ---------------------------------------------------------------------- Gelu
def _other(n: Node, v: str) -> str:
    """The input of binary ``n`` that is not ``v`` (``v`` if both are)."""
    a, b = n.inputs
    return b if a == v else a


def _near(v: float | None, want: float) -> bool:
    return v is not None and abs(v - want) <= 1e-5 * abs(want)


_MAX_DEGREE = 4
#: the argument of Erf / Tanh in each Gelu, as polynomial coefficients of x
_GELU_ARGUMENTS: dict[str, dict[int, float]] = {
    "Erf": {1: math.sqrt(0.5)},
    "Tanh": {1: math.sqrt(2.0 / math.pi), 3: math.sqrt(2.0 / math.pi) * 0.044715},
}
_POLY_OPS = ("Add", "Sub", "Mul", "Div", "Pow")


def _pmul(a: dict[int, float], b: dict[int, float]) -> dict[int, float]:
    r: dict[int, float] = {}
    for i, u in a.items():
        for j, v in b.items():
            r[i + j] = r.get(i + j, 0.0) + u * v
    return r


def _polynomial(g: Graph, prods: dict[str, Node], consumers: dict[str, list[Node]],
                root: str) -> tuple[str, dict[int, float], list[Node]] | None:  # fmt: skip
    """``(x, coefficients, nodes)`` if ``root`` is a polynomial of degree <= 4 in one value ``x``
    computed by ``nodes`` (Add, Sub, Mul, Div by a constant, Pow by a constant integer; one-element
    constants), every value between them with one consumer and not a graph output; else None.
    ``x`` is where the walk stops: a value with another consumer, or not computed by those ops."""
    leaves: set[str] = set()
    nodes: list[Node] = []

    def walk(v: str, parent: Node | None) -> dict[int, float] | None:
        c = scalar_constant(g, v)
        if c is not None:
            return {0: c}
        p = prods.get(v)
        e = scalar_constant(g, p.inputs[1]) if p is not None and len(p.inputs) == 2 else None
        if (
            p is None
            or p.op_type not in _POLY_OPS
            or len(p.inputs) != 2
            or (parent is not None and single_consumer(g, consumers, v) is not parent)
            or (p.op_type == "Pow" and (e is None or e != int(e) or not 0 <= e <= _MAX_DEGREE))
            or (p.op_type == "Div" and not e)
        ):
            leaves.add(v)
            return {1: 1.0}
        a = walk(p.inputs[0], p)
        if a is None:
            return None
        r: dict[int, float] | None
        if p.op_type == "Pow":
            r = {0: 1.0}
            for _ in range(int(e or 0)):
                r = _pmul(r, a)
        elif p.op_type == "Div":
            r = {k: u / (e or 1.0) for k, u in a.items()}
        else:
            b = walk(p.inputs[1], p)
            if b is None:
                return None
            if p.op_type == "Mul":
                r = _pmul(a, b)
            else:
                sign = -1.0 if p.op_type == "Sub" else 1.0
                r = dict(a)
                for k, u in b.items():
                    r[k] = r.get(k, 0.0) + sign * u
        if max(r) > _MAX_DEGREE:
            return None
        nodes.append(p)
        return r

    poly = walk(root, None)
    if poly is None or len(leaves) != 1:
        return None
    return leaves.pop(), poly, nodes


def _same_polynomial(got: dict[int, float], want: dict[int, float]) -> bool:
    return all(_near(got.get(k, 0.0), want[k]) if k in want else got[k] == 0.0 for k in set(got) | set(want))


def fuse_gelu(graph: Graph) -> Graph:
    """Gelu as exporters write it becomes one ``Gelu`` (which the bias + activation fusion then puts
    in a matrix product's epilogue, as onnxruntime's Gelu fusion does): the erf form
    ``x * 0.5 * (1 + erf(x / sqrt(2)))`` and the tanh form (``approximate="tanh"``, GPT-2's
    gelu_new) ``x * 0.5 * (1 + tanh(sqrt(2 / pi) * (x + 0.044715 * x ** 3)))``.  The 0.5 may be on
    ``x``, on ``1 + erf`` / ``1 + tanh`` or on the product; the argument of erf / tanh may be written
    any way Add/Sub/Mul/Div/Pow by constants write that polynomial in ``x`` (``x / sqrt(2)`` or
    ``x * (1 / sqrt(2))``; ``Pow(x, 3)`` or ``x * x * x``; ``c * x * (1 + 0.044715 * x * x)``).
    Constants must match within 1e-5 relative; every inner value must have one consumer and not be a
    graph output; ``x`` keeps its other consumers, and the result must have ``x``'s shape and dtype."""
    require_shapes(graph, "fuse_gelu")
    g = working_copy(graph)
    if not any(n.op_type in _GELU_ARGUMENTS for n in g.nodes):
        return g  # nothing to match: no readers maps to build
    consumers = g.consumers()
    prods = g.producers()
    dead: list[Node] = []
    for e in [n for n in g.nodes if n.op_type in _GELU_ARGUMENTS]:
        if single_consumer(g, consumers, e.inputs[0]) is not e:
            continue
        arg = _polynomial(g, prods, consumers, e.inputs[0])
        if arg is None or not arg[2] or not _same_polynomial(arg[1], _GELU_ARGUMENTS[e.op_type]):
            continue
        x = arg[0]
        add = single_consumer(g, consumers, e.outputs[0])
        if add is None or add.op_type != "Add" or not _near(scalar_constant(g, _other(add, e.outputs[0])), 1.0):
            continue
        m1 = single_consumer(g, consumers, add.outputs[0])
        if m1 is None or m1.op_type != "Mul":
            continue
        chain = [*arg[2], e, add, m1]
        o = _other(m1, add.outputs[0])
        h = prods.get(o)
        if o == x or _near(scalar_constant(g, o), 0.5):  # then a Mul by the other factor: 0.5 or x
            m2 = single_consumer(g, consumers, m1.outputs[0])
            if m2 is None or m2.op_type != "Mul":
                continue
            f = _other(m2, m1.outputs[0])
            if not (f == x if o != x else _near(scalar_constant(g, f), 0.5)):
                continue
            chain.append(m2)
        elif (h is not None and h.op_type == "Mul" and single_consumer(g, consumers, o) is m1
              and x in h.inputs and _near(scalar_constant(g, _other(h, x)), 0.5)):  # fmt: skip
            chain.insert(0, h)  # (x * 0.5) * (1 + erf)
        else:
            continue
        last = chain[-1]
        xv, yv = g.values[x], g.values[last.outputs[0]]
        if xv.shape != yv.shape or xv.dtype != yv.dtype or xv.dtype not in FLOAT_TYPES:
            continue  # a constant broadcast the result, or changed its dtype
        if any(g.values[n.outputs[0]].dtype != xv.dtype for n in chain):
            continue
        for n in chain[:-1]:
            dead.append(n)
            g.values.pop(n.outputs[0], None)
        attrs: dict[str, Any] = {"approximate": "tanh"} if e.op_type == "Tanh" else {}
        last.op_type, last.inputs, last.attrs, last.domain = "Gelu", [x], attrs, ""
    if dead:
        _drop(g, dead)
    return g


# --------------------------------------------------------------------- Conv + BN
def fold_conv_batchnorm(graph: Graph, *, tidy: bool = False) -> Graph:
    """Fold inference BatchNormalization into the preceding Conv's weights and bias (``tidy``: see
    :func:`fuse`)."""
    return _pruned(_fold_conv_batchnorm(graph, tidy), tidy)


def _fold_conv_batchnorm(graph: Graph, tidy: bool) -> tuple[Graph, bool]:
    """:func:`fold_conv_batchnorm` without its final prune, and whether it changed anything."""
    require_shapes(graph, "fold_conv_batchnorm")
    g = working_copy(graph)
    if not any(n.op_type == "Conv" for n in g.nodes):  # nothing to fold (here or in _fold_conv_affine)
        return g, False
    consumers = g.consumers()
    order = node_order(g, tidy)[0]
    # what folds does not depend on the folds before it (each pair reads its own conv's readers and
    # constants), so the pairs are found first and their scales computed in one go (below)
    pairs: list[tuple[Node, Node]] = []
    for conv in [n for n in order if n.op_type == "Conv"]:  # (the op type first: no call per other node)
        if not _const_conv(g, conv):
            continue
        bn = single_consumer(g, consumers, conv.outputs[0])
        if bn is None or bn.op_type != "BatchNormalization" or bn.inputs[0] != conv.outputs[0]:
            continue
        if not all(i in g.constants for i in bn.inputs[1:5]):
            continue
        pairs.append((conv, bn))
    folded = _bn_folded(g, pairs) or [_bn_fold_one(g, conv, bn) for conv, bn in pairs]
    dead = []
    for (conv, bn), (w_new, b_new) in zip(pairs, folded, strict=True):
        w_name, b_name = g.fresh_name(f"{conv.name}/w_bn"), g.fresh_name(f"{conv.name}/b_bn")
        g.set_constant(w_name, w_new)
        g.set_constant(b_name, b_new)
        old_out = conv.outputs[0]
        conv.inputs = [conv.inputs[0], w_name, b_name]
        conv.outputs = [bn.outputs[0]]
        dead.append(bn)
        g.values.pop(old_out, None)
        # it writes what the BatchNormalization wrote, of the shape and dtype the conv wrote before (a
        # BatchNormalization keeps its input's), from weights of the same shape and dtype as before
        carry_node(g, conv)
    if dead:
        _remove(g, dead)
    # the readers and order from before the folds still serve _fold_conv_affine: it asks for the readers
    # of a conv's output and of the chain after it, values whose readers no fold changed (a folded
    # Conv writes what its BatchNormalization wrote, read as before; what only a dropped
    # BatchNormalization read is no node's output now, or a constant), and it visits the convs in
    # their order (a dropped BatchNormalization in that list is no conv: skipped)
    return g, _fold_conv_affine(g, (consumers, order)) or bool(dead)


def _bn_fold_one(g: Graph, conv: Node, bn: Node) -> tuple[np.ndarray, np.ndarray]:
    """The weights and bias of ``conv`` with ``bn`` folded in."""
    bias = conv.input(2)
    w = g.constants[conv.inputs[1]]
    scale, beta, mean, var = (g.constants[i].astype(np.float64) for i in bn.inputs[1:5])
    s = scale / np.sqrt(var + float(get_attr(bn, "epsilon")))
    b0 = g.constants[bias].astype(np.float64) if bias else np.zeros(w.shape[0])
    return _scaled(w, s), ((b0 - mean) * s + beta).astype(w.dtype)


_F32 = np.dtype(np.float32)


def _bn_folded(g: Graph, pairs: list[tuple[Node, Node]]) -> list[tuple[np.ndarray, np.ndarray]]:
    """:func:`_bn_fold_one` of every pair, the scale and bias arithmetic done once over all the pairs'
    channels (a handful of numpy calls per pair on vectors of a few dozen channels was most of this
    pass): the same elementwise float64 operations, so the same values.  For float32 weights, bias
    and parameters of one value per output channel (as exporters write them); [] otherwise (then
    each pair is folded on its own)."""
    if len(pairs) < 2:
        return []
    c = g.constants
    params: list[list[np.ndarray]] = [[], [], [], [], []]  # scale, beta, mean, var, conv bias
    eps: list[float] = []
    counts: list[int] = []
    for conv, bn in pairs:
        w = c[conv.inputs[1]]
        n = w.shape[0]
        arrs = [c[i] for i in bn.inputs[1:5]]
        bias = conv.input(2)
        arrs.append(c[bias] if bias else np.zeros(n, _F32))
        if w.dtype != _F32 or any(a.dtype != _F32 or a.shape != (n,) for a in arrs):
            return []
        for dst, a in zip(params, arrs, strict=True):
            dst.append(a)
        eps.append(float(get_attr(bn, "epsilon")))
        counts.append(n)
    scale, beta, mean, var, b0 = (np.concatenate(p).astype(np.float64) for p in params)
    s = scale / np.sqrt(var + np.repeat(np.array(eps, np.float64), counts))
    s32 = s.astype(np.float32)
    b_new = ((b0 - mean) * s + beta).astype(np.float32)
    b_new.setflags(write=False)  # fresh: set_constant keeps each pair's slice (a view) without a copy
    out = []
    lo = 0
    for (conv, _), n in zip(pairs, counts, strict=True):
        w = c[conv.inputs[1]]
        out.append((_scaled(w, s32[lo : lo + n]), b_new[lo : lo + n]))
        lo += n
    return out


def _scaled(w: np.ndarray, s: np.ndarray) -> np.ndarray:
    """``w`` with output channel ``i`` scaled by ``s[i]`` (float64 scale factors, or float32 ones
    for float32 weights), in ``w``'s dtype; read-only.

    The product is taken in ``w``'s dtype when that is float32 (as onnxruntime folds): the scale
    is rounded once, the product once, and no float64 copy of the weights is made.  Weights that
    are one value broadcast (a folded fill) whose channels all scale to the same bits stay one
    value broadcast: the same elements, none written here (the upload fills them)."""
    shape = (-1, *([1] * (w.ndim - 1)))
    if w.ndim > 1 and w.size and not any(w.strides):
        one = _product(w[(slice(None),) + (slice(0, 1),) * (w.ndim - 1)], s, shape)  # per output channel
        flat = one.tobytes()
        if flat == flat[: one.itemsize] * one.size:  # every channel the same bits
            view = np.ndarray(w.shape, one.dtype, one, 0, (0,) * w.ndim)
            view.setflags(write=False)
            return view
    out = _product(w, s, shape)
    out.setflags(write=False)  # fresh: set_constant keeps it without a copy
    return out


def _product(w: np.ndarray, s: np.ndarray, shape: tuple[int, ...]) -> np.ndarray:
    """``w * s.reshape(shape)`` in ``w``'s dtype, as :func:`_scaled` takes it: a fresh array."""
    out: np.ndarray
    if w.dtype == np.float32:
        out = np.multiply(w, s.astype(np.float32, copy=False).reshape(shape), dtype=np.float32)
    else:
        out = (w.astype(np.float64) * s.reshape(shape)).astype(w.dtype)
    return out


def _const_conv(g: Graph, n: Node) -> bool:
    """A Conv whose weights (and bias, if any) are constants: foldable."""
    if n.op_type != "Conv" or n.inputs[1] not in g.constants:
        return False
    bias = n.input(2)
    return not bias or bias in g.constants


def _drop(g: Graph, dead: list[Node]) -> None:
    _remove(g, dead)
    g.prune_values()


def _remove(g: Graph, dead: list[Node]) -> None:
    """Take ``dead`` out of ``g.nodes`` (what only they read is left for a prune)."""
    dead_ids = {id(d) for d in dead}
    g.nodes = [n for n in g.nodes if id(n) not in dead_ids]


_AFFINE = {"Mul", "Div", "Add", "Sub"}


def _channel_vector(g: Graph, n: Node, x: str) -> np.ndarray | None:
    """The constant operand of ``n`` (an affine step on ``x``, the conv's output, shape (N, C, ...))
    as a float64 vector of C values, if it is per output channel; else None."""
    if n.op_type not in _AFFINE or len(n.inputs) != 2 or x not in n.inputs:
        return None
    if n.op_type in ("Div", "Sub") and n.inputs[0] != x:
        return None  # c / x and c - x are not affine in x's channel scale
    other = n.inputs[1] if n.inputs[0] == x else n.inputs[0]
    c = g.constants.get(other)
    shape = g.values[x].shape
    if c is None or shape is None or len(shape) < 3 or c.dtype != g.values[x].dtype or c.ndim > len(shape):
        return None
    if g.values[n.outputs[0]].shape != shape:
        return None  # the constant broadcasts the result: not a per-channel step
    ch = shape[1]
    full = (1,) * (len(shape) - c.ndim) + tuple(c.shape)
    if any(d != 1 for i, d in enumerate(full) if i != 1) or full[1] not in (1, ch):
        return None
    v = np.broadcast_to(np.asarray(c, np.float64).reshape(full[1]), (ch,))
    if n.op_type == "Div":
        if not np.all(v != 0):
            return None
        v = 1.0 / v
    elif n.op_type == "Sub":
        v = -v
    return v


def _fold_conv_affine(g: Graph, index: tuple[dict[str, list[Node]], list[Node]]) -> bool:
    """Absorb per-channel Mul/Div/Add/Sub chains after a Conv with constant weights (see above), in
    place; whether it did (what the absorbed nodes alone read is left for a prune).

    ``index``: ``g.consumers()`` and ``g.topological_order()``."""
    consumers, order = index
    dead: list[Node] = []
    changed = False
    for conv in [n for n in order if n.op_type == "Conv"]:  # (the op type first: no call per other node)
        if not _const_conv(g, conv):
            continue
        bias = conv.input(2)
        w = g.constants[conv.inputs[1]]
        if w.dtype.kind != "f":
            continue
        out, absorbed, steps = conv.outputs[0], [], []
        while True:
            n = single_consumer(g, consumers, out)
            v = None if n is None else _channel_vector(g, n, out)
            if n is None or v is None or len(v) != w.shape[0]:
                break
            steps.append((n.op_type in ("Mul", "Div"), v))
            absorbed.append(n)
            out = n.outputs[0]
        if not absorbed:
            continue  # the usual case (a Conv read by an activation): no scale or shift arrays made
        scale = np.ones(w.shape[0])
        shift = g.constants[bias].astype(np.float64) if bias else np.zeros(w.shape[0])
        for scales, v in steps:
            if scales:
                scale, shift = scale * v, shift * v
            else:
                shift = shift + v
        w_name, b_name = g.fresh_name(f"{conv.name}/w_affine"), g.fresh_name(f"{conv.name}/b_affine")
        g.set_constant(w_name, _scaled(w, scale))
        g.set_constant(b_name, shift.astype(w.dtype))
        old_out = conv.outputs[0]
        conv.inputs = [conv.inputs[0], w_name, b_name]
        conv.outputs = [out]
        same = g.values[out].shape == g.values[old_out].shape and g.values[out].dtype == g.values[old_out].dtype
        g.values.pop(old_out, None)
        if same:  # (a per-channel step keeps its input's shape and dtype: always so)
            carry_node(g, conv)
        for a in absorbed[:-1]:
            g.values.pop(a.outputs[0], None)
        dead.extend(absorbed)
        changed = True
    if changed:
        _remove(g, dead)
    return changed


# --------------------------------------------------------------- bias + activation
def _activation(g: Graph, n: Node) -> dict[str, Any] | None:
    op = n.op_type
    if op in ("Relu", "Sigmoid", "Tanh", "HardSwish"):
        return {"activation": op}
    if op == "LeakyRelu":
        return {"activation": "LeakyRelu", "alpha": float(get_attr(n, "alpha"))}
    if op == "Gelu":
        return {"activation": "GeluTanh" if get_attr(n, "approximate") == "tanh" else "Gelu"}
    if op == "Clip":
        bounds = []
        for i, default in ((1, -math.inf), (2, math.inf)):
            name = n.input(i)
            if not name:
                bounds.append(default)
                continue
            v = scalar_constant(g, name)
            if v is None:
                return None
            bounds.append(v)
        return {"activation": "Clip", "min": bounds[0], "max": bounds[1]}
    return None


def _swish_of(g: Graph, consumers: dict[str, list[Node]], v: str) -> tuple[Node, Node] | None:
    """(the Sigmoid, the Mul) when ``v``'s only readers are ``s = Sigmoid(v)`` and ``Mul(v, s)``
    (either order) and ``s`` is read by that Mul alone: Swish (SiLU), ``v * sigmoid(v)``."""
    readers = consumers.get(v, [])
    if len(readers) != 2 or v in g.outputs:
        return None
    sig = next((m for m in readers if m.op_type == "Sigmoid"), None)
    mul = next((m for m in readers if m.op_type == "Mul"), None)
    if sig is None or mul is None or single_consumer(g, consumers, sig.outputs[0]) is not mul:
        return None
    if sorted(mul.inputs) != sorted([v, sig.outputs[0]]):
        return None
    if g.values[mul.outputs[0]].shape != g.values[v].shape:
        return None
    return sig, mul


def _bias_vector(g: Graph, add: Node, main_out: str, channels: int, channel_axis: int) -> np.ndarray | None:
    """The constant operand of ``add`` as a (channels,) vector, if it only varies along the channel axis."""
    other = add.inputs[1] if add.inputs[0] == main_out else add.inputs[0]
    if other == main_out or other not in g.constants:
        return None
    arr = g.constants[other]
    out_shape = g.values[main_out].shape or ()
    rank = len(out_shape)
    if arr.ndim > rank:
        return None
    try:
        if S.broadcast_shapes(out_shape, arr.shape) != tuple(out_shape):
            return None
    except ValueError:
        return None
    full = (1,) * (rank - arr.ndim) + tuple(arr.shape)
    ax = channel_axis % rank
    if any(d != 1 for i, d in enumerate(full) if i != ax):
        return None
    vec = arr.reshape(-1)
    return np.broadcast_to(vec, (channels,)).astype(arr.dtype) if vec.size in (1, channels) else None


def _activation_before_reshape(g: Graph) -> dict[str, list[Node]] | None:
    """``product [-> Add] -> Reshape -> activation`` becomes ``product [-> Add] -> activation ->
    Reshape`` in ``g`` (an elementwise activation commutes with a reshape), so the activation can join
    the product's epilogue (GPT-2's ``c_fc`` is ``Gemm -> Reshape -> Gelu``).  Only where the Reshape's
    output is read by the activation alone, the product's (or its bias Add's) output by the Reshape
    alone (and the product's by that Add alone), and the activation is a one-input node the epilogue
    takes.  Returns the readers of each value when it moved nothing (still ``g.consumers()``), else None."""
    if not any(n.op_type == "Reshape" for n in g.nodes):
        return None
    consumers = g.consumers()
    moved = False
    producers = g.producers()
    position = {id(m): i for i, m in enumerate(g.nodes)}
    for r in list(g.nodes):
        if r.op_type != "Reshape" or not r.outputs or not r.outputs[0]:
            continue
        act = single_consumer(g, consumers, r.outputs[0])
        if act is None or [i for i in act.inputs if i] != [r.outputs[0]] or _activation(g, act) is None:
            continue
        src = r.inputs[0]
        if single_consumer(g, consumers, src) is not r:
            continue
        p = producers.get(src)
        if p is not None and p.op_type == "Add":  # the bias: the product's output read by it alone
            add = p
            p = next((producers[i] for i in add.inputs if i in producers
                      and single_consumer(g, consumers, i) is add), None)  # fmt: skip
        if p is None or p.op_type not in ("MatMul", "Gemm"):
            continue
        pre = g.values[src]
        mid = g.fresh_name(f"{act.name or act.op_type}/pre_reshape")
        g.values[mid] = Value(mid, pre.shape, pre.dtype)
        out = act.outputs[0]
        g.values.pop(r.outputs[0], None)
        new_act = Node(act.op_type, [src], [mid], dict(act.attrs), act.name, act.domain)
        new_reshape = Node(r.op_type, [mid, *r.inputs[1:]], [out], dict(r.attrs), r.name, r.domain)
        # the activation takes the Reshape's place and the Reshape the activation's: still topological
        g.nodes[position[id(r)]] = new_act
        g.nodes[position[id(act)]] = new_reshape
        carry_node(g, new_act)  # an activation keeps its input's shape and dtype
        carry_node(g, new_reshape)  # to the activation's output shape, as the Reshape gave before
        moved = True
    return None if moved else consumers


def fuse_bias_activation(graph: Graph, *, tidy: bool = False) -> Graph:
    """Conv/MatMul/Gemm [+ constant bias Add] [+ activation] -> _FusedConv/_FusedMatMul (an
    activation after a Reshape of a product first moved before it: _activation_before_reshape).
    ``tidy``: see :func:`fuse`."""
    return _pruned(_fuse_bias_activation(graph, tidy), tidy)


def _fuse_bias_activation(graph: Graph, tidy: bool) -> tuple[Graph, bool]:
    """:func:`fuse_bias_activation` without its final prune, and whether it changed anything."""
    require_shapes(graph, "fuse_bias_activation")
    g = working_copy(graph)
    if not any(n.op_type in ("Conv", "MatMul", "Gemm") for n in g.nodes):  # no product: nothing to fuse
        return g, False
    consumers = _activation_before_reshape(g)
    changed = consumers is None  # an activation moved
    if consumers is None:
        consumers = g.consumers()
    dead: list[Node] = []
    dead_ids: set[int] = set()
    position = {id(m): i for i, m in enumerate(g.nodes)}
    for n in node_order(g, tidy)[0]:
        if n.op_type not in ("Conv", "MatMul", "Gemm") or id(n) in dead_ids:
            continue
        out = n.outputs[0]
        shape = g.values[out].shape or ()
        dtype = g.values[out].dtype
        if dtype not in FLOAT_TYPES or len(shape) < 2:
            continue
        if n.op_type == "MatMul" and (
            len(g.values[n.inputs[0]].shape or ()) < 2 or len(g.values[n.inputs[1]].shape or ()) < 2
        ):
            continue
        is_conv = n.op_type == "Conv"
        if is_conv and len(shape) != 4:  # _FusedConv is a 2-D conv (host.py lowers no other)
            continue
        channels = shape[1] if is_conv else shape[-1]
        bias: np.ndarray | None = None
        if is_conv and (b_in := n.input(2)):
            bias = g.constants.get(b_in)
            if bias is None:
                continue
        if n.op_type == "Gemm" and n.input(2):
            beta = float(get_attr(n, "beta"))
            c_vec = _gemm_c(g, n, channels)
            if c_vec is None:
                continue
            bias = (c_vec.astype(np.float64) * beta).astype(dtype)
        absorbed: list[Node] = []
        tail = out
        scale = float(get_attr(n, "alpha")) if n.op_type == "Gemm" else 1.0
        mul = single_consumer(g, consumers, tail)
        if not is_conv and mul is not None and mul.op_type in ("Mul", "Div") and bias is None:
            other = (
                mul.inputs[1] if mul.inputs[0] == tail else (mul.inputs[0] if mul.op_type == "Mul" else "")
            )
            c = scalar_constant(g, other) if other else None
            if c is not None and c != 0.0 and g.values[mul.outputs[0]].shape == shape:
                scale = scale * c if mul.op_type == "Mul" else scale / c
                absorbed.append(mul)
                tail = mul.outputs[0]
        add = single_consumer(g, consumers, tail)
        if add is not None and add.op_type == "Add":
            vec = _bias_vector(g, add, tail, channels, 1 if is_conv else -1)
            if vec is not None and g.values[add.outputs[0]].shape == shape:
                bias = vec if bias is None else (bias.astype(np.float64) + vec).astype(dtype)
                absorbed.append(add)
                tail = add.outputs[0]
        act_attrs: dict[str, Any] = {"activation": "none"}
        act = single_consumer(g, consumers, tail)
        swish = _swish_of(g, consumers, tail) if act is None else None
        if swish is not None:
            act_attrs = {"activation": "Swish"}
            absorbed.extend(swish)
            tail = swish[1].outputs[0]
        elif act is not None and act.inputs[0] == tail:
            a = _activation(g, act)
            if a is not None:
                act_attrs = a
                absorbed.append(act)
                tail = act.outputs[0]
        if not absorbed and not (n.op_type == "Gemm" and _gemm_needs_ops(g, n, channels)):
            continue
        ins = [n.inputs[0], n.inputs[1]]
        if bias is not None:
            b_name = g.fresh_name(f"{n.name}/bias")
            g.set_constant(b_name, np.asarray(bias, dtype))
            ins.append(b_name)
        if is_conv:
            attrs = _explicit_conv_attrs(g, n)
            fused_op = "_FusedConv"
        else:
            fused_op = "_FusedMatMul"
            attrs = {}
            if n.op_type == "Gemm":
                attrs = {"trans_a": int(get_attr(n, "transA")), "trans_b": int(get_attr(n, "transB"))}
            if scale != 1.0:
                attrs["scale"] = scale
        attrs.update(act_attrs)
        fused = Node(fused_op, ins, [tail], attrs, g.fresh_name(f"{n.name}/fused"))
        g.nodes[position[id(n)]] = fused
        changed = True
        carry_node(g, fused)  # it computes what the chain did: its output keeps the tail's shape and dtype
        dead.extend(absorbed)
        dead_ids.update(id(m) for m in absorbed)
        for m in [n, *absorbed]:
            for o in m.outputs:
                if o and o != tail:
                    g.values.pop(o, None)
    if dead_ids:
        g.nodes = [m for m in g.nodes if id(m) not in dead_ids]
    return g, changed


def _explicit_conv_attrs(g: Graph, n: Node) -> dict[str, Any]:
    """Conv attrs with auto_pad resolved and defaults spelled out (simpler for a C kernel)."""
    values, a = g.values, n.attrs  # Conv's attrs (the schema's defaults: None, "NOTSET" and 1 below)
    x = values[n.inputs[0]].shape or ()
    n_sp = len(x) - 2
    kernel = [int(k) for k in (a.get("kernel_shape") or (values[n.inputs[1]].shape or ())[2:])]
    strides = [int(s) for s in (a.get("strides") or [1] * n_sp)]
    dilations = [int(d) for d in (a.get("dilations") or [1] * n_sp)]
    pb, pe, _ = S.conv_geometry(x[2:], kernel, strides, dilations, a.get("pads"), str(a.get("auto_pad", "NOTSET")))
    return {
        "kernel_shape": kernel,
        "strides": strides,
        "dilations": dilations,
        "pads": [*pb, *pe],
        "group": int(a.get("group", 1) or 1),
    }


def _gemm_needs_ops(g: Graph, n: Node, channels: int) -> bool:
    """Whether a Gemm alone lowers to more than one matrix product (alpha != 1, or a C that is not
    a plain (N,) bias): then its ``_FusedMatMul`` form puts alpha and beta * C in the product's store."""
    c = n.input(2)
    if float(get_attr(n, "alpha")) != 1.0:
        return True
    return bool(c) and (float(get_attr(n, "beta")) != 1.0 or tuple(g.values[c].shape or ()) != (channels,))


def _gemm_c(g: Graph, n: Node, channels: int) -> np.ndarray | None:
    c = n.input(2)
    if c not in g.constants:
        return None
    arr = g.constants[c]
    m = (g.values[n.outputs[0]].shape or (0, 0))[0]
    full = (1,) * (2 - arr.ndim) + tuple(arr.shape) if arr.ndim <= 2 else None
    if full is None or (full[0] != 1 and m != 1):
        return None
    vec = arr.reshape(-1)
    if vec.size not in (1, channels):
        return None
    return np.broadcast_to(vec, (channels,)).copy()


# --------------------------------------------------------------------- elementwise
_PARAMS: dict[str, tuple[tuple[str, float], ...]] = {
    "LeakyRelu": (("alpha", 0.01),),
    "Elu": (("alpha", 1.0),),
    "Selu": (("alpha", 1.67326319217681884765625), ("gamma", 1.05070102214813232421875)),
    "Shrink": (("bias", 0.0), ("lambd", 0.5)),
}


def _ew_step(g: Graph, n: Node) -> tuple[str, list[str], tuple[float, ...]] | None:
    """(opcode, register-input value names, params) for a fusable node, else None."""
    op = n.op_type
    dtype = g.values[n.outputs[0]].dtype
    if dtype not in FLOAT_TYPES or len([o for o in n.outputs if o]) != 1:
        return None
    if op in ELEMENTWISE_BINARY:
        if len(n.inputs) != 2 or any(g.values[i].dtype != dtype for i in n.inputs):
            return None
        return op, list(n.inputs), ()
    if op not in ELEMENTWISE_UNARY or g.values[n.inputs[0]].dtype != dtype:
        return None
    if op == "Clip":
        a = _activation(g, n)
        return None if a is None else ("Clip", [n.inputs[0]], (a["min"], a["max"]))
    if op == "Gelu":
        return ("GeluTanh" if get_attr(n, "approximate") == "tanh" else "Gelu"), [n.inputs[0]], ()
    params = tuple(float(get_attr(n, k)) for k, _ in _PARAMS.get(op, ()))
    return op, [n.inputs[0]], params


#: registers of a ``_FusedElementwise`` program (its inputs + its steps): the host kernel's register file
EW_MAX_REGISTERS = 64


class _EwTree:
    """One fusable tree: its member nodes, external inputs and register program.

    Grown from the root towards the operands, depth first, while its inputs and steps fit in
    :data:`EW_MAX_REGISTERS`; a producer left out roots a tree of its own.
    """

    def __init__(
        self,
        g: Graph,
        steps: dict[int, tuple[str, list[str], tuple[float, ...]]],
        producers: dict[str, Node],
        consumers: dict[str, list[Node]],
        taken: set[int],
        root: Node,
    ) -> None:
        self.g, self.steps, self.producers, self.consumers = g, steps, producers, consumers
        self.dtype = g.values[root.outputs[0]].dtype
        self.members: set[int] = set()
        self.inputs: list[str] = []
        self.program: list[Step] = []
        self._leaves = set(self.steps[id(root)][1])  # the tree's external inputs so far
        self._absorb(root, taken)

    def _absorb(self, n: Node, taken: set[int]) -> None:
        self.members.add(id(n))
        for name in self.steps[id(n)][1]:
            p = self.producers.get(name)
            if (
                p is not None
                and id(p) in self.steps
                and id(p) not in taken
                and id(p) not in self.members
                and self.g.values[name].dtype == self.dtype
                and single_consumer(self.g, self.consumers, name) is n
            ):
                leaves = (self._leaves - {name}).union(self.steps[id(p)][1])
                if len(self.members) + 1 + len(leaves) > EW_MAX_REGISTERS:
                    continue  # p would not fit: it roots a tree of its own
                self._leaves = leaves
                self._absorb(p, taken)

    def _emit(self, n: Node) -> int:
        """Append ``n``'s step after its operands'; srcs are -1-input or step numbers for now."""
        op, ins, params = self.steps[id(n)]
        srcs = []
        for name in ins:
            p = self.producers.get(name)
            if p is not None and id(p) in self.members:
                srcs.append(self._emit(p))
            else:
                if name not in self.inputs:
                    self.inputs.append(name)
                srcs.append(-1 - self.inputs.index(name))
        self.program.append((op, tuple(srcs), params))
        return len(self.program) - 1

    def node(self, root: Node) -> Node:
        self._emit(root)
        k = len(self.inputs)
        program = [
            (op, tuple(-1 - s if s < 0 else k + s for s in srcs), params) for op, srcs, params in self.program
        ]
        name = self.g.fresh_name(f"{root.name}/fused_ew")
        return Node("_FusedElementwise", list(self.inputs), [root.outputs[0]], {"program": program}, name)


def fuse_elementwise(graph: Graph, *, tidy: bool = False) -> Graph:
    """Fuse trees of single-consumer elementwise ops into _FusedElementwise nodes (``tidy``: see
    :func:`fuse`)."""
    return _pruned(_fuse_elementwise(graph, tidy), tidy)


def _fuse_elementwise(graph: Graph, tidy: bool) -> tuple[Graph, bool]:
    """:func:`fuse_elementwise` without its final prune, and whether it changed anything."""
    require_shapes(graph, "fuse_elementwise")
    g = working_copy(graph)
    steps = {id(n): s for n in g.nodes if (s := _ew_step(g, n)) is not None}
    if not steps:  # no elementwise op to fuse
        return g, False
    consumers = g.consumers()
    producers = g.producers()
    taken: set[int] = set()
    replace: dict[int, Node] = {}
    dead: set[int] = set()
    for root in reversed(node_order(g, tidy)[0]):
        if id(root) not in steps or id(root) in taken:
            continue
        tree = _EwTree(g, steps, producers, consumers, taken, root)
        if len(tree.members) < 2:
            continue
        taken |= tree.members
        replace[id(root)] = fused = tree.node(root)
        carry_node(g, fused)  # the tree's broadcast of its leaves, as the root's output was
        dead |= tree.members - {id(root)}
    if replace:
        g.nodes = [replace.get(id(n), n) for n in g.nodes if id(n) not in dead]
    return g, bool(replace)
