"""Constant folding.

Evaluates, with the reference executor, every node whose inputs are all
constants, and every ``Shape`` node (shapes are static), replacing the node by
constants of the same names.  Nodes that would create a constant larger than
``max_elements`` and larger than their inputs (``Expand``,
``ConstantOfShape``, ``Tile`` of something small) are kept, so folding never
blows up the model -- except a result read only as the weights of a Conv,
ConvTranspose, Gemm or MatMul: the weights exist at run time anyway (in the
arena, refilled on every run: the onnx light models' ConstantOfShape fills
cost more per run than their layers), and folded they are packed once and
open Conv+BatchNormalization folding (onnxruntime folds them too).  Needs
inferred shapes; returns a new graph.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from ..ir import Graph, Value
from ..reference import evaluate_node, shape_slice
from ..schema import get_attr
from ._util import node_order, require_shapes, working_copy
from .infer_shapes import inferred_outputs

__all__ = ("fold_constants", "fold_constants_pass")


#: (op type, input index) that read weights
_WEIGHT_USES = frozenset({("Conv", 1), ("ConvTranspose", 1), ("Gemm", 1), ("MatMul", 1)})
#: ConstantOfShape results above this many elements fold to a broadcast view of their scalar
_FILL_VIEW_ELEMENTS = 4096


def fold_constants(graph: Graph, *, max_elements: int = 1 << 20) -> Graph:
    """Return a copy of ``graph`` with constant subgraphs evaluated (see the module docstring)."""
    return fold_constants_pass(graph, max_elements=max_elements)[0]


def fold_constants_pass(graph: Graph, *, max_elements: int = 1 << 20, tidy: bool = False) -> tuple[Graph, bool]:
    """:func:`fold_constants`, and whether the result is tidy (see ``simplify_pass``); ``tidy``:
    ``graph`` is.  Folding only removes nodes: the result's nodes keep the order of ``graph``'s."""
    require_shapes(graph, "fold_constants")
    g = working_copy(graph)
    folded = []
    uses: dict[str, list[tuple[str, int]]] = {}  # built when first needed (a big constant result)
    outputs = set(g.outputs)
    fills: dict[tuple[Any, ...], np.ndarray] = {}  # see ConstantOfShape below

    def weights_only(n_outputs: list[str]) -> bool:
        if not uses:  # the loop below changes no node's inputs: built once, then valid
            for m in g.nodes:
                for i, v in enumerate(m.inputs):
                    if v:
                        uses.setdefault(v, []).append((m.op_type, i))
        return all(o and o not in outputs and uses.get(o) and all(u in _WEIGHT_USES for u in uses[o])
                   for o in n_outputs)  # fmt: skip

    consts, values = g.constants, g.values
    order, in_order = node_order(g, tidy)
    for n in order:
        op = n.op_type
        if op == "Shape":
            end = get_attr(n, "end")
            shape = values[n.inputs[0]].shape or ()
            outs = [
                np.array(
                    shape_slice(shape, int(get_attr(n, "start")), None if end is None else int(end)), np.int64
                )
            ]
        elif op == "ConstantOfShape" and n.inputs[0] in consts:
            # fills of one value and shape fold to one read-only array, shared: made (or taken from
            # shape inference) once, and CSE then merges the copies by identity (the onnx light
            # models' weights are hundreds of fills of a few shapes)
            o = n.outputs[0]
            v = values[o]
            shape = v.shape or ()
            out_elems = math.prod(shape)
            if out_elems > max_elements and out_elems > consts[n.inputs[0]].size and not weights_only(n.outputs):
                continue
            val = get_attr(n, "value")
            fill = np.asarray(val if val is not None else np.zeros(1, np.float32))
            first = fill.reshape(-1)[:1]  # ConstantOfShape's value: its first element
            fkey = (fill.dtype.str, first.tobytes(), shape, v.dtype)
            made = fills.get(fkey)
            if made is None:
                if out_elems > _FILL_VIEW_ELEMENTS:
                    # a fill folded (weights): a read-only broadcast of the scalar, so nothing is written
                    # (or copied, or compared element by element by CSE) until it is uploaded
                    a = np.asarray(np.broadcast_to(first.reshape(()), shape), dtype=v.dtype)
                else:
                    a = np.full(shape, first[0], dtype=fill.dtype)  # as the reference evaluates it
                    a = np.asarray(a, dtype=v.dtype)
                    a.setflags(write=False)  # fresh: set_constant keeps it without a copy
                g.set_constant(o, a)
                fills[fkey] = consts[o]
            else:
                consts[o] = made  # its Value has the fill's shape and dtype already (the key's)
            folded.append(n)
            continue
        elif n.inputs and all(i in consts for i in n.inputs if i):
            out_elems = sum(math.prod(values[o].shape or ()) for o in n.outputs if o)
            if (out_elems > max_elements and out_elems > sum(consts[i].size for i in n.inputs if i)
                    and not weights_only(n.outputs)):
                continue
            ins = [consts[i] if i else None for i in n.inputs]
            # shape inference evaluated it already (its compile-time values): the same result
            outs = inferred_outputs(graph, n, ins) or evaluate_node(n, ins)
        else:
            continue
        for name, arr in zip(n.outputs, outs, strict=False):
            if name:
                a = np.asarray(arr, dtype=values[name].dtype)
                if a.flags.writeable:  # fresh: no copy; a view of a writeable array: a read-only copy
                    if a.base is not None:
                        a = a.copy()
                    a.setflags(write=False)
                consts[name] = a  # set_constant's work, inline (a is read-only here)
                values[name] = Value(name, a.shape, a.dtype)
        for name in n.outputs[len(outs) :]:
            if name:  # an output the evaluation did not give: no constant to keep it
                raise KeyError(name)
        folded.append(n)
    if not folded and tidy:
        return g, True  # nothing to remove, nothing newly unreferenced
    # every output of a folded node is a constant now (its Value too): dropping the nodes drops no Value
    dropped = {id(n) for n in folded}
    g.nodes = [n for n in g.nodes if id(n) not in dropped]
    g.prune_values()
    return g, in_order
