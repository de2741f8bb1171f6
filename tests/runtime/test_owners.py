"""Grep gates: one owner per piece of runtime state.

* a device's state lives in its :class:`~aioge.runtime.context.DeviceContext`: no module
  but ``device.py`` and ``context.py`` touches a device's private attributes;
* the enqueue primitive's state is its own: no launch path reads an ``Enqueue``'s
  privates (``tx._...``);
* a memory's reader/writer notes are written only in ``stream.py`` (the enqueue
  transaction; capture records launches, the transaction notes them);
* a lane's failure fields (``unreported``, ``failed``, the runtime's failure log) are
  touched only in ``scheduler.py``;
* the observation hub (``_trace``) imports nothing of the runtime it observes.

These read the sources, so they fail the moment someone writes the next bypass.
"""

from __future__ import annotations

import pathlib
import re

import numpy as np
import pytest

import aioge
from aioge.runtime.context import DeviceContext

ROOT = pathlib.Path(aioge.__file__).parent
SOURCES = sorted(p for p in ROOT.rglob("*.py"))


def _hits(pattern: str, allowed: set[str]) -> list[str]:
    rx = re.compile(pattern)
    out = []
    for p in SOURCES:
        rel = p.relative_to(ROOT).as_posix()
        if rel in allowed:
            continue
        for n, line in enumerate(p.read_text().splitlines(), 1):
            if rx.search(line):
                out.append(f"{rel}:{n}: {line.strip()}")
    return out


def test_sources_found() -> None:
    assert len(SOURCES) > 50 and any(p.name == "context.py" for p in SOURCES)


def test_device_privates_only_in_device_and_context() -> None:
    hits = _hits(r"\b(?:device|dev|_dev|\.device)\._[a-z]", {"runtime/device.py", "runtime/context.py"})
    assert hits == [], "reach the device's state through device.context:\n" + "\n".join(hits)


def test_no_enqueue_privates_outside_stream() -> None:
    hits = _hits(r"\btx\._[a-z]", {"runtime/stream.py"})
    assert hits == [], "use the Enqueue's methods (order/commit/scratch/...):\n" + "\n".join(hits)


@pytest.mark.anyio
async def test_device_state_has_one_owner() -> None:
    async with aioge.open_device(0) as dev:
        ctx = dev.context
        assert isinstance(ctx, DeviceContext) and not ctx.closed
        for old in ("_ctx", "_cache", "_pool", "_pinned", "_memory", "_streams", "_events", "_models", "_compiling"):
            assert not hasattr(dev, old), old  # no second copy of the state on the façade
        async with dev.open_stream() as s:
            assert s in ctx.streams
            t = s.upload(np.ones(4, np.float32))
            mem = t._memory()
            assert mem.context is ctx and ctx.memory[id(mem)]() is mem
            await t.numpy()
    assert ctx.closed and dev.closed
    with pytest.raises(aioge.ClosedResourceError, match="Device 0"):
        ctx.check_open()


def test_reader_writer_notes_only_in_stream() -> None:
    # a memory's last writer and readers are noted by the enqueue transaction alone
    # (aioge.graph's passes keep readers indexes of their own: graph values, not device memory)
    rx = r"\.readers\s*\[[^\]]*\]\s*=|\.readers\.(?:clear|pop|update)\(|\.writer\s*=[^=]"
    hits = [h for h in _hits(rx, {"runtime/stream.py"}) if not h.startswith("graph/")]
    assert hits == [], "note readers and writers through Enqueue.commit/note:\n" + "\n".join(hits)


def test_lane_failure_fields_only_in_scheduler() -> None:
    # the first unreported error, the failure count and the runtime's failure log are the lane's
    hits = _hits(r"\.(?:unreported|_failures|_fails_seen)\b|\.failed\s*[+-]?=[^=]", {"runtime/scheduler.py"})
    assert hits == [], "read a lane's failures through its methods (take_unreported, ...):\n" + "\n".join(hits)


def test_trace_imports_nothing_it_observes() -> None:
    # the observation hub sits below the runtime it observes, type-only imports included
    src = (ROOT / "runtime" / "_trace.py").read_text()
    hits = re.findall(r"^\s*from \.+[a-z_.]* import .*|^\s*import aioge.*", src, re.M)
    assert hits == [], hits
