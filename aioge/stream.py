"""Streams: FIFO queues of device work, each with a completion lane.

Launch methods (``upload``, ``aioge.op``, the ``aioge.ops`` functions) are
synchronous and cheap, like ``StreamWriter.write``: they enqueue and return
a :class:`~aioge.Tensor` at once.  Waiting is always an ``await``.
"""

from __future__ import annotations

import itertools
import threading
from typing import TYPE_CHECKING, Any

import numpy as np

from . import _native, _trace, dtypes
from ._native import ffi, lib
from ._resources import Resource, finalizing
from ._scheduler import Completion, Lane, deadline
from .errors import BusyResourceError, WrongDeviceError, error_class
from .tensor import DeviceMemory, Tensor

if TYPE_CHECKING:
    from .device import Device
    from .event import Event

__all__ = ("Stream",)

_H2D, _D2H, _D2D = 1, 2, 3


class _Pinned:
    """Page-locked host staging memory, from the device's pinned pool."""

    __slots__ = ("cap", "device", "nbytes", "ptr")

    def __init__(self, device: Device, nbytes: int) -> None:
        self.ptr, self.cap = device._pinned.take(nbytes)
        self.nbytes = nbytes
        self.device = device

    def __del__(self) -> None:
        ptr, self.ptr = self.ptr, None
        if ptr is not None and not self.device.closed:
            self.device._pinned.give(ptr, self.cap)


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
            ffi.memmove(_native.host_ptr(out), self.staging.ptr, out.nbytes)
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
        device._check_open()
        _native.bind_context(device._ctx)
        p = ffi.new("aclrtStream *")
        _native.check(lib.aclrtCreateStream(p), "aclrtCreateStream")
        self._handle = p[0]
        self.device = device
        self.id = next(Stream._ids)
        self.high_water = high_water
        #: every launch also records a start event; its Completion.device_ms is set
        self.timing = timing
        self._lock = threading.Lock()
        self._scratch_n = (0, 0)
        self._scratch_arrays: tuple[Any, Any, Any, Any] = (None, None, None, None)
        self._lane = Lane(device._ctx, f"aioge-lane-{device.id}-{self.id}", self._handle)
        self._opened()
        _trace.stream_opened(self)

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

    # ---- internals used by launches (caller holds self._lock) ----
    def _enter(self) -> None:
        self._check_open()
        _native.bind_context(self.device._ctx)

    def _scratch(self, n_in: int, n_out: int) -> tuple[Any, Any, Any, Any]:
        """Reusable pointer arrays for a launch (the caller holds the lock;
        ACL copies what it needs during the call)."""
        cap_in, cap_out = self._scratch_n
        if n_in > cap_in or n_out > cap_out:
            cap_in, cap_out = max(n_in, cap_in, 8), max(n_out, cap_out, 4)
            self._scratch_arrays = (
                ffi.new("aclTensorDesc *[]", cap_in), ffi.new("aclDataBuffer *[]", cap_in),
                ffi.new("aclTensorDesc *[]", cap_out), ffi.new("aclDataBuffer *[]", cap_out),
            )  # fmt: skip
            self._scratch_n = (cap_in, cap_out)
        return self._scratch_arrays

    def _new_event(self) -> Any:
        ev = self._lane.take_event()
        if ev is None:
            p = ffi.new("aclrtEvent *")
            # SYNC: usable by aclrtStreamWaitEvent; TIME_LINE: by aclrtEventElapsedTime
            _native.check(lib.aclrtCreateEventWithFlag(p, 0x1 | 0x8), "aclrtCreateEventWithFlag")
            ev = p[0]
        return ev

    def _start_mark(self) -> Any:
        """Timing streams: record the start event of the next launch."""
        if not self.timing:
            return None
        ev = self._new_event()
        _native.check(lib.aclrtRecordEvent(ev, self._handle), "aclrtRecordEvent")
        return ev

    def _record(self, keep: Any, what: str, start: Any = None, deps: list[Completion] | None = None,
                name: str | None = None) -> Completion:  # fmt: skip
        ev = self._new_event()
        rc = lib.aclrtRecordEvent(ev, self._handle)
        if rc:
            lib.aclrtDestroyEvent(ev)
            _native.check(rc, "aclrtRecordEvent")
        return self._lane.submit(ev, keep, what, start, deps, name)

    def _wait_for(self, comp: Completion | None) -> None:
        """Make this stream wait (on the device) for a launch of another stream."""
        if comp is None or comp.done or comp.lane is self._lane:
            return
        _native.check(lib.aclrtStreamWaitEvent(self._handle, comp.event), "aclrtStreamWaitEvent")
        if _trace.hub is not None:
            _trace.hub.waited(self, comp)

    def _order_read(self, m: DeviceMemory) -> None:
        if m.device is not self.device:
            raise WrongDeviceError(
                f"a tensor of {m.device!r} used on {self.device!r}: every open_device() call is a device "
                "object of its own (a context), and tensors stay with the one that made them"
            )
        self._wait_for(m.writer)

    def _order_write(self, m: DeviceMemory) -> None:
        self._order_read(m)
        for lane, comp in list(m.readers.items()):
            if lane is not self._lane:
                self._wait_for(comp)

    def _note_read(self, m: DeviceMemory, comp: Completion) -> None:
        # every stream's last read, the writer's own stream's too: a later
        # write on another stream waits for it (write-after-read)
        m.readers[self._lane] = comp

    def _note_write(self, m: DeviceMemory, comp: Completion) -> None:
        m.writer = comp
        m.stream = self
        m.readers.clear()

    # ---- launches ----
    def upload(self, array: Any, dtype: dtypes.DTypeLike | None = None) -> Tensor:
        """Copy a host array to a new device tensor, asynchronously.

        Returns the tensor at once; the host array is kept alive until the
        copy has run (mutating it meanwhile is a race, as with any async copy).

        Example:
            >>> x = s.upload(np.ones((2, 3), np.float32))
        """
        return self._upload(array, dtype, None)

    def _upload(self, array: Any, dtype: dtypes.DTypeLike | None, name: str | None) -> Tensor:
        """``upload``, naming the copy ``name`` in its device error."""
        arr = np.asarray(array, dtype=None if dtype is None else dtypes.normalize(dtype))
        dt = dtypes.normalize(arr.dtype)
        arr = _native.contiguous(arr)
        with self._lock:
            self._enter()
            mem = DeviceMemory(self.device, arr.nbytes, self)
            t = Tensor(mem, arr.shape, dt)
            start = self._start_mark()
            if arr.nbytes:
                _native.check(
                    lib.aclrtMemcpyAsync(mem.ptr, arr.nbytes, _native.host_ptr(arr), arr.nbytes, _H2D, self._handle),
                    "aclrtMemcpyAsync",
                )
            self._note_write(mem, self._record((mem, arr), "upload", start, name=name))
        return t

    def empty(self, shape: Any, dtype: dtypes.DTypeLike = "float32") -> Tensor:
        """A new uninitialised tensor on this stream."""
        shape = (int(shape),) if isinstance(shape, (int, np.integer)) else tuple(int(d) for d in shape)
        with self._lock:
            self._enter()
            return Tensor._empty(self, shape, dtypes.normalize(dtype))

    def zeros(self, shape: Any, dtype: dtypes.DTypeLike = "float32") -> Tensor:
        """A new tensor filled with zeros (``aclrtMemsetAsync``)."""
        t = self.empty(shape, dtype)
        with self._lock:
            self._enter()
            mem = t._memory()
            self._order_write(mem)
            if t.nbytes:
                _native.check(lib.aclrtMemsetAsync(mem.ptr, t.nbytes, 0, t.nbytes, self._handle), "aclrtMemsetAsync")
            self._note_write(mem, self._record((mem,), "zeros"))
        return t

    def copy(self, src: Tensor) -> Tensor:
        """A device-to-device copy of ``src`` into a new tensor on this stream."""
        with self._lock:
            self._enter()
            smem = src._memory()
            self._order_read(smem)
            t = Tensor._empty(self, src.shape, src.dtype)
            dmem = t._memory()
            start = self._start_mark()
            if t.nbytes:
                _native.check(
                    lib.aclrtMemcpyAsync(dmem.ptr, t.nbytes, smem.ptr, t.nbytes, _D2D, self._handle),
                    "aclrtMemcpyAsync",
                )
            comp = self._record((smem, dmem), "copy", start)
            self._note_read(smem, comp)
            self._note_write(dmem, comp)
        return t

    def _enqueue_download(self, t: Tensor) -> _Download:
        with self._lock:
            self._enter()
            mem = t._memory()
            self._order_read(mem)
            n = t.nbytes
            staging = _Pinned(self.device, n)
            start = self._start_mark()
            if n:
                _native.check(lib.aclrtMemcpyAsync(staging.ptr, n, mem.ptr, n, _D2H, self._handle), "aclrtMemcpyAsync")
            comp = self._record((mem, staging), "download", start)
            self._note_read(mem, comp)
            return _Download(comp, mem.writer if mem.writer is not comp else None, staging, t)

    async def _download(self, t: Tensor, timeout: float | None) -> np.ndarray:
        d = self._enqueue_download(t)
        with deadline(timeout, f"numpy() of a tensor {t.shape} on {self._describe()}"):
            out = await d.result()
        return out

    def record_event(self, *, timing: bool = False) -> Event:
        """Record an event capturing the work issued so far (``aclrtRecordEvent``)."""
        from .event import Event

        with self._lock:
            self._enter()
            return Event._record(self, timing)

    def wait_event(self, event: Event) -> None:
        """Make later work on this stream wait for ``event`` on the device (the host never blocks)."""
        with self._lock:
            self._enter()
            event._check_open()
            if event.device is not self.device:
                raise WrongDeviceError("event of another device")
            _native.check(lib.aclrtStreamWaitEvent(self._handle, event._handle), "aclrtStreamWaitEvent")
            if _trace.hub is not None:
                _trace.hub.waited(self, event._comp)

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
        with self._lock:
            self._enter()
            comp = self._record(None, "synchronize")
        if not comp.done:
            with deadline(timeout, f"synchronize() of {self._describe()}"):
                await comp._wait_pending()
        self._raise_unreported()

    def _raise_unreported(self) -> None:
        lane = self._lane
        with lane.lock:
            err, lane.unreported = lane.unreported, None
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
            lib.aclrtDestroyEvent(ev)
        if not self.device.closed:
            _native.bind_context(self.device._ctx)
            lib.aclrtDestroyStream(self._handle)
        self.device._streams.discard(self)

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
