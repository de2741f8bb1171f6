"""Completion lanes: the only module that knows both threads and event loops.

Every launch on a stream is followed by an event record; the launch's
:class:`Completion` holds that event and everything the device may still
touch (device buffers, host arrays being copied).  Each stream has one
:class:`Lane`: a dedicated, named thread bound to the stream's context that
waits for the oldest pending event with ``aclrtSynchronizeEventWithTimeout``
in bounded slices, then collects every later launch that has finished too
(coalescing), and hands the batch back to each waiting event loop with a
single ``call_soon_threadsafe`` (or trio's ``run_sync_soon``) per loop.
Closed loops and cancelled waiters are skipped.

Because each launch has its own event, a failing launch's error code reaches
exactly the awaiters of that launch (the runtime reports the error of the
work between two event records), and is also kept for the stream's next
``synchronize()``.
"""

from __future__ import annotations

import asyncio
import collections
import threading
from collections.abc import Callable
from typing import Any

import sniffio

from . import _native
from ._native import lib
from .errors import error_class

__all__ = ("Completion", "Lane", "wait_all")

#: slice of one blocking wait, in ms: bounds how long shutdown takes to notice
SLICE_MS = 100
_EVENT_TIMEOUT = 507047  # ACL_ERROR_RT_EVENT_SYNC_TIMEOUT

_Poster = Callable[..., Any]


class Completion:
    """The completion of one launch (or event record) on a stream.

    Awaiting it resolves when the device has run the launch; a launch error
    is raised as the matching :class:`~aioge.AclError`.

    Cancellation: cancelling an ``await`` returns control at once and has no
    effect on the launch: it still runs, and everything it uses stays alive
    until it has; other awaiters are unaffected.
    """

    __slots__ = ("_done", "_error", "_waiters", "event", "keep", "lane", "seq", "what")

    def __init__(self, lane: Lane, event: Any, keep: Any, what: str, seq: int) -> None:
        self.lane = lane
        self.event = event
        self.keep = keep
        self.what = what
        self.seq = seq
        self._done = False
        self._error: tuple[int, str] | None = None
        self._waiters: list[tuple[_Poster, Any]] = []

    @property
    def done(self) -> bool:
        return self._done

    def exception(self) -> BaseException | None:
        """The launch's error, once done (None if it succeeded or is pending)."""
        if self._error is None:
            return None
        code, msg = self._error
        return error_class(code)(code, msg, self.what)

    def _raise_if_failed(self) -> None:
        exc = self.exception()
        if exc is not None:
            raise exc

    async def wait(self) -> None:
        """Wait until the launch has run; raise its error if it failed."""
        if not self._done:
            await self._wait_pending()
        self._raise_if_failed()

    def __await__(self) -> Any:
        return self.wait().__await__()

    async def _wait_pending(self) -> None:
        if sniffio.current_async_library() == "asyncio":
            loop = asyncio.get_running_loop()
            fut = loop.create_future()
            if self._add_waiter(loop.call_soon_threadsafe, fut):
                await fut
            return
        import trio  # the only other library anyio supports

        token = trio.lowlevel.current_trio_token()
        ev = trio.Event()
        if self._add_waiter(token.run_sync_soon, ev):
            await ev.wait()

    def _add_waiter(self, poster: _Poster, waiter: Any) -> bool:
        """Register a waiter; False if the completion finished meanwhile."""
        with self.lane.lock:
            if self._done:
                return False
            self._waiters.append((poster, waiter))
            return True


def _wake(waiters: list[Any]) -> None:
    """Runs on the waiting loop: resolve futures / set trio events."""
    for w in waiters:
        if isinstance(w, asyncio.Future):
            if not w.done():
                w.set_result(None)
        else:
            w.set()


class Lane:
    """The completion thread of one stream (started lazily, stopped on close)."""

    def __init__(self, ctx: Any, name: str) -> None:
        # no reference to the Stream: an unclosed stream can still be collected
        self._ctx = ctx
        self.name = name
        self.lock = threading.Lock()
        self._cv = threading.Condition(self.lock)
        self.pending: collections.deque[Completion] = collections.deque()
        self._thread: threading.Thread | None = None
        self._idle = False
        self._stopping = False
        self.launched = 0
        self.completed = 0
        self.failed = 0
        #: first error since the last synchronize(): (code, message, what)
        self.unreported: tuple[int, str, str] | None = None
        self._free_events: list[Any] = []

    # ---- loop side ----
    def submit(self, event: Any, keep: Any, what: str) -> Completion:
        with self.lock:
            self.launched += 1
            comp = Completion(self, event, keep, what, self.launched)
            self.pending.append(comp)
            if self._thread is None:
                self._start_locked()
            elif self._idle:
                self._cv.notify()
        return comp

    def take_event(self) -> Any | None:
        """A recycled event of this stream, if any."""
        try:
            return self._free_events.pop()
        except IndexError:
            return None

    @property
    def in_flight(self) -> int:
        return self.launched - self.completed

    def _start_locked(self) -> None:
        t = threading.Thread(target=self._run, name=self.name, daemon=True)
        self._thread = t
        t.start()

    def stop(self) -> list[Any]:
        """Stop the thread once nothing is pending; return the spare events."""
        with self.lock:
            self._stopping = True
            self._cv.notify()
            t = self._thread
        if t is not None and t is not threading.current_thread():
            t.join()
        events, self._free_events = self._free_events, []
        return events

    # ---- lane thread ----
    def _run(self) -> None:
        _native.bind_context(self._ctx)
        sync_to = lib.aclrtSynchronizeEventWithTimeout
        while True:
            with self.lock:
                while not self.pending and not self._stopping:
                    self._idle = True
                    self._cv.wait()
                    self._idle = False
                if not self.pending:
                    return
                head = self.pending[0]
            rc = sync_to(head.event, SLICE_MS)
            if rc == _EVENT_TIMEOUT:
                _native.recent_error()  # the timeout's text is not for anyone
                continue
            batch = [(head, rc, _native.recent_error() if rc else "")]
            with self.lock:
                self.pending.popleft()
                nxt = self.pending[0] if self.pending else None
            # coalesce: everything behind it that has finished too
            while nxt is not None:
                rc = sync_to(nxt.event, 0)
                if rc == _EVENT_TIMEOUT:
                    _native.recent_error()
                    break
                batch.append((nxt, rc, _native.recent_error() if rc else ""))
                with self.lock:
                    self.pending.popleft()
                    nxt = self.pending[0] if self.pending else None
            self._finish(batch)

    def _finish(self, batch: list[tuple[Completion, int, str]]) -> None:
        by_loop: dict[_Poster, list[Any]] = {}
        released = []
        with self.lock:
            for comp, rc, msg in batch:
                if rc:
                    comp._error = (rc, msg)
                    self.failed += 1
                    if self.unreported is None:
                        self.unreported = (rc, msg, comp.what)
                comp._done = True
                self.completed += 1
                for poster, waiter in comp._waiters:
                    by_loop.setdefault(poster, []).append(waiter)
                comp._waiters = []
                released.append(comp.keep)
                comp.keep = None
                self._free_events.append(comp.event)
        for poster, waiters in by_loop.items():
            try:
                poster(_wake, waiters)
            except RuntimeError:  # closed asyncio loop, or trio.RunFinishedError
                pass
        # drop references outside the lock: buffers may free device memory here
        del released


async def wait_all(comps: list[Completion]) -> None:
    """Await several completions; raise the first error in launch order."""
    for c in comps:
        if not c.done:
            await c._wait_pending()
    for c in comps:
        c._raise_if_failed()
