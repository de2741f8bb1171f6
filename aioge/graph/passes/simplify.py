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
from ._util import node_order, rename_output, require_shapes, working_copy

__all__ = ("simplify", "simplify_pass")

_RESHAPE_LIKE = frozenset({"Reshape", "Flatten", "Squeeze", "Unsqueeze"})
#: op types that can be no-ops (``_is_noop``)
_MAYBE_NOOP = _RESHAPE_LIKE | {"Identity", "Dropout", "Cast", "Transpose"}


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


class _Sweep:
    """One pass over the nodes: who reads each value (a superset, checked on use), and the nodes
    removed so far (dropped from the graph in one go at the end: removing them one at a time
    rescanned every node, quadratic on transformer exports)."""

    def __init__(self, g: Graph) -> None:
        self.g = g
        self.prods = g.producers()
        self.readers = g.consumers()
        self.dead: list[Node] = []
        self._dead_ids: set[int] = set()

    def read(self, value: str) -> bool:
        """Whether a live node reads ``value``."""
        return any(id(m) not in self._dead_ids and value in m.inputs for m in self.readers.get(value, ()))

    def rewire(self, n: Node, inputs: list[str]) -> None:
        """Make ``n`` read ``inputs``."""
        n.inputs = inputs
        for x in inputs:
            if x:
                self.readers.setdefault(x, []).append(n)

    def drop(self, n: Node) -> None:
        self.dead.append(n)
        self._dead_ids.add(id(n))

    def is_dead(self, n: Node) -> bool:
        return id(n) in self._dead_ids


def _bypass(sw: _Sweep, n: Node) -> bool:
    """Remove single-input-passthrough node ``n``; False if it must stay."""
    g = sw.g
    src, dst = n.inputs[0], n.outputs[0]
    if dst in g.outputs:
        if src in g.inputs or src in g.constants or src in g.outputs:
            return False
        g.nodes.remove(n)
        rename_output(g, src, dst)
        sw.prods = g.producers()
        return True
    sw.drop(n)
    for m in sw.readers.pop(dst, ()):
        if not sw.is_dead(m) and dst in m.inputs:
            sw.rewire(m, [src if i == dst else i for i in m.inputs])
    g.values.pop(dst, None)
    return True


def simplify(graph: Graph) -> Graph:
    """Return a simplified copy of ``graph`` (see the module docstring)."""
    return simplify_pass(graph)[0]


def simplify_pass(graph: Graph, *, tidy: bool = False) -> tuple[Graph, bool]:
    """:func:`simplify`, and whether the result is tidy: its nodes in topological order and nothing
    unreferenced left (see ``optimize``).  ``tidy``: ``graph`` is (then nothing is checked or pruned
    again when nothing changes); the result's nodes keep the order of ``graph``'s."""
    require_shapes(graph, "simplify")
    g = working_copy(graph)
    pruned = tidy
    changed = True
    edited = False
    while changed:
        changed = False
        # producers and readers built once per sweep (not per node: that was quadratic); a bypass or
        # collapse leaves the entries of every value still read valid (the values it strands are no
        # longer read)
        sw = _Sweep(g)
        order, tidy = node_order(g, tidy)  # a sweep removes nodes and rewires reads to earlier values
        for n in order:
            if sw.is_dead(n):
                continue
            if n.op_type in _MAYBE_NOOP and _is_noop(g, n):
                if _bypass(sw, n):
                    changed = True
                    continue
            if n.op_type in _RESHAPE_LIKE:
                changed |= _collapse_reshape(sw, n)
            elif n.op_type == "Transpose":
                changed |= _compose_transpose(sw, n)
        if sw.dead:
            g.remove_nodes(sw.dead)
        edited |= changed
    if edited or not pruned:
        g.prune_values()
    return g, tidy


def _collapse_reshape(sw: _Sweep, n: Node) -> bool:
    """Reshape-like fed by a reshape-like with no other use -> one Reshape from the first input."""
    g = sw.g
    prod = sw.prods.get(n.inputs[0])
    if prod is None or prod.op_type not in _RESHAPE_LIKE or sw.is_dead(prod):
        return False
    src = prod.inputs[0]
    shape_name = g.fresh_name(f"{n.name}/shape")
    g.set_constant(shape_name, np.array(g.values[n.outputs[0]].shape, np.int64))
    n.op_type, n.attrs = "Reshape", {}
    sw.rewire(n, [src, shape_name])
    # the producer may still have other consumers; DCE drops it otherwise
    if not sw.read(prod.outputs[0]) and prod.outputs[0] not in g.outputs:
        sw.drop(prod)
    return True


def _compose_transpose(sw: _Sweep, n: Node) -> bool:
    """Transpose fed by a Transpose -> one Transpose of the first input (perm q[k] = p1[p2[k]])."""
    g = sw.g
    prod = sw.prods.get(n.inputs[0])
    if prod is None or prod.op_type != "Transpose" or sw.is_dead(prod):
        return False
    p1, p2 = get_attr(prod, "perm"), get_attr(n, "perm")
    if p1 is None or p2 is None or len(p1) != len(p2):
        return False
    n.attrs = {**n.attrs, "perm": [int(p1[k]) for k in p2]}
    sw.rewire(n, [prod.inputs[0]])
    if not sw.read(prod.outputs[0]) and prod.outputs[0] not in g.outputs:
        sw.drop(prod)
    return True
