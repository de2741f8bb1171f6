"""The compile driver: graph + target -> a loaded :class:`~aioge.CompiledGraph`.

Optimises (the target's passes), plans, lowers for the target, lays the result
out (:mod:`aioge.graph.executable`) and loads it (:mod:`aioge.runtime.graphs.executable`).
``Device.compile`` runs it on a worker thread, or a small graph's on the
calling thread (:func:`compiles_inline`).
"""

from __future__ import annotations

import math
import weakref
from typing import TYPE_CHECKING

from ... import _native
from ...graph import lower_node, plan
from ...graph import optimize as run_passes
from ...graph.executable import ALIGN, Layout
from ...graph.lower.host import expand_host_ops
from ...graph.target import Target, target_for
from .. import _trace
from .executable import MAX_INFLIGHT, CompiledGraph, SharedWeights

if TYPE_CHECKING:
    from ...graph import Graph
    from ..device import Device

__all__ = ("SHARED_WEIGHTS", "compile_graph", "default_max_streams")

#: graphs whose compile takes its weights from a model's :class:`SharedWeights` (a dynamic-shape
#: model registers each specialisation it compiles): their plans share one device copy of each
SHARED_WEIGHTS: weakref.WeakKeyDictionary[Graph, SharedWeights] = weakref.WeakKeyDictionary()


def default_max_streams() -> int:
    """Streams a compiled plan may use by default.

    The host runtime's kernels split their work over the intra-op pool that
    every stream shares, so independent branches gain nothing from running on
    several streams and pay the joins: measured on 2 cores, one stream ran the
    inception-style model in 1.15 ms against 1.40 ms on two, the attention
    block in 2.34 against 2.56 ms, and the others the same.  A device with a
    graph engine (GE on Ascend) overlaps branches on its cores: 2 there.
    """
    return 1 if _native.backend == "host" else 2


def compile_graph(
    device: Device,
    graph: Graph,
    *,
    optimize: int = 2,
    max_streams: int | None = None,
    mode: str = "auto",
    max_inflight: int = MAX_INFLIGHT,
    target: Target | str | None = None,
) -> CompiledGraph:
    """Synchronous compile + load (``Device.compile`` runs it, a large graph's off the event loop).

    ``target``: what the compile may emit (default: the backend's, see :mod:`aioge.graph.target`).
    """
    if mode not in ("auto", "sunk", "per_op"):
        raise ValueError(f"mode must be 'auto', 'sunk' or 'per_op', not {mode!r}")
    if mode == "auto":
        mode = "sunk" if _native.has_graph_api else "per_op"
    if mode == "sunk" and not _native.has_graph_api:
        raise ValueError("sunk execution needs the aiogeGraph API (the host runtime, or a GE shim implementing it)")
    tgt = target_for(target if target is not None else _native.backend)
    steps = _trace.compile_steps(graph.name, optimize)  # times nothing unless logged or shown
    g = run_passes(graph, level=optimize, target=tgt, on_pass=steps.on_pass)
    if max_streams is None:
        max_streams = default_max_streams()
    with steps.step("plan"):
        p = plan(g, max_streams=max_streams if mode == "sunk" else 1, alignment=ALIGN)
    with steps.step("lower"):
        lowered = {st.node.name: expand_host_ops(g, lower_node(g, st.node, target=tgt), tgt)
                   for st in p.steps if not st.alias}  # fmt: skip
    used = {x for ln in lowered.values() for op in ln.ops for x in op.inputs if isinstance(x, str)}
    used |= {st.node.inputs[0] for st in p.steps if st.alias}
    used |= set(g.outputs)
    weights = [n for n in g.constants if n in used]
    build = Layout(g, p, lowered, weights)
    model = CompiledGraph(device, g, p, build, mode, lowered, max_inflight, SHARED_WEIGHTS.get(graph))
    try:
        with steps.step("load"):
            model._load()
    except BaseException:
        model.close()
        raise
    device.context.models.add(model)
    steps.finish(lambda: f"{mode}, {len(build.ops)} nodes in {len(build.segments)} segments on "
                         f"{p.num_streams} streams, arena {build.total_arena} B (max live "
                         f"{p.max_live_bytes} B), {len(weights)} weights")  # fmt: skip
    return model


#: graphs of at most this many nodes (and :data:`INLINE_ELEMENTS`) compile on the calling thread
INLINE_NODES = 128
#: ... and at most this many elements summed over their values (constants, fills and
#: activations alike): 4 MiB of float32
INLINE_ELEMENTS = 1 << 20


def compiles_inline(graph: Graph) -> bool:
    """Whether a host-backend compile of ``graph`` runs on the calling thread:
    at most :data:`INLINE_NODES` nodes and :data:`INLINE_ELEMENTS` elements
    summed over its values of known shape (a node count, then one pass over
    the values: ~3 us for gru, ~16 us for t5_encoder's 167).

    The bounds keep such a compile within the interpreter's 5 ms switch
    interval, below the loop stall a compile on a worker causes: the worker
    holds the GIL through the Python of the compile, so the loop runs only
    when the worker lets go of it, and on a busy machine waits beyond that for
    a core.  Measured on 2 cores (load 2): a compile takes ~0.04-0.08 ms per
    node (more for large convolutions) and ~0.5-0.8 ms per MB of values
    (weights packed and uploaded, fills made, the arena); within the bounds
    gru (10 nodes) 0.85 ms, lstm 1.4, unet 1.5, gpt2 3.6, t5_encoder (108
    nodes) 3.7, inception (53 nodes, 3.5 MB) 3.9, bert 4.0, vit_hf 4.3;
    beyond them attention (10.8 MB) 4.1, mlp (9 MB) 6.9, squeezenet1_1 8.3,
    shufflenet_v2 18, alexnet (39 nodes, 252 MB of fills) 115.  The longest
    loop gaps during compiles on a worker were 1.0 ms (gru), 3.7 (lstm), 6.5
    (t5_encoder), 16 (inception), 26 (attention), 32 (shufflenet); and the
    hop to the worker and back costs ~0.2 ms per compile, a quarter of gru's.
    """
    if len(graph.nodes) > INLINE_NODES:
        return False
    prod = math.prod
    return sum([prod(s) for v in graph.values.values() if (s := v.shape)]) <= INLINE_ELEMENTS
