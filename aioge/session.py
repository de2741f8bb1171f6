"""``aioge.Session``: GE's ``ge::Session`` graph flow, one to one.

For users who know GE::

    sess = aioge.Session(dev)
    sess.add_graph(1, graph)                         # AddGraph
    await sess.compile_graph(1)                      # CompileGraph (off the loop)
    sess.load_graph(1, {"ge.exec.hostInputIndexes": "0"}, stream)   # LoadGraph
    outs = sess.execute_graph_with_stream_async(1, stream, [x_host, w_dev])   # enqueue, returns Tensors
    await stream.synchronize()                       # results ready, as after aclrtSynchronizeStream

GE's rules hold: LoadGraph needs CompileGraph first and happens once;
ExecuteGraphWithStreamAsync needs LoadGraph; inputs are device tensors except
those listed in ``ge.exec.hostInputIndexes`` (host arrays, copied in with the
launch); outputs are the caller's tensors or allocated by the runtime.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from ._resources import Resource
from .errors import AioGeError
from .tensor import Tensor

if TYPE_CHECKING:
    from .device import Device
    from .graph import Graph
    from .model import CompiledGraph
    from .stream import Stream

__all__ = ("Session", "SessionError")

_LOAD_OPTIONS = ("ge.exec.hostInputIndexes", "ge.exec.frozenInputIndexes")


class SessionError(AioGeError, RuntimeError):
    """A Session call out of GE's order (unknown graph id, not compiled, loaded twice...)."""


class _Entry:
    def __init__(self, graph: Graph, options: Mapping[str, str]) -> None:
        self.graph = graph
        self.options = dict(options)
        self.model: CompiledGraph | None = None
        self.loaded_on: Stream | None = None
        self.host_inputs: frozenset[int] = frozenset()


class Session(Resource):
    """A GE-style session on a device.

    Args:
        device: the :class:`~aioge.Device`.
        options: session options (``ge.*`` keys; recorded, and ``ge.graphRunMode``
            must be "0": inference).
    """

    def __init__(self, device: Device, options: Mapping[str, str] | None = None) -> None:
        device._check_open()
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
        """``AddGraph``: register a graph under an id."""
        self._check_open()
        if graph_id in self._graphs:
            raise SessionError(f"graph id {graph_id} is already added")
        graph.validate()
        self._graphs[graph_id] = _Entry(graph, options or {})

    def remove_graph(self, graph_id: int) -> None:
        """``RemoveGraph``: unload and forget a graph."""
        e = self._entry(graph_id)
        if e.model is not None:
            e.model.close()
        del self._graphs[graph_id]

    async def compile_graph(self, graph_id: int) -> None:
        """``CompileGraph``: optimise, plan and compile the graph (off the event loop).

        Cancellation: returns control at once and leaves the graph not
        compiled; the compile finishes on its thread and its model goes to a
        ``compile_graph`` retried meanwhile, or is closed (:meth:`Device.compile`).
        """
        e = self._entry(graph_id)
        if e.model is None:
            e.model = await self.device.compile(e.graph)

    def load_graph(self, graph_id: int, options: Mapping[str, str] | None, stream: Stream) -> None:
        """``LoadGraph``: bind a compiled graph to ``stream``.

        Only ``ge.exec.hostInputIndexes`` (``"0;2"``: those inputs are host
        arrays) and ``ge.exec.frozenInputIndexes`` are accepted, as in GE.
        """
        e = self._entry(graph_id)
        if e.model is None:
            raise SessionError(f"graph {graph_id} must be compiled (CompileGraph) before LoadGraph")
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
        e.loaded_on = stream

    def execute_graph_with_stream_async(
        self, graph_id: int, stream: Stream, inputs: Sequence[Any], outputs: Sequence[Tensor] | None = None
    ) -> list[Tensor]:
        """``ExecuteGraphWithStreamAsync``: enqueue one run on ``stream``; return the outputs at once.

        The results are ready once the stream synchronizes (or the returned
        tensors are awaited).  A node that fails on the device reports at
        that point, as in GE.
        """
        e = self._entry(graph_id)
        if e.loaded_on is None or e.model is None:
            raise SessionError(f"graph {graph_id} must be loaded (LoadGraph) before ExecuteGraphWithStreamAsync")
        model = e.model
        if len(inputs) != len(model.inputs):
            raise SessionError(f"graph {graph_id} takes {len(model.inputs)} inputs, {len(inputs)} given")
        dev_inputs: list[Tensor] = []
        for i, x in enumerate(inputs):
            if i in e.host_inputs:
                if isinstance(x, Tensor):
                    raise SessionError(f"input {i} is listed in ge.exec.hostInputIndexes: pass a host array")
                dev_inputs.append(stream.upload(np.asarray(x)))
            else:
                if not isinstance(x, Tensor):
                    raise SessionError(f"input {i} must be a device Tensor (or listed in ge.exec.hostInputIndexes)")
                dev_inputs.append(x)
        outs, _ = model.launch(dev_inputs, outputs, stream=stream)
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
