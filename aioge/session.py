"""``aioge.Session``: GE's ``ge::Session`` graph flow, one to one.

For users who know GE::

    sess = aioge.Session(dev)
    sess.add_graph(1, graph, {"ge.enableSingleStream": "true"})   # AddGraph
    await sess.compile_graph(1)                      # CompileGraph (off the loop)
    sess.load_graph(1, {"ge.exec.hostInputIndexes": "0"}, stream)   # LoadGraph
    outs = sess.execute_graph_with_stream_async(1, stream, [x_host, w_dev])   # enqueue, returns Tensors
    await stream.synchronize()                       # results ready, as after aclrtSynchronizeStream

GE's rules hold: LoadGraph needs CompileGraph first and happens once;
ExecuteGraphWithStreamAsync needs LoadGraph and runs on the given stream, or
the one LoadGraph bound when it is None; inputs are device tensors except
those listed in ``ge.exec.hostInputIndexes`` (host arrays, copied in with the
launch); inputs listed in ``ge.exec.frozenInputIndexes`` do not change
between runs: the first run's tensor is kept and reused, later runs pass
``None`` (or that same tensor) there; outputs are the caller's tensors or
allocated by the runtime.
"""

from __future__ import annotations

from collections.abc import Coroutine, Mapping, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from .errors import AioGeError
from .runtime._resources import Resource
from .runtime.stream import Tensor

if TYPE_CHECKING:
    from .graph import Graph
    from .runtime.device import Device
    from .runtime.graphs.dynamic import DynamicCompiledGraph
    from .runtime.graphs.executable import CompiledGraph
    from .runtime.stream import Stream

__all__ = ("Session", "SessionError")

_LOAD_OPTIONS = ("ge.exec.hostInputIndexes", "ge.exec.frozenInputIndexes")
#: AddGraph options and the ``Device.compile`` argument each sets
_GRAPH_OPTIONS = ("ge.enableSingleStream", "aioge.optimize", "aioge.maxStreams", "aioge.mode")


class SessionError(AioGeError, RuntimeError):
    """A Session call out of GE's order (unknown graph id, not compiled, loaded twice...)."""


class _Entry:
    def __init__(self, graph: Graph, options: Mapping[str, str]) -> None:
        self.graph = graph
        self.options = dict(options)
        self.compile_args = _compile_args(self.options)
        self.model: CompiledGraph | DynamicCompiledGraph | None = None
        self.compile_started = False  # compile_graph() called (awaited or not)
        self.loaded_on: Stream | None = None
        self.host_inputs: frozenset[int] = frozenset()
        self.frozen: frozenset[int] = frozenset()
        self.frozen_values: dict[int, Tensor] = {}


class Session(Resource):
    """A GE-style session on a device.

    Args:
        device: the :class:`~aioge.Device`.
        options: session options (``ge.*`` keys; recorded, and ``ge.graphRunMode``
            must be "0": inference).
    """

    def __init__(self, device: Device, options: Mapping[str, str] | None = None) -> None:
        device.context.check_open()
        self.device = device
        self.options = dict(options or {})
        if self.options.get("ge.graphRunMode", "0") != "0":
            raise SessionError("only inference (ge.graphRunMode = 0) is supported")
        self._graphs: dict[int, _Entry] = {}
        self._opened()

    def _entry(self, graph_id: int) -> _Entry:
        self._check_open()
        e = self._graphs.get(graph_id)
        if e is None:
            raise SessionError(f"graph {graph_id} was not added (AddGraph)")
        return e

    def add_graph(self, graph_id: int, graph: Graph, options: Mapping[str, str] | None = None) -> None:
        """``AddGraph``: register a graph under an id.

        Options (strings, as in GE), applied by ``compile_graph``:
        ``ge.enableSingleStream`` (``"true"``: the whole graph on one stream),
        ``aioge.optimize`` (pass level ``"0"``-``"2"``), ``aioge.maxStreams``
        (``"1"``...) and ``aioge.mode`` (``"auto"``, ``"sunk"``, ``"per_op"``):
        the arguments of :meth:`Device.compile`.  Any other key is refused
        (:class:`SessionError`) rather than silently ignored.
        """
        self._check_open()
        if graph_id in self._graphs:
            raise SessionError(f"graph id {graph_id} is already added")
        entry = _Entry(graph, options or {})
        graph.validate()
        self._graphs[graph_id] = entry

    def remove_graph(self, graph_id: int) -> None:
        """``RemoveGraph``: unload and forget a graph."""
        e = self._entry(graph_id)
        if e.model is not None:
            e.model.close()
        del self._graphs[graph_id]

    def compile_graph(self, graph_id: int) -> Coroutine[Any, Any, None]:
        """``CompileGraph``: optimise, plan and compile the graph (off the event loop),
        with the options given to ``add_graph``.  **Must be awaited**
        (``await sess.compile_graph(1)``); the other Session calls are plain.

        Cancellation: returns control at once and leaves the graph not
        compiled; the compile finishes on its thread and its model goes to a
        ``compile_graph`` retried meanwhile, or is closed (:meth:`Device.compile`).
        """
        e = self._entry(graph_id)
        e.compile_started = True  # at the call, so that a forgotten await can be named later
        return self._compile(e)

    async def _compile(self, e: _Entry) -> None:
        if e.model is None:
            e.model = await self.device.compile(e.graph, **e.compile_args)

    def _not_compiled(self, graph_id: int, e: _Entry, call: str) -> SessionError:
        if e.compile_started:
            return SessionError(f"graph {graph_id}: compile_graph() was called but has not finished: it must "
                                f"be awaited (`await session.compile_graph({graph_id})`) before {call}")  # fmt: skip
        return SessionError(f"graph {graph_id} must be compiled (CompileGraph) before {call}")

    def load_graph(self, graph_id: int, options: Mapping[str, str] | None, stream: Stream) -> None:
        """``LoadGraph``: bind a compiled graph to ``stream`` (the default stream of its runs).

        Only ``ge.exec.hostInputIndexes`` (``"0;2"``: those inputs are host
        arrays) and ``ge.exec.frozenInputIndexes`` (``"1"``: that input does
        not change between runs; see :meth:`execute_graph_with_stream_async`)
        are accepted, as in GE.
        """
        e = self._entry(graph_id)
        if e.model is None:
            raise self._not_compiled(graph_id, e, "LoadGraph")
        if e.loaded_on is not None:
            raise SessionError(f"graph {graph_id} is already loaded; a second LoadGraph is not supported")
        opts = dict(options or {})
        unknown = [k for k in opts if k not in _LOAD_OPTIONS]
        if unknown:
            raise SessionError(f"LoadGraph accepts only {_LOAD_OPTIONS}, got {unknown}")
        host = _indexes(opts.get("ge.exec.hostInputIndexes", ""), len(e.model.inputs))
        frozen = _indexes(opts.get("ge.exec.frozenInputIndexes", ""), len(e.model.inputs))
        if host & frozen:
            raise SessionError("an input index cannot be both a host input and frozen")
        e.host_inputs = host
        e.frozen = frozen
        e.loaded_on = stream

    def execute_graph_with_stream_async(
        self,
        graph_id: int,
        stream: Stream | None,
        inputs: Sequence[Any],
        outputs: Sequence[Tensor] | None = None,
    ) -> list[Tensor]:
        """``ExecuteGraphWithStreamAsync``: enqueue one run; return the outputs at once.

        Args:
            stream: where to run, or None for the stream given to ``load_graph``.
            inputs: one per graph input: a device Tensor; a host array at a
                ``ge.exec.hostInputIndexes`` index; at a
                ``ge.exec.frozenInputIndexes`` index the first run's Tensor is
                kept (not copied: the input is promised not to change) and
                reused, and later runs pass None there (or that same Tensor).
            outputs: tensors to write into, or None to allocate them.

        The results are ready once the stream synchronizes (or the returned
        tensors are awaited).  A node that fails on the device reports at
        that point, as in GE.

        Raises:
            SessionError: GE's order broken, or an input of the wrong kind for its index.
        """
        e = self._entry(graph_id)
        if e.model is None:
            raise self._not_compiled(graph_id, e, "ExecuteGraphWithStreamAsync")
        if e.loaded_on is None:
            raise SessionError(f"graph {graph_id} must be loaded (LoadGraph) before ExecuteGraphWithStreamAsync")
        model = e.model
        s = stream if stream is not None else e.loaded_on
        if len(inputs) != len(model.inputs):
            raise SessionError(f"graph {graph_id} takes {len(model.inputs)} inputs, {len(inputs)} given")
        dev_inputs: list[Tensor] = []
        first: dict[int, Tensor] = {}
        for i, x in enumerate(inputs):
            if i in e.host_inputs:
                if isinstance(x, Tensor):
                    raise SessionError(f"input {i} is listed in ge.exec.hostInputIndexes: pass a host array")
                dev_inputs.append(s.upload(np.asarray(x)))
            elif i in e.frozen and i in e.frozen_values:
                kept = e.frozen_values[i]
                if x is not None and x is not kept:
                    raise SessionError(f"input {i} is frozen (ge.exec.frozenInputIndexes): its first value is "
                                       "reused; pass None or that same Tensor")  # fmt: skip
                dev_inputs.append(kept)
            else:
                if not isinstance(x, Tensor):
                    what = "frozen input" if i in e.frozen else "input"
                    raise SessionError(f"{what} {i} must be a device Tensor (or listed in ge.exec.hostInputIndexes)")
                dev_inputs.append(x)
                if i in e.frozen:
                    first[i] = x
        outs, _ = model.launch(dev_inputs, outputs, stream=s)
        e.frozen_values.update(first)  # kept once a run accepted them
        return list(outs.values())

    def _close(self) -> None:
        for e in self._graphs.values():
            if e.model is not None:
                e.model.close()
        self._graphs.clear()

    async def _drain(self) -> None:
        for e in self._graphs.values():
            if e.loaded_on is not None and not e.loaded_on.closed:
                await e.loaded_on.synchronize()


def _indexes(text: str, n: int) -> frozenset[int]:
    if not text.strip():
        return frozenset()
    try:
        idx = frozenset(int(p) for p in text.split(";") if p.strip())
    except ValueError:
        raise SessionError(f"bad input index list {text!r} (use '0;1;2')") from None
    bad = [i for i in idx if not 0 <= i < n]
    if bad:
        raise SessionError(f"input indexes {sorted(bad)} are out of range for {n} inputs")
    return idx


def _compile_args(options: Mapping[str, str]) -> dict[str, Any]:
    """``Device.compile`` arguments from AddGraph options."""
    unknown = [k for k in options if k not in _GRAPH_OPTIONS]
    if unknown:
        raise SessionError(f"AddGraph accepts only {_GRAPH_OPTIONS}, got {unknown}")
    args: dict[str, Any] = {}

    def number(key: str, lo: int, hi: int | None = None) -> int:
        try:
            v = int(options[key])
        except ValueError:
            v = lo - 1
        if v < lo or (hi is not None and v > hi):
            raise SessionError(f"{key} must be an integer in [{lo}, {hi if hi is not None else '...'}], "
                               f"not {options[key]!r}")  # fmt: skip
        return v

    if "aioge.optimize" in options:
        args["optimize"] = number("aioge.optimize", 0, 2)
    if "aioge.maxStreams" in options:
        args["max_streams"] = number("aioge.maxStreams", 1)
    single = options.get("ge.enableSingleStream", "false").lower()
    if single not in ("true", "false"):
        raise SessionError(f"ge.enableSingleStream must be 'true' or 'false', not {single!r}")
    if single == "true":
        args["max_streams"] = 1
    if "aioge.mode" in options:
        if options["aioge.mode"] not in ("auto", "sunk", "per_op"):
            raise SessionError(f"aioge.mode must be 'auto', 'sunk' or 'per_op', not {options['aioge.mode']!r}")
        args["mode"] = options["aioge.mode"]
    return args
