"""Small helpers shared by the passes."""

from __future__ import annotations

from operator import is_

import numpy as np

from ..errors import PlanError
from ..ir import Graph, Node


def working_copy(graph: Graph) -> Graph:
    """The graph a pass edits and returns: a copy of ``graph`` (a pass leaves its argument
    untouched), or ``graph`` itself when it is ``optimize``'s working graph, handed from pass to
    pass (one copy per ``optimize`` instead of one per pass)."""
    return graph if graph._scratch else graph.copy()


def node_order(graph: Graph, tidy: bool) -> tuple[list[Node], bool]:
    """``graph``'s nodes in topological order (a new list), and whether that is ``graph.nodes``' own
    order.  ``tidy``: the caller knows it is (``optimize``'s working graph between passes that keep
    their nodes in order, see ``optimize``), so the list is not checked again."""
    if tidy:
        return list(graph.nodes), True
    order = graph.topological_order()
    return order, len(order) == len(graph.nodes) and all(map(is_, order, graph.nodes))


def require_shapes(graph: Graph, what: str) -> None:
    """Raise unless every value has a shape and dtype (the pass needs them).

    ``optimize``'s working graph is not checked: it starts inferred, and each pass gives every value
    it makes its shape and dtype."""
    if graph._scratch:
        return
    for v in graph.values.values():
        if v.shape is None or v.dtype is None:  # not v.known: a property call per value
            raise PlanError(f"{what} needs inferred shapes; value {v.name!r} has none (run infer_shapes)")


def single_consumer(graph: Graph, consumers: dict[str, list[Node]], value: str) -> Node | None:
    """The only consumer of ``value`` if it has exactly one and is not a graph output."""
    users = consumers.get(value, [])
    if len(users) != 1 or value in graph.outputs:
        return None
    if sum(1 for i in users[0].inputs if i == value) != 1:
        return None
    return users[0]


def scalar_constant(graph: Graph, name: str) -> float | None:
    """The float value of a one-element constant, else None."""
    arr = graph.constants.get(name)
    if arr is None or arr.size != 1:
        return None
    return float(np.asarray(arr).reshape(-1)[0])


def rename_output(graph: Graph, old: str, new: str) -> None:
    """Make ``new`` (an existing, soon orphaned value name) the output written by ``old``'s producer."""
    for n in graph.nodes:
        n.outputs = [new if o == old else o for o in n.outputs]
        n.inputs = [new if i == old else i for i in n.inputs]
    v = graph.values.pop(old)
    graph.values[new].shape, graph.values[new].dtype = v.shape, v.dtype
