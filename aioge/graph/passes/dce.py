"""Dead-code elimination.

Removes nodes none of whose outputs reach a graph output, blanks unused
optional outputs (``Dropout`` mask, ``LayerNormalization`` mean/inv-std-dev,
``MaxPool`` indices)
and drops constants and values nothing refers to.  Graph inputs stay (they
are the signature) even if unused.  Returns a new graph.
"""

from __future__ import annotations

from ..ir import Graph
from ._util import node_order, working_copy

__all__ = ("eliminate_dead_code",)

# ops whose trailing outputs are optional (safe to drop when unused)
_OPTIONAL_OUTPUTS = {"Dropout": 1, "LayerNormalization": 1, "MaxPool": 1}


def eliminate_dead_code(graph: Graph) -> Graph:
    """Return a copy of ``graph`` without dead nodes, outputs and constants."""
    return dead_code_pass(graph)[0]


def dead_code_pass(graph: Graph, *, tidy: bool = False) -> tuple[Graph, bool]:
    """:func:`eliminate_dead_code`, and whether it changed anything (a node, output, value or constant).

    The result is tidy (see ``simplify_pass``): its nodes are kept in topological order, and pruned.
    ``tidy``: ``graph`` is (then its order is not checked, and not pruned again when nothing changes)."""
    g = working_copy(graph)
    n_nodes, n_values, n_constants = len(g.nodes), len(g.values), len(g.constants)
    blanked = False
    live = set(g.outputs)
    keep = []
    for n in reversed(node_order(g, tidy)[0]):
        if any(o in live for o in n.outputs if o):
            keep.append(n)
            live.update(n.inputs)  # "" (an absent input) too: no output is named ""
    keep.reverse()
    g.nodes = keep
    for n in g.nodes:
        first_optional = _OPTIONAL_OUTPUTS.get(n.op_type)
        if first_optional is None:
            continue
        outs = [o if (i < first_optional or o in live) else "" for i, o in enumerate(n.outputs)]
        while len(outs) > 1 and not outs[-1]:
            outs.pop()
        if outs != n.outputs:
            blanked = True
            n.outputs = outs
    if tidy and not blanked and len(keep) == n_nodes:
        return g, False  # no node or output fewer: nothing newly unreferenced
    g.prune_values()
    return g, blanked or (len(g.nodes), len(g.values), len(g.constants)) != (n_nodes, n_values, n_constants)
