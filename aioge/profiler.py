"""Where device time goes: record every launch on every stream, export a trace.

::

    with aioge.profile() as prof:          # or `async with`, which also waits for the work
        asyncio.run(main())
    prof.export_chrome_trace("trace.json")  # Perfetto / chrome://tracing
    print(prof.key_averages())              # per-op table, like torch.profiler's

While a profiler records, every stream behaves like a timing stream
(``open_stream(timing=True)``): each launch, copy, event wait and graph
execution is recorded with its host enqueue time, its device start and end
(the runtime's timing events), its stream, op type, shapes and bytes.  Sunk
graph segments also carry the device time of every node, measured by the
runtime inside the graph task (``aiogeGraphExecuteTimedAsync``).

Clocks: a launch's device start is its start event's timestamp
(``aclrtEventGetTimestamp``, us) and its duration the events' elapsed time
(``aclrtEventElapsedTime``).  On the host runtime that clock *is* the host's
(``time.monotonic_ns``); on a device with a clock of its own, the offset is
the tightest value the recorded facts allow (no launch starts before the host
enqueued it, none ends after the host saw it end).  A backend without
timestamps places each launch so that it ends when the host saw it end.

Off, it costs nothing: the runtime's hooks test one global (:mod:`aioge.runtime._trace`).
"""

from __future__ import annotations

import json
import math
import os
import threading
import time
import weakref
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import anyio

from . import _native
from ._native import acl
from .runtime import _trace
from .runtime.stream import live_streams

if TYPE_CHECKING:
    from .runtime.graphs.executable import CompiledGraph
    from .runtime.scheduler import Completion, Lane
    from .runtime.stream import Stream

__all__ = ("Execution", "KeyAverage", "KeyAverages", "Launch", "Node", "Profiler", "profile")

_COPIES = _trace.COPIES
#: the runtime can time the nodes of sunk graph segments (aiogeGraphExecuteTimedAsync)
has_node_times = acl.has_entry("aiogeGraphExecuteTimedAsync")
#: events carry absolute timestamps (aclrtEventGetTimestamp, CANN 8 and the host runtime)
has_timestamps = acl.has_entry("aclrtEventGetTimestamp")


@dataclass(slots=True)
class Node:
    """One node of a sunk graph segment, timed by the runtime (host-clock ns)."""

    name: str
    op_type: str
    start_ns: int
    end_ns: int

    @property
    def device_ms(self) -> float:
        return (self.end_ns - self.start_ns) / 1e6


@dataclass(slots=True)
class Launch:
    """One recorded launch (kernel, copy, memset, graph segment or marker).

    Times are ``time.monotonic_ns()`` values; the device ones are None until
    the launch completed (and for work that completed after the profiler
    stopped waiting for it).
    """

    index: int
    name: str
    kind: str  # "kernel" | "memcpy" | "memset" | "graph" | "marker"
    device: int
    stream: int
    enqueue_ns: int
    start_ns: int | None = None
    end_ns: int | None = None
    error: int = 0
    inputs: list[tuple[tuple[int, ...], str]] | None = None
    outputs: list[tuple[tuple[int, ...], str]] | None = None
    nbytes: int = 0
    #: indices of the launches of other streams this one waited for (device-side)
    waits_for: list[int] = field(default_factory=list)
    nodes: list[Node] | None = None
    execution: int | None = None
    # raw facts for the clock alignment (see the module docstring)
    _clock: _Clock | None = None
    _prev_ns: int = 0
    _finish_ns: int = 0
    _dev_start: int | None = None
    _dev_end: int | None = None
    _times: Any = None
    _node_names: list[tuple[str, str]] | None = None

    @property
    def done(self) -> bool:
        return self.end_ns is not None

    @property
    def device_ms(self) -> float | None:
        """Device time in ms (markers: 0), None until done."""
        if self.start_ns is None or self.end_ns is None:
            return None
        return (self.end_ns - self.start_ns) / 1e6


@dataclass(slots=True)
class Execution:
    """One execution of a compiled graph: its launches and the join that ends it."""

    index: int
    model: str
    device: int
    stream: int
    enqueue_ns: int
    members: list[int] = field(default_factory=list)
    join: int | None = None
    #: host time the join's completion was seen (enqueue to completion = latency)
    finish_ns: int | None = None

    @property
    def latency_ms(self) -> float | None:
        return None if self.finish_ns is None else (self.finish_ns - self.enqueue_ns) / 1e6


class _Clock:
    """A device's clock as seen from the host: ``host = device + offset``."""

    __slots__ = ("exact", "hi", "last_ns", "lo")

    def __init__(self, exact: bool) -> None:
        #: the same clock as the host's (the host runtime): the offset is 0
        self.exact = exact
        self.lo = -math.inf
        self.hi = math.inf
        #: host time of the latest record on the device, per stream (the next launch was enqueued after it)
        self.last_ns: dict[int, int] = {}

    def offset(self) -> float:
        if self.exact:
            return 0.0
        if self.lo == -math.inf:
            return 0.0 if self.hi == math.inf else self.hi
        return self.lo if self.lo <= self.hi else self.hi


# streams whose `timing` the running profilers turned on, with their own setting
_timing_lock = threading.Lock()
_timing_users = 0
_saved_timing: weakref.WeakKeyDictionary[Stream, bool] = weakref.WeakKeyDictionary()


def _timing_on(streams: Sequence[Stream]) -> None:
    with _timing_lock:
        for s in streams:
            if s not in _saved_timing:
                _saved_timing[s] = s.timing
            s.timing = True


def _timing_release() -> None:
    global _timing_users
    with _timing_lock:
        _timing_users -= 1
        if _timing_users:
            return
        for s, was in list(_saved_timing.items()):
            s.timing = was
        _saved_timing.clear()


class Profiler(_trace.Observer["Stream", "Completion", "CompiledGraph"]):
    """Records the runtime's launches while started; see :func:`profile`.

    Attributes:
        launches: every recorded :class:`Launch`, in enqueue order.
        executions: every recorded graph :class:`Execution`.
        t0_ns / t1_ns: when recording started / stopped (``time.monotonic_ns``).
    """

    def __init__(self, *, node_times: bool = True) -> None:
        self._node_times = node_times and has_node_times
        self.launches: list[Launch] = []
        self.executions: list[Execution] = []
        self._lock = threading.Lock()
        self._streams: dict[Lane, tuple[int, int]] = {}  # lane -> (device, stream id)
        self._clocks: dict[int, _Clock] = {}
        self._pending: dict[Completion, Launch] = {}
        self._waits: dict[Lane, list[Completion]] = {}
        self._by_comp: dict[Completion, Launch] = {}  # while recording (Completion has no weakref slot)
        self._by_join: dict[int, Execution] = {}
        self._open_exec = threading.local()
        self._segments: dict[tuple[int, int], list[tuple[str, str]]] = {}
        self._recording = False
        self._started = False
        self._stopped = False
        self.t0_ns = 0
        self.t1_ns = 0

    # ---- lifecycle ----
    def start(self) -> Profiler:
        """Start recording (once)."""
        global _timing_users
        if self._started:
            raise RuntimeError("a profiler records once: make a new one")
        self._started = True
        self.t0_ns = time.monotonic_ns()
        with _timing_lock:
            _timing_users += 1
        self._recording = True
        _trace.attach(self)
        for s in live_streams():
            self.stream_opened(s)
        return self

    def stop(self) -> None:
        """Stop recording new work (idempotent).  Launches recorded so far
        still get their device times as they complete; ``await wait()``."""
        if not self._started or self._stopped:
            return
        self._stopped = True
        self.t1_ns = time.monotonic_ns()
        self._recording = False
        _trace.detach(self, finish=False)
        _timing_release()
        self._maybe_release()

    async def wait(self, *, timeout: float | None = None) -> None:
        """Wait until every recorded launch has completed (so all have device times).

        Cancellation: returns at once; nothing recorded is lost.
        """
        with anyio.fail_after(timeout):
            while True:
                with self._lock:
                    comps = [c for c in self._pending if not c.done]
                if not comps:
                    return
                for c in comps:
                    if not c.done:
                        await c._wait_pending()

    def __enter__(self) -> Profiler:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    async def __aenter__(self) -> Profiler:
        return self.start()

    async def __aexit__(self, *exc: object) -> None:
        self.stop()
        await self.wait()

    def _maybe_release(self) -> None:
        """Once stopped and nothing is pending: stop listening for completions."""
        with self._lock:
            if not self._stopped or self._pending:
                return
            self._by_comp.clear()
        _trace.detach(self)

    # ---- hooks (see aioge.runtime._trace) ----
    def stream_opened(self, stream: Stream) -> None:
        if not self._recording or stream.closed:
            return
        _timing_on([stream])
        dev = stream.device.id
        with self._lock:
            self._streams[stream._lane] = (dev, stream.id)
            if dev not in self._clocks:
                self._clocks[dev] = _Clock(exact=has_timestamps and _native.backend == "host")

    def recorded(self, comp: Completion, t_ns: int) -> None:
        if not self._recording:
            return
        where = self._streams.get(comp.lane)
        if where is None:
            return
        what = comp.what
        kind = _trace.kind_of(what)
        dev, sid = where
        clock = self._clocks[dev]
        with self._lock:
            rec = Launch(len(self.launches), what, kind, dev, sid, t_ns, _clock=clock,
                         _prev_ns=clock.last_ns.get(sid, self.t0_ns))  # fmt: skip
            clock.last_ns[sid] = t_ns
            self.launches.append(rec)
            self._pending[comp] = rec
            self._by_comp[comp] = rec
            waits = self._waits.pop(comp.lane, None)
        rec.nbytes = _trace.moved_bytes(what, comp.keep)
        if waits:
            rec.waits_for = [src.index for src in (self._by_comp.get(c) for c in waits) if src is not None]
        ex = getattr(self._open_exec, "current", None)
        if ex is not None:
            ex.members.append(rec.index)
            rec.execution = ex.index

    def annotate(self, comp: Completion, inputs: Sequence[Any], outputs: Sequence[Any]) -> None:
        rec = self._by_comp.get(comp)
        if rec is None:
            return
        rec.inputs = [_operand(x) for x in inputs]
        rec.outputs = [_operand(y) for y in outputs]
        rec.nbytes = sum(_nbytes(x) for x in (*inputs, *outputs))

    def waited(self, stream: Stream, comp: Completion, t_ns: int) -> None:
        if self._recording and comp.lane is not stream._lane:
            with self._lock:
                self._waits.setdefault(stream._lane, []).append(comp)

    def execution_begins(self, model: CompiledGraph, stream: Stream, t_ns: int) -> Any:
        if not self._recording:
            return None
        with self._lock:
            ex = Execution(len(self.executions), model.graph.name, stream.device.id, stream.id, t_ns)
            self.executions.append(ex)
        self._open_exec.current = ex
        return ex

    def execution_ends(self, token: Any, join: Completion, t_ns: int) -> None:
        ex: Execution = token
        self._open_exec.current = None
        rec = self._by_comp.get(join)
        if rec is None:
            return
        ex.join = rec.index
        if rec._finish_ns:  # completed already
            ex.finish_ns = rec._finish_ns
        else:
            self._by_join[rec.index] = ex

    def node_times(self, model: CompiledGraph, segment: int) -> Any:
        if not (self._recording and self._node_times):
            return None
        names = self._segment_nodes(model, segment)
        return acl.timestamps(max(2 * len(names), 2))

    def segment(self, comp: Completion, model: CompiledGraph, segment: int, times: Any) -> None:
        rec = self._by_comp.get(comp)
        if rec is None:
            return
        rec.kind = "graph"
        rec._times = times
        rec._node_names = self._segment_nodes(model, segment)

    def ran_inline(self, model: CompiledGraph, stream: Stream, begin_ns: int, end_ns: int, rc: int,
                   times: Any) -> None:  # fmt: skip
        """An execution run on the caller's thread: one graph launch and its execution, both over.

        Host runtime only, where the device clock is the host's: its times are exact."""
        if not self._recording:
            return
        where = self._streams.get(stream._lane)
        if where is None:
            return
        dev, sid = where
        clock = self._clocks[dev]
        with self._lock:
            rec = Launch(len(self.launches), f"{model.graph.name}[0]", "graph", dev, sid, begin_ns, error=rc,
                         _clock=clock, _prev_ns=clock.last_ns.get(sid, self.t0_ns))  # fmt: skip
            rec._dev_start, rec._dev_end, rec._finish_ns = begin_ns, end_ns, end_ns
            rec._times = times
            rec._node_names = self._segment_nodes(model, 0) if times is not None else None
            clock.last_ns[sid] = end_ns
            self.launches.append(rec)
            ex = Execution(len(self.executions), model.graph.name, dev, sid, begin_ns, [rec.index], rec.index, end_ns)
            rec.execution = ex.index
            self.executions.append(ex)

    def finished(self, comp: Completion, rc: int, t_ns: int) -> None:
        with self._lock:
            rec = self._pending.pop(comp, None)
        if rec is None:
            return
        rec.error = rc
        dur_ns = 0
        if comp.start is not None:
            ms = acl.try_elapsed_ms(comp.start, comp.event)
            if ms is not None:
                dur_ns = max(int(ms * 1e6), 0)
        if has_timestamps:
            us = acl.event_timestamp_us(comp.start if comp.start is not None else comp.event)
            if us is not None:
                rec._dev_start = us * 1000
                rec._dev_end = rec._dev_start + dur_ns
        else:  # no device clock: it ended when the host saw it end
            rec._dev_end = t_ns
            rec._dev_start = t_ns - dur_ns
        _native.recent_error()
        rec._finish_ns = t_ns
        ex = self._by_join.pop(rec.index, None)
        if ex is not None:
            ex.finish_ns = t_ns
        if self._stopped and not self._pending:
            self._maybe_release()

    # ---- clock alignment ----
    @staticmethod
    def _bound(rec: Launch, clock: _Clock) -> None:
        """Tighten the bounds on a device clock's offset with one launch's facts."""
        if rec._dev_start is None or rec._dev_end is None:
            return
        clock.lo = max(clock.lo, rec._prev_ns - rec._dev_start)  # enqueued after the stream's previous record
        clock.hi = min(clock.hi, rec._finish_ns - rec._dev_end)  # ended before the host saw it end

    def _resolve(self) -> None:
        """Turn every completed launch's device times into host-clock times
        (from scratch: each completion tightens its device's bounds)."""
        done = [r for r in self.launches if r._dev_end is not None and r._clock is not None]
        for clock in self._clocks.values():
            clock.lo, clock.hi = -math.inf, math.inf
        for rec in done:
            assert rec._clock is not None
            self._bound(rec, rec._clock)
        last_end: dict[tuple[int, int], int] = {}
        for rec in done:  # in record order, which is each stream's FIFO order
            assert rec._clock is not None and rec._dev_start is not None and rec._dev_end is not None
            off = rec._clock.offset()
            start = int(rec._dev_start + off)
            if rec._times is not None and rec._clock.exact and rec._times[0]:
                # the start event's timestamp is truncated to us; the segment's first node
                # (timed in ns on the same clock) starts right after that event
                start = max(start, min(int(rec._times[0]), start + 999))
            # truncation must not make a launch start before its predecessor on the stream ended
            start = max(start, last_end.get((rec.device, rec.stream), start))
            rec.start_ns = start
            rec.end_ns = start + (rec._dev_end - rec._dev_start)
            last_end[(rec.device, rec.stream)] = rec.end_ns
            if rec._times is not None and rec._node_names:
                t = rec._times
                nodes = []
                for i, (name, op_type) in enumerate(rec._node_names):
                    a, b = int(t[2 * i]), int(t[2 * i + 1])
                    if not a or not b:
                        continue  # did not run (an earlier node failed)
                    a = min(max(a, rec.start_ns), rec.end_ns)  # within the segment's own events
                    b = min(max(b, a), rec.end_ns)
                    nodes.append(Node(name, op_type, a, b))
                rec.nodes = nodes

    def _segment_nodes(self, model: CompiledGraph, segment: int) -> list[tuple[str, str]]:
        key = (id(model), segment)
        names = self._segments.get(key)
        if names is None:
            names = [(op.name, op.op_type) for op in model._build.ops if op.segment == segment]
            self._segments[key] = names
        return names

    # ---- results ----
    def completed(self) -> list[Launch]:
        """The launches that have device times, in enqueue order."""
        self._resolve()
        return [r for r in self.launches if r.end_ns is not None]

    def key_averages(self) -> KeyAverages:
        """Device time per op type (and per graph node type), like ``torch.profiler``'s table."""
        launches = self.completed()
        groups: dict[tuple[str, str], list[float]] = {}
        for r in launches:
            if r.kind == "marker":
                continue
            ms = r.device_ms
            assert ms is not None
            groups.setdefault((r.name, r.kind), []).append(ms)
            for n in r.nodes or ():
                groups.setdefault((n.op_type, "node"), []).append(n.device_ms)
        total = sum(sum(v) for (_, kind), v in groups.items() if kind != "node")
        rows = [KeyAverage(name, kind, len(v), sum(v), min(v), max(v), 100.0 * sum(v) / total if total else 0.0)
                for (name, kind), v in groups.items()]  # fmt: skip
        rows.sort(key=lambda r: r.total_ms, reverse=True)
        return KeyAverages(rows, total)

    def chrome_trace(self) -> dict[str, Any]:
        """The trace as a Trace Event Format object (what :meth:`export_chrome_trace` writes)."""
        launches = self.completed()
        t0 = self.t0_ns

        def us(ns: int) -> float:
            return round((ns - t0) / 1e3, 3)

        events: list[dict[str, Any]] = []
        tracks = sorted({(r.device, r.stream) for r in launches})
        for dev in sorted({d for d, _ in tracks}):
            events.append({"ph": "M", "name": "process_name", "pid": dev, "tid": 0,
                           "args": {"name": f"device {dev} ({_native.backend})"}})  # fmt: skip
            events.append({"ph": "M", "name": "process_sort_index", "pid": dev, "tid": 0, "args": {"sort_index": dev}})
        for dev, sid in tracks:
            events.append({"ph": "M", "name": "thread_name", "pid": dev, "tid": sid, "args": {"name": f"stream {sid}"}})
            events.append({"ph": "M", "name": "thread_sort_index", "pid": dev, "tid": sid, "args": {"sort_index": sid}})
        by_index = {r.index: r for r in launches}
        for ex in self.executions:
            join = by_index.get(ex.join) if ex.join is not None else None
            mine = [by_index[i] for i in ex.members if i in by_index]
            own = [r for r in mine if r.stream == ex.stream and r.device == ex.device]
            if join is None or not own:
                continue
            start = min(r.start_ns for r in own if r.start_ns is not None)
            end = max(r.end_ns for r in own if r.end_ns is not None)
            events.append({
                "ph": "X", "cat": "execution", "name": ex.model, "pid": ex.device, "tid": ex.stream,
                "ts": us(start), "dur": round((end - start) / 1e3, 3),
                "args": {"execution": ex.index, "enqueued_us": us(ex.enqueue_ns), "launches": len(mine),
                         **({"latency_ms": round(ex.latency_ms, 4)} if ex.latency_ms is not None else {})},
            })  # fmt: skip
        for r in launches:
            assert r.start_ns is not None and r.end_ns is not None
            args: dict[str, Any] = {"launch": r.index, "enqueued_us": us(r.enqueue_ns),
                                    "queued_us": round(max(r.start_ns - r.enqueue_ns, 0) / 1e3, 3)}  # fmt: skip
            if r.nbytes:
                args["bytes"] = r.nbytes
            if r.kind == "memcpy":
                args["direction"] = _COPIES[r.name]
            if r.inputs is not None:
                args["inputs"] = [f"{d}{list(s)}" for s, d in r.inputs]
            if r.outputs is not None:
                args["outputs"] = [f"{d}{list(s)}" for s, d in r.outputs]
            if r.error:
                args["error"] = r.error
            if r.execution is not None:
                args["execution"] = r.execution
            if r.waits_for:
                args["waits_for"] = r.waits_for
            events.append(
                {
                    "ph": "X",
                    "cat": r.kind,
                    "name": r.name,
                    "pid": r.device,
                    "tid": r.stream,
                    "ts": us(r.start_ns),
                    "dur": round((r.end_ns - r.start_ns) / 1e3, 3),
                    "args": args,
                }
            )
            for n in r.nodes or ():
                events.append({"ph": "X", "cat": "node", "name": n.op_type, "pid": r.device, "tid": r.stream,
                               "ts": us(n.start_ns), "dur": round((n.end_ns - n.start_ns) / 1e3, 3),
                               "args": {"node": n.name, "launch": r.index}})  # fmt: skip
        flow = 0
        for r in launches:
            for i in r.waits_for:
                src = by_index.get(i)
                if src is None:
                    continue
                flow += 1
                assert src.start_ns is not None and r.start_ns is not None
                common = {"cat": "wait", "name": "event wait", "id": flow}
                events.append({"ph": "s", "pid": src.device, "tid": src.stream, "ts": us(src.start_ns), **common})
                events.append({"ph": "f", "bp": "e", "pid": r.device, "tid": r.stream, "ts": us(r.start_ns),
                               **common})  # fmt: skip
        return {
            "traceEvents": events,
            "displayTimeUnit": "ms",
            "otherData": {"producer": "aioge", "backend": _native.backend, "launches": len(self.launches),
                          "completed": len(launches), "executions": len(self.executions)},
        }  # fmt: skip

    def export_chrome_trace(self, path: str | os.PathLike[str]) -> None:
        """Write the trace (Trace Event Format JSON: Perfetto, chrome://tracing).

        One process per device, one track (thread) per stream; graph
        executions enclose their segments, which enclose their nodes; an arrow
        (flow) joins each launch to the launches of other streams it waited for.
        """
        with open(path, "w", encoding="utf-8") as f:
            json.dump(self.chrome_trace(), f, separators=(",", ":"))


def _operand(x: Any) -> tuple[tuple[int, ...], str]:
    shape = getattr(x, "shape", None)
    dtype = getattr(x, "dtype", None)
    if shape is None and hasattr(x, "array"):  # Const / HostInput
        shape, dtype = x.array.shape, x.array.dtype
    if shape is None:
        return (), "none"
    return tuple(int(d) for d in shape), str(dtype)


def _nbytes(x: Any) -> int:
    n = getattr(x, "nbytes", None)
    return int(n) if isinstance(n, int) else 0


@dataclass(slots=True, frozen=True)
class KeyAverage:
    """One row of :meth:`Profiler.key_averages`."""

    name: str
    kind: str
    calls: int
    total_ms: float
    min_ms: float
    max_ms: float
    percent: float

    @property
    def avg_ms(self) -> float:
        return self.total_ms / self.calls


class KeyAverages(Sequence[KeyAverage]):
    """Rows sorted by total device time; ``str()`` (or :meth:`table`) renders them."""

    def __init__(self, rows: list[KeyAverage], total_ms: float) -> None:
        self._rows = rows
        #: device time of every launch (graph nodes are inside their segments)
        self.total_ms = total_ms

    def __len__(self) -> int:
        return len(self._rows)

    def __getitem__(self, i: Any) -> Any:
        return self._rows[i]

    def __iter__(self) -> Iterator[KeyAverage]:
        return iter(self._rows)

    def table(self, *, sort_by: str = "total_ms", row_limit: int | None = None) -> str:
        """A text table (``sort_by``: any :class:`KeyAverage` field, e.g. ``calls``, ``avg_ms``)."""
        rows = sorted(self._rows, key=lambda r: getattr(r, sort_by), reverse=sort_by != "name")
        if row_limit is not None:
            rows = rows[:row_limit]
        head = ("Name", "Kind", "Calls", "Device total", "Device avg", "Min", "Max", "% of device")
        body = [(r.name, r.kind, str(r.calls), _ms(r.total_ms), _ms(r.avg_ms), _ms(r.min_ms), _ms(r.max_ms),
                 f"{r.percent:.1f}%") for r in rows]  # fmt: skip
        width = [max(len(c[i]) for c in (head, *body)) for i in range(len(head))]
        width[0] = min(width[0], 48)

        def line(cells: Sequence[str]) -> str:
            first = cells[0] if len(cells[0]) <= width[0] else cells[0][: width[0] - 1] + "…"
            return "  ".join([first.ljust(width[0]), cells[1].ljust(width[1])] +
                             [c.rjust(w) for c, w in zip(cells[2:], width[2:])])  # fmt: skip

        rule = "-" * len(line(head))
        out = [rule, line(head), rule, *(line(b) for b in body), rule, f"Device time total: {_ms(self.total_ms)}"]
        return "\n".join(out)

    def __str__(self) -> str:
        return self.table()


def _ms(ms: float) -> str:
    if ms >= 1000:
        return f"{ms / 1000:.3f}s"
    if ms >= 1:
        return f"{ms:.3f}ms"
    return f"{ms * 1000:.1f}us"


def profile(*, node_times: bool = True) -> Profiler:
    """Profile the runtime: ``with aioge.profile() as prof:`` or ``async with``.

    Args:
        node_times: time every node of sunk graph segments (the runtime does,
            inside the graph task).

    ``async with`` also waits, on exit, for every recorded launch to complete;
    after a plain ``with`` inside a coroutine, ``await prof.wait()`` before
    reading the results.

    Example:
        >>> async with aioge.profile() as prof:
        ...     await model.execute({"x": x})
        >>> prof.export_chrome_trace("trace.json")
        >>> print(prof.key_averages().table(row_limit=10))
    """
    return Profiler(node_times=node_times)
