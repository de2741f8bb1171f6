"""Streams, their tensors and events: FIFO queues of device work, each with a completion lane.

Launch methods (``upload``, ``aioge.op``, the ``aioge.ops`` functions) are
synchronous and cheap, like ``StreamWriter.write``: they enqueue and return
a :class:`Tensor` at once.  Waiting is always an ``await``.

A :class:`Tensor` is device memory with a shape and a dtype, ordered by the
stream that last wrote it: awaiting it waits for that launch, reading it on
another stream makes that stream wait for it on the device.  An
:class:`Event` records a point in a stream, to wait for or to time.  The
three live in one module (as CuPy keeps Stream and Event together): each
names the others in its signatures, and the reader/writer notes that order
them have one home here.
"""

from __future__ import annotations

import itertools
import math
import threading
import weakref
from collections.abc import Generator, Mapping, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from .. import _native, dtypes
from .._native import acl
from ..errors import BusyResourceError, ClosedResourceError, InvalidParamError, WrongDeviceError, error_class
from . import _trace
from ._resources import Resource, finalizing
from .capture import CapturedGraph, StreamCapture, captured_error, dependency_error
from .scheduler import POLL_EVERY, Completion, Lane, deadline

if TYPE_CHECKING:
    from .device import Device

__all__ = ("Event", "Stream", "Tensor", "TensorSpec", "lane_totals", "live_streams")

_MAX_BYTES = (1 << 63) - 1  # the runtime counts elements and bytes in int64


class TensorSpec:
    """Shape and dtype of a tensor to allocate (an output of :func:`aioge.op`).

    Example:
        >>> aioge.TensorSpec((2, 3), "float32")
        TensorSpec((2, 3), float32)
    """

    __slots__ = ("dtype", "shape")

    def __init__(self, shape: Sequence[int], dtype: dtypes.DTypeLike = "float32") -> None:
        self.shape = _shape(shape)
        self.dtype = dtypes.normalize(dtype)

    @property
    def nbytes(self) -> int:
        return math.prod(self.shape) * self.dtype.itemsize

    def __repr__(self) -> str:
        return f"TensorSpec({self.shape}, {self.dtype})"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, TensorSpec) and (self.shape, self.dtype) == (other.shape, other.dtype)

    def __hash__(self) -> int:
        return hash((self.shape, self.dtype))


def _shape(shape: Sequence[int] | int) -> tuple[int, ...]:
    if isinstance(shape, (int, np.integer)):
        shape = (int(shape),)
    out = tuple(int(d) for d in shape)
    if any(d < 0 for d in out):
        raise ValueError(f"shape {out} has a negative dim")
    return out


class DeviceMemory:
    """One ``aclrtMalloc`` block and its ``aclDataBuffer``.

    Freed when the last reference goes: the tensors' (several tensors may
    view one block, e.g. after a reshape), and those of queued launches that
    use it (their completions keep it alive until they ran).  Ordering state
    lives here, so every view sees the same last writer and readers.
    """

    __slots__ = ("__weakref__", "buffer", "cap", "context", "device", "nbytes", "ptr", "readers", "stream", "writer")

    def __init__(self, device: Device, nbytes: int, stream: Stream) -> None:
        ctx = device.context
        ctx.check_open()
        self._hold(ctx, ctx.pool.take(nbytes), nbytes, device, stream)

    def _hold(self, ctx: Any, block: tuple[Any, Any, int], nbytes: int, device: Device, stream: Stream) -> None:
        """A new block's state: ``block`` is the pool's ``(ptr, aclDataBuffer, capacity)``."""
        self.context = ctx
        self.ptr, self.buffer, self.cap = block
        self.nbytes = nbytes
        self.device = device
        #: stream of the last write (or of the allocation)
        self.stream = stream
        self.writer: Completion | None = None
        #: latest read per stream (by its lane, which does not keep the stream
        #: alive): a write on another stream waits for them (write-after-read)
        self.readers: dict[Lane, Completion] = {}
        ctx.memory[id(self)] = weakref.ref(self)

    @classmethod
    def _many(cls, device: Device, sizes: list[int], stream: Stream) -> list[DeviceMemory]:
        """A block of each of ``sizes`` (``DeviceMemory(device, n, stream)`` of each), taken from the
        pool in one step."""
        ctx = device.context
        ctx.check_open()
        new = cls.__new__
        out = []
        for block, n in zip(ctx.pool.take_many(sizes), sizes, strict=True):
            m = new(cls)
            m._hold(ctx, block, n, device, stream)
            out.append(m)
        return out

    def home(self) -> Stream:
        """The stream of the last write, or the device's default stream once that one closed."""
        s = self.stream
        return s if not s.closed else self.device.default_stream

    def free(self) -> None:
        """Give the block back (to the device's pool, or to the runtime); idempotent."""
        ptr, self.ptr = self.ptr, None
        if ptr is None:
            return
        ctx = self.context
        ctx.memory.pop(id(self), None)
        if not ctx.closed:  # once closed, the device released everything already
            ctx.pool.give(ptr, self.buffer, self.cap)

    def __del__(self) -> None:
        try:
            self.free()
        except Exception:
            pass


class Tensor:
    """A device-resident tensor.

    Created by :meth:`Stream.upload`, :func:`aioge.op`, the ``aioge.ops``
    functions and model execution -- never directly.

    Attributes:
        shape: tuple of dims.
        dtype: numpy dtype.
        stream: the stream of the launch that last wrote it.  Once that stream
            is closed, launches that pick a stream from the tensor (``aioge.ops``,
            ``numpy()``) use the device's default stream instead.

    Awaiting a tensor (``await t`` or ``await t.ready()``) waits until the
    launch that produced it has run on the device and raises that launch's
    error, if any.

    Lifecycle: dropping the last reference frees the memory once queued work
    using it has run; ``close()`` drops it early and makes later use raise
    :class:`~aioge.ClosedResourceError`.
    """

    __slots__ = ("__weakref__", "_mem", "dtype", "shape")

    def __init__(self, mem: DeviceMemory, shape: tuple[int, ...], dtype: np.dtype) -> None:
        self._mem: DeviceMemory | None = mem
        self.shape = shape
        self.dtype = dtype

    @classmethod
    def _empty(cls, stream: Stream, shape: tuple[int, ...], dtype: np.dtype) -> Tensor:
        nbytes = math.prod(shape) * dtype.itemsize
        if nbytes > _MAX_BYTES:  # refuse before aclrtMalloc, with the shape in the message
            msg = f"shape {shape} x itemsize {dtype.itemsize} overflows int64 ({nbytes} bytes)"
            raise InvalidParamError(100000, msg, "Tensor")
        return cls(DeviceMemory(stream.device, nbytes, stream), shape, dtype)

    def reshape(self, *shape: Any) -> Tensor:
        """A view with another shape of the same memory (no device work).

        One dim may be -1.  The view shares ordering with this tensor.
        """
        if len(shape) == 1 and not isinstance(shape[0], (int, np.integer)):
            shape = tuple(shape[0])
        dims = list(int(d) for d in shape)
        if dims.count(-1) > 1:
            raise ValueError("only one dim may be -1")
        if -1 in dims:
            known = math.prod(d for d in dims if d != -1)
            if known == 0 or self.size % known:
                raise ValueError(f"cannot reshape {self.shape} to {tuple(dims)}")
            dims[dims.index(-1)] = self.size // known
        if math.prod(dims) != self.size or any(d < 0 for d in dims):
            raise ValueError(f"cannot reshape {self.shape} to {tuple(dims)}")
        return Tensor(self._memory(), tuple(dims), self.dtype)

    # ---- properties ----
    @property
    def nbytes(self) -> int:
        return math.prod(self.shape) * self.dtype.itemsize

    @property
    def size(self) -> int:
        return math.prod(self.shape)

    @property
    def ndim(self) -> int:
        return len(self.shape)

    @property
    def stream(self) -> Stream:
        """The stream of the launch that last wrote it."""
        return self._memory().stream

    @property
    def device(self) -> Device:
        return self._memory().device

    @property
    def launch(self) -> Completion | None:
        """The :class:`~aioge.Completion` of the launch that last wrote it (None if never written)."""
        return self._writer

    @property
    def _writer(self) -> Completion | None:
        m = self._mem
        return None if m is None else m.writer

    @property
    def spec(self) -> TensorSpec:
        return TensorSpec(self.shape, self.dtype)

    @property
    def closed(self) -> bool:
        """True after ``close()``, and once its device closed (its memory is gone then)."""
        m = self._mem
        return m is None or m.ptr is None

    def _memory(self) -> DeviceMemory:
        m = self._mem
        if m is None or m.ptr is None:
            raise ClosedResourceError("tensor is closed" if m is None else "the tensor's device is closed")
        return m

    def __repr__(self) -> str:
        state = "closed" if self.closed else ("ready" if self.is_ready() else "pending")
        return f"<aioge.Tensor shape={self.shape} dtype={self.dtype} {state}>"

    def __array__(self, dtype: Any = None, copy: Any = None) -> np.ndarray:
        """Refused: the data is on the device (numpy would make a 0-d object array of it)."""
        raise TypeError("an aioge.Tensor is device memory: copy it to the host with `await tensor.numpy()`")

    # ---- readiness ----
    def is_ready(self) -> bool:
        """True when the launch that wrote it has run (asks the runtime, never waits)."""
        w = self._writer
        if w is None or w.done:
            return True
        w.lane.poll()
        return w.done

    async def ready(self) -> Tensor:
        """Wait until the producing launch has run; return ``self``.

        Raises:
            AclError: the producing launch failed on the device.

        Cancellation: returns control at once; the launch still runs and its
        buffers stay alive until it has.
        """
        return await self

    def __await__(self) -> Generator[Any, None, Tensor]:
        # what ready() awaits, without a coroutine of its own (the await of every launch's output)
        m = self._mem
        w = None if m is None else m.writer
        if w is not None:
            yield from w.__await__()
        return self

    async def numpy(self, *, timeout: float | None = None, stream: Stream | None = None) -> np.ndarray:
        """Copy to a new host array, in stream order.

        The copy is enqueued on the tensor's stream (or ``stream``, which then
        waits for the tensor on the device) behind the launch that wrote it,
        into page-locked staging memory; the loop is never blocked.

        Args:
            timeout: seconds to wait before raising :class:`~aioge.StreamSyncTimeoutError`.
            stream: the stream to copy on (e.g. a dedicated copy-out stream).

        Raises:
            AclError: the producing launch (or the copy) failed.
            StreamSyncTimeoutError: the copy did not complete within ``timeout`` (a ``TimeoutError``).

        Cancellation: returns control at once; the staging memory is released
        once the copy has run.
        """
        s = stream if stream is not None else self._memory().home()
        return await s._download(self, timeout)

    def close(self) -> None:
        """Drop this tensor's memory reference now (idempotent)."""
        self._mem = None

    async def aclose(self) -> None:
        self.close()

    async def __aenter__(self) -> Tensor:
        return self

    async def __aexit__(self, *exc: object) -> None:
        self.close()


class _Pinned:
    """Page-locked host staging memory, from the device's pinned pool."""

    __slots__ = ("cap", "device", "nbytes", "ptr")

    def __init__(self, device: Device, nbytes: int) -> None:
        self.ptr, self.cap = device.context.pinned.take(nbytes)
        self.nbytes = nbytes
        self.device = device

    def __del__(self) -> None:
        ptr, self.ptr = self.ptr, None
        if ptr is not None and not self.device.closed:
            self.device.context.pinned.give(ptr, self.cap)


class _Download:
    """An enqueued device-to-host copy; ``await result()`` gives the array."""

    __slots__ = ("comp", "dtype", "shape", "staging", "writer")

    def __init__(self, comp: Completion, writer: Completion | None, staging: _Pinned, t: Tensor) -> None:
        self.comp = comp
        self.writer = writer
        self.staging = staging
        self.shape = t.shape
        self.dtype = t.dtype

    async def result(self) -> np.ndarray:
        comp, writer = self.comp, self.writer
        if not comp.done and not comp.lane.spin_until(comp):
            await comp._wait_pending()
        if writer is not None:  # it ran first: its error is this download's first error
            await writer.wait()
        comp._raise_if_failed()
        out = np.empty(self.shape, self.dtype)
        if out.nbytes:
            acl.memmove(_native.host_ptr(out), self.staging.ptr, out.nbytes)
        return out


_record_event = acl.record_event_rc
_NULL = acl.NULL
_submitted = acl.stream_submitted
_execute = acl.launch_execute_rc
_launch_plain = acl.launch_plain
_note_launch = acl.note_launch
_wait_seq = acl.stream_wait_seq

#: every launch's completion event: waitable by other streams, and timed on timing streams
_LAUNCH_EVENT = acl.EventFlag.SYNC | acl.EventFlag.TIME_LINE


class Enqueue:
    """THE way work is put on a stream: one transaction per launch.

    ``with stream._enqueue as tx:`` holds the stream's lock, checks it is
    open and binds the device's context; inside, ``tx.order(reads, writes)``
    makes the stream wait (on the device) for the other streams' launches
    the work depends on -- read-after-write, write-after-write and
    write-after-read -- ``tx.mark_start()`` records the start event of a
    timing stream, the caller enqueues its ACL call on ``tx.handle``, and
    ``tx.commit(...)`` records the completion and notes who read and who
    wrote each memory (what the next ``order`` of any stream consults).
    Leaving the block without a commit gives an unused start event back.

    One reusable object per stream (no allocation per launch): the lock
    makes its state exclusive.  Every launch path uses it: ``Stream`` copies,
    ``aioge.op``, compiled graphs (sunk segments and per-op), captured graphs'
    replays.  The prepared-launch form (``run_prepared``) is the host runtime's
    fast path for ``aioge.op``: the same ordering rules and notes, with the
    device pointers gathered in the same pass, the launch call made inside it and
    the completion keyed by the sequence number that call returned.  While the stream captures
    (``capture``), both commits record the launch into the capture instead.

    On the host runtime (``Lane.seq_mode``) a commit records no event: the
    completion holds the number of the stream's latest task, and waits of
    other streams wait for that number (an event is still recorded on timing
    streams and while a profiler observes, for the device clock).
    """

    __slots__ = ("_arrays", "_cap", "_dev", "_lane", "_ptrs", "_start", "cache", "capture", "handle", "lock",
                 "seq_mode", "stream")  # fmt: skip

    def __init__(self, stream: Stream) -> None:
        self.stream = stream
        self.handle: Any = stream._handle
        self._dev = stream.device
        self._lane = stream._lane
        #: the stream's lock; the prepared launch's C transaction takes it alone (then the stream's
        #: open check): it needs no bound context (a wait binds it)
        self.lock: threading.Lock = stream._lock
        self._start: Any = None
        self._cap = (0, 0)
        self._arrays: tuple[Any, Any, Any, Any] = (None, None, None, None)
        #: the device pointers of a prepared launch (launch.py), grown on demand
        self._ptrs: Any = None
        self.seq_mode = self._lane.seq_mode
        #: the device's launch cache (descs, attrs, prepared launches), guarded by this lock
        self.cache = stream.device.context.cache
        #: the stream's capture in progress (:meth:`Stream.capture`): commits record into it
        self.capture: CapturedGraph | None = None

    def __enter__(self) -> Enqueue:
        self.lock.acquire()
        try:
            s = self.stream
            if s._closed:
                s._check_open()
            self._dev.context.bind()
        except BaseException:
            self.lock.release()
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        start = self._start
        if start is not None:  # not committed: the launch was refused
            self._start = None
            self._lane._give_event(start)
        self.lock.release()

    def scratch(self, n_in: int, n_out: int) -> tuple[Any, Any, Any, Any]:
        """Reusable pointer arrays for an op launch (input descs, input buffers,
        output descs, output buffers): the lock makes them this launch's, and
        ACL copies what it needs during the call."""
        cap_in, cap_out = self._cap
        if n_in > cap_in or n_out > cap_out:
            cap_in, cap_out = max(n_in, cap_in, 8), max(n_out, cap_out, 4)
            self._arrays = acl.pointer_arrays(cap_in, cap_out)
            self._cap = (cap_in, cap_out)
        return self._arrays

    def wait(self, comp: Completion | None) -> None:
        """Make the stream wait (on the device) for a launch of another stream."""
        if comp is None or comp._done or comp.lane is self._lane:
            return
        if self.capture is not None:
            raise dependency_error(self.stream, comp)
        self._dev.context.bind()  # (the prepared-launch form has not bound it)
        if comp.event is None:  # a sequence-number lane
            _wait_seq(self.handle, comp.lane._handle, comp.tseq)
        else:
            acl.stream_wait_event(self.handle, comp.event)
        if _trace.hub is not None:
            _trace.hub.waited(self.stream, comp)

    def order(self, reads: Sequence[DeviceMemory], writes: Sequence[DeviceMemory] = ()) -> None:
        """Order this launch after what it depends on in other streams.

        A read waits for the memory's writer; a write also waits for every
        other stream's last read of it (write-after-read).  Memory of
        another device is a :class:`~aioge.WrongDeviceError`.
        """
        dev, lane = self._dev, self._lane
        for m in reads:
            if m.device is not dev:
                raise self.stream._wrong_device(m)
            w = m.writer
            if w is not None and not w._done and w.lane is not lane:
                self.wait(w)
        for m in writes:
            if m.device is not dev:
                raise self.stream._wrong_device(m)
            w = m.writer
            if w is not None and not w._done and w.lane is not lane:
                self.wait(w)
            r = m.readers
            if r and (len(r) > 1 or lane not in r):
                for other, comp in list(r.items()):
                    if other is not lane:
                        self.wait(comp)

    def run_prepared(self, op_type: str, inputs: Sequence[Tensor | None], outputs: Sequence[Tensor],
                     attrs: Mapping[str, Any] | None, name: str | None = None) -> Completion:  # fmt: skip
        """The prepared-launch form (``aioge.op`` on the host runtime), one transaction: the stream's
        lock, the prepared launch of (op, attrs, dtypes and shapes) looked up in the device's cache
        (or made: descs checked once by the runtime), the launch's device pointers (inputs then
        outputs; NULL for an absent input) gathered in a reusable array, the launch ordered by
        :meth:`order`, the one C call (``aiogeHostLaunchExecute``: it returns the launch's sequence
        number, which completes it) and the readers and writers noted by :meth:`note`.  Observed (a
        profiler, metrics) or timed: the same call inside the whole transaction (``with``), between
        a start event and :meth:`commit`'s completion event.  A refused call raises its AclError,
        nothing enqueued; ``name`` is what the launch's device error names.

        Unobserved, the transaction is one C call (``acl.launch_plain``, ``aioge/_native/_launch.c``)
        when it needs nothing but the launch: prepared already, not capturing, nothing for
        :meth:`order` to wait for; it notes through the same definition as :meth:`note`.  Anything
        else it leaves to the Python transaction below, having launched nothing."""
        stream = self.stream
        hub = _trace.hub
        observed = hub is not None or stream.timing
        if not observed:
            comp = _launch_plain(self, op_type, inputs, outputs, attrs, name)
            if comp is not None:
                return comp  # type: ignore[no-any-return]
        self.__enter__()
        try:
            cache = self.cache
            if attrs:
                attr_h = cache.attr(attrs)
            else:
                attr_h = cache.no_attr
                if attr_h is None:
                    attr_h = cache.no_attr = cache.attr(None)
            key: list[Any] = [op_type, attr_h]
            for x in inputs:
                if x is None:
                    key.append(None)
                else:
                    key.append(x.dtype)
                    key.append(x.shape)
            for y in outputs:
                key.append(y.dtype)
                key.append(y.shape)
            k = tuple(key)
            prep = cache.prepared.get(k)
            if prep is None:
                prep = cache.prepare(k, op_type, inputs, outputs)
            ptrs = self._ptrs
            n = len(inputs) + len(outputs)
            if ptrs is None or len(ptrs) < n:
                ptrs = self._ptrs = acl.pointer_scratch(max(n, 8))
            reads: list[DeviceMemory] = []
            i = 0
            for x in inputs:
                if x is None:
                    ptrs[i] = _NULL
                else:
                    m = x._memory()  # raises ClosedResourceError
                    ptrs[i] = m.ptr
                    reads.append(m)
                i += 1
            writes: list[DeviceMemory] = []
            for y in outputs:
                m = y._memory()
                ptrs[i] = m.ptr
                writes.append(m)
                i += 1
            self.order(reads, writes)
            self.mark_start()
            seq = _execute(prep, ptrs, attr_h, self.handle)
            if seq < 0:
                acl.raise_for(-seq, op_type)
            keep = (reads, writes)
            if observed or self.capture is not None:
                comp = self.commit(keep, op_type, reads=reads, writes=writes, name=name)
                if hub is not None:
                    hub.annotate(comp, inputs, outputs)
                return comp
            comp = self._lane.submit_seq(keep, op_type, name, seq)
            self.note(comp, reads, writes)
            return comp
        finally:
            self.__exit__()

    def mark_start(self) -> None:
        """Timing streams: record the start event of the launch about to be enqueued."""
        if self.stream.timing and self._start is None and self.capture is None:
            ev = self.stream._new_event()
            try:
                acl.record_event(ev, self.handle)
            except BaseException:
                self._lane._give_event(ev)
                raise
            self._start = ev

    def commit(self, keep: Any, what: str, *, reads: Sequence[DeviceMemory] = (),
               writes: Sequence[DeviceMemory] = (), deps: list[Completion] | None = None,
               name: str | None = None) -> Completion:  # fmt: skip
        """Record the launch's completion event; note it as the last reader of
        ``reads`` and the writer of ``writes``.  ``keep`` stays alive until it ran;
        ``deps`` are earlier launches whose errors this completion reports too."""
        cap = self.capture
        if cap is not None:  # recorded, not run: the graph's replays complete it
            comp = cap._record(keep, what, reads, writes, name)
            self.note(comp, reads=reads, writes=writes)
            return comp
        lane = self._lane
        start, self._start = self._start, None
        if self.seq_mode and start is None and _trace.hub is None:
            comp = lane.submit(None, keep, what, None, deps, name, _submitted(self.handle))
        else:
            ev = lane.take_event()
            if ev is None:
                ev = acl.create_event(_LAUNCH_EVENT)
            rc = _record_event(ev, self.handle)
            if rc:
                acl.destroy_event(ev)
                self._start = start  # given back by __exit__
                acl.raise_for(rc, "aclrtRecordEvent")
            comp = lane.submit(ev, keep, what, start, deps, name, _submitted(self.handle) if self.seq_mode else 0)
        self.note(comp, reads=reads, writes=writes)
        return comp

    def note(self, comp: Completion, reads: Sequence[DeviceMemory] = (),
             writes: Sequence[DeviceMemory] = ()) -> None:  # fmt: skip
        """Note ``comp`` (a launch of this stream) as the last reader of ``reads``
        and the writer of ``writes``: what later ``order`` calls wait for."""
        # every stream's last read, the writer's own stream's too: a later write on another stream
        # waits for it (write-after-read); a write forgets the readers.  One definition, in C
        # (``acl.note_launch``): the prepared launch's C transaction notes through it too.
        _note_launch(comp, reads, writes, self.stream)


# ---- the stream registry (always on: one entry per stream opened) -------------------------
_streams: weakref.WeakSet[Stream] = weakref.WeakSet()
_lanes: dict[int, Lane] = {}
_retired = {"streams": 0, "launched": 0, "completed": 0, "failed": 0}
_keys = iter(range(1, 1 << 62))
_registry_lock = threading.Lock()


def _register(stream: Stream) -> None:
    """Called by every new stream (its lane exists); then the observers hear of it."""
    with _registry_lock:
        key = next(_keys)
        _lanes[key] = stream._lane
    _streams.add(stream)
    fin = weakref.finalize(stream, _retire, key)
    fin.atexit = False
    h = _trace.hub
    if h is not None:
        h.stream_opened(stream)


def _retire(key: int) -> None:
    """A stream was collected: fold its lane's counts into the totals (they stay monotonic)."""
    with _registry_lock:
        lane = _lanes.pop(key, None)
        if lane is not None:
            _retired["streams"] += 1
            _retired["launched"] += lane.launched
            _retired["completed"] += lane.completed
            _retired["failed"] += lane.failed


def live_streams() -> list[Stream]:
    """The streams not yet collected (closed ones included)."""
    return list(_streams)


def lane_totals() -> dict[str, int]:
    """Launch counts of every stream ever opened: ``launched``, ``completed``, ``failed``,
    ``in_flight`` (now), ``streams`` (opened) and ``max_queue_depth`` (the deepest queue now)."""
    with _registry_lock:
        lanes = list(_lanes.values())
        out = dict(_retired)
    out["streams"] += len(lanes)
    depth = 0
    in_flight = 0
    for lane in lanes:
        out["launched"] += lane.launched
        out["completed"] += lane.completed
        out["failed"] += lane.failed
        n = lane.in_flight
        in_flight += n
        depth = max(depth, n)
    out["in_flight"] = in_flight
    out["max_queue_depth"] = depth
    return out


class Stream(Resource):
    """An ACL stream (``aclrtCreateStream``) of a :class:`~aioge.Device`.

    Use as ``async with dev.open_stream() as s:``.  Every launch on it can be
    awaited on its own (through the tensor it produces); ``synchronize()``
    waits for everything launched before it.

    Thread safety: launches on one stream are serialised by a lock, so
    several threads may share a stream; ACL itself forbids that.

    Closing: ``aclose()`` drains pending work first; ``close()`` refuses with
    :class:`~aioge.BusyResourceError` while launches are in flight.
    """

    _ids = itertools.count(1)  # next() is atomic: streams may be opened from several threads

    def __init__(self, device: Device, *, high_water: int = 1024, timing: bool = False) -> None:
        device.context.check_open()
        device.context.bind()
        self._handle = acl.create_stream()
        self.device = device
        self.id = next(Stream._ids)
        self.high_water = high_water
        #: every launch also records a start event; its Completion.device_ms is set
        self.timing = timing
        self._lock = threading.Lock()
        self._lane = Lane(device.context.handle, f"aioge-lane-{device.id}-{self.id}", self._handle)
        #: THE enqueue primitive of this stream (see :class:`Enqueue`)
        self._enqueue = Enqueue(self)
        self._opened()
        _register(self)

    def _describe(self) -> str:
        return f"Stream {self.id} of device {self.device.id}"

    def __repr__(self) -> str:
        state = "closed" if self._closed else f"in_flight={self._lane.in_flight}"
        return f"<aioge.Stream {self.id} device={self.device.id} {state}>"

    # ---- metrics ----
    @property
    def in_flight(self) -> int:
        """Launches enqueued and not yet known to have completed."""
        return self._lane.in_flight

    @property
    def stats(self) -> dict[str, float]:
        """Counters: ``launched``, ``completed``, ``in_flight``, ``failed``,
        ``wakeups`` (event-loop wake-ups that settled completed launches: one
        settles every launch finished by then), and ``device_ms`` (summed device
        time of completed launches; timing streams)."""
        lane = self._lane
        return {"launched": lane.launched, "completed": lane.completed, "in_flight": lane.in_flight,
                "failed": lane.failed, "wakeups": lane.wakeups, "device_ms": lane.device_ms}  # fmt: skip

    # ---- the enqueue transaction ----
    def _enter(self) -> None:
        """Check open and bind the context, for callers holding ``self._lock`` around a raw
        test-hook call (``with stream._enqueue:`` does both; launches go through it)."""
        self._check_open()
        self.device.context.bind()

    def _new_event(self) -> Any:
        ev = self._lane.take_event()
        return ev if ev is not None else acl.create_event(_LAUNCH_EVENT)

    def _wrong_device(self, m: DeviceMemory) -> WrongDeviceError:
        return WrongDeviceError(
            f"a tensor of {m.device!r} used on {self.device!r}: every open_device() call is a device "
            "object of its own (a context), and tensors stay with the one that made them"
        )

    # ---- launches ----
    def upload(self, array: Any, dtype: dtypes.DTypeLike | None = None) -> Tensor:
        """Copy a host array to a new device tensor, asynchronously.

        Returns the tensor at once; the host array is kept alive until the
        copy has run (mutating it meanwhile is a race, as with any async copy).

        Example:
            >>> x = s.upload(np.ones((2, 3), np.float32))
        """
        return self._upload(array, dtype, None)

    def _upload(self, array: Any, dtype: dtypes.DTypeLike | None, name: str | None, now: bool = False) -> Tensor:
        """``upload``, naming the copy ``name`` in its device error.

        ``now``: copy at once, outside the stream's order (a compiled model's weights): a pageable
        source is otherwise staged (copied) by the runtime at the call and copied again when the
        stream gets there.  The block is new (no queued launch uses it, see ``BlockPool``) and
        nobody else sees it yet, so this is the same upload, with one copy and no completion.
        Not while capturing or timing (the copy is then a launch of its own)."""
        arr = np.asarray(array, dtype=None if dtype is None else dtypes.normalize(dtype))
        dt = dtypes.normalize(arr.dtype)
        arr = _native.contiguous(arr)
        with self._enqueue as tx:
            mem = DeviceMemory(self.device, arr.nbytes, self)
            t = Tensor(mem, arr.shape, dt)
            if now and self._copies_now(tx):
                if arr.nbytes:
                    acl.memcpy(mem.ptr, _native.host_ptr(arr), arr.nbytes, acl.MemcpyKind.HOST_TO_DEVICE)
                return t
            tx.mark_start()
            if arr.nbytes:
                acl.memcpy_async(mem.ptr, _native.host_ptr(arr), arr.nbytes, acl.MemcpyKind.HOST_TO_DEVICE, tx.handle)
            tx.commit((mem, arr), "upload", writes=(mem,), name=name)
        return t

    def _copies_now(self, tx: Enqueue) -> bool:
        """Whether an upload into a new block may copy at once, outside the stream's order (``_upload``'s
        ``now``, ``_upload_all``): not while capturing, timing or tracing, where the copy is a launch."""
        return tx.capture is None and not self.timing and _trace.hub is None

    def _upload_all(self, arrays: Sequence[np.ndarray]) -> list[Tensor]:
        """``_upload(a, None, None, now=True)`` of each of ``arrays`` (C-contiguous numpy arrays), as
        one step: the stream's lock held once, the blocks taken from the pool together, each array
        copied at once into its own block (a compiled model's weights)."""
        dts = [dtypes.normalize(a.dtype) for a in arrays]  # TypeError as _upload's
        with self._enqueue as tx:
            if self._copies_now(tx):
                mems = DeviceMemory._many(self.device, [a.nbytes for a in arrays], self)
                copy, host_ptr, h2d = acl.memcpy, _native.host_ptr, acl.MemcpyKind.HOST_TO_DEVICE
                out = []
                for a, mem, dt in zip(arrays, mems, dts, strict=True):
                    if a.nbytes:
                        copy(mem.ptr, host_ptr(a), a.nbytes, h2d)
                    out.append(Tensor(mem, a.shape, dt))
                return out
        return [self._upload(a, None, None, now=True) for a in arrays]  # each a launch of its own

    def empty(self, shape: Any, dtype: dtypes.DTypeLike = "float32") -> Tensor:
        """A new uninitialised tensor on this stream."""
        shape = (int(shape),) if isinstance(shape, (int, np.integer)) else tuple(int(d) for d in shape)
        with self._enqueue:
            return Tensor._empty(self, shape, dtypes.normalize(dtype))

    def zeros(self, shape: Any, dtype: dtypes.DTypeLike = "float32") -> Tensor:
        """A new tensor filled with zeros (``aclrtMemsetAsync``)."""
        t = self.empty(shape, dtype)
        with self._enqueue as tx:
            mem = t._memory()
            tx.order((), (mem,))
            if t.nbytes:
                acl.memset_async(mem.ptr, t.nbytes, 0, tx.handle)
            tx.commit((mem,), "zeros", writes=(mem,))
        return t

    def copy(self, src: Tensor) -> Tensor:
        """A device-to-device copy of ``src`` into a new tensor on this stream."""
        with self._enqueue as tx:
            smem = src._memory()
            tx.order((smem,))
            t = Tensor._empty(self, src.shape, src.dtype)
            dmem = t._memory()
            tx.mark_start()
            if t.nbytes:
                acl.memcpy_async(dmem.ptr, smem.ptr, t.nbytes, acl.MemcpyKind.DEVICE_TO_DEVICE, tx.handle)
            tx.commit((smem, dmem), "copy", reads=(smem,), writes=(dmem,))
        return t

    def copy_into(self, dst: Tensor, src: Any) -> Tensor:
        """Copy ``src`` -- a host array or a :class:`Tensor` of the same shape and dtype -- into
        the existing tensor ``dst``, in stream order; returns ``dst``.

        What updates a captured graph's inputs between replays (:meth:`capture`).  A host
        array is copied from as it is at the call (the copy stages it).  Inside a capture only
        a tensor source is recorded (a host array cannot be replayed: copy it into a tensor
        before, or use a replayable staging tensor).
        """
        if isinstance(src, Tensor):
            if src.shape != dst.shape or src.dtype != dst.dtype:
                raise ValueError(f"copy_into: source {src.shape} {src.dtype} into {dst.shape} {dst.dtype}")
            with self._enqueue as tx:
                smem, dmem = src._memory(), dst._memory()
                tx.order((smem,), (dmem,))
                tx.mark_start()
                if dst.nbytes:
                    acl.memcpy_async(dmem.ptr, smem.ptr, dst.nbytes, acl.MemcpyKind.DEVICE_TO_DEVICE, tx.handle)
                tx.commit((smem, dmem), "copy_into", reads=(smem,), writes=(dmem,))
            return dst
        arr = _native.contiguous(np.asarray(src, dtype=dst.dtype))
        if arr.shape != dst.shape:
            raise ValueError(f"copy_into: a host array of shape {arr.shape} into a tensor of shape {dst.shape}")
        with self._enqueue as tx:
            dmem = dst._memory()
            tx.order((), (dmem,))
            tx.mark_start()
            if arr.nbytes:
                acl.memcpy_async(dmem.ptr, _native.host_ptr(arr), arr.nbytes, acl.MemcpyKind.HOST_TO_DEVICE, tx.handle)
            tx.commit((dmem, arr), "copy_into", writes=(dmem,))
        return dst

    def _enqueue_download(self, t: Tensor) -> _Download:
        with self._enqueue as tx:
            if tx.capture is not None:
                raise captured_error(self, "numpy()")
            mem = t._memory()
            tx.order((mem,))
            n = t.nbytes
            staging = _Pinned(self.device, n)
            tx.mark_start()
            if n:
                acl.memcpy_async(staging.ptr, mem.ptr, n, acl.MemcpyKind.DEVICE_TO_HOST, tx.handle)
            comp = tx.commit((mem, staging), "download", reads=(mem,))
            return _Download(comp, mem.writer if mem.writer is not comp else None, staging, t)

    async def _download(self, t: Tensor, timeout: float | None) -> np.ndarray:
        d = self._enqueue_download(t)
        with deadline(timeout, f"numpy() of a tensor {t.shape} on {self._describe()}"):
            out = await d.result()
        return out

    def record_event(self, *, timing: bool = False) -> Event:
        """Record an event capturing the work issued so far (``aclrtRecordEvent``)."""
        with self._enqueue as tx:
            if tx.capture is not None:
                raise captured_error(self, "record_event()")
            return Event._record(tx, timing)

    def wait_event(self, event: Event) -> None:
        """Make later work on this stream wait for ``event`` on the device (the host never blocks)."""
        with self._enqueue as tx:
            if tx.capture is not None:
                raise captured_error(self, "wait_event()")
            event._check_open()
            if event.device is not self.device:
                raise WrongDeviceError("event of another device")
            acl.stream_wait_event(tx.handle, event._handle)
            if _trace.hub is not None:
                _trace.hub.waited(self, event._comp)

    # ---- capture ----
    def capture(self, mode: str = "thread_local") -> StreamCapture:
        """Record the launches made on this stream inside a ``with``/``async with`` block,
        to replay them as one task (CANN's ``aclmdlRICapture*``; see :mod:`aioge.runtime.capture`).

        Example:
            >>> with s.capture() as graph:
            ...     y = aioge.ops.relu(aioge.ops.matmul(x, w))   # recorded, not run
            >>> await graph.replay()                             # runs both as one task
            >>> await y.numpy()

        Args:
            mode: ``"thread_local"`` (default: this thread may not make unsafe calls --
                synchronous copies, device synchronize -- while capturing), ``"global"``
                (no thread may), or ``"relaxed"``.
        """
        return StreamCapture(self, mode)

    # ---- waiting ----
    async def synchronize(self, *, timeout: float | None = None) -> None:
        """Wait for every launch issued so far.

        Raises the first launch error since the previous ``synchronize()``
        (each error is also raised to the awaiters of its own launch).

        Args:
            timeout: seconds; :class:`~aioge.StreamSyncTimeoutError` (a
                ``TimeoutError``) when exceeded.

        Cancellation: returns control at once; nothing is lost, the pending
        error (if any) is reported by the next ``synchronize()``.
        """
        with self._enqueue as tx:
            if tx.capture is not None:
                raise captured_error(self, "synchronize()")
            comp = tx.commit(None, "synchronize")
        if not comp.done:
            with deadline(timeout, f"synchronize() of {self._describe()}"):
                await comp._wait_pending()
        self._raise_unreported()

    def _raise_unreported(self) -> None:
        err = self._lane.take_unreported()
        if err is not None:
            code, msg, what = err
            raise error_class(code)(code, msg, what)

    async def drain(self) -> None:
        """Wait while more than ``high_water`` launches are in flight (backpressure).

        Cancellation: returns control at once; nothing is lost.
        """
        lane = self._lane
        while lane.in_flight > self.high_water:
            with lane.lock:
                idx = len(lane.pending) - self.high_water - 1
                target = lane.pending[idx] if 0 <= idx < len(lane.pending) else None
            if target is None:
                break
            if not target.done:
                await target._wait_pending()

    # ---- lifecycle ----
    def _close(self) -> None:
        if self._lane.in_flight:
            raise BusyResourceError(
                f"{self._describe()} has {self._lane.in_flight} launches in flight: use `await stream.aclose()`"
            )
        self._destroy()

    def _destroy(self) -> None:
        for ev in self._lane.stop():
            acl.destroy_event(ev)
        if not self.device.closed:
            self.device.context.bind()
            acl.destroy_stream(self._handle)
        self.device.context.streams.discard(self)

    async def _drain(self) -> None:
        await self.synchronize()

    async def aclose(self) -> None:
        """Drain pending work, then destroy the stream.  Idempotent.

        A launch error still pending is raised after the stream is closed.

        Cancellation: returns control at once; the stream is closed, and a
        background thread destroys it once the launches in flight have run.
        """
        if self._closed:
            return
        try:
            await self._drain()
        except BaseException as e:
            if isinstance(e, Exception) and not self._lane.in_flight:
                self.close()
                raise
            self._force_close()
            raise
        self.close()

    def _force_close(self) -> None:
        """Close without waiting: a background thread drains the queue first.

        While the interpreter shuts down no thread can start: a busy stream is
        then left to the process exit (the exit hook drained it if it could).
        """
        if self._closed:
            return
        self._closed = True
        if not self._lane.in_flight:
            self._destroy()
        elif not finalizing():
            threading.Thread(target=self._destroy, name=f"aioge-close-{self.id}", daemon=True).start()

    def _gc_release(self) -> None:
        self._force_close()


class Event(Resource):
    """An ACL event recorded on a stream (``Stream.record_event()``).

    ``await event.wait()`` resolves when the work captured by the record has
    run; ``other_stream.wait_event(event)`` orders work across streams on the
    device; ``end.elapsed_ms(start)`` gives device time between two records
    (both recorded with ``timing=True``).

    Cancellation: cancelling a wait returns at once and changes nothing.
    """

    def __init__(self, stream: Stream, handle: Any, comp: Completion) -> None:
        self.stream = stream
        self.device: Device = stream.device
        self._handle = handle
        self._comp = comp
        self._opened()
        self.device.context.events.add(self)

    @classmethod
    def _record(cls, tx: Enqueue, timing: bool) -> Event:
        """Record a new event inside ``tx`` (the stream's enqueue transaction)."""
        handle = acl.create_event(acl.EventFlag.SYNC | (acl.EventFlag.TIME_LINE if timing else 0))
        try:
            acl.record_event(handle, tx.handle)
        except BaseException:
            acl.destroy_event(handle)
            raise
        # the lane waits on a pooled twin recorded right behind it, so the
        # user's handle is never recycled
        comp = tx.commit(None, "event")
        return cls(tx.stream, handle, comp)

    def __repr__(self) -> str:
        state = "closed" if self._closed else ("done" if self._comp.done else "pending")
        return f"<aioge.Event of stream {self.stream.id} device={self.device.id} {state}>"

    @property
    def done(self) -> bool:
        """True once the recorded work has run (asks the runtime, never waits)."""
        return self._comp.done or self.query()

    def query(self) -> bool:
        """Ask the runtime (``aclrtQueryEventStatus``) whether the event completed."""
        self._check_open()
        self.device.context.bind()
        return acl.query_event_done(self._handle)

    async def wait(self, *, timeout: float | None = None) -> None:
        """Wait until the captured work has run (raising its error, if any).

        Raises:
            EventSyncTimeoutError: not complete within ``timeout`` seconds (a ``TimeoutError``).
        """
        self._check_open()
        with deadline(timeout, f"wait() of an event of {self.stream._describe()}", event=True):
            await self._comp.wait()

    def __await__(self) -> Any:
        return self.wait().__await__()

    def elapsed_ms(self, start: Event) -> float:
        """Device time in ms from ``start`` to this event (both complete, both ``timing=True``)."""
        self._check_open()
        start._check_open()
        self.device.context.bind()
        return acl.elapsed_ms(start._handle, self._handle)

    def _close(self) -> None:
        if not self.device.closed:
            acl.destroy_event(self._handle)

    _gc_release = _close


if acl.launch_execute_rc is not None:  # the host runtime: its prepared launch in one C call
    acl.bind_launch(Tensor, DeviceMemory, Completion, POLL_EVERY, _trace, Enqueue, Lane)
