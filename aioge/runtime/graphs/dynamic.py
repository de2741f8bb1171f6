"""Dynamic shapes: one compile of a graph with symbolic dims, a plan per concrete shape.

``await dev.compile(graph)`` of a graph whose inputs have symbolic dims (e.g.
``load_onnx`` of a model with a ``batch`` or ``sequence`` ``dim_param``)
returns a :class:`DynamicCompiledGraph`.  Its ``execute()`` takes feeds of
any shape that fits the declared dims (a dim name binds one size across all
inputs); the first execution at a new concrete shape specialises the graph
(:meth:`aioge.graph.Graph.specialize`) and compiles it into an ordinary
:class:`~aioge.CompiledGraph` (a *plan*), later ones reuse it.

* Plans are cached in a bounded LRU (``max_plans``, default
  :data:`MAX_PLANS`); the least recently used is closed when a new one would
  exceed it -- once no execution is using it.
* Concurrent first executions at one shape share one specialisation and one
  compile (the same specialised graph goes to ``Device.compile``, whose
  :class:`~aioge.runtime.scheduler.ThreadJob` they share).
* ``stats``: ``plans``, ``max_plans``, ``hits``, ``misses``, ``compiles``
  (specialisations started), ``evictions``, ``compiling`` (in flight).
* ``launch()`` never compiles (it never waits): ``await model.specialize(shapes)``
  first (execute() does it on its own).

``input_shapes=`` at load time still pins shapes up front (a static graph,
compiled once into a plain CompiledGraph).
"""

from __future__ import annotations

import collections
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

import anyio
import numpy as np

from ... import dtypes
from ...errors import BusyResourceError
from ...graph import GraphError
from ...graph.ir import Dim
from .._resources import Resource
from ..memory import trim_host_heap
from ..scheduler import Completion, ThreadJob
from ..stream import Tensor
from .compile import SHARED_WEIGHTS, compiles_inline
from .executable import CompiledGraph, SharedWeights, check_feed_names, feeds_dict

if TYPE_CHECKING:
    from ...graph import Graph
    from ..device import Device
    from ..stream import Stream

__all__ = ("DynamicCompiledGraph", "MAX_PLANS")

#: plans (one per concrete input shape) a dynamic model keeps by default (``model.max_plans``)
MAX_PLANS = 8

_Key = tuple[tuple[int, ...], ...]


class DynamicCompiledGraph(Resource):
    """A graph with symbolic dims, compiled per concrete input shape on first use.

    Attributes:
        inputs: ``{name: (dims, dtype)}``; a dim is an int, a dim name (str)
            or None (anonymous).
        outputs: ``{name: (dims, dtype)}`` as far as inference can tell
            without a concrete shape (``dims`` None when it cannot; a dim that
            follows an input dim carries its name).
        graph: the dynamic graph.

    Lifecycle: as a CompiledGraph (``async with``, ``aclose()``; the device
    closes it); closing it closes every plan.
    """

    def __init__(self, device: Device, graph: Graph, options: Mapping[str, Any],
                 outputs: Mapping[str, tuple[tuple[Dim, ...] | None, np.dtype | None]],
                 max_plans: int = MAX_PLANS) -> None:  # fmt: skip
        self.device = device
        self.graph = graph
        self._options = dict(options)
        self.inputs: dict[str, tuple[tuple[Dim, ...], np.dtype]] = {}
        for n in graph.inputs:
            dt = graph.values[n].dtype
            assert dt is not None
            self.inputs[n] = (graph.input_dims(n), dt)
        self.outputs = dict(outputs)
        self._max_plans = _positive(max_plans)
        self._plans: collections.OrderedDict[_Key, CompiledGraph] = collections.OrderedDict()
        self._users: dict[CompiledGraph, int] = {}  # executions between taking a plan and launching it
        self._retired: dict[CompiledGraph, _Key] = {}  # evicted while in use: closed when idle
        self._specs: dict[_Key, Graph] = {}  # specialisations being compiled (shared by id in Device.compile)
        self._waiting: dict[_Key, int] = {}
        self._counts = {"hits": 0, "misses": 0, "compiles": 0, "evictions": 0}
        #: the device copies of the graph's constants, shared by every plan (uploaded once)
        self._weights = SharedWeights(graph.constants)
        device.context.models.add(self)  # closed with the device, like every compiled graph
        self._opened()

    @classmethod
    async def create(cls, device: Device, graph: Graph, options: Mapping[str, Any]) -> DynamicCompiledGraph:
        """Validate the graph and infer what it can of the outputs, then wrap it.

        The inference (shape inference of two specialisations, no weights
        touched: 0.5-1.9 ms for gru to shufflenet_v2 made dynamic) runs on a
        worker, or on the calling thread for a graph within the bounds of
        :func:`~aioge.runtime.graphs.compile.compiles_inline` (on every backend: it is
        Python alone)."""
        graph.validate(shapes=False)
        job: ThreadJob[dict[str, Any]] = ThreadJob(lambda: _probe_outputs(graph), "aioge-compile", _ignore,
                                                   inline=compiles_inline(graph))  # fmt: skip
        outputs = await job.result()
        return cls(device, graph, options, outputs)

    def __repr__(self) -> str:
        dims = ", ".join(f"{n}: {_fmt(d)}" for n, (d, _) in self.inputs.items())
        return f"<aioge.DynamicCompiledGraph {self.graph.name!r} ({dims}) plans={len(self._plans)}/{self._max_plans}>"

    # ---- the cache ----
    @property
    def max_plans(self) -> int:
        """Plans kept at most; lowering it closes the least recently used ones beyond it."""
        return self._max_plans

    @max_plans.setter
    def max_plans(self, n: int) -> None:
        self._max_plans = _positive(n)
        self._evict()

    @property
    def max_inflight(self) -> int:
        """``max_inflight`` of every plan (see :attr:`aioge.CompiledGraph.max_inflight`)."""
        return int(self._options["max_inflight"])

    @max_inflight.setter
    def max_inflight(self, n: int) -> None:
        self._options["max_inflight"] = _positive(n)
        for cg in self._plans.values():
            cg.max_inflight = n

    @property
    def stats(self) -> dict[str, int]:
        """``plans`` cached, ``max_plans``, cache ``hits``/``misses``, ``compiles`` started,
        ``evictions``, ``compiling`` (specialisations in flight)."""
        return {"plans": len(self._plans), "max_plans": self._max_plans, **self._counts,
                "compiling": len(self._specs)}  # fmt: skip

    @property
    def cached_shapes(self) -> list[dict[str, tuple[int, ...]]]:
        """The input shapes of every cached plan, least recently used first."""
        return [dict(zip(self.inputs, key, strict=True)) for key in self._plans]

    def _key(self, shapes: Mapping[str, Sequence[int]]) -> _Key:
        self.graph.bind_dims(shapes)  # ShapeInferenceError (a ValueError) naming the input
        return tuple(tuple(int(d) for d in shapes[n]) for n in self.inputs)

    async def specialize(self, shapes: Mapping[str, Sequence[int]]) -> CompiledGraph:
        """The plan for concrete input shapes (every input), compiled now if not cached.

        The plan stays owned by this model (closed on eviction or with it).
        """
        self._check_open()
        key = self._key(shapes)
        cg = await self._acquire(key)
        self._release_plan(cg)
        return cg

    async def _acquire(self, key: _Key) -> CompiledGraph:
        """The plan for ``key``, counted as in use (``_release_plan`` when launched)."""
        cg = self._plans.get(key)
        if cg is not None and cg.closed:  # closed behind our back (the device closed it)
            del self._plans[key]
            cg = None
        if cg is not None:
            self._counts["hits"] += 1
            self._plans.move_to_end(key)
        else:
            self._counts["misses"] += 1
        while cg is None or cg.closed:
            cg = await self._compile(key)
            self._check_open_or_discard(cg)
        self._users[cg] = self._users.get(cg, 0) + 1
        return cg

    async def _compile(self, key: _Key) -> CompiledGraph:
        spec = self._specs.get(key)
        if spec is None:
            spec = self._specs[key] = self.graph.specialize(dict(zip(self.inputs, key, strict=True)))
            SHARED_WEIGHTS[spec] = self._weights
            self._counts["compiles"] += 1
        self._waiting[key] = self._waiting.get(key, 0) + 1
        try:
            compiled = await self.device.compile(spec, **self._options)
            assert isinstance(compiled, CompiledGraph)  # a specialised graph is static
            cg = compiled
        finally:
            self._waiting[key] -= 1
            if not self._waiting[key]:
                del self._waiting[key]
                if self._specs.get(key) is spec:
                    del self._specs[key]  # nobody left to share it (done, failed or cancelled)
        if self._specs.get(key) is spec:
            del self._specs[key]  # compiled: later callers find the plan
        if not cg.closed and key not in self._plans and cg not in self._retired and not self._closed:
            self._plans[key] = cg
            self._evict()
        return cg

    def _check_open_or_discard(self, cg: CompiledGraph) -> None:
        if self._closed:  # closed while compiling: the plan is nobody's
            cg.close()
            self._check_open()

    def _evict(self) -> None:
        while len(self._plans) > self._max_plans:
            key, old = self._plans.popitem(last=False)
            self._counts["evictions"] += 1
            self._retired[old] = key
        self._reap()

    def _release_plan(self, cg: CompiledGraph) -> None:
        self._users[cg] -= 1
        if not self._users[cg]:
            del self._users[cg]
        self._reap()

    def _reap(self) -> None:
        """Close retired plans nobody is about to use (an execution in flight holds what it needs)."""
        for cg, key in list(self._retired.items()):
            if cg in self._users or key in self._waiting:
                continue
            try:
                cg.close()
            except BusyResourceError:
                continue  # aux streams still busy: the next reap (or aclose) closes it
            del self._retired[cg]

    # ---- execution ----
    def _feed_key(self, feeds: Mapping[str, Any]) -> _Key:
        check_feed_names(self.graph.name, self.inputs, feeds)
        shapes = {}
        for n, (_, dt) in self.inputs.items():
            x = feeds[n]
            xd = x.dtype if isinstance(x, Tensor) else np.asarray(x).dtype
            if dtypes.normalize(xd) != dt:
                raise TypeError(f"{self.graph.name}: input {n!r} has dtype {xd}, the model takes {dt}")
            shapes[n] = tuple(x.shape if isinstance(x, Tensor) else np.shape(x))
        return self._key(shapes)

    async def execute(
        self,
        feeds: Mapping[str, Any] | Any,
        *,
        stream: Stream | None = None,
        as_tensors: bool = False,
        timeout: float | None = None,
    ) -> dict[str, Any]:
        """Run the model once at the feeds' shapes (see :meth:`aioge.CompiledGraph.execute`).

        The first run at a new shape compiles its plan (concurrent ones share
        that compile); ``timeout`` covers the compile too.

        Raises:
            FeedError: not a dict of input name -> array (nor one array for a model of one
                input), or missing / unknown input names (nothing compiled).
            ValueError/TypeError: a feed of the wrong dtype or a shape
                that does not fit the declared dims (nothing compiled).
            GraphError: the graph cannot be compiled at that shape (naming the node).
        """
        self._check_open()
        feeds = feeds_dict(self.graph.name, self.inputs, feeds)
        key = self._feed_key(feeds)
        with anyio.fail_after(timeout) if timeout is not None else _nullcontext():
            cg = await self._acquire(key)
            try:
                return await cg.execute(feeds, stream=stream, as_tensors=as_tensors)
            finally:
                self._release_plan(cg)

    def launch(
        self, inputs: Sequence[Tensor], outputs: Sequence[Tensor] | None = None, *, stream: Stream | None = None
    ) -> tuple[dict[str, Tensor], list[Completion]]:
        """Enqueue one execution on a cached plan (see :meth:`aioge.CompiledGraph.launch`).

        Never compiles: ``await model.specialize(shapes)`` first for a new shape.
        """
        self._check_open()
        if len(inputs) != len(self.inputs):
            raise ValueError(f"{self.graph.name}: {len(inputs)} inputs given, the model takes {len(self.inputs)}")
        for t, name in zip(inputs, self.inputs, strict=True):
            if not isinstance(t, Tensor):
                raise TypeError(f"{self.graph.name}: input {name!r} must be a Tensor")
        key = self._key({n: t.shape for n, t in zip(self.inputs, inputs, strict=True)})
        cg = self._plans.get(key)
        if cg is None:
            shown = {n: t.shape for n, t in zip(self.inputs, inputs, strict=True)}
            raise ValueError(f"{self.graph.name}: no plan for input shapes {shown} yet; "
                             "`await model.specialize(shapes)` first (execute() compiles on its own)")  # fmt: skip
        self._counts["hits"] += 1
        self._plans.move_to_end(key)
        return cg.launch(inputs, outputs, stream=stream)

    # ---- lifecycle ----
    def _all_plans(self) -> list[CompiledGraph]:
        return [*self._plans.values(), *self._retired]

    async def _drain(self) -> None:
        specs = {id(s) for s in self._specs.values()}
        for key, job in list(self.device.context.compiles.items()):
            if key[0] in specs:
                await job.wait()  # the caller that gets its plan closes it (we are closing)
        for cg in self._all_plans():
            await cg.aclose()

    def _close(self) -> None:
        for cg in self._all_plans():
            cg.close()  # BusyResourceError when a plan has executions in flight on aux streams
        self._plans.clear()
        self._retired.clear()
        self._users.clear()
        self._weights.close()  # each copy goes once the last plan or execution using it let go
        if not self.device.closed:
            self.device.context.pool.trim()  # blocks cached for shapes this model ran: back to the runtime
        trim_host_heap()  # and what the runtime freed, back to the system
        self.device.context.models.discard(self)

    def _gc_release(self) -> None:
        for cg in self._all_plans():
            cg._force_close()

    def _describe(self) -> str:
        return f"DynamicCompiledGraph {self.graph.name!r}"


# ---- what can be told of the outputs without a concrete shape ----
def _probe_outputs(graph: Graph) -> dict[str, tuple[tuple[Dim, ...] | None, np.dtype | None]]:
    """Output dims from shape inference at two probe sizes per symbolic dim.

    A dim equal in both probes is static; one that took the probe sizes of an
    input dim follows it (its name, or None for an anonymous one); anything
    else (a derived size) is unknown.  Small sizes are tried first (a
    position table bounds a sequence length), then multiples of 32 (a
    strided model needs them); a graph that rejects both has unknown outputs.
    """
    from ...graph.passes.infer_shapes import infer_shapes

    index: dict[Any, int] = {}  # a dim name, or (input, axis) for an anonymous dim -> its number
    for n in graph.inputs:
        for axis, d in enumerate(graph.symbolic.get(n, ())):
            if isinstance(d, str):
                index.setdefault(d, len(index))
            elif d is None:
                index[(n, axis)] = len(index)
    names = {i: (k if isinstance(k, str) else None) for k, i in index.items()}
    k = len(index)
    results: list[Graph] = []
    for scale, first, second in ((1, 2, 2 + k), (32, 2, 3 + k)):  # per dim i: scale*(first+i), scale*(second+i)
        results = []
        for base in (first, second):
            sizes = {key: scale * (base + i) for key, i in index.items()}
            shapes = {n: tuple(sizes[d] if isinstance(d, str) else sizes[(n, a)] if d is None else d
                               for a, d in enumerate(dims)) for n, dims in graph.symbolic.items()}  # fmt: skip
            try:
                results.append(infer_shapes(graph.specialize(shapes)))
            except GraphError:
                break
        if len(results) == 2:
            probe1 = {scale * (first + i): i for i in range(k)}
            probe2 = {scale * (second + i): i for i in range(k)}
            break
    out: dict[str, tuple[tuple[Dim, ...] | None, np.dtype | None]] = {}
    for o in graph.outputs:
        if len(results) < 2:
            out[o] = (None, graph.values[o].dtype)
            continue
        s1, s2 = results[0].values[o].shape, results[1].values[o].shape
        dt = results[0].values[o].dtype
        if s1 is None or s2 is None or len(s1) != len(s2):
            out[o] = (None, dt)
            continue
        dims: list[Dim] = []
        for d1, d2 in zip(s1, s2, strict=True):
            i = probe1.get(d1)
            dims.append(d1 if d1 == d2 else names[i] if i is not None and probe2.get(d2) == i else None)
        out[o] = (tuple(dims), dt)
    return out


def _fmt(dims: Sequence[Dim]) -> str:
    return "x".join("?" if d is None else str(d) for d in dims) or "scalar"


def _positive(n: int) -> int:
    if int(n) < 1:
        raise ValueError(f"must be >= 1, not {n}")
    return int(n)


def _ignore(_: object) -> None:
    pass


class _nullcontext:
    def __enter__(self) -> None:
        return None

    def __exit__(self, *exc: object) -> None:
        return None
