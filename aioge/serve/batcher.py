"""Dynamic batching: many ``await batcher.infer(feeds)`` become few ``model.execute`` calls.

A request (batch-1 or batch-n feeds) is checked on its own, then queued.
Batches form FIFO, Triton's way: a batch leaves as soon as it holds
``max_batch_size`` rows, or when its oldest request has waited
``max_queue_delay`` seconds; requests are never split.  It is padded up to
the runner's bucket (copies of its last row, outputs dropped), executed
once, and its outputs are split back by rows.  ``max_inflight`` worker
tasks each run one batch at a time while the next one forms: under load
the queue grows while the device is busy, so batches grow with the load.
A batcher serves the event loop it was entered on.

When the batcher is idle (nothing queued, no batch running) and a request
would leave at once anyway (``max_queue_delay == 0``, or it fills a batch
by itself) and has no deadline, the caller runs its batch of one in its
own task: no hop to a worker and back (the same batch, sooner; under load
requests queue and batch as before).  On asyncio the waits are
bare futures and timer handles rather than anyio events and cancel
scopes: those cost more than the rest of a small request's queueing.

Deadlines: a request whose deadline passes is failed with
:class:`DeadlineExceededError` at once; one still queued then is dropped
from the queue and never executed.  Cancelling ``infer`` does the same
(a request already running just has its rows dropped).  Past
``max_queue_size`` queued requests, ``infer`` raises :class:`QueueFullError`
at once.  A request of the wrong names, dtypes or shapes is refused with
:class:`InvalidInputError` before it is queued, so it cannot poison a batch.

Sequence models (a :class:`~aioge.serve.runner.DynamicModel`: symbolic dims
besides the batch, ``-1`` in its specs) take any positive size at a symbolic
dim; a batch only holds requests of the same non-batch shapes (the oldest
request's; others of other shapes stay queued, in order, for a later batch).
"""

from __future__ import annotations

import asyncio
import collections
import math
import time
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Protocol

import anyio
import anyio.lowlevel
import numpy as np

from ..errors import ClosedResourceError
from ..runtime.graphs.executable import CompiledGraph
from .errors import DeadlineExceededError, InvalidInputError, QueueFullError
from .runner import BucketedModel, Runner
from .stats import ModelStatistics

if TYPE_CHECKING:
    from types import TracebackType

    from anyio.abc import TaskGroup

__all__ = ("Batcher", "BatchObserver")

_QUEUED, _RUNNING, _DONE, _DEAD = 0, 1, 2, 3
#: a request run alone in its caller's task yields to the loop once in this many (see Batcher._run_alone)
_YIELD_EVERY = 16
#: ... and when it arrives this soon (seconds) after the previous batch ended
_BACK_TO_BACK = 50e-6


class BatchObserver(Protocol):
    """Receives the batcher's measurements (:class:`aioge.serve.metrics.ServeMetrics` is one)."""

    def queue_depth(self, model: str, depth: int) -> None: ...

    def inflight(self, model: str, batches: int) -> None: ...

    def batch(self, model: str, rows: int, bucket: int, compute_seconds: float) -> None: ...

    def request(self, model: str, status: str, queue_seconds: float | None, total_seconds: float) -> None: ...


class _Request:
    __slots__ = ("deadline", "done", "error", "feeds", "key", "result", "rows", "state", "t_enqueue", "t_perf",
                 "t_start")  # fmt: skip

    def __init__(self, feeds: dict[str, np.ndarray], rows: int, now: float, deadline: float | None,
                 t_perf: float = 0.0, key: Any = None) -> None:  # fmt: skip
        self.feeds = feeds
        self.key = key  # the non-batch shapes of a dynamic model's request (requests batch with equal keys)
        self.rows = rows
        self.state = _QUEUED
        self.result: dict[str, np.ndarray] | None = None
        self.error: BaseException | None = None
        self.done: Any = None  # the waiter's flag (see _Sync), made when it is queued
        self.t_enqueue = now
        self.t_perf = t_perf  # time.perf_counter() on arrival (durations: uvloop's clock counts milliseconds)
        self.t_start: float | None = None
        self.deadline = deadline


class _Sync:
    """Flags to wait on, with an optional timeout, and the clock: anyio's (any backend)."""

    def __init__(self) -> None:
        self.now = anyio.current_time

    def flag(self) -> Any:
        return anyio.Event()

    @staticmethod
    def set(flag: Any) -> None:
        flag.set()

    checkpoint = staticmethod(anyio.lowlevel.checkpoint)

    async def wait(self, flag: Any, timeout: float | None) -> None:
        """Until ``flag`` is set or ``timeout`` seconds passed (the caller tells which)."""
        if timeout is None:
            await flag.wait()
        else:
            with anyio.move_on_after(timeout):
                await flag.wait()


def _resolve(fut: asyncio.Future[None]) -> None:
    if not fut.done():
        fut.set_result(None)


class _AsyncioSync(_Sync):
    """The same on asyncio: a future per flag, a timer handle per timeout (no cancel scope, no backend lookup).

    A task cancelled while awaiting a flag cancels the future; setting it later is a no-op.
    """

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self.loop = loop
        self.now = loop.time  # what anyio.current_time() reads on asyncio

    def flag(self) -> asyncio.Future[None]:
        return self.loop.create_future()

    @staticmethod
    def set(flag: Any) -> None:
        if not flag.done():
            flag.set_result(None)

    @staticmethod
    async def checkpoint() -> None:
        await asyncio.sleep(0)  # a bare yield; anyio's also checks for a cancel scope

    async def wait(self, flag: Any, timeout: float | None) -> None:
        if timeout is None:
            await flag
            return
        timer = self.loop.call_later(max(timeout, 0.0), _resolve, flag)
        try:
            await flag
        finally:
            timer.cancel()


def _sync_here() -> _Sync:
    """The flags of the running event loop's backend."""
    try:
        import sniffio

        asyncio_loop = sniffio.current_async_library() == "asyncio"
    except Exception:  # pragma: no cover - sniffio comes with anyio
        asyncio_loop = False
    return _AsyncioSync(asyncio.get_running_loop()) if asyncio_loop else _Sync()


class Batcher:
    """Dynamic batcher in front of one model; use as ``async with``.

    Example:
        >>> runner = await aioge.serve.load_model(dev, "mlp.onnx", batch_sizes=(1, 8, 32))
        >>> async with aioge.serve.Batcher(runner, max_queue_delay=500e-6) as batcher:
        ...     out = await batcher.infer({"x": x_row})     # x_row: shape (1, 1024)

    Args:
        model: a :class:`~aioge.serve.Runner` (see :func:`~aioge.serve.load_model`) or a
            :class:`aioge.CompiledGraph` (one bucket: its own leading dimension).
            The batcher never closes it.
        max_batch_size: rows per batch at most (default and upper bound: the model's).
        max_queue_delay: seconds a batch may wait to fill, from its oldest request
            (Triton's ``max_queue_delay_microseconds``); 0 sends what is queued at once.
        max_queue_size: queued requests beyond which ``infer`` raises :class:`QueueFullError`.
        max_inflight: batches executing at once (at most the model's ``max_inflight``).
        timeout: default deadline of a request, in seconds (``None``: none).
        observer: a :class:`BatchObserver` for metrics.

    ``stats`` counts requests, batches, rows, padding rows, the batch-size
    distribution (``batch_sizes``: rows -> batches), refusals, deadlines and
    cancellations; ``statistics`` holds the same in Triton's terms (counts and
    durations: :class:`~aioge.serve.stats.ModelStatistics`).

    Closing (leaving ``async with``, or :meth:`aclose`) refuses new requests
    (:class:`aioge.ClosedResourceError`), sends what is queued at once and
    waits for every batch: no accepted request is lost.
    """

    def __init__(
        self,
        model: Runner | CompiledGraph,
        *,
        max_batch_size: int | None = None,
        max_queue_delay: float = 500e-6,
        max_queue_size: int = 1024,
        max_inflight: int = 2,
        timeout: float | None = None,
        observer: BatchObserver | None = None,
        name: str | None = None,
    ) -> None:
        #: a runner made here for a CompiledGraph: closed with the batcher (its stream with it)
        self._own_runner = isinstance(model, CompiledGraph)
        if isinstance(model, CompiledGraph):
            model = BucketedModel.of(model, batching=max_batch_size != 0, name=name)
        if not isinstance(model, Runner):
            raise TypeError(f"Batcher needs a Runner or a CompiledGraph, not {type(model).__name__}")
        if not model.inputs:
            raise ValueError(f"{model.name}: the model's specs are unknown (call prepare() first)")
        self.model = model
        self.name = name or model.name
        cap = model.max_batch_size
        mb = cap if max_batch_size is None else int(max_batch_size)
        if cap and not 1 <= mb <= cap:
            raise ValueError(f"{self.name}: max_batch_size {mb} is not in 1..{cap} (the model's)")
        self.max_batch_size = mb if cap else 0
        if not (max_queue_delay >= 0 and math.isfinite(max_queue_delay)):
            raise ValueError(f"max_queue_delay must be a finite number of seconds >= 0, not {max_queue_delay}")
        self.max_queue_delay = float(max_queue_delay)
        if max_queue_size < 1:
            raise ValueError(f"max_queue_size must be >= 1, not {max_queue_size}")
        self.max_queue_size = int(max_queue_size)
        limit = max(int(getattr(model, "max_inflight", max_inflight) or max_inflight), 1)
        self.max_inflight = max(1, min(int(max_inflight), limit))
        self.timeout = timeout
        self._observer = observer
        self._queue: collections.deque[_Request] = collections.deque()
        self._queued = 0  # live requests in the queue
        self._queued_rows = 0
        self._dead = 0  # dropped requests still in the deque
        self._running = 0  # batches executing
        self._sync = _Sync()
        self._now = self._sync.now
        self._wake: Any = None  # the forming worker's flag while it waits
        self._wake_when_full = False  # ... for a full batch (not for any arrival)
        self._want_slot = False  # ... for a batch to end (max_inflight batches are running)
        self._alone = 0  # requests run alone in their callers' tasks
        self._last_end = -math.inf  # when the last batch ended (time.perf_counter)
        self._tg: TaskGroup | None = None
        self._form = anyio.Lock()
        self._closing = False
        self._closed = False
        self._batch_sizes: collections.Counter[int] = collections.Counter()
        self._stats = dict.fromkeys(("requests", "ok", "batches", "rows", "padding_rows", "invalid", "queue_full",
                                     "deadline", "cancelled", "errors", "peak_inflight"), 0)  # fmt: skip
        #: Triton's statistics of this model (``GET /v2/models/{name}/stats``)
        self.statistics = ModelStatistics()
        self._row_shapes = {n: t.shape[1:] if cap else t.shape for n, t in model.inputs.items()}
        #: symbolic dims besides the batch (-1): requests batch only with others of the same shapes
        self._dynamic = any(d == -1 for row in self._row_shapes.values() for d in row)
        self._check_shapes = getattr(model, "check_shapes", None) if self._dynamic else None
        self._dtypes = {n: t.dtype for n, t in model.inputs.items()}

    def __repr__(self) -> str:
        state = "closed" if self._closed else "closing" if self._closing else "open" if self._tg else "new"
        return (f"<aioge.serve.Batcher {self.name!r} {state} queued={self._queued} running={self._running} "
                f"max_batch_size={self.max_batch_size}>")  # fmt: skip

    # ---- lifecycle ----
    async def __aenter__(self) -> Batcher:
        if self._tg is not None or self._closed:
            raise RuntimeError(f"{self.name}: a Batcher is entered once")
        self._sync = _sync_here()
        self._now = self._sync.now
        self._form = anyio.Lock(fast_acquire=True)  # no yield when free: the worker loop awaits anyway
        tg = anyio.create_task_group()
        await tg.__aenter__()
        self._tg = tg
        for i in range(self.max_inflight):
            tg.start_soon(self._worker, name=f"aioge-batcher-{self.name}-{i}")
        return self

    async def __aexit__(
        self, et: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> bool | None:
        self._begin_close()
        assert self._tg is not None
        try:
            suppress = await self._tg.__aexit__(et, exc, tb)
            while self._running:  # batches run in their callers' own tasks (_run_alone) finish too
                await self._wait(None, slot=True)
            return suppress
        finally:
            self._closed = True
            self._fail_queued(ClosedResourceError(f"{self.name}: the batcher closed before this request ran"))
            if self._own_runner and isinstance(self.model, BucketedModel):
                await self.model.aclose()

    def _begin_close(self) -> None:
        self._closing = True
        self._wakeup()

    def close_soon(self) -> None:
        """Refuse new requests from now on and send what is queued at once (leaving ``async with`` waits)."""
        self._begin_close()

    @property
    def closing(self) -> bool:
        """Whether new requests are refused."""
        return self._closing

    @property
    def queue_depth(self) -> int:
        """Requests queued (not yet in a batch)."""
        return self._queued

    @property
    def inflight(self) -> int:
        """Batches executing."""
        return self._running

    @property
    def stats(self) -> dict[str, Any]:
        s: dict[str, Any] = dict(self._stats)
        s["batch_sizes"] = dict(sorted(self._batch_sizes.items()))
        s["queued"] = self._queued
        s["inflight"] = self._running
        return s

    # ---- requests ----
    async def infer(self, feeds: Mapping[str, Any], *, timeout: float | None = None) -> dict[str, np.ndarray]:
        """Run ``feeds`` (input name -> array of ``rows`` rows) in some batch; the outputs' rows.

        Args:
            feeds: every input of the model, numpy arrays of its dtype whose
                non-batch dimensions match (the same number of rows in each).
            timeout: seconds to the deadline (default: the batcher's ``timeout``).

        Raises:
            InvalidInputError: names, dtypes or shapes that do not fit (nothing queued).
            QueueFullError: ``max_queue_size`` requests are queued already.
            DeadlineExceededError: the deadline passed (never executed if still queued).
            aioge.ClosedResourceError: the batcher is closing.
            AclError: the batch failed on the device.

        Cancellation: a queued request leaves the queue at once and is never
        executed; one already running has its rows dropped.
        """
        now = self._now()
        p0 = time.perf_counter()  # durations: the loop's clock is uvloop's millisecond one
        self._stats["requests"] += 1
        if self._closing or self._tg is None:
            self._finish(None, "closed", p0)
            if self._closing:
                raise ClosedResourceError(f"{self.name}: shutting down, no new requests are accepted")
            raise ClosedResourceError(f"{self.name}: the batcher is not running (not entered yet)")
        try:
            checked, rows = self._check(feeds)
            key = tuple(a.shape[1:] for a in checked.values()) if self._dynamic and self.max_batch_size else None
        except InvalidInputError:
            self._stats["invalid"] += 1
            self._finish(None, "invalid", p0)
            raise
        t = self.timeout if timeout is None else timeout
        if (t is None and not self._queued and not self._running
                and (self.max_queue_delay == 0 or rows >= self._full_rows())):  # fmt: skip
            return await self._run_alone(_Request(checked, rows, now, None, p0, key), now)
        if self._queued >= self.max_queue_size:
            self._stats["queue_full"] += 1
            self._finish(None, "queue_full", p0)
            raise QueueFullError(f"{self.name}: {self._queued} requests are queued (max_queue_size "
                                 f"{self.max_queue_size})", retry_after=self._retry_after())  # fmt: skip
        deadline = None if t is None else now + max(float(t), 0.0)
        req = _Request(checked, rows, now, deadline, p0, key)
        req.done = self._sync.flag()
        self._queue.append(req)
        self._queued += 1
        self._queued_rows += rows
        if self._observer is not None:
            self._observer.queue_depth(self.name, self._queued)
        if self._wake is not None and not self._want_slot and (
                not self._wake_when_full or self._queued_rows >= self._full_rows()):  # fmt: skip
            self._wakeup()
        try:
            await self._sync.wait(req.done, None if deadline is None else deadline - now)
        except BaseException:
            if req.state != _DONE:
                self._drop(req)
                self._stats["cancelled"] += 1
                self._finish(req, "cancelled", p0)
            raise
        if req.state != _DONE:  # the deadline passed
            self._drop(req)
            req.error = DeadlineExceededError(self._deadline_message(req))
        return self._settle(req, now)

    async def _run_alone(self, req: _Request, now: float) -> dict[str, np.ndarray]:
        """A batch of one request, run in the caller's task (the batcher idle, no deadline).

        Its slot is taken first: requests arriving while it runs queue (and
        batch with each other).  It yields once first when the previous batch
        ended a moment ago (``_BACK_TO_BACK``: back-to-back requests, so
        others are likely ready to run: they join the queue and batch instead
        of each running alone), and every ``_YIELD_EVERY``-th time (a small
        model's ``execute`` may finish without yielding: a caller looping on
        an idle batcher must not starve the loop).  A lone client's request
        does not pay for the yield.
        """
        req.state = _RUNNING
        self._running += 1
        started = False
        try:
            self._alone += 1
            if req.t_perf - self._last_end < _BACK_TO_BACK or not self._alone % _YIELD_EVERY:
                await self._sync.checkpoint()
            req.t_start = self._now()
            started = True
            await self._run_batch([req], reserved=True)
        except BaseException:  # cancelled while running: its (only) rows are dropped
            if not started:
                self._running -= 1
                self._slot_freed()
            self._stats["cancelled"] += 1
            self._finish(req, "cancelled", req.t_perf)
            raise
        return self._settle(req, now)

    def _settle(self, req: _Request, now: float) -> dict[str, np.ndarray]:
        """The finished request's result, or its error raised; counted either way."""
        if req.error is not None:
            status = "deadline" if isinstance(req.error, DeadlineExceededError) else "error"
            self._stats["deadline" if status == "deadline" else "errors"] += 1
            self._finish(req, status, req.t_perf)
            raise req.error
        self._stats["ok"] += 1
        self._finish(req, "ok", req.t_perf)
        assert req.result is not None
        return req.result

    def _deadline_message(self, req: _Request) -> str:
        where = "queued" if req.t_start is None else "running"
        return f"{self.name}: the request's deadline passed while it was {where}"

    def _finish(self, req: _Request | None, status: str, t0: float) -> None:
        """Count a request answered (``t0``: its ``time.perf_counter()`` on arrival)."""
        now = time.perf_counter()
        q = None if req is None or req.t_start is None else req.t_start - req.t_enqueue
        self.statistics.request(status == "ok", 0 if req is None else req.rows, now - t0, q)
        if self._observer is not None:
            self._observer.request(self.name, status, q, now - t0)

    def _check(self, feeds: Mapping[str, Any]) -> tuple[dict[str, np.ndarray], int]:
        """The feeds as arrays, and their rows; InvalidInputError for anything that does not fit."""
        if not isinstance(feeds, dict) and not isinstance(feeds, Mapping):
            raise InvalidInputError(f"{self.name}: feeds must be a mapping of input name -> array")
        specs = self._row_shapes
        if len(feeds) != len(specs) or not all(n in feeds for n in specs):
            missing = [n for n in specs if n not in feeds]
            unknown = [str(n) for n in feeds if n not in specs]
            raise InvalidInputError(f"{self.name}: missing inputs {missing}, unknown inputs {unknown} "
                                    f"(the model takes {list(specs)})")  # fmt: skip
        out: dict[str, np.ndarray] = {}
        rows: int | None = None
        batching = self.max_batch_size > 0
        for n, row in specs.items():
            a = feeds[n]
            if not isinstance(a, np.ndarray):
                raise InvalidInputError(f"{self.name}: input {n!r} must be a numpy array, not {type(a).__name__}")
            if a.dtype != self._dtypes[n]:
                raise InvalidInputError(f"{self.name}: input {n!r} has dtype {a.dtype}, the model takes "
                                        f"{self._dtypes[n]}")  # fmt: skip
            shape = a.shape
            given = shape[1:] if batching else shape
            if ((len(shape) != len(row) + 1 or given != row) if batching else shape != row) and not (
                    self._dynamic and len(given) == len(row)
                    and all(g == w if w != -1 else g >= 1 for g, w in zip(given, row, strict=True))):  # fmt: skip
                want = ("n", *row) if batching else row
                raise InvalidInputError(f"{self.name}: input {n!r} has shape {list(shape)}, the model takes "
                                        f"{list(want)}")  # fmt: skip
            if batching:
                r = shape[0]
                if rows is not None and r != rows:
                    raise InvalidInputError(f"{self.name}: inputs have different numbers of rows ({rows} and {r})")
                rows = r
            out[n] = a
        if self._check_shapes is not None:  # a dim name binds one size across the inputs
            try:
                self._check_shapes({n: a.shape for n, a in out.items()})
            except ValueError as e:
                raise InvalidInputError(f"{self.name}: {e}") from None
        if not batching:
            return out, 1
        assert rows is not None
        if not 1 <= rows <= self.max_batch_size:
            raise InvalidInputError(f"{self.name}: a request of {rows} rows (the model takes 1 to "
                                    f"{self.max_batch_size} rows per request)")  # fmt: skip
        return out, rows

    def _drop(self, req: _Request) -> None:
        """A request nobody waits for any more: out of the queue if it is still there."""
        if req.state == _QUEUED:
            req.state = _DEAD
            self._queued -= 1
            self._queued_rows -= req.rows
            self._dead += 1
            if self._dead > 64 and self._dead > self._queued:  # compact: waiters that keep giving up
                self._queue = collections.deque(r for r in self._queue if r.state == _QUEUED)
                self._dead = 0
            if self._observer is not None:
                self._observer.queue_depth(self.name, self._queued)

    def _retry_after(self) -> float:
        """Seconds until the queue has likely drained by one batch's worth."""
        return max(self.max_queue_delay, 0.001) * max(1, self._queued // max(self.max_batch_size, 1))

    def _full_rows(self) -> int:
        return self.max_batch_size if self.max_batch_size else 1

    def _slot_freed(self) -> None:
        if self._want_slot:
            self._wakeup()

    def _wakeup(self) -> None:
        flag = self._wake
        if flag is not None:
            self._wake = None
            self._sync.set(flag)

    async def _wait(self, timeout: float | None, *, when_full: bool = False, slot: bool = False) -> None:
        """The forming worker waits: for an arrival (a full batch if ``when_full``), a free ``slot``,
        closing, or ``timeout``."""
        flag = self._wake = self._sync.flag()
        self._wake_when_full = when_full
        self._want_slot = slot
        try:
            await self._sync.wait(flag, timeout)
        finally:
            self._wake = None
            self._want_slot = False

    def _fail_queued(self, err: BaseException) -> None:
        while self._queue:
            r = self._queue.popleft()
            if r.state == _QUEUED:
                r.state = _DONE
                r.error = err
                self._sync.set(r.done)
        self._queued = self._queued_rows = self._dead = 0

    # ---- dispatch ----
    async def _worker(self) -> None:
        """One of ``max_inflight`` workers: form a batch (one worker at a time), run it, repeat.

        While some workers run their batches, the next one forms: the queue
        grows while the device is busy, so batches grow with the load.
        """
        try:
            while True:
                async with self._form:
                    batch = await self._next_batch()
                if batch is None:
                    return
                await self._run_batch(batch)
        finally:
            if not self._closing:  # cancelled from outside: nobody will run what is queued
                self._fail_queued(ClosedResourceError(f"{self.name}: the batcher was cancelled"))

    async def _next_batch(self) -> list[_Request] | None:
        """Wait until a batch should leave (full, or its oldest request waited long enough) and take it."""
        while True:
            q = self._queue
            while q and q[0].state != _QUEUED:
                q.popleft()
                self._dead -= 1
            if not q:
                if self._closing:
                    return None
                await self._wait(None)
                continue
            if self._running >= self.max_inflight:  # batches run in the callers' own tasks (_run_alone)
                await self._wait(None, slot=True)
                continue
            if self._queued_rows >= self._full_rows() or self._closing or self.max_queue_delay == 0:
                break
            remaining = q[0].t_enqueue + self.max_queue_delay - self._now()
            if remaining <= 0:
                break
            await self._wait(remaining, when_full=True)
        return self._take()

    def _take(self) -> list[_Request]:
        q = self._queue
        batch: list[_Request] = []
        rows = 0
        now = self._now()
        cap = self._full_rows()
        key: Any = None
        other: list[_Request] = []  # queued requests of other shapes than the batch's (a dynamic model)
        while q:
            r = q[0]
            if r.state != _QUEUED:
                q.popleft()
                self._dead -= 1
                continue
            if batch and r.key != key:
                other.append(q.popleft())
                continue
            if batch and rows + r.rows > cap:
                break
            key = r.key
            q.popleft()
            self._queued -= 1
            self._queued_rows -= r.rows
            if r.deadline is not None and r.deadline <= now:  # never executed: its waiter raises
                r.state = _DONE
                r.error = DeadlineExceededError(self._deadline_message(r))
                self._sync.set(r.done)
                continue
            r.state = _RUNNING
            r.t_start = now
            batch.append(r)
            rows += r.rows
        if other:  # back at the front, in their order
            q.extendleft(reversed(other))
        if self._observer is not None:
            self._observer.queue_depth(self.name, self._queued)
        return batch

    async def _run_batch(self, batch: list[_Request], reserved: bool = False) -> None:
        """Assemble, execute, split; ``reserved``: its slot in ``_running`` is taken already."""
        if not batch:
            return
        t0 = time.perf_counter()  # durations: the loop's clock is uvloop's millisecond one
        rows = batch[0].rows if len(batch) == 1 else sum(r.rows for r in batch)
        bucket = rows
        if not reserved:
            self._running += 1
        if self._running > self._stats["peak_inflight"]:
            self._stats["peak_inflight"] = self._running
        if self._observer is not None:
            self._observer.inflight(self.name, self._running)
        try:
            feeds, bucket = self._assemble(batch, rows)
            t1 = time.perf_counter()
            outs = await self.model.execute(feeds)
            t2 = time.perf_counter()
            self._split(batch, outs, rows)
            self.statistics.batch(len(batch), rows, t1 - t0, t2 - t1, time.perf_counter() - t2)
        except BaseException as e:  # a device error (or cancellation) fails every request of the batch
            err = e if isinstance(e, Exception) else ClosedResourceError(f"{self.name}: the batch was cancelled")
            for r in batch:
                if r.state == _RUNNING:
                    r.state = _DONE
                    r.error = err
                    if r.done is not None:
                        self._sync.set(r.done)
            if not isinstance(e, Exception):
                raise
        finally:
            self._running -= 1
            self._slot_freed()
            # on time.perf_counter, as the requests' arrivals: uvloop's loop clock counts whole
            # milliseconds, so every request within the millisecond of the last batch's end looked
            # back-to-back and yielded (a loop iteration per request for a lone client)
            self._last_end = end = time.perf_counter()
            self._batch_sizes[rows] += 1
            stats = self._stats
            stats["batches"] += 1
            stats["rows"] += rows
            stats["padding_rows"] += bucket - rows
            if self._observer is not None:
                self._observer.batch(self.name, rows, bucket, end - t0)
                self._observer.inflight(self.name, self._running)

    def _assemble(self, batch: list[_Request], rows: int) -> tuple[dict[str, np.ndarray], int]:
        """One array per input: the requests' rows in order, padded up to the bucket."""
        if not self.max_batch_size:
            return batch[0].feeds, 1
        bucket = self.model.bucket(rows)
        if len(batch) == 1 and bucket == rows:
            return batch[0].feeds, bucket
        feeds = {}
        for n in self._row_shapes:
            parts = [r.feeds[n] for r in batch]
            if bucket > rows:  # padding: copies of the last row, so the model sees ordinary values
                last = parts[-1][-1:]
                parts.append(np.broadcast_to(last, (bucket - rows, *last.shape[1:])))
            feeds[n] = np.concatenate(parts)
        return feeds, bucket

    def _split(self, batch: list[_Request], outs: Mapping[str, np.ndarray], rows: int) -> None:
        whole = len(batch) == 1 and (not self.max_batch_size or next(iter(outs.values())).shape[0] == rows)
        at = 0
        for r in batch:
            if whole:
                res = dict(outs)
            else:
                res = {n: a[at:at + r.rows].copy() for n, a in outs.items()}
            at += r.rows
            if r.state == _RUNNING:  # else its waiter gave up: the rows are dropped
                r.state = _DONE
                r.result = res
                if r.done is not None:  # None: run by its own caller (_run_alone)
                    self._sync.set(r.done)
