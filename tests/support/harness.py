"""The async test harness's shared parts (tests/conftest.py wires them into pytest).

``ALL_BACKENDS`` are the event loops async tests run on (a directory may narrow them);
``loop_errors`` collects what an event loop only logs, which the harness turns into a failure;
``live_handles`` reads the host runtime's live-handle counters a test must leave unchanged.
"""

from __future__ import annotations

import gc
import logging

import pytest

from aioge import _native

ALL_BACKENDS = [
    pytest.param(("asyncio", {"debug": True}), id="asyncio"),
    pytest.param(("asyncio", {"debug": True, "use_uvloop": True}), id="uvloop"),
    pytest.param(("trio", {}), id="trio"),
]


class LoopErrors(logging.Handler):
    """Collects what asyncio's (and uvloop's) default exception handler logs."""

    def __init__(self) -> None:
        super().__init__(logging.ERROR)
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)


loop_errors = LoopErrors()
logging.getLogger("asyncio").addHandler(loop_errors)

LIVE = ("contexts", "streams", "events", "tensor_descs", "data_buffers", "attrs", "device_allocations",
        "host_allocations", "subscriptions", "graphs", "captured_models")  # fmt: skip


def live_handles() -> dict[str, int]:
    gc.collect()
    c = _native.counters()
    return {k: c[k] for k in LIVE}
