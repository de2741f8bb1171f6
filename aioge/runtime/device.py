"""Devices: ``aclInit`` (reference counted), ``aclrtSetDevice`` and an
explicit context per :class:`Device`."""

from __future__ import annotations

import itertools
import os
import threading
import time
from typing import TYPE_CHECKING, Any

from .. import _native
from .._native import acl
from ..errors import BusyResourceError
from ..graph import Graph, load_onnx
from ._resources import Resource, close_at_exit
from .context import DeviceContext
from .graphs import compile as compile_module
from .graphs.executable import MAX_INFLIGHT
from .scheduler import ThreadJob, deadline
from .stream import Stream

if TYPE_CHECKING:
    from .graphs.dynamic import DynamicCompiledGraph
    from .graphs.executable import CompiledGraph

__all__ = ("Device", "open_device", "device_count")


def device_count() -> int:
    """Number of devices the backend offers (``aclrtGetDeviceCount``)."""
    return acl.device_count()


class Device(Resource):
    """An opened device: ACL initialised, the device set, an explicit context.

    Open with :func:`open_device`; use as ``async with``.  Streams opened from
    it are closed with it.

    Attributes:
        id: the device id.
        backend: ``"host"`` (the embedded host runtime) or ``"ascend"``.
    """

    _serials = itertools.count(1)

    def __init__(self, device_id: int = 0) -> None:
        self.id = int(device_id)
        #: which ``open_device()`` call of the process made this object (two may open one device id)
        self.serial = next(Device._serials)
        self.backend: str = _native.backend
        #: the device's state (context handle, caches, pools, live sets): the runtime's
        #: modules reach it here, never through the device's private attributes
        self.context = DeviceContext(self.id, self._describe())
        self._default_stream: Stream | None = None
        self._default_lock = threading.Lock()  # compiles on their threads upload weights through it
        self._opened()
        close_at_exit(self)

    def _describe(self) -> str:
        return f"Device {self.id} ({self.backend})"

    @property
    def _closed(self) -> bool:  # the context's flag: one owner of closed-ness
        ctx = self.__dict__.get("context")
        return True if ctx is None else ctx.closed

    @_closed.setter
    def _closed(self, value: bool) -> None:
        self.context.closed = value

    def __repr__(self) -> str:
        state = "closed" if self._closed else "open"
        return f"<aioge.Device {self.id} #{self.serial} backend={self.backend!r} {state}>"

    # ---- streams ----
    def open_stream(self, *, high_water: int = 1024, timing: bool = False) -> Stream:
        """Create a stream (``aclrtCreateStream``); use as ``async with``.

        Args:
            high_water: in-flight launches above which ``await stream.drain()`` waits.
            timing: measure the device time of every launch (``Completion.device_ms``,
                ``stream.stats["device_ms"]``) with an extra event per launch.
        """
        self._check_open()
        s = Stream(self, high_water=high_water, timing=timing)
        self.context.streams.add(s)
        return s

    @property
    def default_stream(self) -> Stream:
        """A stream owned by the device, opened on first use (for convenience APIs)."""
        s = self._default_stream
        if s is not None and not s._closed and not self._closed:  # every execute() asks: no lock once open
            return s
        self._check_open()
        with self._default_lock:
            if self._default_stream is None or self._default_stream.closed:
                self._default_stream = self.open_stream()
            return self._default_stream

    def memory_info(self) -> tuple[int, int]:
        """``(free, total)`` device memory in bytes (``aclrtGetMemInfo``)."""
        self._check_open()
        self.context.bind()
        return acl.mem_info_checked(acl.MemAttr.HBM)

    async def compile(
        self,
        graph: Graph | str | os.PathLike[str] | bytes | Any,
        *,
        optimize: int = 2,
        max_streams: int | None = None,
        mode: str = "auto",
        max_inflight: int | None = None,
    ) -> CompiledGraph | DynamicCompiledGraph:
        """Compile and load a graph (GE ``CompileGraph`` + ``LoadGraph``); a large one off the event loop.

        A graph with symbolic input dims gives a :class:`aioge.DynamicCompiledGraph`
        (compiled per concrete input shape on first use, see :mod:`aioge.runtime.graphs.dynamic`).

        Args:
            graph: an :class:`aioge.Graph` (e.g. from :func:`aioge.load_onnx`), or an
                ONNX model (a path, bytes or ``onnx.ModelProto``), loaded with
                ``aioge.load_onnx(graph)`` (use that for ``input_shapes=``).
            optimize: pass level 0 (shape inference only), 1 (+ folding, DCE, CSE) or 2 (+ fusion).
            max_streams: independent branches may run on up to this many streams
                (GE's multi-stream parallelism).  Default: 1 on the host runtime,
                whose kernels already spread over every core (measured on 2 cores:
                extra streams only added joins), 2 elsewhere.
            mode: ``"sunk"`` (the whole plan inside the runtime, one task per
                segment), ``"per_op"`` (each op through ``aclopCompileAndExecute``)
                or ``"auto"`` (sunk where the backend supports it).
            max_inflight: executions of the model in flight at once before
                ``execute()`` waits for room (default ``aioge.runtime.graphs.executable.MAX_INFLIGHT``).

        Concurrent calls with the same graph and options share one compile.
        A small graph on the host backend (at most ``INLINE_NODES`` nodes
        and ``INLINE_ELEMENTS`` elements in its values, see
        :func:`~aioge.runtime.graphs.compile.compiles_inline`)
        compiles on the calling thread, the event loop's, with no hand-off to a
        thread and back; the compile has no await point, so nothing else runs
        on the loop meanwhile and callers that come while its caller takes its
        result share it.  Every other compile (every one on ``ascend``, whose
        graph engine can take seconds) runs on one of the runtime's long-lived
        worker threads (named ``aioge-compile`` while it runs), off the event loop.

        Cancellation: returns control at once.  The compile cannot be
        interrupted: a worker's goes on in its thread (an inline one has ended
        before its caller can be cancelled) and the other callers sharing it
        still get its result; if no caller is left to take the model, it is
        closed when the compile ends.  ``aclose()`` of the device waits for
        compiles in flight (``close()`` refuses while there are any).
        """
        self._check_open()
        if not isinstance(graph, Graph):
            if isinstance(graph, (str, os.PathLike, bytes, bytearray)) or type(graph).__name__ == "ModelProto":
                graph = load_onnx(graph)  # an ONNX model: its path, bytes or ModelProto
            else:
                raise TypeError(f"compile() takes an aioge.Graph or an ONNX model (a path, bytes or an "
                                f"onnx.ModelProto), not {type(graph).__name__}")  # fmt: skip
        limit = MAX_INFLIGHT if max_inflight is None else max_inflight
        if graph.is_dynamic:  # symbolic dims: a plan per concrete shape, compiled on first use
            from .graphs.dynamic import DynamicCompiledGraph

            opts = {"optimize": optimize, "max_streams": max_streams, "mode": mode, "max_inflight": limit}
            return await DynamicCompiledGraph.create(self, graph, opts)
        key = (id(graph), optimize, max_streams, mode, limit)
        compiles: dict[Any, ThreadJob[CompiledGraph]] = self.context.compiles
        job = compiles.get(key)
        if job is None or not job.join():

            def work() -> CompiledGraph:
                return compile_module.compile_graph(  # looked up per call: the module's may be replaced
                    self, graph, optimize=optimize, max_streams=max_streams, mode=mode, max_inflight=limit
                )

            inline = self.backend == "host" and compile_module.compiles_inline(graph)
            job = compiles[key] = ThreadJob(work, "aioge-compile", _discard_model, inline=inline)
        try:
            return await job.result()
        finally:
            if job.done and compiles.get(key) is job:
                del compiles[key]

    async def synchronize(self, *, timeout: float | None = None) -> None:
        """Wait for every launch issued so far on every open stream of the device.

        Raises the first pending launch error of a stream, as
        :meth:`Stream.synchronize` does.

        Args:
            timeout: seconds for the whole wait (one deadline, however many
                streams); :class:`~aioge.StreamSyncTimeoutError` (a ``TimeoutError``)
                when exceeded.

        Cancellation: returns control at once; nothing is lost, a pending
        error is reported by the next ``synchronize()``.
        """
        self._check_open()
        with deadline(timeout, f"synchronize() of {self._describe()}"):
            for s in list(self.context.streams):
                if not s.closed:
                    await s.synchronize()

    # ---- lifecycle ----
    async def _drain(self) -> None:
        ctx = self.context
        for job in list(ctx.compiles.values()):
            await job.wait()  # its model, if nobody took it, is closed by now
        ctx.compiles.clear()
        for m in list(ctx.models):
            await m.aclose()
        for s in list(ctx.streams):
            if not s.closed:
                await s.aclose()

    def _close(self) -> None:
        ctx = self.context
        if any(not job.done for job in ctx.compiles.values()):
            raise BusyResourceError(f"{self._describe()} has a compile in flight: use `await device.aclose()`")
        busy = [s for s in ctx.streams if not s.closed and s.in_flight]
        if busy:
            raise BusyResourceError(
                f"{self._describe()} has streams with work in flight ({len(busy)}): use `await device.aclose()`"
            )
        for e in list(ctx.events):
            e.close()
        for m in list(ctx.models):
            m.close()
        for s in list(ctx.streams):
            s.close()
        ctx.release()

    def _close_at_exit(self, deadline: float) -> str:
        """The exit hook's close: wait (until ``deadline``) for compiles and
        launches still running, then close everything in order; work that
        outlives the deadline is left to the process exit, not waited for."""
        ctx = self.context
        for job in list(ctx.compiles.values()):
            job.wait_sync(max(0.0, deadline - time.monotonic()))
        streams = [s for s in ctx.streams if not s.closed]
        models = [m for m in ctx.models if not m.closed]
        events = [e for e in ctx.events if not e.closed]
        parts = [f"{len(x)} {noun}{'s' if len(x) != 1 else ''}" for x, noun in
                 ((streams, "stream"), (models, "compiled graph"), (events, "event")) if x]  # fmt: skip
        what = f" (with {', '.join(parts)})" if parts else ""
        idle = all(job.done for job in ctx.compiles.values())
        if idle and all([s._lane.settle(deadline) for s in streams]):
            ctx.compiles.clear()
            self.close()
            return what
        for r in (*events, *models, *streams):
            r._closed = True  # still in use by the device: no release, nothing to collect later
        ctx.closed = True
        return f"{what}, work still running after the exit timeout left to the process exit"

    def _gc_release(self) -> None:
        # streams with pending work drain on their own threads; the context
        # stays until interpreter exit rather than freeing memory in use
        pass


def _discard_model(model: CompiledGraph) -> None:
    """A compiled graph nobody awaits any more (every caller was cancelled)."""
    model.close()


def open_device(device_id: int = 0) -> Device:
    """Open a device: ``aclInit`` (once), ``aclrtSetDevice``, an explicit context.

    Example:
        >>> async with aioge.open_device(0) as dev:
        ...     async with dev.open_stream() as s:
        ...         y = aioge.ops.add(s.upload(x), s.upload(x))
        ...         print(await y.numpy())
    """
    return Device(device_id)
