"""Triton's statistics extension: per-model counts and durations (``GET /v2/models[/{name}]/stats``).

:class:`ModelStatistics` holds what Triton reports for one model version,
fed by its :class:`~aioge.serve.Batcher` (and by the server for requests
refused before they reach it): successful and failed requests with their
total durations, the time requests waited in the queue, and per executed
batch the time to assemble its inputs (``compute_input``), to execute it
(``compute_infer``) and to split its outputs (``compute_output``) -- added
once per request of the batch to ``inference_stats``, and once per batch
to ``batch_stats`` of its batch size (rows before padding).
``inference_count`` counts the rows of successful requests,
``execution_count`` the batches executed.
"""

from __future__ import annotations

import time
from typing import Any

__all__ = ("ModelStatistics",)


def _duration(count: int, ns: int) -> dict[str, int]:
    return {"count": count, "ns": ns}


class ModelStatistics:
    """One model's statistics in Triton's terms; plain counters updated on the event loop's thread."""

    __slots__ = ("batches", "compute_infer", "compute_input", "compute_output", "execution_count", "fail",
                 "inference_count", "last_inference", "queue", "success")  # fmt: skip

    def __init__(self) -> None:
        #: milliseconds since the epoch of the last request (0: none yet)
        self.last_inference = 0
        self.inference_count = 0
        self.execution_count = 0
        # [count, ns]
        self.success = [0, 0]
        self.fail = [0, 0]
        self.queue = [0, 0]
        self.compute_input = [0, 0]
        self.compute_infer = [0, 0]
        self.compute_output = [0, 0]
        #: batch size -> [count, input ns, infer ns, output ns]
        self.batches: dict[int, list[int]] = {}

    def request(self, ok: bool, rows: int, seconds: float, queue_seconds: float | None) -> None:
        """A request answered: ``ok`` or failed, after ``seconds`` (``queue_seconds`` of them queued)."""
        self.last_inference = time.time_ns() // 1_000_000
        d = self.success if ok else self.fail
        d[0] += 1
        d[1] += int(seconds * 1e9)
        if ok:
            self.inference_count += rows
        if queue_seconds is not None:
            q = self.queue
            q[0] += 1
            q[1] += int(queue_seconds * 1e9)

    def batch(self, requests: int, rows: int, input_s: float, infer_s: float, output_s: float) -> None:
        """A batch of ``requests`` requests (``rows`` rows) executed."""
        self.execution_count += 1
        ins, inf, outs = int(input_s * 1e9), int(infer_s * 1e9), int(output_s * 1e9)
        for d, ns in ((self.compute_input, ins), (self.compute_infer, inf), (self.compute_output, outs)):
            d[0] += requests
            d[1] += requests * ns
        b = self.batches.get(rows)
        if b is None:
            b = self.batches[rows] = [0, 0, 0, 0]
        b[0] += 1
        b[1] += ins
        b[2] += inf
        b[3] += outs

    def to_json(self, name: str, version: str = "1") -> dict[str, Any]:
        """The ``$model_stat`` object of Triton's statistics extension."""
        return {
            "name": name,
            "version": version,
            "last_inference": self.last_inference,
            "inference_count": self.inference_count,
            "execution_count": self.execution_count,
            "inference_stats": {
                "success": _duration(*self.success),
                "fail": _duration(*self.fail),
                "queue": _duration(*self.queue),
                "compute_input": _duration(*self.compute_input),
                "compute_infer": _duration(*self.compute_infer),
                "compute_output": _duration(*self.compute_output),
                "cache_hit": _duration(0, 0),
            },
            "batch_stats": [
                {"batch_size": size, "compute_input": _duration(c, i), "compute_infer": _duration(c, f),
                 "compute_output": _duration(c, o)}
                for size, (c, i, f, o) in sorted(self.batches.items())
            ],
        }  # fmt: skip
