"""Stream capture: record a stream's launches once, replay them as one awaitable task.

``with stream.capture() as graph:`` (or ``async with``) puts the stream in capture (CANN's
``aclmdlRICaptureBegin``): the launches made on it inside the block return their output
tensors as usual, but are recorded instead of run.  Leaving the block ends the capture
(``aclmdlRICaptureEnd``) and ``graph`` is a :class:`CapturedGraph`: ``await graph.replay()``
(or ``graph.launch(stream)``, an awaitable :class:`~aioge.Completion`) enqueues everything
recorded as ONE stream task (``aclmdlRIExecuteAsync``) -- the per-launch cost paid once.

The tensors the captured launches read and write are the graph's fixed buffers: update inputs
by copying into them (``stream.copy_into`` or another launch that writes them), read outputs
from them after a replay.  The graph keeps them alive until it is closed.

Inside the capture, what cannot be recorded raises :class:`~aioge.StreamCaptureError` at once
and leaves the capture usable: waiting for the capturing stream (``synchronize()``,
``numpy()``, awaiting a captured tensor), events, and reading tensors still being written by
other streams (synchronize those first).  Work the runtime refuses (copies from pageable host
memory, host-memory model I/O, host callbacks) invalidates the capture, and leaving the block
raises :class:`~aioge.CaptureInvalidatedError` with the reason.

The enqueue primitive (:class:`~aioge.runtime.stream.Enqueue`) does the recording: while its
``capture`` is set, ``commit`` notes the launch here instead of completing it, so every launch
path (ops, ``aioge.op``, compiled graphs, copies) is captured the same way.
"""

from __future__ import annotations

from collections.abc import Generator, Hashable, Sequence
from typing import TYPE_CHECKING, Any, Protocol

from .._native import acl
from ..errors import CaptureInvalidatedError, StreamCaptureError, WrongDeviceError
from ._resources import Resource
from .scheduler import Completion, Lane, deadline

if TYPE_CHECKING:
    from types import TracebackType

__all__ = ("CaptureMode", "CapturedGraph", "CapturedLaunch", "StreamCapture")

CaptureMode = acl.CaptureMode
_MODES = {"global": CaptureMode.GLOBAL, "thread_local": CaptureMode.THREAD_LOCAL, "relaxed": CaptureMode.RELAXED}
_NOT_RUN = 107026  # ACL_ERROR_RT_MODEL_CAPTURED
_CAPTURING = 107027  # ACL_ERROR_RT_STREAM_CAPTURED
_DEPENDENCY = 107024  # ACL_ERROR_RT_CAPTURE_DEPENDENCY


class Stream(Protocol):
    """What a capture uses of a :class:`~aioge.Stream` (the stream module sits above this one)."""

    device: Any
    _lane: Lane
    _enqueue: Any

    def _describe(self) -> str: ...


class CapturedLaunch(Completion):
    """The completion of a launch recorded by a capture: it has not run and never runs on its
    own.  Ordering treats it as done (inside the capture the stream's order holds; outside,
    the graph's replays are what writes its buffers); awaiting it raises
    :class:`~aioge.StreamCaptureError` -- replay the graph instead."""

    __slots__ = ()

    def __init__(self, graph: CapturedGraph, keep: Any, what: str, name: str | None) -> None:
        super().__init__(graph.stream._lane, None, keep, what, 0, name=name)
        self._done = True

    def __repr__(self) -> str:
        return f"<aioge.CapturedLaunch {self.what!r} on {self.lane.name}>"

    def __await__(self) -> Generator[Any, None, None]:  # what Completion.wait and Tensor.__await__ await
        raise StreamCaptureError(
            _NOT_RUN, f"{self.name or self.what} was captured and runs only when its graph is replayed "
            "(await graph.replay(), then read the outputs)", "await",
        )  # fmt: skip


def captured_error(stream: Stream, what: str) -> StreamCaptureError:
    """The error of waiting for a capturing stream (``what`` names the call)."""
    return StreamCaptureError(
        _CAPTURING, f"{stream._describe()} is capturing: what it holds has not run and cannot be waited for "
        "or read; leave the capture block and replay the graph", what,
    )  # fmt: skip


def dependency_error(stream: Stream, comp: Completion) -> StreamCaptureError:
    """The error of a captured launch depending on pending work of another stream."""
    return StreamCaptureError(
        _DEPENDENCY, f"a launch captured on {stream._describe()} depends on {comp.what!r} still pending on "
        f"{comp.lane.name}: a capture cannot wait for work outside it (synchronize that stream, or make "
        "the tensor on the capturing stream, before the capture)", "capture",
    )  # fmt: skip


class CapturedGraph(Resource):
    """A stream's launches recorded by :meth:`Stream.capture`, replayed as one stream task.

    Attributes:
        stream: the stream it was captured on (its default replay stream).
        launches: how many launches it recorded.
        replays: how many replays were enqueued.

    Replays of one graph run one at a time, whatever streams they are launched on (they read
    and write the same buffers).  A launch that fails inside a replay fails that replay, with
    an error naming the launch; the graph stays replayable.
    """

    def __init__(self, stream: Stream, mode: acl.CaptureMode) -> None:
        self.stream = stream
        self.device = stream.device
        self.mode = mode
        self.launches = 0
        self.replays = 0
        self._handle: Any = None
        self._keep: list[Any] = []
        self._names: list[str] = []
        # insertion-ordered sets of the memories the captured launches read and wrote
        self._reads: dict[Hashable, None] = {}
        self._writes: dict[Hashable, None] = {}
        self._capturing = False
        with stream._enqueue as tx:
            if tx.capture is not None:
                raise StreamCaptureError(_CAPTURING, f"{stream._describe()} is already capturing", "capture")
            acl.capture_begin(tx.handle, mode)
            tx.capture = self
            self._capturing = True
        self._opened()

    def _describe(self) -> str:
        return f"CapturedGraph of {self.launches} launches on {self.stream._describe()}"

    def __repr__(self) -> str:
        state = "closed" if self._closed else "capturing" if self._capturing else f"replays={self.replays}"
        return f"<aioge.CapturedGraph launches={self.launches} {state}>"

    # ---- recording (Enqueue.commit calls it while the stream captures) ----
    def _record(self, keep: Any, what: str, reads: Sequence[Hashable], writes: Sequence[Hashable],
                name: str | None) -> Completion:  # fmt: skip
        """Record one launch; the enqueue transaction notes its readers and writers."""
        comp = CapturedLaunch(self, None, what, name)
        if keep is not None:
            self._keep.append(keep)
        self._names.append(name or what)
        self.launches += 1
        for m in reads:
            self._reads[m] = None
        for m in writes:
            self._writes[m] = None
        return comp

    def _end(self, ok: bool) -> None:
        """Leave the capture: the graph becomes replayable, or (``ok`` False, or the runtime
        invalidated the capture) it is closed."""
        if not self._capturing:
            return
        with self.stream._enqueue as tx:
            tx.capture = None
            self._capturing = False
            try:
                self._handle = acl.capture_end(tx.handle)
            except BaseException:
                self._closed = True
                self._keep.clear()
                raise
        if not ok:
            self.close()

    # ---- replaying ----
    def launch(self, stream: Stream | None = None) -> Completion:
        """Enqueue one replay on ``stream`` (default: the capture's stream); return its completion.

        The replay is ordered like any launch: after the other streams' pending writes of the
        graph's buffers (and reads, for those it writes), and later launches that use them
        wait for it.
        """
        self._check_open()
        if self._capturing:
            raise StreamCaptureError(_NOT_RUN, "the capture is still in progress: leave its block first", "replay")
        s = self.stream if stream is None else stream
        if s.device is not self.device:
            raise WrongDeviceError(f"a graph captured on {self.device!r} replayed on {s._describe()}: "
                                   "it replays on the device it was captured on")  # fmt: skip
        reads, writes = tuple(self._reads), tuple(self._writes)
        with s._enqueue as tx:
            tx.order(reads, writes)
            acl.model_ri_execute_async(self._handle, tx.handle)
            self.replays += 1
            comp: Completion = tx.commit((self._keep, reads, writes), "replay", reads=reads, writes=writes,
                                         name=f"replay {self.replays} of a graph of {self.launches} captured "
                                         "launches")  # fmt: skip
            return comp

    async def replay(self, stream: Stream | None = None, *, timeout: float | None = None) -> None:
        """Replay the captured launches as one task and wait for it.

        Raises the error of a launch that failed inside the replay (naming it).

        Cancellation: returns control at once; the replay still runs, and the graph and its
        buffers stay alive until it has.
        """
        comp = self.launch(stream)
        with deadline(timeout, "replay() of a captured graph"):
            await comp.wait()

    # ---- lifecycle ----
    def _close(self) -> None:
        if self._capturing:
            self._end(False)
            return
        if self._handle is not None:
            if not self.device.closed:  # (a device reset released it)
                acl.model_ri_destroy(self._handle)  # queued replays keep it until they ran
            self._handle = None
        self._keep = []
        self._reads.clear()
        self._writes.clear()

    def _gc_release(self) -> None:
        if self._handle is not None and not self._capturing and not self.device.closed:
            acl.model_ri_destroy(self._handle)
        self._handle = None


class StreamCapture:
    """What :meth:`Stream.capture` returns: ``with``/``async with`` it to capture.

    Entering begins the capture and gives the :class:`CapturedGraph`; leaving ends it.  An
    exception inside the block ends the capture, closes the graph and propagates.
    """

    def __init__(self, stream: Stream, mode: str = "thread_local") -> None:
        try:
            self._mode = _MODES[mode]
        except KeyError:
            raise ValueError(f"capture mode {mode!r}: use one of {sorted(_MODES)}") from None
        self._stream = stream
        self._graph: CapturedGraph | None = None

    def __enter__(self) -> CapturedGraph:
        if self._graph is not None:
            raise RuntimeError("a StreamCapture is entered once: call stream.capture() again")
        self._graph = CapturedGraph(self._stream, self._mode)
        return self._graph

    def __exit__(self, et: type[BaseException] | None, e: BaseException | None, tb: TracebackType | None) -> None:
        g = self._graph
        assert g is not None
        if et is None:
            g._end(True)
            return
        try:
            g._end(False)
        except CaptureInvalidatedError:
            pass  # the block's own exception says more

    async def __aenter__(self) -> CapturedGraph:
        return self.__enter__()

    async def __aexit__(self, et: type[BaseException] | None, e: BaseException | None,
                        tb: TracebackType | None) -> None:  # fmt: skip
        self.__exit__(et, e, tb)
