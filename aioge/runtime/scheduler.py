"""Completion lanes: the only module that knows both threads and event loops.

Every launch on a stream is followed by an event record; the launch's
:class:`Completion` holds that event and everything the device may still
touch (device buffers, host arrays being copied).  Each stream has one
:class:`Lane`, the FIFO of its pending completions, and two ways of
noticing that they finished:

* **the notify fd** (host runtime + asyncio, the fast path): the stream's C
  worker writes an eventfd after the next event marker once armed; the
  owning loop watches it with ``add_reader`` and completes every finished
  launch in one callback, with no extra thread and no thread hop;
* **the lane thread** (any backend, any loop, trio): a dedicated, named
  thread bound to the stream's context waits for the oldest pending event
  with ``aclrtSynchronizeEventWithTimeout`` in bounded slices and hands each
  finished batch to every waiting loop with one ``call_soon_threadsafe``
  (or trio's ``run_sync_soon``) per loop.

Either way one wake-up settles every launch that has finished (coalescing),
cancelled waiters and closed loops are skipped, and a failing launch's error
reaches exactly its own awaiters; the first error is also kept for the
stream's next ``synchronize()``.

How a launch is known to have run depends on the backend:

* **sequence numbers** (the host runtime): every task a stream runs has a
  number and they complete in order, so a completion holds the number of its
  launch's last task (``tseq``) and is done once the stream's completed count
  reaches it -- no event per launch.  The runtime logs each failed task with
  its number, and a completion takes the first failure in its range (after
  the previous completion's number, up to its own);
* **events** (a real ACL backend): each launch is followed by an event record,
  and the runtime reports the error of the work between two records.
"""

from __future__ import annotations

import asyncio
import collections
import os
import threading
import time
import weakref
from collections.abc import Callable, Generator
from types import TracebackType
from typing import Any, Generic, TypeVar

import anyio.lowlevel

from .. import _native
from .._native import acl
from ..errors import AclError, EventSyncTimeoutError, StreamSyncTimeoutError, error_class
from . import _trace

__all__ = ("Completion", "Lane", "ThreadJob", "deadline", "wait_all")

#: slice of one blocking wait, in ms: bounds how long shutdown takes to notice
SLICE_MS = 100
#: pending launches above which a launch settles finished ones inline
POLL_EVERY = 512
#: an await on one of the next two launches of a stream polls this long (s)
#: before suspending: tiny device work then completes without a loop wake-up
AWAIT_SPIN_S = _native.env_number("AIOGE_AWAIT_SPIN_US", 20, minimum=0) * 1e-6
#: a kind of launch that keeps outlasting the spin spins once in ``2**_SPIN_BACKOFF`` awaits
_SPIN_BACKOFF = 6
#: kinds of launches whose misses a lane remembers (beyond: it forgets them all)
_SPIN_KINDS = 64
_EVENT_TIMEOUT = acl.ERROR_WAIT_TIMEOUT
_STREAM_TIMEOUT = acl.ERROR_STREAM_TIMEOUT
#: the host runtime completes launches by stream sequence numbers (see the module docstring)
SEQ_MODE = _native.has_host_hooks and acl.has_entry("aiogeHostStreamProgress")

_Poster = Callable[..., Any]
_T = TypeVar("_T")


class Completion:
    """The completion of one launch (or event record) on a stream.

    Awaiting it resolves when the device has run the launch; a launch error
    is raised as the matching :class:`~aioge.AclError`.

    Cancellation: cancelling an ``await`` returns control at once and has no
    effect on the launch: it still runs, and everything it uses stays alive
    until it has; other awaiters are unaffected.
    """

    __slots__ = ("_done", "_error", "_waiters", "deps", "device_ms", "event", "keep", "lane", "name", "seq", "start",
                 "tseq", "what")  # fmt: skip

    def __init__(self, lane: Lane, event: Any, keep: Any, what: str, seq: int, start: Any = None,
                 deps: list[Completion] | None = None, name: str | None = None, tseq: int = 0) -> None:  # fmt: skip
        self.lane = lane
        #: sequence-number lanes: the runtime's number of the launch's last task
        self.tseq = tseq
        #: what its error names (e.g. "<graph>: node 'n' (Op)"), when more than ``what`` (the op type)
        self.name = name
        self.event = event
        #: launches this one stands for, in enqueue order: of other streams it
        #: joined (device-side waits), or earlier ones of its own stream; the
        #: first of them that failed gives this launch its error
        self.deps = deps
        #: timing streams: the event recorded just before the launch
        self.start = start
        #: device time of the launch in ms (timing streams, once done), else None
        self.device_ms: float | None = None
        self.keep = keep
        self.what = what
        self.seq = seq
        self._done = False
        self._error: tuple[int, str, str] | None = None  # (code, message, what failed)
        self._waiters: list[tuple[_Poster, Any]] | None = None

    def __repr__(self) -> str:
        state = "pending" if not self._done else ("failed" if self._error is not None else "done")
        return f"<aioge.Completion #{self.seq} {self.what!r} on {self.lane.name} {state}>"

    @property
    def done(self) -> bool:
        return self._done

    def exception(self) -> BaseException | None:
        """The launch's error, once done (None if it succeeded or is pending)."""
        if self._error is None:
            return None
        code, msg, what = self._error
        return error_class(code)(code, msg, what)

    def _ran_within(self, timeout_ms: int) -> bool:
        """Block the calling thread until the launch has run on the device, at most
        ``timeout_ms``; True if it has (tests and shutdown paths: settles nothing)."""
        if self._done:
            return True
        if self.event is None:
            rc = acl.stream_wait_completed_rc(self.lane._handle, self.tseq, timeout_ms)
        else:
            _native.bind_context(self.lane._ctx)
            rc = acl.synchronize_event_rc(self.event, timeout_ms)
        if rc in (_EVENT_TIMEOUT, _STREAM_TIMEOUT):
            _native.recent_error()
            return False
        _native.recent_error()  # its error is reported when the lane settles it
        return True

    def _raise_if_failed(self) -> None:
        exc = self.exception()
        if exc is not None:
            raise exc

    async def wait(self) -> None:
        """Wait until the launch has run; raise its error if it failed."""
        await self

    def __await__(self) -> Generator[Any, None, None]:
        # a generator, not a coroutine: a launch that settled when it was made (it ran inline) is
        # done here, and its await is then this check alone
        if not self._done and not self.lane.spin_until(self):
            yield from self._wait_pending().__await__()
        if self._error is not None:
            self._raise_if_failed()

    async def _wait_pending(self) -> None:
        loop = asyncio._get_running_loop()
        if loop is not None:
            fut = loop.create_future()
            if self._add_waiter(loop.call_soon_threadsafe, fut):
                self.lane.watch(loop, self)
                await fut
            return
        import trio  # not asyncio: the only other library anyio supports

        token = trio.lowlevel.current_trio_token()
        ev = trio.Event()
        if self._add_waiter(token.run_sync_soon, ev):
            self.lane.watch(None, self)
            await ev.wait()

    def _add_waiter(self, poster: _Poster, waiter: Any) -> bool:
        """Register a waiter; False if the completion finished meanwhile."""
        with self.lane.lock:
            if self._done:
                return False
            if self._waiters is None:
                self._waiters = []
                self.lane.waited += 1
            self._waiters.append((poster, waiter))
            return True


class _Bell:
    """Wakes one asyncio loop from other threads: ``post(fn, arg)`` runs ``fn(arg)`` on the loop.

    It does what ``loop.call_soon_threadsafe`` does, through an eventfd the loop
    watches (``add_reader``) that the posting thread writes without releasing the
    GIL (``acl.ring``).  A :class:`ThreadJob`'s worker posts its result and then
    blocks for its next call: with ``call_soon_threadsafe``, the socket write
    releases the GIL, the woken loop takes it, and the worker, which needs it
    for the few steps to its wait, gets it back only when the loop next blocks,
    which then waits for the worker to let go again.  Here the loop finds the
    GIL held until the worker waits, and runs on from there.

    A loop has one bell (:func:`_bell_of`), made on first use; its fd closes with
    the loop object.
    """

    __slots__ = ("__weakref__", "_calls", "_fd", "_loop")

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self._loop = weakref.ref(loop)  # the loop holds the bell (its reader), never the reverse
        self._calls: collections.deque[tuple[Callable[[Any], object], Any]] = collections.deque()
        self._fd = os.eventfd(0, os.EFD_NONBLOCK | os.EFD_CLOEXEC)
        try:
            loop.add_reader(self._fd, self._run)
        except BaseException:
            os.close(self._fd)
            raise
        weakref.finalize(loop, os.close, self._fd)

    def post(self, fn: Callable[[Any], object], arg: Any) -> None:
        """Run ``fn(arg)`` on the loop soon (from any thread); RuntimeError if the loop is closed."""
        loop = self._loop()
        if loop is None or loop.is_closed():
            raise RuntimeError("Event loop is closed")
        self._calls.append((fn, arg))
        _ring(self._fd)  # after the append: the loop reads the count before it takes the calls

    def _run(self) -> None:
        try:
            os.eventfd_read(self._fd)
        except BlockingIOError:  # a ring the previous run already took the calls of
            pass
        calls = self._calls
        while calls:
            fn, arg = calls.popleft()
            try:
                fn(arg)
            except Exception as e:  # as a call_soon_threadsafe callback's would be: reported, the others run
                loop = self._loop()
                if loop is not None:
                    loop.call_exception_handler({"message": f"exception in {fn!r}", "exception": e})


_ring = acl.ring
#: each loop's bell; None for a loop that cannot have one (no eventfd, no add_reader)
_bells: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, _Bell | None] = weakref.WeakKeyDictionary()
if hasattr(os, "register_at_fork"):  # a forked child rings bells of its own, never its parent's fds
    os.register_at_fork(after_in_child=_bells.clear)


def _bell_of(loop: asyncio.AbstractEventLoop) -> _Poster:
    """What posts a call to ``loop``: its bell's ``post``, else ``call_soon_threadsafe``."""
    try:
        bell = _bells[loop]
    except KeyError:
        try:
            bell = _Bell(loop) if hasattr(os, "eventfd") else None
        except (NotImplementedError, OSError):  # a loop without add_reader (e.g. Windows' proactor)
            bell = None
        except TypeError:  # a loop that takes no weak reference: it cannot own a bell
            return loop.call_soon_threadsafe
        _bells[loop] = bell
    return bell.post if bell is not None else loop.call_soon_threadsafe


def _loop_waiter() -> tuple[_Poster, Any]:
    """A waiter for the running loop and the call that wakes it from any
    thread: ``poster(_wake, [waiter])``."""
    loop = asyncio._get_running_loop()
    if loop is not None:
        return _bell_of(loop), loop.create_future()
    import trio

    return trio.lowlevel.current_trio_token().run_sync_soon, trio.Event()


async def _park(waiter: Any) -> None:
    if isinstance(waiter, asyncio.Future):
        await waiter
    else:
        await waiter.wait()


def _wake(waiters: list[Any]) -> None:
    """Runs on the waiting loop: resolve futures / set trio events."""
    for w in waiters:
        if isinstance(w, asyncio.Future):
            if not w.done():
                w.set_result(None)
        else:
            w.set()


_new = object.__new__
_init = Completion.__init__
_submit_seq = acl.submit_seq


class Lane:
    """The pending launches of one stream and the drivers that complete them."""

    # slots: the prepared launch's C transaction (_launch.c) reads and writes a few by offset
    __slots__ = ("_armed_at", "_ctx", "_cv", "_elapsed", "_fails_seen", "_failures", "_fd", "_fd_loop", "_fd_ok",
                 "_free_events", "_handle", "_idle", "_last_tseq", "_progress", "_spin_misses", "_stopped",
                 "_stopping", "_thread", "completed", "device_ms", "failed", "launched", "lock", "name", "pending",
                 "seq_mode", "unreported", "waited", "wakeups")  # fmt: skip

    def __init__(self, ctx: Any, name: str, handle: Any) -> None:
        # no reference to the Stream: an unclosed stream can still be collected
        self._ctx = ctx
        self._handle = handle
        self.name = name
        self.lock = threading.Lock()
        self._cv = threading.Condition(self.lock)
        self.pending: collections.deque[Completion] = collections.deque()
        self._thread: threading.Thread | None = None
        self._idle = False
        self._stopping = False
        self._stopped = False
        self.launched = 0
        self.completed = 0
        self.device_ms = 0.0
        #: pending completions that have waiters (decides re-arming the fd)
        self.waited = 0
        #: loop wake-ups spent settling launches: notify-fd callbacks plus
        #: batches posted to a loop (coalescing keeps it far below `completed`)
        self.wakeups = 0
        self.failed = 0
        #: first error since the last synchronize(): (code, message, what)
        self.unreported: tuple[int, str, str] | None = None
        self._free_events: list[Any] = []
        #: awaits whose spin missed, by the launch's ``what``: (misses in a row, spins still to skip)
        self._spin_misses: dict[str, tuple[int, int]] = {}
        self._elapsed = acl.ElapsedTimer()
        # notify-fd driver (host runtime only)
        self._fd: int | None = None
        self._fd_loop: asyncio.AbstractEventLoop | None = None
        self._fd_ok = _native.has_host_hooks and hasattr(os, "eventfd")
        #: completion by stream sequence numbers (the host runtime), else by events
        self.seq_mode = SEQ_MODE
        #: sequence-number mode: the number the notify fd is armed for (-1: not armed), the last
        #: finished completion's number, failures logged by the runtime and those taken so far
        self._armed_at = -1
        self._last_tseq = 0
        self._failures: collections.deque[tuple[int, int, str]] = collections.deque()
        self._fails_seen = 0
        if self.seq_mode:
            self._progress = acl.StreamProgress(handle)
            acl.stream_log_failures(handle, True)

    def take_unreported(self) -> tuple[int, str, str] | None:
        """The first error since the last call (``(code, message, what)``), cleared: what a
        stream's ``synchronize()`` raises."""
        with self.lock:
            err, self.unreported = self.unreported, None
        return err

    # ---- launching side ----
    def submit(self, event: Any, keep: Any, what: str, start: Any = None,
               deps: list[Completion] | None = None, name: str | None = None, tseq: int = 0) -> Completion:  # fmt: skip
        with self.lock:
            self.launched = n = self.launched + 1
            comp = _new(Completion)  # + __init__ as a function: a class call costs a launch more
            _init(comp, self, event, keep, what, n, start, deps, name, tseq)
            self.pending.append(comp)
            if self._idle:
                self._cv.notify()
        if _trace.hub is not None:
            _trace.hub.recorded(comp)
        if not n & 63 and len(self.pending) > POLL_EVERY:
            self.poll()  # nobody is waiting: settle what finished so buffers are released
        return comp

    def submit_seq(self, keep: Any, what: str, name: str | None, tseq: int) -> Completion:
        """``submit`` for the prepared-launch path (sequence-number lanes, no event, no
        observer): the caller holds the stream's lock, which serialises every submit.  One
        definition, in C (``acl.submit_seq``, which the prepared launch's C transaction also
        calls): the lane counts the launch.  One that has already run without a failure, nothing
        pending before it (the runtime ran it inline on the caller's thread), is settled there: its
        Completion is done when made and keeps nothing, so awaiting it takes no poll.  Any other's
        Completion joins ``pending``, a lane thread asleep on the condition is woken, and every
        64th launch polls once ``pending`` is longer than ``POLL_EVERY``."""
        return _submit_seq(self, keep, what, name, tseq)  # type: ignore[no-any-return]

    def record_failure(self, err: tuple[int, str, str]) -> None:
        """A launch that ran at once on the caller's thread (and so has no completion) failed:
        count it, and keep it for the stream's next ``synchronize()`` as any launch's error."""
        with self.lock:
            self.failed += 1
            if self.unreported is None:
                self.unreported = err

    def spin_until(self, comp: Completion) -> bool:
        """Briefly poll for a launch near the head of the queue; True if it completed.

        Launches of a kind (their ``what``) that outlast the spin stop paying for it: after a
        miss the next ``2**misses - 1`` awaits of that kind (up to 63) suspend at once, then one
        spins again; a hit forgets the misses.  A graph execution of hundreds of microseconds
        thus spins once in 64 awaits, and tiny launches of other kinds keep their spin."""
        if AWAIT_SPIN_S <= 0:
            return False
        p = self.pending
        if not (p and (p[0] is comp or (len(p) > 1 and p[1] is comp))):
            return comp._done
        misses = self._spin_misses  # benign races between loops of several threads: it is advice
        what = comp.what
        seen = misses.get(what)
        if seen is not None and seen[1]:
            misses[what] = (seen[0], seen[1] - 1)
            return comp._done
        self.poll()  # a tiny launch has often run by now: then no clock read
        if not comp._done:
            deadline = time.perf_counter() + AWAIT_SPIN_S
            while not comp._done and time.perf_counter() < deadline:
                self.poll()
        if comp._done:
            if seen is not None:
                misses.pop(what, None)
            return True
        n = min(seen[0] + 1, _SPIN_BACKOFF) if seen is not None else 1
        if seen is None and len(misses) >= _SPIN_KINDS:
            misses.clear()
        misses[what] = (n, (1 << n) - 1)
        return False

    def take_event(self) -> Any | None:
        """A recycled event of this stream, if any."""
        try:
            return self._free_events.pop()
        except IndexError:
            return None

    @property
    def in_flight(self) -> int:
        return self.launched - self.completed

    # ---- choosing a driver ----
    def watch(self, loop: asyncio.AbstractEventLoop | None, comp: Completion | None = None) -> None:
        """Make sure something completes pending launches for a waiter (of ``comp``) on ``loop``."""
        if loop is not None and self._fd_ok:
            if self._fd_loop is loop:
                self._arm(comp)
                return
            if self._fd_loop is None or self._fd_loop.is_closed():
                if self._attach(loop, comp):
                    return
        self._ensure_thread()

    def _attach(self, loop: asyncio.AbstractEventLoop, comp: Completion | None = None) -> bool:
        self._detach()
        try:
            fd = os.eventfd(0, os.EFD_NONBLOCK | os.EFD_CLOEXEC)
        except OSError:
            self._fd_ok = False
            return False
        try:
            loop.add_reader(fd, self._on_readable)
        except (NotImplementedError, RuntimeError):
            os.close(fd)
            self._fd_ok = False
            return False
        _native.bind_context(self._ctx)
        acl.stream_set_notify_fd(self._handle, fd)
        self._fd, self._fd_loop = fd, loop
        self._armed_at = -1
        self._arm(comp)
        return True

    def _detach(self) -> None:
        fd, loop = self._fd, self._fd_loop
        if fd is None:
            return
        self._fd = self._fd_loop = None
        _native.bind_context(self._ctx)
        acl.stream_clear_notify_fd(self._handle)
        if loop is not None and not loop.is_closed():
            try:
                loop.remove_reader(fd)
            except RuntimeError:  # the loop is closing from another thread
                pass
        os.close(fd)

    def _arm(self, comp: Completion | None = None) -> None:
        if self.seq_mode:
            # for the launch waited for, or the first pending one with waiters (re-arming)
            target = comp.tseq if comp is not None else self._first_waited()
            if target >= 0 and (self._armed_at < 0 or target < self._armed_at):
                self._armed_at = target
                acl.stream_arm_notify_at(self._handle, target)  # writes the fd at once if it ran already
            return
        _native.bind_context(self._ctx)
        acl.stream_arm_notify(self._handle)
        self.poll()  # whatever finished before arming

    def _first_waited(self) -> int:
        """The number of the first pending launch with waiters (-1: none)."""
        for c in list(self.pending):  # a snapshot: launches append without the lock
            if c._waiters:
                return c.tseq
        return -1

    def _on_readable(self) -> None:
        fd = self._fd
        if fd is None:
            return
        try:
            os.eventfd_read(fd)
        except OSError:
            pass
        with self.lock:
            self.wakeups += 1
        self._armed_at = -1
        self.poll()
        if self.waited:
            self._arm()

    def _ensure_thread(self) -> None:
        with self.lock:
            if self._thread is None and not self._stopping:
                t = threading.Thread(target=self._run, name=self.name, daemon=True)
                self._thread = t
                t.start()

    # ---- completing ----
    def poll(self) -> int:
        """Complete every pending launch that has finished, without blocking; return how many."""
        if not self.seq_mode:
            _native.bind_context(self._ctx)
        batch: list[tuple[Completion, int, str]] = []
        lock = self.lock
        lock.acquire()  # by hand: `with` costs about twice as much, and awaits poll while they spin
        try:
            before = self.completed
            self._take_finished(batch)
            if batch:
                self._finish(batch)
            return self.completed - before
        finally:
            lock.release()

    def _take_finished(self, batch: list[tuple[Completion, int, str]]) -> None:
        """Move the finished launches at the head of the queue to ``batch`` (sequence-number
        lanes settle the plain ones at once: see ``_take_finished_seq``); caller holds the lock."""
        if self.seq_mode:
            self._take_finished_seq(batch)
            return
        sync_to = acl.synchronize_event_rc
        while self.pending:
            head = self.pending[0]
            rc = sync_to(head.event, 0)
            if rc == _EVENT_TIMEOUT:
                _native.recent_error()  # the timeout's text is not for anyone
                break
            batch.append((head, rc, _native.recent_error() if rc else ""))
            self.pending.popleft()

    def _take_finished_seq(self, batch: list[tuple[Completion, int, str]]) -> None:
        pending = self.pending
        if not pending:
            return
        done, failures = self._progress()
        if failures != self._fails_seen:
            self._take_failures(failures)
        fails = self._failures
        if not fails:  # nothing failed: every finished launch succeeded
            if _trace.hub is None:
                # settled here, in order, up to the first one with more to do than mark it done and
                # drop what it kept (waiters, deps, events): the common case of a pipelined stream
                released = []
                last = 0
                while pending:
                    head = pending[0]
                    if head.tseq > done or head._waiters or head.deps or head.event is not None:
                        break
                    pending.popleft()
                    head._done = True
                    released.append(head.keep)
                    head.keep = None
                    last = head.tseq
                if released:
                    self.completed += len(released)
                    self._last_tseq = last
                    del released  # before any waiter of the rest wakes
            n = len(batch)
            while pending and pending[0].tseq <= done:
                batch.append((pending.popleft(), 0, ""))
            if len(batch) > n:
                self._last_tseq = batch[-1][0].tseq
            return
        while pending and pending[0].tseq <= done:
            head = pending.popleft()
            rc, msg = 0, ""
            while fails and fails[0][0] <= head.tseq:  # the first failure in its range is its error
                _, code, text = fails.popleft()
                if not rc:
                    rc, msg = code, text
            self._last_tseq = head.tseq
            batch.append((head, rc, msg))

    def _take_failures(self, logged: int) -> None:
        """Move the failures the runtime logged into ``_failures``; caller holds the lock."""
        while self._fails_seen < logged:
            got = acl.stream_take_failure(self._handle)
            self._fails_seen += 1
            if got is None:  # logged without its record (the runtime was out of memory)
                lost = "a task failed (its error was lost: out of host memory)"
                got = (self._last_tseq + 1, acl.ERROR_INTERNAL, lost)
            self._failures.append(got)

    def _run(self) -> None:
        if not self.seq_mode:
            _native.bind_context(self._ctx)
        while True:
            with self.lock:
                while not self.pending and not self._stopping:
                    self._idle = True
                    self._cv.wait()
                    self._idle = False
                if not self.pending:
                    return
                head = self.pending[0]
            self._wait_head(head)

    def _wait_head(self, head: Completion, slice_ms: int = SLICE_MS) -> None:
        """Wait up to one slice for ``head``; settle it and everything behind it that finished too."""
        if self.seq_mode:
            rc = acl.stream_wait_completed_rc(self._handle, head.tseq, slice_ms)
            msg = _native.recent_error() if rc else ""  # a timeout's text is not for anyone
            if rc == _STREAM_TIMEOUT:
                return
            batch: list[tuple[Completion, int, str]] = []
            with self.lock:
                if rc:  # the stream is gone (its device was reset): nothing pending will complete
                    while self.pending:
                        batch.append((self.pending.popleft(), rc, msg))
                else:
                    self._take_finished_seq(batch)
                if batch:
                    self._finish(batch)
            return
        rc = acl.synchronize_event_rc(head.event, slice_ms)
        if rc == _EVENT_TIMEOUT:
            _native.recent_error()
            return
        msg = _native.recent_error() if rc else ""
        batch = []
        with self.lock:
            if self.pending and self.pending[0] is head:  # else a poll() took it
                self.pending.popleft()
                batch.append((head, rc, msg))
            self._take_finished(batch)
            if batch:
                self._finish(batch)  # one wake-up per waiting loop for the whole batch

    def _finish(self, batch: list[tuple[Completion, int, str]]) -> None:
        """Caller holds the lock."""
        by_loop: dict[_Poster, list[Any]] = {}
        released = []
        observers = _trace.hub
        for comp, rc, msg in batch:
            if rc:
                comp._error = (rc, msg, comp.name or comp.what)
                self.failed += 1
                if self.unreported is None:
                    self.unreported = comp._error
            if comp.deps:
                # the device ran them first, so they are done: settle those of other
                # lanes (lock order is always joining lane -> joined lane; earlier
                # launches of this lane are settled already) and take the first error
                for d in comp.deps:
                    if not d._done:
                        d.lane.poll()
                    if d._error is not None:
                        comp._error = d._error
                        if d.lane is not self and self.unreported is None:
                            self.unreported = d._error  # this stream's synchronize() reports it too
                        break
                comp.deps = None
            comp._done = True
            if comp._waiters:
                self.waited -= 1
                for poster, waiter in comp._waiters:
                    by_loop.setdefault(poster, []).append(waiter)
                comp._waiters = None
            if observers is not None:  # before the events go back to the pool
                observers.finished(comp, rc)
            released.append(comp.keep)
            comp.keep = None
            ev = comp.event
            if ev is not None:
                start = comp.start
                if start is not None:
                    ms = self._elapsed(start, ev)
                    if ms is not None:
                        comp.device_ms = ms
                        self.device_ms += ms
                    else:
                        _native.recent_error()
                    self._give_event(start)
                    comp.start = None
                self._give_event(ev)
        self.completed += len(batch)
        # release before waking anyone: an awaiter that resumes (possibly on
        # another thread, before this one returns) sees every buffer, arena and
        # ticket of its launches already given back
        del released
        here = self._fd_loop if self._fd_loop is not None and self._on_loop_thread() else None
        for poster, waiters in by_loop.items():
            if here is not None and getattr(poster, "__self__", None) is here:
                _wake(waiters)  # on the waiting loop already: no self-pipe round trip
                continue
            # counted before posting: the woken loop may read the stats before this thread runs on
            self.wakeups += 1
            try:
                poster(_wake, waiters)
            except RuntimeError:  # closed asyncio loop, or trio.RunFinishedError
                self.wakeups -= 1

    def _on_loop_thread(self) -> bool:
        try:
            return asyncio.get_running_loop() is self._fd_loop
        except RuntimeError:
            return False

    def _give_event(self, ev: Any) -> None:
        """Pool a settled launch's event, or destroy it once the lane stopped
        (a joining lane may settle this lane's launches after ``stop()``)."""
        if self._stopped:
            acl.destroy_event(ev)
        else:
            self._free_events.append(ev)

    # ---- shutdown ----
    def stop(self) -> list[Any]:
        """Wait until nothing is pending, stop the drivers; return the spare events.

        Blocks while launches are pending: callers either saw none in flight
        (``close()``) or run on a thread of their own (a forced close).
        """
        with self.lock:
            self._stopping = True
            self._cv.notify()
            t = self._thread
        if t is not None and t is not threading.current_thread():
            t.join()
        self._settle_all()
        self._detach()
        if self.seq_mode:  # unchecked: the stream may be gone with its device already
            acl.stream_log_failures(self._handle, False, check_rc=False)
        with self.lock:
            self._stopped = True
            events, self._free_events = self._free_events, []
        return events

    def _settle_all(self) -> None:
        """Complete every pending launch, waiting for each in bounded slices."""
        self.settle(None)

    def settle(self, deadline: float | None) -> bool:
        """Complete pending launches from the calling thread until none is left
        (True) or ``time.monotonic()`` passes ``deadline`` (False).  Safe while
        the lane thread runs too (whoever sees a launch finish settles it)."""
        if not self.seq_mode:
            _native.bind_context(self._ctx)
        while True:
            with self.lock:
                if not self.pending:
                    return True
                head = self.pending[0]
            ms = SLICE_MS
            if deadline is not None:
                left = deadline - time.monotonic()
                if left <= 0:
                    return False
                ms = max(1, min(SLICE_MS, int(left * 1000)))
            self._wait_head(head, ms)


class deadline:
    """``anyio.fail_after`` raising the documented class: :class:`~aioge.StreamSyncTimeoutError`
    (or :class:`~aioge.EventSyncTimeoutError`), a ``TimeoutError`` that says what timed out
    and after how long.  ``None``: no limit (and next to no cost: every ``execute()`` enters one)."""

    __slots__ = ("event", "scope", "timeout", "what")

    def __init__(self, timeout: float | None, what: str, event: bool = False) -> None:
        self.timeout = timeout
        self.what = what
        self.event = event
        self.scope: anyio.CancelScope | None = None

    def __enter__(self) -> None:
        if self.timeout is not None:
            scope = self.scope = anyio.move_on_after(self.timeout)
            scope.__enter__()

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> bool | None:  # fmt: skip
        scope = self.scope
        if scope is None:
            return None
        self.scope = None
        swallowed = scope.__exit__(exc_type, exc, tb)
        if scope.cancelled_caught:
            cls: type[AclError] = EventSyncTimeoutError if self.event else StreamSyncTimeoutError
            raise cls(cls.codes[0], f"did not complete within {self.timeout:g} s", self.what) from None
        return swallowed  # only the scope's own cancellation, which it caught: raised above


async def wait_all(comps: list[Completion]) -> None:
    """Await several completions; raise the first error in launch order."""
    for c in comps:
        if not c.done:
            await c._wait_pending()
    for c in comps:
        c._raise_if_failed()


class _Workers:
    """The long-lived daemon threads :class:`ThreadJob` calls run on.

    A call goes to an idle worker; when none is idle a new one starts, up to
    ``limit`` (beyond that, calls wait in order for a worker to come free).
    A worker left idle for ``keep`` seconds exits.  A worker carries the name of
    the job it runs (``idle_name`` between jobs), and what a call leaves on its
    thread (the bound ACL context, thread caches) stays for the next call.
    """

    def __init__(self, limit: int, keep: float, idle_name: str) -> None:
        if limit < 1:
            raise ValueError(f"a worker pool needs a limit of at least 1 thread, not {limit}")
        self.limit = limit
        self.keep = keep
        self._idle_name = idle_name
        self._cond = threading.Condition(threading.Lock())
        self._queue: collections.deque[ThreadJob[Any]] = collections.deque()
        self._waiting = 0  # workers waiting for a call (woken or not)
        self._count = 0  # live workers
        self._started = 0  # workers ever started (for tests and measurements)

    @property
    def threads(self) -> int:
        """The live workers."""
        return self._count

    @property
    def started(self) -> int:
        """The workers started so far."""
        return self._started

    def submit(self, job: ThreadJob[Any]) -> None:
        with self._cond:
            if self._waiting > len(self._queue):
                self._queue.append(job)
                self._cond.notify()
                return
            if self._count >= self.limit:
                self._queue.append(job)  # taken by the next worker to come free
                return
            self._count += 1
            self._started += 1
        try:
            # the job in a list the worker empties: the Thread keeps its args while it lives
            threading.Thread(target=self._work, args=([job],), name=job.name, daemon=True).start()
        except BaseException:
            with self._cond:
                self._count -= 1
                self._started -= 1
            raise

    def _work(self, first: list[ThreadJob[Any]]) -> None:
        me = threading.current_thread()
        job = first.pop()
        cond, queue = self._cond, self._queue
        while True:
            me.name = job.name
            job._call()
            with cond:
                # free before the result shows: a caller it wakes that submits
                # at once finds this worker, not a reason to start another
                self._waiting += 1
            try:
                job._publish()
            except BaseException as e:  # a discard() that raised: report it, keep the worker
                threading.excepthook(threading.ExceptHookArgs((type(e), e, e.__traceback__, me)))
            del job
            with cond:
                while not queue:
                    me.name = self._idle_name
                    if not cond.wait(self.keep) and not queue:
                        self._waiting -= 1
                        self._count -= 1
                        return
                self._waiting -= 1
                job = queue.popleft()

    def _after_fork(self) -> None:
        """In a forked child: the parent's workers do not exist there."""
        self._cond = threading.Condition(threading.Lock())
        self._queue = collections.deque()
        self._waiting = self._count = 0


#: the workers every ThreadJob runs on (compiles: a few at a time, each a short burst)
_workers = _Workers(limit=max(4, os.cpu_count() or 1), keep=30.0, idle_name="aioge-idle")
if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_workers._after_fork)


class ThreadJob(Generic[_T]):
    """A blocking call on a worker thread (named ``name`` while it runs), awaited
    by any number of tasks (on any loops, asyncio or trio): concurrent callers
    share one call.

    The call runs on one of the runtime's long-lived daemon workers, not on a
    thread of its own: a new thread per call costs its start and, on a busy
    machine, its first scheduling; concurrent jobs still run in parallel, up to
    the workers' limit.

    ``inline=True``: the call runs on the thread of the first :meth:`wait`
    (or :meth:`result`), before that await first suspends, instead of on a
    worker: no hand-off to a worker and back, for a call too short to be worth
    them (the caller decides; ``Device.compile`` says when).  It blocks that
    thread, an event loop included, while it runs; the job is otherwise the
    same (shared by its awaiters, ``done`` once the call ended, ``discard``).

    Cancellation: cancelling an await returns control at once; the call goes
    on, and its result still reaches the other awaiters.  A result that no
    awaiter is left to take is passed to ``discard`` (on the thread that
    notices last) so nothing it holds leaks.  An inline call cannot be
    cancelled: it has ended before its await can be.
    """

    def __init__(
        self, fn: Callable[[], _T], name: str, discard: Callable[[_T], None], *, inline: bool = False
    ) -> None:
        self._fn = fn
        self.name = name
        self._discard = discard
        self._lock = threading.Lock()
        self._finished: threading.Event | None = None  # made by the first wait_sync() before the end
        self._waiters: list[tuple[_Poster, Any]] = []
        self._done = False
        self._result: _T | None = None
        self._error: BaseException | None = None
        self._wanted = 1  # the creator's result() to come
        self._taken = False
        self._dropped = False
        self._inline = inline  # the call waits for the first wait() to make it on its thread
        if not inline:
            _workers.submit(self)

    @property
    def done(self) -> bool:
        return self._done

    def join(self) -> bool:
        """Count one more ``result()`` to come; False once the result was
        discarded (start a new job then)."""
        with self._lock:
            if self._dropped:
                return False
            self._wanted += 1
            return True

    def _call(self) -> None:
        """Make the call (on a worker); :meth:`_publish` then hands its outcome over."""
        try:
            self._result = self._fn()
        except BaseException as e:
            self._error = e
        self._fn = _ran  # what the call held goes now, not when the job goes

    def _run_inline(self) -> None:
        """Make an inline job's call here and now (once, whoever asks first)."""
        with self._lock:
            mine, self._inline = self._inline, False
        if mine:
            self._call()
            self._publish()

    def _publish(self) -> None:
        with self._lock:
            try:
                if not self._wanted:
                    self._drop()  # before done shows: whoever sees it done sees it discarded
            finally:
                self._done = True
                if self._finished is not None:
                    self._finished.set()
                for poster, w in self._waiters:
                    try:
                        poster(_wake, [w])
                    except RuntimeError:  # closed asyncio loop, or trio.RunFinishedError
                        pass
                self._waiters = []

    def wait_sync(self, timeout: float | None) -> bool:
        """Block the calling thread until the call has finished, at most ``timeout`` s
        (interpreter exit: no loop is left to await on); True if it has."""
        if self._inline:
            self._run_inline()
        with self._lock:  # done is set, and the event looked up, under it: no wake-up is missed
            if self._done:
                return True
            if self._finished is None:
                self._finished = threading.Event()
            finished = self._finished
        return finished.wait(timeout)

    async def wait(self) -> None:
        """Wait until the call has finished (taking nothing)."""
        if self._inline:
            self._run_inline()
        if not self._done:  # (an inline job is done by now, but for one another thread is making)
            poster, waiter = _loop_waiter()
            with self._lock:
                parked = not self._done
                if parked:
                    self._waiters.append((poster, waiter))
            if parked:
                await _park(waiter)
                return
        # still a checkpoint: tasks started together share the job even if it was quick
        await anyio.lowlevel.checkpoint()

    async def result(self) -> _T:
        """The call's result (or its exception); one per creation or successful ``join()``."""
        try:
            await self.wait()
        except BaseException:
            with self._lock:
                self._wanted -= 1
                if self._done and not self._wanted and not self._taken:
                    self._drop()
            raise
        with self._lock:
            self._wanted -= 1
            self._taken = True
        if self._error is not None:
            raise self._error
        return self._result  # type: ignore[return-value]

    def _drop(self) -> None:
        """Caller holds the lock."""
        self._dropped = True
        if self._result is not None:
            self._discard(self._result)


def _ran() -> Any:
    raise AssertionError("a ThreadJob's call runs once")
