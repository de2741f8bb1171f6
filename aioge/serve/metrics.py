"""Prometheus metrics of the serving layer (``GET /metrics``).

:class:`ServeMetrics` registers its collectors in a registry of its own
unless given one, so a process can expose several servers, and the
runtime's own collectors (``aioge.metrics``) can be added to the same
``/metrics``: ``aioge.serve.app(..., runtime_metrics=True)`` (``aioge serve
--runtime-metrics``) registers them in the server's registry, or pass one
``prometheus_client.CollectorRegistry`` to ``aioge.serve.app(..., registry=...)``
and register anything else in it too.

Metrics (every one labelled by ``model``):

* ``aioge_serve_requests_total{model, status}`` -- requests by outcome
  (``ok``, ``invalid``, ``queue_full``, ``deadline``, ``cancelled``,
  ``error``, ``closed``);
* ``aioge_serve_http_requests_total{model, code}`` -- HTTP infer responses by status code;
* ``aioge_serve_grpc_requests_total{model, code}`` -- gRPC infer responses by status code name;
* ``aioge_serve_queue_depth`` -- requests queued now;
* ``aioge_serve_inflight_batches`` -- batches executing now;
* ``aioge_serve_batch_size`` -- rows per executed batch (histogram), and
  ``aioge_serve_padding_rows_total`` -- rows added to reach a bucket;
* ``aioge_serve_queue_seconds``, ``aioge_serve_compute_seconds`` (per batch),
  ``aioge_serve_request_seconds`` -- latency histograms;
* models with symbolic dims besides the batch (a sequence length: one plan
  per concrete shape, see :class:`~aioge.serve.DynamicModel`):
  ``aioge_serve_plans`` -- plans cached now, ``aioge_serve_max_plans`` --
  their bound, ``aioge_serve_plan_compiles_total``,
  ``aioge_serve_plan_evictions_total``, ``aioge_serve_plan_hits_total``,
  ``aioge_serve_plan_misses_total`` (read from the model's plan cache when
  scraped).

The values are plain Python numbers updated on the event loop's thread and
turned into metric families only when scraped (a custom collector): an
update is a dict lookup and an addition, where ``prometheus_client``'s own
``Counter``/``Histogram`` take a lock and several calls each -- about a
dozen updates per request made them a tenth of a small request's cost.
"""

from __future__ import annotations

import bisect
from collections.abc import Callable, Iterator, Mapping
from typing import Any

from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily
from prometheus_client.exposition import CONTENT_TYPE_LATEST

__all__ = ("ServeMetrics", "CONTENT_TYPE_LATEST")

_LATENCY = (0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)
_BATCH = (1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024)


class _Histogram:
    """Counts per bucket (``value <= bound``, the last one +Inf) and the sum."""

    __slots__ = ("bounds", "counts", "sum")

    def __init__(self, bounds: tuple[float, ...]) -> None:
        self.bounds = bounds
        self.counts = [0] * (len(bounds) + 1)
        self.sum = 0.0

    def observe(self, v: float) -> None:
        self.counts[bisect.bisect_left(self.bounds, v)] += 1
        self.sum += v

    def buckets(self) -> list[tuple[str, float]]:
        out, acc = [], 0
        for bound, c in zip((*(str(float(b)) for b in self.bounds), "+Inf"), self.counts):
            acc += c
            out.append((bound, float(acc)))
        return out


class _Model:
    """One model's values."""

    __slots__ = ("batch_size", "compute", "grpc", "http", "inflight", "padding", "queue", "queue_seconds",
                 "request_seconds", "requests")  # fmt: skip

    def __init__(self) -> None:
        self.requests: dict[str, int] = {}
        self.http: dict[str, int] = {}
        self.grpc: dict[str, int] = {}
        self.queue = 0
        self.inflight = 0
        self.padding = 0
        self.batch_size = _Histogram(_BATCH)
        self.compute = _Histogram(_LATENCY)
        self.queue_seconds = _Histogram(_LATENCY)
        self.request_seconds = _Histogram(_LATENCY)


class ServeMetrics:
    """The serving metrics (a ``prometheus_client`` collector), and the
    :class:`~aioge.serve.BatchObserver` methods that feed them."""

    def __init__(self, registry: CollectorRegistry | None = None, *, namespace: str = "aioge_serve") -> None:
        self.registry = registry if registry is not None else CollectorRegistry(auto_describe=True)
        self.namespace = namespace
        self._models: dict[str, _Model] = {}
        #: model -> its plan cache's statistics (``DynamicCompiledGraph.stats`` keys), read when scraped
        self._plans: dict[str, Callable[[], Mapping[str, int]]] = {}
        self.registry.register(self)

    def plans(self, model: str, source: Callable[[], Mapping[str, int]] | None,
              replaces: Callable[[], Mapping[str, int]] | None = None) -> None:  # fmt: skip
        """Report ``model``'s plan cache: ``source()`` returns its statistics (``plans``, ``max_plans``,
        ``compiles``, ``evictions``, ``hits``, ``misses``); ``None`` forgets it -- only while the
        source registered is still ``replaces`` when that is given (a reloaded model registered its own)."""
        if source is not None:
            self._plans[model] = source
        elif replaces is None or self._plans.get(model) is replaces:
            self._plans.pop(model, None)

    def _m(self, model: str) -> _Model:
        m = self._models.get(model)
        if m is None:
            m = self._models[model] = _Model()
        return m

    # ---- BatchObserver ----
    def queue_depth(self, model: str, depth: int) -> None:
        self._m(model).queue = depth

    def inflight(self, model: str, batches: int) -> None:
        self._m(model).inflight = batches

    def batch(self, model: str, rows: int, bucket: int, compute_seconds: float) -> None:
        m = self._m(model)
        m.batch_size.observe(rows)
        m.padding += bucket - rows
        m.compute.observe(compute_seconds)

    def request(self, model: str, status: str, queue_seconds: float | None, total_seconds: float) -> None:
        m = self._m(model)
        m.requests[status] = m.requests.get(status, 0) + 1
        if queue_seconds is not None:
            m.queue_seconds.observe(queue_seconds)
        if status == "ok":
            m.request_seconds.observe(total_seconds)

    # ---- HTTP ----
    def http(self, model: str, code: int) -> None:
        h = self._m(model).http
        k = str(code)
        h[k] = h.get(k, 0) + 1

    def grpc(self, model: str, code: str) -> None:
        """A gRPC infer answered with status ``code`` (a ``grpc.StatusCode`` name: OK, INVALID_ARGUMENT ...)."""
        g = self._m(model).grpc
        g[code] = g.get(code, 0) + 1

    # ---- prometheus_client ----
    def describe(self) -> Iterator[Any]:
        """The families without samples: the registry refuses a second collector of the same names."""
        return self._families([])

    def collect(self) -> Iterator[Any]:
        # copies: a scrape from another thread is safe
        plans = {n: dict(f()) for n, f in list(self._plans.items())}
        return self._families(list(self._models.items()), plans)

    def _families(self, models: list[tuple[str, _Model]],
                  plans: Mapping[str, Mapping[str, int]] | None = None) -> Iterator[Any]:  # fmt: skip
        ns = self.namespace
        requests = CounterMetricFamily(f"{ns}_requests", "Inference requests by outcome", labels=["model", "status"])
        http = CounterMetricFamily(f"{ns}_http_requests", "HTTP inference responses by status code",
                                   labels=["model", "code"])  # fmt: skip
        grpc = CounterMetricFamily(f"{ns}_grpc_requests", "gRPC inference responses by status code",
                                   labels=["model", "code"])  # fmt: skip
        queue = GaugeMetricFamily(f"{ns}_queue_depth", "Requests queued, waiting for a batch", labels=["model"])
        inflight = GaugeMetricFamily(f"{ns}_inflight_batches", "Batches executing", labels=["model"])
        padding = CounterMetricFamily(f"{ns}_padding_rows", "Rows added to batches to reach a compiled batch size",
                                      labels=["model"])  # fmt: skip
        hists = {
            "batch_size": HistogramMetricFamily(f"{ns}_batch_size", "Rows per executed batch (before padding)",
                                                labels=["model"]),
            "queue_seconds": HistogramMetricFamily(f"{ns}_queue_seconds", "Time from arrival to the batch's start",
                                                   labels=["model"]),
            "compute": HistogramMetricFamily(f"{ns}_compute_seconds", "Time a batch takes to assemble, execute "
                                             "and split", labels=["model"]),
            "request_seconds": HistogramMetricFamily(f"{ns}_request_seconds", "Time from arrival to the result",
                                                     labels=["model"]),
        }  # fmt: skip
        for name, m in models:
            for status, n in list(m.requests.items()):
                requests.add_metric([name, status], n)
            for code, n in list(m.http.items()):
                http.add_metric([name, code], n)
            for code, n in list(m.grpc.items()):
                grpc.add_metric([name, code], n)
            queue.add_metric([name], m.queue)
            inflight.add_metric([name], m.inflight)
            padding.add_metric([name], m.padding)
            for attr, fam in hists.items():
                h: _Histogram = getattr(m, attr)
                fam.add_metric([name], h.buckets(), h.sum)
        yield from (requests, http, grpc, queue, inflight, padding, *hists.values())
        live = GaugeMetricFamily(f"{ns}_plans", "Plans (one per concrete input shape) a dynamic-shape model "
                                 "holds now", labels=["model"])  # fmt: skip
        bound = GaugeMetricFamily(f"{ns}_max_plans", "Plans a dynamic-shape model keeps at most (the least "
                                  "recently used is evicted)", labels=["model"])  # fmt: skip
        counts = {k: CounterMetricFamily(f"{ns}_plan_{k}", text, labels=["model"]) for k, text in (
            ("compiles", "Plans compiled (a first request of a concrete input shape, or one evicted before)"),
            ("evictions", "Plans evicted to stay within max_plans"),
            ("hits", "Executions that found their plan cached"),
            ("misses", "Executions that had to compile their plan"))}  # fmt: skip
        for name, st in (plans or {}).items():
            live.add_metric([name], st.get("plans", 0))
            bound.add_metric([name], st.get("max_plans", 0))
            for k, cfam in counts.items():
                cfam.add_metric([name], st.get(k, 0))
        yield from (live, bound, *counts.values())

    def expose(self) -> bytes:
        """The registry in Prometheus' text format."""
        return generate_latest(self.registry)
