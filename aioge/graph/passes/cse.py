"""Common-subexpression elimination.

Merges identical constants (same dtype, shape and bytes) and nodes with the
same op type, domain, inputs and attributes, in topological order so merges
cascade.  A duplicate whose output is a graph output is kept when the
original's output is a graph output too (graph output names never change).
Returns a new graph.
"""

from __future__ import annotations

import hashlib
from typing import Any

import numpy as np

from ..ir import Graph, Node
from ._util import node_order, working_copy

__all__ = ("eliminate_common_subexpressions",)


def _freeze(v: Any) -> Any:
    if isinstance(v, np.ndarray):
        return ("ndarray", v.dtype.str, v.shape, hashlib.sha1(np.ascontiguousarray(v).tobytes()).hexdigest())
    if isinstance(v, (list, tuple)):
        return tuple(_freeze(x) for x in v)
    if isinstance(v, dict):
        return tuple(sorted((k, _freeze(x)) for k, x in v.items()))
    if isinstance(v, float) and v != v:
        return ("nan",)
    return v


def _const_key(arr: np.ndarray) -> tuple[Any, ...]:
    flat = arr.reshape(-1)
    step = max(1, flat.size // 64)
    return (arr.dtype.str, arr.shape, flat[::step][:64].tobytes(), flat[-1:].tobytes())


def _equal(a: np.ndarray, b: np.ndarray) -> bool:
    """Same elements (NaN equal to NaN); ``a`` and ``b`` share dtype and shape (one ``_const_key``)."""
    if a is b:
        return True
    nan = a.dtype.kind in "fc"
    if a.size and not any(a.strides) and not any(b.strides):  # two broadcast scalars (folded fills), or 0-d
        a1, b1 = a.reshape(-1)[:1], b.reshape(-1)[:1]
        # the same bytes are the same element (as below): one compare before array_equal's 2 us
        return a1.tobytes() == b1.tobytes() or bool(np.array_equal(a1, b1, equal_nan=nan))
    # the same bytes are the same elements (a NaN against the same NaN too): what a shared key mostly
    # finds, a duplicate, confirmed by one memcmp (array_equal with equal_nan: 10 us for 32 floats, 40x
    # this); other bytes can still be equal elements (-0.0 and 0.0, NaNs of other payloads)
    if a.flags.c_contiguous and b.flags.c_contiguous and a.tobytes() == b.tobytes():
        return True
    return bool(np.array_equal(a, b, equal_nan=nan))


def eliminate_common_subexpressions(graph: Graph) -> Graph:
    """Return a copy of ``graph`` with duplicate constants and nodes merged."""
    return common_subexpressions_pass(graph)[0]


def common_subexpressions_pass(graph: Graph, *, tidy: bool = False) -> tuple[Graph, bool]:
    """:func:`eliminate_common_subexpressions`, and whether running it again could merge more.

    Merges cascade in one run (a node is keyed after its inputs' producers were merged), except
    where a duplicate is kept because it writes a graph output: readers of the dropped original
    keyed before it now read the duplicate, under keys that no longer say so.

    ``tidy``: ``graph``'s nodes are in topological order and nothing unreferenced is left (see
    ``simplify_pass``; not checked again, nor pruned when nothing merges).  The result keeps that
    order unless it returns True: a kept duplicate then writes what readers before it read.
    """
    g = working_copy(graph)
    rerun = False
    outputs = set(g.outputs)
    # constants
    # bucketed by a cheap key (dtype, shape, a strided sample of the elements) and confirmed by a
    # full comparison: hashing every weight in full (sha1) was most of this pass on CNNs
    seen: dict[Any, list[str]] = {}
    same: dict[str, str] = {}
    # one array under several names (fold_constants shares a fill's) is keyed once: by id, the
    # arrays staying alive in g.constants throughout
    keys: dict[int, tuple[Any, ...]] = {}
    for name in sorted(g.constants):
        arr = g.constants[name]
        key = keys.get(id(arr))
        if key is None:
            key = keys[id(arr)] = _const_key(arr)
        cands = seen.setdefault(key, [])
        orig = next((c for c in cands if _equal(g.constants[c], arr)), None)
        if orig is None:
            cands.append(name)
            continue
        if name in outputs:
            continue
        same[name] = orig
    g.rename_uses(same)
    # nodes
    index: dict[tuple[Any, ...], Node] = {}
    # the attrs part of a key (sha1 of array attrs) is computed only once two nodes share the rest
    alone: dict[tuple[Any, ...], Node | None] = {}
    dead: list[Node] = []
    for n in node_order(g, tidy)[0]:
        cheap = (n.op_type, n.domain, tuple(n.inputs), len(n.outputs))
        if cheap not in alone:
            alone[cheap] = n
            continue
        p = alone[cheap]
        if p is not None:
            index[(*cheap, _freeze(p.attrs))] = p
            alone[cheap] = None
        key = (*cheap, _freeze(n.attrs))
        first = index.get(key)
        if first is None:
            index[key] = n
            continue
        pairs = [(d, o) for d, o in zip(n.outputs, first.outputs, strict=False) if d]
        if any(d in outputs for d, _ in pairs):
            if any(o in outputs for _, o in pairs) or any(not o for _, o in pairs):
                continue
            # keep the duplicate (it writes a graph output) and drop the firstinal instead
            for d, o in pairs:
                _redirect(g, o, d)
            index[key] = n
            dead.append(first)
            rerun = True
            continue
        if any(not o for _, o in pairs):
            continue
        for d, o in pairs:
            _redirect(g, d, o)
        dead.append(n)
    if tidy and not dead and not same:
        return g, rerun  # nothing merged: nothing newly unreferenced
    g.remove_nodes(dead)
    g.prune_values()
    return g, rerun


def _redirect(g: Graph, old: str, new: str) -> None:
    for m in g.nodes:
        if old in m.inputs:
            m.inputs = [new if i == old else i for i in m.inputs]
