"""Compile passes and the ``optimize`` pipeline.

Every pass is a function ``Graph -> Graph`` that returns a new graph and
leaves its argument untouched; all but ``infer_shapes`` and
``eliminate_dead_code`` need inferred shapes.

``optimize(graph, level=2)``:

* level 0: ``infer_shapes`` (validation and shapes only);
* level 1: + ``simplify``, ``fold_constants``, ``eliminate_dead_code``,
  ``eliminate_common_subexpressions`` (repeated until nothing changes);
* level 2: + ``fuse`` (Conv+BN folding, bias+activation, elementwise chains).
"""

from __future__ import annotations

import time
from collections.abc import Callable

from ..ir import Graph
from .cse import eliminate_common_subexpressions
from .dce import eliminate_dead_code
from .fold_constants import fold_constants
from .fuse import fold_conv_batchnorm, fuse, fuse_bias_activation, fuse_elementwise
from .infer_shapes import infer_shapes
from .simplify import simplify

__all__ = (
    "optimize",
    "infer_shapes",
    "simplify",
    "fold_constants",
    "eliminate_dead_code",
    "eliminate_common_subexpressions",
    "fuse",
    "fold_conv_batchnorm",
    "fuse_bias_activation",
    "fuse_elementwise",
)


def _signature(g: Graph) -> tuple[int, int, int]:
    return len(g.nodes), len(g.constants), sum(a.size for a in g.constants.values())


def optimize(graph: Graph, level: int = 2, *, on_pass: Callable[[str, float], None] | None = None) -> Graph:
    """Run the pass pipeline for ``level`` (0, 1 or 2) and return a new, validated graph.

    ``on_pass(name, seconds)`` is called after each pass (compile logging and progress).
    """
    if level not in (0, 1, 2):
        raise ValueError(f"optimize level must be 0, 1 or 2, not {level!r}")

    def run(p: Callable[[Graph], Graph], g: Graph) -> Graph:
        if on_pass is None:
            return p(g)
        t = time.perf_counter()
        out = p(g)
        on_pass(p.__name__, time.perf_counter() - t)
        return out

    graph.validate()
    g = run(infer_shapes, graph)
    if level >= 1:
        for _ in range(8):
            before = _signature(g)
            g = run(simplify, g)
            g = run(fold_constants, g)
            g = run(eliminate_dead_code, g)
            g = run(eliminate_common_subexpressions, g)
            if _signature(g) == before:
                break
    if level >= 2:
        g = run(fuse, g)
        g = run(eliminate_dead_code, g)
    g = run(infer_shapes, g)
    g.validate()
    return g
