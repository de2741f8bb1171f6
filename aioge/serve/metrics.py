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
* ``aioge_serve_queue_depth`` -- requests queued now;
* ``aioge_serve_inflight_batches`` -- batches executing now;
* ``aioge_serve_batch_size`` -- rows per executed batch (histogram), and
  ``aioge_serve_padding_rows_total`` -- rows added to reach a bucket;
* ``aioge_serve_queue_seconds``, ``aioge_serve_compute_seconds`` (per batch),
  ``aioge_serve_request_seconds`` -- latency histograms.
"""

from __future__ import annotations

from typing import Any

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest
from prometheus_client.exposition import CONTENT_TYPE_LATEST

__all__ = ("ServeMetrics", "CONTENT_TYPE_LATEST")

_LATENCY = (0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)
_BATCH = (1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024)


class ServeMetrics:
    """The collectors, and the :class:`~aioge.serve.BatchObserver` methods that feed them."""

    def __init__(self, registry: CollectorRegistry | None = None, *, namespace: str = "aioge_serve") -> None:
        self.registry = registry if registry is not None else CollectorRegistry(auto_describe=True)
        r, ns = self.registry, namespace
        self.requests = Counter(f"{ns}_requests", "Inference requests by outcome", ["model", "status"], registry=r)
        self.http_requests = Counter(f"{ns}_http_requests", "HTTP inference responses by status code",
                                     ["model", "code"], registry=r)  # fmt: skip
        self.queue = Gauge(f"{ns}_queue_depth", "Requests queued, waiting for a batch", ["model"], registry=r)
        self.inflight_batches = Gauge(f"{ns}_inflight_batches", "Batches executing", ["model"], registry=r)
        self.batch_size = Histogram(f"{ns}_batch_size", "Rows per executed batch (before padding)", ["model"],
                                    buckets=_BATCH, registry=r)  # fmt: skip
        self.padding = Counter(f"{ns}_padding_rows", "Rows added to batches to reach a compiled batch size",
                               ["model"], registry=r)  # fmt: skip
        self.queue_seconds = Histogram(f"{ns}_queue_seconds", "Time from arrival to the batch's start",
                                       ["model"], buckets=_LATENCY, registry=r)  # fmt: skip
        self.compute_seconds = Histogram(f"{ns}_compute_seconds", "Time a batch takes to assemble, execute "
                                         "and split", ["model"], buckets=_LATENCY, registry=r)  # fmt: skip
        self.request_seconds = Histogram(f"{ns}_request_seconds", "Time from arrival to the result",
                                         ["model"], buckets=_LATENCY, registry=r)  # fmt: skip
        self._children: dict[tuple[Any, ...], Any] = {}

    def _child(self, metric: Any, *labels: str) -> Any:
        # labels() costs a lock and a dict lookup with string joins: cache the children
        key = (id(metric), *labels)
        c = self._children.get(key)
        if c is None:
            c = self._children[key] = metric.labels(*labels)
        return c

    # ---- BatchObserver ----
    def queue_depth(self, model: str, depth: int) -> None:
        self._child(self.queue, model).set(depth)

    def inflight(self, model: str, batches: int) -> None:
        self._child(self.inflight_batches, model).set(batches)

    def batch(self, model: str, rows: int, bucket: int, compute_seconds: float) -> None:
        self._child(self.batch_size, model).observe(rows)
        if bucket > rows:
            self._child(self.padding, model).inc(bucket - rows)
        self._child(self.compute_seconds, model).observe(compute_seconds)

    def request(self, model: str, status: str, queue_seconds: float | None, total_seconds: float) -> None:
        self._child(self.requests, model, status).inc()
        if queue_seconds is not None:
            self._child(self.queue_seconds, model).observe(queue_seconds)
        if status == "ok":
            self._child(self.request_seconds, model).observe(total_seconds)

    # ---- HTTP ----
    def http(self, model: str, code: int) -> None:
        self._child(self.http_requests, model, str(code)).inc()

    def expose(self) -> bytes:
        """The registry in Prometheus' text format."""
        return generate_latest(self.registry)
