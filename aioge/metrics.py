"""Runtime metrics: counters, gauges and histograms, for Prometheus or anything else.

::

    aioge.metrics.enable()                  # count what needs the runtime's hooks too
    print(aioge.metrics.snapshot())         # plain data
    aioge.metrics.register()                # a Collector in prometheus_client's REGISTRY
                                            # (what a /metrics endpoint serves)

Always there, read from the runtime when asked (no cost per launch):
launches enqueued, completed and failed on every stream ever opened, the
launches in flight (queue depth: total and deepest stream), streams opened,
and on the host runtime the op cache and device memory in use.

Counted while enabled (through :mod:`aioge.runtime._trace`'s hooks, a Python call
per launch): launches by kind, bytes copied by direction, and per model the
executions and their latency (enqueue to completion) as a histogram.
"""

from __future__ import annotations

import bisect
import threading
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from . import _native
from .runtime import _trace
from .runtime.stream import lane_totals

if TYPE_CHECKING:
    from .runtime.graphs.executable import CompiledGraph
    from .runtime.scheduler import Completion
    from .runtime.stream import Stream

__all__ = ("LATENCY_BUCKETS", "Collector", "Histogram", "disable", "enable", "enabled", "register", "reset",
           "snapshot")  # fmt: skip

#: upper bounds (seconds) of the execution-latency histogram's buckets (+Inf is implied)
LATENCY_BUCKETS = (0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5,
                   5.0, 10.0)  # fmt: skip


@dataclass
class Histogram:
    """Cumulative-bucket histogram (Prometheus semantics): ``counts[i]`` observations <= ``bounds[i]``."""

    bounds: Sequence[float] = LATENCY_BUCKETS
    counts: list[int] = field(default_factory=list)
    sum: float = 0.0
    count: int = 0

    def __post_init__(self) -> None:
        self.counts = [0] * (len(self.bounds) + 1)  # the last is +Inf

    def observe(self, value: float) -> None:
        self.counts[bisect.bisect_left(self.bounds, value)] += 1
        self.sum += value
        self.count += 1

    def cumulative(self) -> list[tuple[float, int]]:
        out, acc = [], 0
        for bound, n in zip([*self.bounds, float("inf")], self.counts):
            acc += n
            out.append((bound, acc))
        return out


class _Counting(_trace.Observer["Stream", "Completion", "CompiledGraph"]):
    """The hook-fed part of the metrics (while enabled)."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.by_kind: dict[str, int] = {}
        self.bytes: dict[str, int] = {}
        self.latency: dict[str, Histogram] = {}
        self.executions: dict[str, int] = {}
        self._joins: dict[Completion, tuple[str, int]] = {}

    def recorded(self, comp: Completion, t_ns: int) -> None:
        what = comp.what
        kind = _trace.kind_of(what)
        with self.lock:
            self.by_kind[kind] = self.by_kind.get(kind, 0) + 1
            if kind == "memcpy":
                d = _trace.COPIES[what]
                self.bytes[d] = self.bytes.get(d, 0) + _trace.moved_bytes(what, comp.keep)

    def execution_begins(self, model: CompiledGraph, stream: Stream, t_ns: int) -> Any:
        return (model.graph.name, t_ns)

    def execution_ends(self, token: Any, join: Completion, t_ns: int) -> None:
        name, t0 = token
        with self.lock:
            self.executions[name] = self.executions.get(name, 0) + 1
            if join.done:  # completed before we heard of it: the latency is at most now - t0
                self._observe(name, (t_ns - t0) / 1e9)
            else:
                self._joins[join] = token

    def ran_inline(self, model: CompiledGraph, stream: Stream, begin_ns: int, end_ns: int, rc: int,
                   times: Any) -> None:  # fmt: skip
        name = model.graph.name
        with self.lock:
            self.by_kind["graph"] = self.by_kind.get("graph", 0) + 1
            self.executions[name] = self.executions.get(name, 0) + 1
            self._observe(name, (end_ns - begin_ns) / 1e9)

    def finished(self, comp: Completion, rc: int, t_ns: int) -> None:
        if not self._joins:
            return
        with self.lock:
            token = self._joins.pop(comp, None)
            if token is not None:
                self._observe(token[0], (t_ns - token[1]) / 1e9)

    def _observe(self, name: str, seconds: float) -> None:
        h = self.latency.get(name)
        if h is None:
            h = self.latency[name] = Histogram()
        h.observe(seconds)


_counting = _Counting()
_enabled = False
_lock = threading.RLock()  # register() creates a Collector, which enables


def enable() -> None:
    """Count launches by kind, bytes copied and execution latency (idempotent)."""
    global _enabled
    with _lock:
        if not _enabled:
            _trace.attach(_counting)
            _enabled = True


def disable() -> None:
    """Stop counting through the hooks (what was counted stays)."""
    global _enabled
    with _lock:
        if _enabled:
            _trace.detach(_counting)
            _enabled = False


def enabled() -> bool:
    return _enabled


def reset() -> None:
    """Forget what the hooks counted (the runtime's own counters keep their totals)."""
    with _counting.lock:
        _counting.by_kind.clear()
        _counting.bytes.clear()
        _counting.latency.clear()
        _counting.executions.clear()
        _counting._joins.clear()


def snapshot() -> dict[str, Any]:
    """Every metric as plain data (see the module docstring for what is always there)."""
    lanes = lane_totals()
    out: dict[str, Any] = {
        "enabled": _enabled,
        "launches": lanes["launched"],
        "launches_completed": lanes["completed"],
        "launch_failures": lanes["failed"],
        "in_flight": lanes["in_flight"],
        "max_queue_depth": lanes["max_queue_depth"],
        "streams_opened": lanes["streams"],
    }
    if _native.has_host_hooks:
        c = _native.counters()
        out["op_cache"] = {"hits": c["op_cache_hits"], "misses": c["op_cache_misses"],
                           "entries": c["op_cache_entries"], "evictions": c["op_cache_evictions"]}  # fmt: skip
        out["device_memory_bytes"] = c["device_bytes"]
    with _counting.lock:
        out["launches_by_kind"] = dict(_counting.by_kind)
        out["bytes_copied"] = dict(_counting.bytes)
        out["executions"] = dict(_counting.executions)
        out["execution_latency_seconds"] = {
            name: {"count": h.count, "sum": h.sum, "buckets": h.cumulative()} for name, h in _counting.latency.items()
        }
    return out


class Collector:
    """A ``prometheus_client`` collector of :func:`snapshot` (creating one enables the hooks).

    Register it once with the registry a ``/metrics`` endpoint serves
    (:func:`register` does, idempotently).
    """

    def __init__(self) -> None:
        enable()

    def describe(self) -> list[Any]:
        return []  # no upfront description: collect() runs at scrape time only

    def collect(self) -> Iterator[Any]:
        from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily

        s = snapshot()
        yield CounterMetricFamily("aioge_launches", "Launches enqueued on every stream", value=s["launches"])
        yield CounterMetricFamily("aioge_launches_completed", "Launches completed", value=s["launches_completed"])
        yield CounterMetricFamily("aioge_launch_failures", "Launches that failed on the device",
                                  value=s["launch_failures"])  # fmt: skip
        yield GaugeMetricFamily("aioge_launches_in_flight", "Launches enqueued and not yet completed (all streams)",
                                value=s["in_flight"])  # fmt: skip
        yield GaugeMetricFamily("aioge_stream_queue_depth_max", "Launches in flight on the deepest stream",
                                value=s["max_queue_depth"])  # fmt: skip
        yield CounterMetricFamily("aioge_streams_opened", "Streams opened", value=s["streams_opened"])
        kinds = CounterMetricFamily("aioge_launches_by_kind", "Launches by kind (while metrics are enabled)",
                                    labels=["kind"])  # fmt: skip
        for k, v in sorted(s["launches_by_kind"].items()):
            kinds.add_metric([k], v)
        yield kinds
        copied = CounterMetricFamily("aioge_bytes_copied", "Bytes copied by direction (while enabled)",
                                     labels=["direction"])  # fmt: skip
        for d, v in sorted(s["bytes_copied"].items()):
            copied.add_metric([d.lower()], v)
        yield copied
        execs = CounterMetricFamily("aioge_executions", "Model executions (while enabled)", labels=["model"])
        for m, v in sorted(s["executions"].items()):
            execs.add_metric([m], v)
        yield execs
        lat = HistogramMetricFamily("aioge_execution_latency_seconds",
                                    "Model execution latency, enqueue to completion (while enabled)",
                                    labels=["model"])  # fmt: skip
        for m, h in sorted(s["execution_latency_seconds"].items()):
            buckets = [("+Inf" if b == float("inf") else repr(b), n) for b, n in h["buckets"]]
            lat.add_metric([m], buckets, sum_value=h["sum"])
        yield lat
        if "op_cache" in s:
            oc = s["op_cache"]
            yield CounterMetricFamily("aioge_op_cache_hits", "Compiled-op cache hits", value=oc["hits"])
            yield CounterMetricFamily("aioge_op_cache_misses", "Compiled-op cache misses", value=oc["misses"])
            yield GaugeMetricFamily("aioge_op_cache_entries", "Compiled ops cached", value=oc["entries"])
            yield GaugeMetricFamily("aioge_device_memory_bytes", "Device memory allocated",
                                    value=s["device_memory_bytes"])  # fmt: skip


_registered: dict[int, Collector] = {}


def register(registry: Any = None) -> Collector:
    """Register (once per registry) a :class:`Collector`; default: ``prometheus_client.REGISTRY``.

    Raises:
        ImportError: prometheus-client is not installed (``pip install 'aioge[cli]'``).
    """
    if registry is None:
        from prometheus_client import REGISTRY as registry
    with _lock:
        c = _registered.get(id(registry))
        if c is None:
            c = _registered[id(registry)] = Collector()
            registry.register(c)
    return c
