"""aioge.profile(), aioge.metrics and the compile logging, in process; the host runtime's timing calls."""

from __future__ import annotations

import asyncio
import logging
import subprocess
import sys
import time

import numpy as np
import pytest
from prometheus_client import CollectorRegistry, generate_latest

import aioge
from aioge import _native
from aioge._native import ffi, lib
from aioge.runtime import _trace
from tests.cli.conftest import branchy
from tests.cli.tracecheck import check_trace

pytestmark = pytest.mark.anyio


@pytest.fixture(params=[pytest.param(("asyncio", {"debug": True}), id="asyncio"),
                        pytest.param(("trio", {}), id="trio")])  # fmt: skip
def anyio_backend(request):
    return request.param


async def _workload(dev, model, s1, s2, x):
    """Ops on two streams with a cross-stream read, a user event wait, and a 2-stream graph on each stream."""
    # s1 is held on the device until the Add is enqueued, so the Add finds the MatMul still
    # pending and must wait for it (a MatMul that finished first would need no wait: a flake)
    g = ffi.new("uint64_t *")
    with s1._enqueue:  # the stream's lock, open, context bound
        _native.check(lib.aiogeHostLaunchGate(s1._handle, 20_000, g), "gate")
    try:
        a = s1.upload(np.full((32, 32), 0.5, np.float32))
        b = aioge.ops.matmul(a, a)
        c = s2.upload(np.ones((32, 32), np.float32))
        d = aioge.ops.add(c, b)  # on s2: waits for b on s1
    finally:
        lib.aiogeHostOpenGate(int(g[0]))
    ev = s1.record_event()
    s2.wait_event(ev)
    e = s2.copy(d)
    out = {"e": await e.numpy()}
    ev.close()
    out.update({f"m1_{k}": v for k, v in (await model.execute({"x": x}, stream=s1)).items()})
    out.update({f"m2_{k}": v for k, v in (await model.execute({"x": x}, stream=s2)).items()})
    return out


async def test_profile_records_every_launch_and_changes_no_result(dev, compiled):
    model = await compiled(aioge.load_onnx(branchy()), max_streams=2)
    x = np.random.default_rng(0).standard_normal((8, 64)).astype(np.float32)
    async with dev.open_stream() as s1, dev.open_stream() as s2:
        plain = await _workload(dev, model, s1, s2, x)
        launched = [s.stats["launched"] for s in (s1, s2, *model._aux_streams())]
        async with aioge.profile() as prof:
            profiled = await _workload(dev, model, s1, s2, x)
        recorded = [s.stats["launched"] - n for s, n in zip((s1, s2, *model._aux_streams()), launched)]
        assert not s1.timing and not s2.timing  # restored
    assert _trace.hub is None  # nothing observes any more: the hooks cost one test each
    for k in plain:
        assert np.array_equal(plain[k], profiled[k]), k
    done = prof.completed()
    assert len(prof.launches) == len(done) == sum(recorded)  # every launch on every stream, all completed
    for r in done:
        assert r.end_ns >= r.start_ns >= prof.t0_ns - 1000  # ns; timestamps are whole us
        assert r.enqueue_ns >= prof.t0_ns
    names = [r.name for r in done]
    assert names.count("upload") == 2 + 2 and names.count("download") == 1 + 2 and "copy" in names
    mm = next(r for r in done if r.kind == "kernel" and r.inputs and r.inputs[0][0] == (32, 32))
    assert mm.outputs == [((32, 32), "float32")] and mm.nbytes == 3 * 32 * 32 * 4
    assert next(r for r in done if r.name == "upload").nbytes == 32 * 32 * 4
    # cross-stream waits: the Add on s2 waited for the MatMul on s1; the copy for the user event
    add = next(r for r in done if r.kind == "kernel" and r.stream == s2.id)
    assert any(done[i].stream == s1.id for i in add.waits_for)
    # two executions, each with 3 segments (one on an auxiliary stream) and node times
    assert [ex.model for ex in prof.executions] == ["branchy", "branchy"]
    segs = [r for r in done if r.kind == "graph"]
    assert len(segs) == 6 and all(r.nodes for r in segs)
    for r in segs:
        assert all(r.start_ns <= n.start_ns <= n.end_ns <= r.end_ns for n in r.nodes)
    assert all(ex.latency_ms is not None and ex.latency_ms > 0 for ex in prof.executions)
    parts = check_trace(prof.chrome_trace())
    assert set(parts["threads"].values()) == {f"stream {r.stream}" for r in done}
    flows = {(f["s"]["tid"], f["f"]["tid"]) for f in parts["flows"].values()}
    assert flows == {(done[i].stream, r.stream) for r in done for i in r.waits_for}
    assert len(parts["flows"]) == sum(len(r.waits_for) for r in done)


async def test_key_averages_add_up(dev, stream):
    x = stream.upload(np.ones((16, 16), np.float32))
    await stream.synchronize()
    async with aioge.profile() as prof:
        for _ in range(3):
            y = aioge.ops.relu(x)
        await y
    rows = prof.key_averages()
    relu = next(r for r in rows if r.name == "Relu")
    assert relu.calls == 3 and relu.kind == "kernel"
    assert relu.min_ms <= relu.avg_ms <= relu.max_ms
    assert rows.total_ms == pytest.approx(sum(r.total_ms for r in rows if r.kind != "node"))
    assert sum(r.percent for r in rows if r.kind != "node") == pytest.approx(100.0)
    table = rows.table(row_limit=5)
    assert "Relu" in table and table.splitlines()[-1].startswith("Device time total")


def test_sync_profile_around_asyncio_run(tmp_path):
    async def main():
        async with aioge.open_device(0) as dev, dev.open_stream() as s:
            return await aioge.ops.mul(s.upload(np.ones(8, np.float32)), 2.0).numpy()

    with aioge.profile() as prof:
        y = asyncio.run(main())
    assert np.array_equal(y, np.full(8, 2.0, np.float32))
    assert [r.name for r in prof.completed()][:1] == ["upload"] and len(prof.completed()) == len(prof.launches)
    prof.export_chrome_trace(tmp_path / "t.json")
    import json

    check_trace(json.loads((tmp_path / "t.json").read_text()))
    with pytest.raises(RuntimeError, match="records once"):
        prof.start()


async def test_metrics_snapshot_and_prometheus(dev, compiled):
    model = await compiled(aioge.load_onnx(branchy()), max_streams=2)
    x = np.zeros((8, 64), np.float32)
    before = aioge.metrics.snapshot()
    reg = CollectorRegistry()
    aioge.metrics.register(reg)
    assert aioge.metrics.register(reg) is aioge.metrics.register(reg)  # once per registry
    try:
        aioge.metrics.reset()
        for _ in range(3):
            await model.execute({"x": x})
        snap = aioge.metrics.snapshot()
        text = generate_latest(reg).decode()
    finally:
        aioge.metrics.disable()
        aioge.metrics.reset()
    assert snap["launches"] > before["launches"] and snap["launches_completed"] == snap["launches"] - snap["in_flight"]
    assert snap["executions"] == {"branchy": 3}
    assert snap["bytes_copied"] == {"H2D": 3 * x.nbytes, "D2H": 3 * 8 * 64 * 4}
    hist = snap["execution_latency_seconds"]["branchy"]
    assert hist["count"] == 3 and hist["buckets"][-1] == (float("inf"), 3)
    assert 'aioge_execution_latency_seconds_count{model="branchy"} 3.0' in text
    assert 'aioge_bytes_copied_total{direction="h2d"}' in text and "aioge_launches_total" in text
    assert _trace.hub is None


async def test_compile_logs_its_steps(dev, compiled, caplog):
    with caplog.at_level(logging.DEBUG, logger="aioge"):
        await compiled(aioge.load_onnx(branchy()))
    lines = [r.getMessage() for r in caplog.records if r.name == "aioge"]
    for step in ("infer_shapes", "fold_constants", "fuse", "plan", "lower", "load"):
        assert any(line.startswith(f"compile branchy: {step} ") and line.endswith(" ms") for line in lines), step
    assert any("in all" in line and "nodes in" in line for line in lines)


def test_import_prints_nothing():
    p = subprocess.run([sys.executable, "-c", "import aioge, aioge.cli, aioge.profiler, aioge.metrics"],
                       capture_output=True, text=True, timeout=120)  # fmt: skip
    assert p.returncode == 0 and p.stdout == "" and p.stderr == ""


async def test_event_timestamp_and_timed_graph_calls(dev, stream):
    """The two runtime calls the profiler uses, their errors included."""
    us = ffi.new("uint64_t *")
    t0 = time.monotonic_ns() // 1000
    ev = stream.record_event()
    await ev.wait()
    assert lib.aclrtEventGetTimestamp(ev._handle, us) == 0
    assert t0 <= us[0] <= time.monotonic_ns() // 1000  # the host runtime's clock is the host's
    assert lib.aclrtEventGetTimestamp(ev._handle, ffi.NULL) == 100000
    _native.recent_error()
    ev.close()
    p = ffi.new("aclrtEvent *")
    assert lib.aclrtCreateEvent(p) == 0
    assert lib.aclrtEventGetTimestamp(p[0], us) == 507006  # never recorded: not complete
    assert "complete" in _native.recent_error()
    lib.aclrtDestroyEvent(p[0])
    model = await dev.compile(aioge.load_onnx(branchy()))
    try:
        n = ffi.new("int32_t *")
        assert lib.aiogeGraphGetNodeCount(model._handle, 0, n) == 0 and n[0] > 1
        times = ffi.new("uint64_t[]", 2 * n[0])
        x, y = stream.upload(np.ones((8, 64), np.float32)), stream.empty((8, 64))
        await stream.synchronize()
        arena = model._arena(model._flight.admit())
        ins = ffi.new("void *[]", [x._memory().ptr] + model._weight_ptrs())
        outs = ffi.new("void *[]", [y._memory().ptr])
        args = (model._handle, 0, arena.ptr, len(model._weight_at) + 1, ins, 1, outs, stream._handle)
        assert lib.aiogeGraphExecuteTimedAsync(*args, times, 2 * n[0] - 1) == 100000  # too small
        assert "needs" in _native.recent_error()
        assert lib.aiogeGraphExecuteTimedAsync(*args, ffi.NULL, 0) == 100000
        _native.recent_error()
        t0 = time.monotonic_ns()
        assert lib.aiogeGraphExecuteTimedAsync(*args, times, 2 * n[0]) == 0
        await stream.synchronize()
        got = list(times)
        assert all(t0 <= a <= b <= time.monotonic_ns() for a, b in zip(got[::2], got[1::2]))
        assert all(b <= a for b, a in zip(got[1::2], got[2::2]))  # nodes run one after another
        ref = await model.execute({"x": np.ones((8, 64), np.float32)})
        assert np.array_equal(await y.numpy(), ref["y"])
    finally:
        await model.aclose()
