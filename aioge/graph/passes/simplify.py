"""Algebraic simplification: remove ops that do nothing on static shapes.

* ``Identity``, inference ``Dropout`` (mask unused), ``Cast`` to the same
  dtype, ``Transpose`` with the identity permutation, and reshape-like ops
  (Reshape/Flatten/Squeeze/Unsqueeze) whose output shape equals the input's;
* chains of reshape-like ops collapse into one ``Reshape`` with a constant
  target shape;
* a ``Transpose`` of a ``Transpose`` becomes one ``Transpose`` of the first
  input with the composed permutation (torch's exports chain permutes, e.g.
  BERT's ``(2,0,1,3)`` then ``(1,2,0,3)`` then ``(0,2,1,3)``: one copy, not three).

Needs inferred shapes.  Returns a new graph; the input is not modified.
Graph output names never change: when the removed node writes a graph output
the producer of its input is renamed to write that output instead (unless
that input is itself a graph input, constant or output; then the node stays).
"""

from __future__ import annotations

import numpy as np

from ..ir import Graph, Node
from ..schema import get_attr
from ._util import rename_output, require_shapes, working_copy

__all__ = ("simplify",)

_RESHAPE_LIKE = frozenset({"Reshape", "Flatten", "Squeeze", "Unsqueeze"})


def _is_noop(g: Graph, n: Node) -> bool:
    op = n.op_type
    x = g.values[n.inputs[0]]
    y = g.values[n.outputs[0]]
    if op == "Identity":
        return True
    if op == "Dropout":
        return len([o for o in n.outputs if o]) == 1
    if op == "Cast":
        return x.dtype == y.dtype
    if op == "Transpose":
        perm = get_attr(n, "perm")
        return perm is not None and list(perm) == list(range(len(x.shape or ())))
    if op in _RESHAPE_LIKE:
        return x.shape == y.shape
    return False


def _bypass(g: Graph, n: Node) -> bool:
    """Remove single-input-passthrough node ``n``; False if it must stay."""
    src, dst = n.inputs[0], n.outputs[0]
    if dst in g.outputs:
        if src in g.inputs or src in g.constants or src in g.outputs:
            return False
        g.nodes.remove(n)
        rename_output(g, src, dst)
        return True
    g.nodes.remove(n)
    g.replace_uses(dst, src)
    g.values.pop(dst, None)
    return True


def simplify(graph: Graph) -> Graph:
    """Return a simplified copy of ``graph`` (see the module docstring)."""
    require_shapes(graph, "simplify")
    g = working_copy(graph)
    changed = True
    while changed:
        changed = False
        # built once per sweep (not per reshape: that was quadratic); a bypass or collapse leaves the
        # entries of every value still read valid (the values it strands are no longer read)
        prods = g.producers()
        for n in list(g.topological_order()):
            if n.op_type in _RESHAPE_LIKE | {"Identity", "Dropout", "Cast", "Transpose"} and _is_noop(g, n):
                if _bypass(g, n):
                    changed = True
                    continue
            if n.op_type in _RESHAPE_LIKE:
                changed |= _collapse_reshape(g, n, prods)
            elif n.op_type == "Transpose":
                changed |= _compose_transpose(g, n, prods)
    g.prune_values()
    return g


def _collapse_reshape(g: Graph, n: Node, prods: dict[str, Node]) -> bool:
    """Reshape-like fed by a reshape-like with no other use -> one Reshape from the first input."""
    prod = prods.get(n.inputs[0])
    if prod is None or prod.op_type not in _RESHAPE_LIKE:
        return False
    src = prod.inputs[0]
    shape_name = g.fresh_name(f"{n.name}/shape")
    g.set_constant(shape_name, np.array(g.values[n.outputs[0]].shape, np.int64))
    n.op_type, n.inputs, n.attrs = "Reshape", [src, shape_name], {}
    # the producer may still have other consumers; DCE drops it otherwise
    if not any(prod.outputs[0] in m.inputs for m in g.nodes) and prod.outputs[0] not in g.outputs:
        g.remove_nodes([prod])
    return True


def _compose_transpose(g: Graph, n: Node, prods: dict[str, Node]) -> bool:
    """Transpose fed by a Transpose -> one Transpose of the first input (perm q[k] = p1[p2[k]])."""
    prod = prods.get(n.inputs[0])
    if prod is None or prod.op_type != "Transpose":
        return False
    p1, p2 = get_attr(prod, "perm"), get_attr(n, "perm")
    if p1 is None or p2 is None or len(p1) != len(p2):
        return False
    n.inputs = [prod.inputs[0]]
    n.attrs = {**n.attrs, "perm": [int(p1[k]) for k in p2]}
    if not any(prod.outputs[0] in m.inputs for m in g.nodes) and prod.outputs[0] not in g.outputs:
        g.remove_nodes([prod])
    return True
