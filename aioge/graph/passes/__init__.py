"""Compile passes and the ``optimize`` pipeline.

Every pass is a function ``Graph -> Graph`` that returns a new graph and
leaves its argument untouched; all but ``infer_shapes`` and
``eliminate_dead_code`` need inferred shapes.

``optimize(graph, level=2)``:

* level 0: ``infer_shapes`` (validation and shapes only);
* level 1: + ``simplify``, ``fold_constants``, ``eliminate_dead_code``,
  ``eliminate_common_subexpressions``, repeated until another round would
  change nothing;
* level 2: + ``fuse``: the fusions the :class:`~aioge.graph.target.Target`
  allows (host: Conv+BN folding, bias+activation, elementwise chains;
  ascend: Conv+BN folding only, which emits no host-only op type);
  then, for a target whose ``layouts`` include ``"NCHWc8"``,
  ``nchwc_layout``: convolution chains in the channel-blocked layout
  (:mod:`aioge.graph.passes.nchwc`).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any, TypeVar

from ..ir import Graph
from ..target import HOST, Target
from .cse import common_subexpressions_pass, eliminate_common_subexpressions
from .dce import dead_code_pass, eliminate_dead_code
from .fold_constants import fold_constants, fold_constants_pass
from .fuse import fold_conv_batchnorm, fuse, fuse_bias_activation, fuse_elementwise, fuse_gelu
from .infer_shapes import carry_inference, infer_shapes, is_inferred
from .nchwc import nchwc_layout
from .simplify import simplify, simplify_pass

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
    "fuse_gelu",
    "nchwc_layout",
)

_T = TypeVar("_T")


def optimize(
    graph: Graph,
    level: int = 2,
    *,
    target: Target = HOST,
    on_pass: Callable[[str, float], None] | None = None,
) -> Graph:
    """Run the pass pipeline for ``level`` (0, 1 or 2) and ``target``; return a new, validated graph.

    ``on_pass(name, seconds)`` is called after each pass (compile logging and progress).
    """
    if level not in (0, 1, 2):
        raise ValueError(f"optimize level must be 0, 1 or 2, not {level!r}")

    def run(p: Callable[..., _T], g: Graph, name: str | None = None, **kw: Any) -> _T:
        if on_pass is None:
            return p(g, **kw)
        t = time.perf_counter()
        out = p(g, **kw)
        on_pass(name or p.__name__, time.perf_counter() - t)
        return out

    if is_inferred(graph):  # e.g. load_onnx's result: validated and inferred there, unchanged since
        g = graph.copy()
        carry_inference(graph, g)  # the final infer_shapes re-infers only what the passes changed
    else:
        graph.validate(shapes=False)  # shapes: inferred next
        g = run(infer_shapes, graph)  # a copy
    # g is this call's own working graph from here on: each pass edits it in place (no copy per pass)
    g._scratch = True
    # tidy: g's nodes are in topological order and no value or constant is unreferenced.  Each pass
    # reports whether its result is; the next one then neither checks the order nor (when it changes
    # nothing) prunes again
    tidy = False
    if level >= 1:
        for _ in range(8):
            g, tidy = run(simplify_pass, g, "simplify", tidy=tidy)
            g, tidy = run(fold_constants_pass, g, "fold_constants", tidy=tidy)
            g, dce_changed = run(dead_code_pass, g, "eliminate_dead_code", tidy=tidy)
            g, cse_rerun = run(common_subexpressions_pass, g, "eliminate_common_subexpressions", tidy=True)
            tidy = not cse_rerun  # DCE's result is tidy; CSE keeps it so but where it asks for a rerun
            # Another round finds something only after a change by DCE (a node or an optional output
            # fewer can make a Dropout a no-op for simplify, or a folded result small enough or read
            # only as weights for fold_constants) or CSE's one case that does not cascade within a
            # run.  What simplify and fold_constants change, the passes after them in this round take
            # up: fold_constants creates no chain of reshapes or transposes and no no-op for
            # simplify; CSE redirects reads from a node to one of the same op type, and from a
            # constant to a constant, which makes nothing foldable or simplifiable and nothing dead.
            if not (dce_changed or cse_rerun):
                break
    if level >= 2:
        f = target.fusions

        def fuse_for_target(g: Graph, tidy: bool) -> Graph:
            return fuse(g, conv_bn="conv_bn" in f, bias_activation="bias_activation" in f,
                        elementwise="elementwise" in f, tidy=tidy)  # fmt: skip

        fuse_for_target.__name__ = "fuse"
        g = run(fuse_for_target, g, tidy=tidy)  # its result is tidy if g is
        g, _ = run(dead_code_pass, g, "eliminate_dead_code", tidy=tidy)  # its result is tidy
        if "NCHWc8" in target.layouts:
            g = run(nchwc_layout, g, tidy=True)
    g = run(infer_shapes, g)
    g._validate_structure(signatures=False)  # infer_shapes just checked each node's signature and dtypes
    g._scratch = False
    return g
