"""The host runtime's ACL semantics, driven through the raw C ABI."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time

import numpy as np
import pytest

from aioge import _native
from aioge._native import ffi, lib
from tests.support.edges import OVERSIZED_SHAPES
from tests.support.rawacl import D2D, D2H, DEFAULT, H2D, H2H, raw_runtime

pytestmark = pytest.mark.abi


@pytest.fixture
def rt():
    with raw_runtime() as r:
        yield r


def new_stream():
    p = ffi.new("aclrtStream *")
    _native.check(lib.aclrtCreateStream(p), "aclrtCreateStream")
    return p[0]


def gate(stream, timeout_ms=10_000):
    g = ffi.new("uint64_t *")
    _native.check(lib.aiogeHostLaunchGate(stream, timeout_ms, g), "gate")
    return g[0]


# ---------------------------------------------------------------- init, devices, contexts
def test_init_is_reference_counted_and_double_finalize_fails():
    assert lib.aclInit(ffi.NULL) == 0
    assert lib.aclInit(ffi.NULL) == 100002  # ACL_ERROR_REPEAT_INITIALIZE
    assert lib.aclFinalize() == 0
    assert lib.aclFinalize() == 100037  # ACL_ERROR_REPEAT_FINALIZE
    assert "aclInit" in _native.recent_error()


def test_calls_need_init_and_a_context():
    assert lib.aclrtSetDevice(0) == 100001  # not initialised
    _native.recent_error()
    assert lib.aclInit(ffi.NULL) == 0
    try:
        ctx = ffi.new("aclrtContext *")
        # a fresh thread has no current context
        out = {}

        def worker():
            p = ffi.new("aclrtStream *")
            out["rc"] = lib.aclrtCreateStream(p)
            out["msg"] = _native.recent_error()

        t = threading.Thread(target=worker)
        t.start()
        t.join()
        assert out["rc"] == 107002 and "context" in out["msg"]
        assert lib.aclrtSetDevice(99) == 107001
        _native.recent_error()
        assert lib.aclrtCreateContext(ctx, 0) == 0
        got = ffi.new("aclrtContext *")
        assert lib.aclrtGetCurrentContext(got) == 0 and got[0] == ctx[0]
        dev = ffi.new("int32_t *")
        assert lib.aclrtGetDevice(dev) == 0 and dev[0] == 0
        assert lib.aclrtDestroyContext(ctx[0]) == 0
        assert lib.aclrtDestroyContext(ctx[0]) == 200005  # no longer live
        _native.recent_error()
        assert lib.aclrtSetCurrentContext(ctx[0]) == 200005
        _native.recent_error()
        n = ffi.new("uint32_t *")
        assert lib.aclrtGetDeviceCount(n) == 0 and n[0] == 1
    finally:
        lib.aclFinalize()
        _native.forget_context()


def test_device_count_is_configurable():
    code = "from aioge._native import ffi, lib; n = ffi.new('uint32_t *'); lib.aclrtGetDeviceCount(n); print(n[0])"
    out = subprocess.run([sys.executable, "-c", code], env={**os.environ, "AIOGE_HOST_DEVICE_COUNT": "4"},
                         capture_output=True, text=True, check=True)  # fmt: skip
    assert out.stdout.strip() == "4"


def test_stream_of_another_context_is_refused(rt):
    ctx = ffi.new("aclrtContext *")
    _native.check(lib.aclrtCreateContext(ctx, 0), "ctx")  # now current
    _native.forget_context()
    try:
        a = rt.to_device(np.ones(4, np.float32))
        rc = rt.add(a, a, a, (4,))  # rt.stream belongs to the default context
        assert rc == 107003, _native.recent_error()
        assert "context" in _native.recent_error() or True
    finally:
        lib.aclrtDestroyContext(ctx[0])
        lib.aclrtSetDevice(0)
        lib.aclrtResetDevice(0)
        _native.forget_context()


def test_recent_error_is_per_thread_cleared_on_read_and_null_when_empty(rt):
    assert lib.aclGetRecentErrMsg() == ffi.NULL
    assert lib.aclrtMalloc(ffi.new("void **"), 0, 0) == 100000
    seen = {}
    t = threading.Thread(target=lambda: seen.setdefault("other", lib.aclGetRecentErrMsg() == ffi.NULL))
    t.start()
    t.join()
    assert seen["other"] is True  # another thread does not see it
    msg = ffi.string(lib.aclGetRecentErrMsg()).decode()
    assert "aclrtMalloc" in msg and "100000" in msg
    assert lib.aclGetRecentErrMsg() == ffi.NULL  # cleared


# ---------------------------------------------------------------------------------- streams
def test_stream_runs_tasks_in_fifo_order(rt):
    x = rt.to_device(np.zeros(64, np.float32))
    one = rt.to_device(np.ones(64, np.float32))
    for _ in range(500):  # each add reads the previous one's result
        assert rt.add(x, one, x, (64,)) == 0
    assert rt.sync() == 0
    np.testing.assert_array_equal(rt.to_host(x, (64,), "float32"), np.full(64, 500, np.float32))


def test_streams_are_independent_and_events_order_them_without_host_wait(rt):
    a, b = rt.stream, new_stream()
    try:
        x = rt.to_device(np.zeros(8, np.float32))
        one = rt.to_device(np.ones(8, np.float32))
        y = rt.malloc(32)
        g = gate(a)
        assert rt.add(x, one, x, (8,), stream=a) == 0  # x = 1, held behind the gate
        ev = ffi.new("aclrtEvent *")
        assert lib.aclrtCreateEvent(ev) == 0
        assert lib.aclrtRecordEvent(ev[0], a) == 0
        t0 = time.perf_counter()
        assert lib.aclrtStreamWaitEvent(b, ev[0]) == 0
        assert rt.add(x, one, y, (8,), stream=b) == 0  # y = x + 1, must see x = 1
        assert time.perf_counter() - t0 < 5  # the host did not wait for the gate (it times out at 10 s)
        st = ffi.new("aclrtStreamStatus *")
        assert lib.aclrtStreamQuery(b, st) == 0 and st[0] == 1  # NOT_READY: b waits on a
        assert lib.aiogeHostOpenGate(g) == 0
        assert rt.sync(b) == 0
        np.testing.assert_array_equal(rt.to_host(y, (8,), "float32"), np.full(8, 2, np.float32))
        assert lib.aclrtStreamQuery(b, st) == 0 and st[0] == 0
        assert lib.aclrtDestroyEvent(ev[0]) == 0
    finally:
        lib.aclrtDestroyStream(b)


def test_sync_with_timeout_returns_timeout_code_on_a_long_queue(rt):
    g = gate(rt.stream)
    for _ in range(10):
        assert lib.aiogeHostLaunchDelay(rt.stream, 100) == 0
    t0 = time.perf_counter()
    assert lib.aclrtSynchronizeStreamWithTimeout(rt.stream, 50) == 507046
    assert 0.04 < time.perf_counter() - t0 < 5
    assert "did not complete" in _native.recent_error()
    assert lib.aclrtSynchronizeStreamWithTimeout(rt.stream, -2) == 107000
    _native.recent_error()
    assert lib.aiogeHostOpenGate(g) == 0
    assert lib.aclrtSynchronizeStreamWithTimeout(rt.stream, 5000) == 0


def test_sync_timeout_zero_polls_and_minus_one_waits_for_ever(rt):
    # acl.h: 0 checks whether the work is already complete, -1 waits without a limit
    ev = ffi.new("aclrtEvent *")
    assert lib.aclrtCreateEvent(ev) == 0
    try:
        assert lib.aclrtSynchronizeStreamWithTimeout(rt.stream, 0) == 0  # idle: complete
        g = gate(rt.stream)
        assert lib.aclrtRecordEvent(ev[0], rt.stream) == 0
        assert lib.aclrtSynchronizeStreamWithTimeout(rt.stream, 0) == 507046  # busy: the timeout code at once
        assert "within 0 ms" in _native.recent_error()
        assert lib.aclrtSynchronizeEventWithTimeout(ev[0], 0) == 507047
        _native.recent_error()
        rcs = {}
        ctx = ffi.new("aclrtContext *")
        assert lib.aclrtGetCurrentContext(ctx) == 0

        def wait(name, fn):
            assert lib.aclrtSetCurrentContext(ctx[0]) == 0  # a stream is used from its context
            rcs[name] = fn()

        forever = {
            "stream": lambda: lib.aclrtSynchronizeStreamWithTimeout(rt.stream, -1),
            "event": lambda: lib.aclrtSynchronizeEventWithTimeout(ev[0], -1),
        }
        waiters = [threading.Thread(target=wait, args=item) for item in forever.items()]
        for t in waiters:
            t.start()
        for t in waiters:
            t.join(0.3)
        assert rcs == {} and all(t.is_alive() for t in waiters)  # still waiting behind the gate
        assert lib.aiogeHostOpenGate(g) == 0
        for t in waiters:
            t.join(10)
        assert rcs == {"stream": 0, "event": 0}
        # a failed task comes back through either form, once
        x = rt.to_device(np.ones(4, np.float32))
        out = rt.malloc(16)
        for timeout in (-1, 0):
            assert lib.aiogeHostInjectFailure(rt.stream, 1, 507015) == 0
            assert rt.add(x, x, out, (4,)) == 0
            deadline = time.monotonic() + 10
            while (rc := lib.aclrtSynchronizeStreamWithTimeout(rt.stream, timeout)) == 507046:
                assert time.monotonic() < deadline
                _native.recent_error()
            assert rc == 507015 and "injected failure" in _native.recent_error()
            assert lib.aclrtSynchronizeStreamWithTimeout(rt.stream, timeout) == 0
    finally:
        lib.aclrtDestroyEvent(ev[0])


def test_shape_times_itemsize_overflow_is_a_coded_error(rt):
    x = rt.to_device(np.ones(4, np.float32))
    out = rt.malloc(16)
    d4 = rt.desc("float32", (4,))
    for dims, what in zip(OVERSIZED_SHAPES, ("byte size overflows", "element count overflows"), strict=True):
        big = rt.desc("float32", dims)  # a desc is metadata: creating it is fine
        assert lib.aclGetTensorDescSize(big) == 0  # its byte size does not fit a size_t
        assert rt.op("Relu", [(d4, rt.buf(x, 16))], [(big, rt.buf(out, 16))]) == 100000
        assert what in _native.recent_error()
        assert rt.op("Relu", [(big, rt.buf(x, 16))], [(d4, rt.buf(out, 16))]) == 100000
        assert what in _native.recent_error()
    assert lib.aclGetTensorDescElementCount(rt.desc("float32", (2**62,))) == 2**62
    assert rt.op("Relu", [(d4, rt.buf(x, 16))], [(d4, rt.buf(out, 16))]) == 0
    assert rt.sync() == 0
    np.testing.assert_array_equal(rt.to_host(out, (4,), "float32"), np.ones(4, np.float32))


def test_failed_task_error_surfaces_at_next_sync_and_stream_stays_usable(rt):
    x = rt.to_device(np.ones(4, np.float32))
    out = rt.malloc(16)
    assert lib.aiogeHostInjectFailure(rt.stream, 1, 507015) == 0
    assert rt.add(x, x, out, (4,)) == 0  # the launch itself succeeds
    assert rt.sync() == 507015
    assert "injected failure" in _native.recent_error()
    assert rt.sync() == 0  # reported once
    assert rt.add(x, x, out, (4,)) == 0
    assert rt.sync() == 0
    np.testing.assert_array_equal(rt.to_host(out, (4,), "float32"), np.full(4, 2, np.float32))


def test_stop_on_failure_skips_later_work_until_sync(rt):
    assert lib.aclrtSetStreamFailureMode(rt.stream, 1) == 0
    x = rt.to_device(np.zeros(4, np.float32))
    one = rt.to_device(np.ones(4, np.float32))
    assert lib.aiogeHostInjectFailure(rt.stream, 1, 507015) == 0
    assert rt.add(x, one, x, (4,)) == 0  # fails
    assert rt.add(x, one, x, (4,)) == 0  # skipped
    assert rt.sync() == 507015
    _native.recent_error()
    assert rt.add(x, one, x, (4,)) == 0  # runs again after the error was reported
    assert rt.sync() == 0
    np.testing.assert_array_equal(rt.to_host(x, (4,), "float32"), np.ones(4, np.float32))


def test_default_stream_is_null(rt):
    x = rt.to_device(np.ones(3, np.float32))
    out = rt.malloc(12)
    assert rt.add(x, x, out, (3,), stream=ffi.NULL) == 0
    assert lib.aclrtSynchronizeStream(ffi.NULL) == 0
    np.testing.assert_array_equal(rt.to_host(out, (3,), "float32"), np.full(3, 2, np.float32))
    assert lib.aclrtDestroyStream(ffi.NULL) == 100000
    _native.recent_error()


def test_stale_and_foreign_handles_are_refused_not_dereferenced(rt):
    s = new_stream()
    assert lib.aclrtDestroyStream(s) == 0
    assert lib.aclrtSynchronizeStream(s) == 200005
    assert lib.aclrtDestroyStream(s) == 200005
    bogus = ffi.cast("void *", 0x1234)
    assert lib.aclrtSynchronizeStream(bogus) == 200005
    assert lib.aclrtRecordEvent(bogus, rt.stream) == 200005
    assert lib.aclDestroyDataBuffer(ffi.cast("aclDataBuffer *", 0x40)) == 200005
    _native.recent_error()


# ---------------------------------------------------------------------------------- events
def test_event_query_sync_and_elapsed_time(rt):
    ev0, ev1 = ffi.new("aclrtEvent *"), ffi.new("aclrtEvent *")
    assert lib.aclrtCreateEventWithFlag(ev0, 0x1 | 0x8) == 0
    assert lib.aclrtCreateEventWithFlag(ev1, 0x1 | 0x8) == 0
    st = ffi.new("aclrtEventRecordedStatus *")
    assert lib.aclrtQueryEventStatus(ev0[0], st) == 0 and st[0] == 1  # never recorded: complete
    g = gate(rt.stream)
    assert lib.aclrtRecordEvent(ev0[0], rt.stream) == 0
    assert lib.aiogeHostLaunchDelay(rt.stream, 20_000) == 0
    assert lib.aclrtRecordEvent(ev1[0], rt.stream) == 0
    assert lib.aclrtQueryEventStatus(ev1[0], st) == 0 and st[0] == 0
    ms = ffi.new("float *")
    assert lib.aclrtEventElapsedTime(ms, ev0[0], ev1[0]) == 507006  # not complete yet
    assert lib.aclrtSynchronizeEventWithTimeout(ev1[0], 20) == 507047
    _native.recent_error()
    assert lib.aiogeHostOpenGate(g) == 0
    assert lib.aclrtSynchronizeEvent(ev1[0]) == 0
    assert lib.aclrtEventElapsedTime(ms, ev0[0], ev1[0]) == 0
    assert 15 <= ms[0] < 1000
    for e in (ev0, ev1):
        assert lib.aclrtDestroyEvent(e[0]) == 0


def test_event_flags_are_checked(rt):
    ev = ffi.new("aclrtEvent *")
    assert lib.aclrtCreateEventWithFlag(ev, 0x8) == 0  # timing only
    assert lib.aclrtStreamWaitEvent(rt.stream, ev[0]) == 100000  # needs ACL_EVENT_SYNC
    assert lib.aclrtCreateEventWithFlag(ffi.new("aclrtEvent *"), 0x1000) == 100000
    _native.recent_error()
    assert lib.aclrtDestroyEvent(ev[0]) == 0


def test_event_sync_reports_the_error_of_the_work_it_captured(rt):
    x = rt.to_device(np.ones(4, np.float32))
    out = rt.malloc(16)
    evs = [ffi.new("aclrtEvent *") for _ in range(3)]
    for e in evs:
        assert lib.aclrtCreateEvent(e) == 0
    assert rt.add(x, x, out, (4,)) == 0
    assert lib.aclrtRecordEvent(evs[0][0], rt.stream) == 0
    assert lib.aiogeHostInjectFailure(rt.stream, 1, 507015) == 0
    assert rt.add(x, x, out, (4,)) == 0
    assert lib.aclrtRecordEvent(evs[1][0], rt.stream) == 0
    assert rt.add(x, x, out, (4,)) == 0
    assert lib.aclrtRecordEvent(evs[2][0], rt.stream) == 0
    assert lib.aclrtSynchronizeEvent(evs[0][0]) == 0
    assert lib.aclrtSynchronizeEvent(evs[1][0]) == 507015
    assert lib.aclrtSynchronizeEvent(evs[2][0]) == 0  # an unrelated later launch is clean
    _native.recent_error()
    assert rt.sync() == 507015  # and the stream's next synchronize reports it too
    _native.recent_error()
    for e in evs:
        lib.aclrtDestroyEvent(e[0])


def test_event_destroyed_before_completion_is_safe(rt):
    g = gate(rt.stream)
    ev = ffi.new("aclrtEvent *")
    assert lib.aclrtCreateEvent(ev) == 0
    assert lib.aclrtRecordEvent(ev[0], rt.stream) == 0
    assert lib.aclrtDestroyEvent(ev[0]) == 0  # the queued marker keeps it alive
    assert lib.aiogeHostOpenGate(g) == 0
    assert rt.sync() == 0


# ---------------------------------------------------------------------------------- memory
def test_memcpy_kinds_are_validated(rt):
    host = np.zeros(16, np.uint8)
    hp = _native.host_ptr(host)
    dev = rt.malloc(16)
    assert lib.aclrtMemcpy(hp, 16, hp, 16, H2D) == 100000  # dst must be device
    assert "HOST_TO_DEVICE" in _native.recent_error()
    assert lib.aclrtMemcpy(hp, 16, hp, 16, D2H) == 100000  # src must be device
    assert lib.aclrtMemcpy(dev, 16, hp, 16, D2H) == 100000
    assert lib.aclrtMemcpy(dev, 16, hp, 16, D2D) == 100000
    assert lib.aclrtMemcpy(dev, 16, dev, 16, H2H) == 100000
    assert lib.aclrtMemcpy(dev, 16, hp, 17, H2D) == 100000  # count > destMax
    assert lib.aclrtMemcpy(dev, 32, hp, 17, H2D) == 100000  # overruns the 16-byte block
    assert lib.aclrtMemcpy(dev, 16, hp, 16, 9) == 100000  # unknown kind
    assert lib.aclrtMemcpy(ffi.NULL, 16, hp, 16, H2D) == 100000
    _native.recent_error()
    host[:] = np.arange(16)
    assert lib.aclrtMemcpy(dev, 16, hp, 16, DEFAULT) == 0  # direction from the addresses
    back = np.zeros(16, np.uint8)
    assert lib.aclrtMemcpy(_native.host_ptr(back), 16, dev, 16, DEFAULT) == 0
    np.testing.assert_array_equal(back, host)
    assert lib.aclrtMemcpy(hp, 16, hp, 0, H2D) == 0  # count 0 is a no-op
    assert lib.aclrtMemcpyAsync(_native.host_ptr(back), 16, hp, 16, H2H, rt.stream) == 207000
    _native.recent_error()


def test_pageable_async_source_may_be_reused_at_once(rt):
    dev = rt.malloc(4096)
    g = gate(rt.stream)
    src = np.full(1024, 7, np.float32)
    assert lib.aclrtMemcpyAsync(dev, 4096, _native.host_ptr(src), 4096, H2D, rt.stream) == 0
    src[:] = -1  # staged at the call, as ACL does for pageable memory
    assert lib.aiogeHostOpenGate(g) == 0
    assert rt.sync() == 0
    np.testing.assert_array_equal(rt.to_host(dev, (1024,), "float32"), np.full(1024, 7, np.float32))


def test_pinned_async_copy_and_memset(rt):
    hp = ffi.new("void **")
    assert lib.aclrtMallocHost(hp, 64) == 0
    dev = rt.malloc(64)
    assert lib.aclrtMemsetAsync(dev, 64, 0xAB, 64, rt.stream) == 0
    assert lib.aclrtMemcpyAsync(hp[0], 64, dev, 64, D2H, rt.stream) == 0
    assert rt.sync() == 0
    assert bytes(ffi.buffer(hp[0], 64)) == b"\xab" * 64
    assert lib.aclrtMemset(dev, 64, 1, 65) == 100000  # count > maxCount
    assert lib.aclrtMemsetAsync(hp[0], 64, 0, 64, rt.stream) == 100000  # not device memory
    assert lib.aclrtFree(hp[0]) == 100000  # pinned memory is not aclrtFree'd
    _native.recent_error()
    assert lib.aclrtFreeHost(hp[0]) == 0
    assert lib.aclrtFreeHost(hp[0]) == 100000
    _native.recent_error()


def test_free_of_memory_used_by_queued_work_is_deferred(rt):
    x = rt.to_device(np.ones(1024, np.float32))
    out = rt.malloc(4096)
    g = gate(rt.stream)
    assert rt.add(x, x, out, (1024,)) == 0
    rt.free(x)  # queued work still uses it
    assert _native.counters()["deferred_frees"] == 1
    assert lib.aiogeHostOpenGate(g) == 0
    assert rt.sync() == 0
    assert _native.counters()["deferred_frees"] == 0
    np.testing.assert_array_equal(rt.to_host(out, (1024,), "float32"), np.full(1024, 2, np.float32))


OOM_SCRIPT = """
from aioge._native import ffi, lib
assert lib.aclInit(ffi.NULL) == 0 and lib.aclrtSetDevice(0) == 0
free, total = ffi.new('size_t *'), ffi.new('size_t *')
assert lib.aclrtGetMemInfo(1, free, total) == 0 and total[0] == 1 << 20, total[0]
a, b = ffi.new('void **'), ffi.new('void **')
assert lib.aclrtMalloc(a, 600_000, 0) == 0
rc = lib.aclrtMalloc(b, 600_000, 0)
msg = ffi.string(lib.aclGetRecentErrMsg()).decode()
assert lib.aclrtFree(a[0]) == 0
assert lib.aclrtMalloc(b, 600_000, 0) == 0
print(rc, msg)
"""


def test_out_of_memory_at_the_configured_capacity():
    out = subprocess.run([sys.executable, "-c", OOM_SCRIPT], env={**os.environ, "AIOGE_HOST_DEVICE_MEMORY": "1M"},
                         capture_output=True, text=True)  # fmt: skip
    assert out.returncode == 0, out.stderr
    code, msg = out.stdout.split(" ", 1)
    assert code == "207001" and "out of memory" in msg


# ------------------------------------------------------------------------------- callbacks
class Reporter:
    """A user thread that processes callbacks, as ACL's sample does."""

    def __init__(self, stream):
        self.stream = stream
        self.ready = threading.Event()
        self.stop = False
        self.codes = []
        self.thread = threading.Thread(target=self.run, daemon=True)
        ctx = ffi.new("aclrtContext *")
        _native.check(lib.aclrtGetCurrentContext(ctx), "ctx")
        self.ctx = ctx[0]
        self.thread.start()
        self.ready.wait()
        _native.check(lib.aclrtSubscribeReport(self.tid, stream), "aclrtSubscribeReport")

    def run(self):
        lib.aclrtSetCurrentContext(self.ctx)
        self.tid = threading.get_ident()
        self.ready.set()
        while not self.stop:
            rc = lib.aclrtProcessReport(20)
            if rc not in (0, 507012, 107012):
                self.codes.append(rc)
            _native.recent_error()

    def close(self):
        _native.check(lib.aclrtUnSubscribeReport(self.tid, self.stream), "aclrtUnSubscribeReport")
        self.stop = True
        self.thread.join()


def test_callbacks_block_and_no_block(rt):
    assert lib.aclrtLaunchCallback(ffi.NULL, ffi.NULL, 0, rt.stream) == 100000
    calls = []
    release = threading.Event()

    @ffi.callback("void(void *)")
    def slow(ud):
        calls.append(("start", int(ffi.cast("intptr_t", ud)), threading.get_ident()))
        release.wait(5)
        calls.append(("end", int(ffi.cast("intptr_t", ud))))

    noop = ffi.callback("void(void *)", lambda ud: calls.append(("quick", int(ffi.cast("intptr_t", ud)))))
    rc = lib.aclrtLaunchCallback(noop, ffi.NULL, 1, rt.stream)
    assert rc == 107015  # no report thread subscribed
    _native.recent_error()
    rep = Reporter(rt.stream)
    try:
        assert lib.aclrtSubscribeReport(rep.tid, rt.stream) == 100033  # twice
        _native.recent_error()
        # NO_BLOCK: the stream runs on while the callback is still inside fn
        assert lib.aclrtLaunchCallback(slow, ffi.cast("void *", 1), 0, rt.stream) == 0
        assert lib.aclrtSynchronizeStreamWithTimeout(rt.stream, 2000) == 0
        assert ("end", 1) not in calls
        release.set()
        deadline = time.time() + 5
        while ("end", 1) not in calls and time.time() < deadline:
            time.sleep(0.005)
        assert calls[0][2] == rep.tid  # ran on the subscribed thread
        # BLOCK: later tasks wait for the callback to return
        release.clear()
        assert lib.aclrtLaunchCallback(slow, ffi.cast("void *", 2), 1, rt.stream) == 0
        assert lib.aclrtLaunchCallback(noop, ffi.cast("void *", 3), 1, rt.stream) == 0
        assert lib.aclrtSynchronizeStreamWithTimeout(rt.stream, 100) == 507046
        _native.recent_error()
        assert ("quick", 3) not in calls
        release.set()
        assert lib.aclrtSynchronizeStreamWithTimeout(rt.stream, 5000) == 0
        assert calls.index(("end", 2)) < calls.index(("quick", 3))
        assert _native.counters()["subscriptions"] == 1
    finally:
        release.set()
        rep.close()
    assert rep.codes == []
    assert lib.aclrtUnSubscribeReport(rep.tid, rt.stream) == 107011
    _native.recent_error()


def test_process_report_rules(rt):
    assert lib.aclrtProcessReport(0) == 100000
    assert lib.aclrtProcessReport(-2) == 100000
    assert lib.aclrtProcessReport(10) == 107012  # this thread is not subscribed
    tid = threading.get_ident()
    assert lib.aclrtSubscribeReport(tid, rt.stream) == 0
    t0 = time.perf_counter()
    assert lib.aclrtProcessReport(30) == 507012  # nothing arrived
    assert time.perf_counter() - t0 >= 0.025
    assert lib.aclrtUnSubscribeReport(tid, rt.stream) == 0
    _native.recent_error()


# ------------------------------------------------------------------------- descs and attrs
def test_tensor_desc_round_trip():
    dims = ffi.new("int64_t[]", [2, 3, 4])
    d = lib.aclCreateTensorDesc(1, 3, dims, 0)  # float16, NCHW
    try:
        assert lib.aclGetTensorDescType(d) == 1
        assert lib.aclGetTensorDescFormat(d) == 0
        assert lib.aclGetTensorDescNumDims(d) == 3
        assert lib.aclGetTensorDescElementCount(d) == 24
        assert lib.aclGetTensorDescSize(d) == 48
        v = ffi.new("int64_t *")
        assert lib.aclGetTensorDescDimV2(d, 2, v) == 0 and v[0] == 4
        assert lib.aclGetTensorDescDimV2(d, 3, v) == 100000
        assert lib.aclGetTensorDescDim(d, 9) == -1
        lib.aclSetTensorDescName(d, b"x")
        assert ffi.string(lib.aclGetTensorDescName(d)) == b"x"
        assert lib.aclSetTensorPlaceMent(d, 1) == 0
        assert lib.aclSetTensorPlaceMent(d, 7) == 100000
        data = np.zeros(24, np.float16)
        assert lib.aclSetTensorConst(d, _native.host_ptr(data), 0) == 100000
        assert lib.aclSetTensorConst(d, _native.host_ptr(data), 48) == 0
    finally:
        lib.aclDestroyTensorDesc(d)
    _native.recent_error()
    assert lib.aclCreateTensorDesc(0, -1, ffi.NULL, 2) == ffi.NULL
    assert lib.aclCreateTensorDesc(0, 2, ffi.NULL, 2) == ffi.NULL
    assert lib.aclCreateTensorDesc(55, 0, ffi.NULL, 2) == ffi.NULL  # unknown dtype
    assert lib.aclCreateTensorDesc(0, 1, ffi.new("int64_t[]", [-3]), 2) == ffi.NULL
    _native.recent_error()
    # a destroyed desc reads as NULL, never dereferenced
    assert lib.aclGetTensorDescType(d) == -1
    assert lib.aclGetTensorDescSize(ffi.NULL) == 0


def test_data_buffer_round_trip_and_type_sizes():
    x = np.zeros(8, np.uint8)
    b = lib.aclCreateDataBuffer(_native.host_ptr(x), 8)
    assert lib.aclGetDataBufferAddr(b) == _native.host_ptr(x)
    assert lib.aclGetDataBufferSizeV2(b) == 8
    assert lib.aclUpdateDataBuffer(b, ffi.NULL, 0) == 0
    assert lib.aclGetDataBufferSizeV2(b) == 0
    assert lib.aclUpdateDataBuffer(b, ffi.NULL, 4) == 100000
    assert lib.aclDestroyDataBuffer(b) == 0
    assert lib.aclDestroyDataBuffer(b) == 200005
    assert lib.aclCreateDataBuffer(ffi.NULL, 4) == ffi.NULL
    _native.recent_error()
    sizes = {0: 4, 1: 2, 2: 1, 3: 4, 4: 1, 9: 8, 11: 8, 12: 1, 13: 0, 27: 2, -1: 0, 999: 8}
    for dt, n in sizes.items():
        assert lib.aclDataTypeSize(dt) == n, dt


def test_every_attr_setter(rt):
    a = lib.aclopCreateAttr()
    try:
        n = b"name"
        assert lib.aclopSetAttrBool(a, n, 1) == 0
        assert lib.aclopSetAttrInt(a, n, -5) == 0  # same name replaces
        assert lib.aclopSetAttrFloat(a, b"f", 1.5) == 0
        assert lib.aclopSetAttrString(a, b"s", b"NCHW") == 0
        assert lib.aclopSetAttrDataType(a, b"dt", 3) == 0
        assert lib.aclopSetAttrDataType(a, b"dt", 55) == 100000
        assert lib.aclopSetAttrListBool(a, b"lb", 2, ffi.new("uint8_t[]", [1, 0])) == 0
        assert lib.aclopSetAttrListInt(a, b"li", 3, ffi.new("int64_t[]", [1, 2, 3])) == 0
        assert lib.aclopSetAttrListFloat(a, b"lf", 1, ffi.new("float[]", [0.5])) == 0
        strs = [ffi.new("char[]", b"a"), ffi.new("char[]", b"bc")]
        assert lib.aclopSetAttrListString(a, b"ls", 2, ffi.new("char *[]", strs)) == 0
        assert lib.aclopSetAttrListInt(a, b"li", 2, ffi.NULL) == 100000
        assert lib.aclopSetAttrInt(a, ffi.NULL, 1) == 100000
        assert lib.aclopSetAttrInt(ffi.NULL, n, 1) == 100000
        assert lib.aclopSetAttrString(a, b"s", ffi.NULL) == 100000
        _native.recent_error()
        # attrs reach the kernel: Cast reads dst_type
        x = rt.to_device(np.array([1.7, -2.5], np.float32))
        out = rt.malloc(8)
        c = lib.aclopCreateAttr()
        assert lib.aclopSetAttrInt(c, b"dst_type", 3) == 0
        rc = rt.op("Cast", [(rt.desc("float32", (2,)), rt.buf(x, 8))], [(rt.desc("int32", (2,)), rt.buf(out, 8))], c)
        lib.aclopDestroyAttr(c)
        assert rc == 0 and rt.sync() == 0
        np.testing.assert_array_equal(rt.to_host(out, (2,), "int32"), [1, -2])
    finally:
        lib.aclopDestroyAttr(a)


# --------------------------------------------------------------------- aclopCompileAndExecute
def test_op_validation_codes(rt):
    x = rt.to_device(np.ones(6, np.float32))
    out = rt.malloc(64)
    d23, d32, d24 = rt.desc("float32", (2, 3)), rt.desc("float32", (3, 2)), rt.desc("float32", (2, 4))
    bx, bo = rt.buf(x, 24), rt.buf(out, 64)
    assert rt.op("Add", [(d23, bx), (d32, bx)], [(d23, bo)]) == 100021  # do not broadcast
    assert "do not broadcast" in _native.recent_error()
    assert rt.op("Add", [(d23, bx), (d23, bx)], [(d24, bo)]) == 100022  # wrong output shape
    assert "[2,4]" in _native.recent_error()
    assert rt.op("Add", [(d23, bx)], [(d23, bo)]) == 100021  # wrong count
    assert rt.op("NoSuchOp", [(d23, bx)], [(d23, bo)]) == 100024
    assert rt.op("Cast", [(d23, bx)], [(d23, bo)]) == 100023  # missing dst_type
    di = rt.desc("int32", (2, 3))
    assert rt.op("Add", [(d23, bx), (di, bx)], [(d23, bo)]) == 100026  # mixed dtypes
    dyn = rt.desc("float32", (2, -1))
    assert rt.op("Relu", [(dyn, bx)], [(dyn, bo)]) == 148050  # dynamic dim
    host = np.ones(6, np.float32)
    bh = rt.buf(_native.host_ptr(host), 24)
    assert rt.op("Relu", [(d23, bh)], [(d23, bo)]) == 100000  # host pointer where device is needed
    assert "not device memory" in _native.recent_error()
    assert rt.op("Relu", [(d23, rt.buf(x, 8))], [(d23, bo)]) == 100000  # buffer smaller than desc
    _native.recent_error()
    # every output empty: success, nothing done
    d0 = rt.desc("float32", (0, 3))
    assert rt.op("Relu", [(d0, rt.buf(ffi.NULL, 0))], [(d0, rt.buf(ffi.NULL, 0))]) == 0
    # the stream is still fine
    assert rt.op("Add", [(d23, bx), (d23, bx)], [(d23, bo)]) == 0
    assert rt.sync() == 0
    np.testing.assert_array_equal(rt.to_host(out, (6,), "float32"), np.full(6, 2, np.float32))


def test_optional_const_and_host_placed_inputs(rt):
    a = rt.to_device(np.arange(6, dtype=np.float32).reshape(2, 3))
    b = rt.to_device(np.ones((3, 2), np.float32))
    out = rt.malloc(16)
    undef = lib.aclCreateTensorDesc(-1, 0, ffi.NULL, -1)
    try:
        none = rt.buf(ffi.NULL, 0)
        rc = rt.op("MatMul", [(rt.desc("float32", (2, 3)), rt.buf(a, 24)), (rt.desc("float32", (3, 2)), rt.buf(b, 24)),
                              (undef, none)], [(rt.desc("float32", (2, 2)), rt.buf(out, 16))])  # fmt: skip
        assert rc == 0, _native.recent_error()
        assert rt.sync() == 0
        np.testing.assert_array_equal(rt.to_host(out, (2, 2), "float32"), [[3, 3], [12, 12]])
    finally:
        lib.aclDestroyTensorDesc(undef)
    # const second operand
    cval = np.array([10, 20, 30], np.float32)
    dc = rt.desc("float32", (3,))
    assert lib.aclSetTensorConst(dc, _native.host_ptr(cval), 12) == 0
    out2 = rt.malloc(24)
    d23 = rt.desc("float32", (2, 3))
    assert rt.op("Add", [(d23, rt.buf(a, 24)), (dc, rt.buf(ffi.NULL, 0))], [(d23, rt.buf(out2, 24))]) == 0
    cval[:] = 0  # the value was copied
    # host-placed second operand
    hval = np.array([1, 2, 3], np.float32)
    dh = rt.desc("float32", (3,))
    assert lib.aclSetTensorPlaceMent(dh, 1) == 0
    out3 = rt.malloc(24)
    hbuf = rt.buf(_native.host_ptr(hval), 12)
    assert rt.op("Add", [(d23, rt.buf(a, 24)), (dh, hbuf)], [(d23, rt.buf(out3, 24))]) == 0
    assert rt.sync() == 0
    base = np.arange(6, dtype=np.float32).reshape(2, 3)
    np.testing.assert_array_equal(rt.to_host(out2, (2, 3), "float32"), base + [10, 20, 30])
    np.testing.assert_array_equal(rt.to_host(out3, (2, 3), "float32"), base + [1, 2, 3])
    # host placement with a device buffer, and a const of the wrong size
    assert rt.op("Add", [(d23, rt.buf(a, 24)), (dh, rt.buf(b, 12))], [(d23, rt.buf(out3, 24))]) == 100000
    bad = rt.desc("float32", (3,))
    assert lib.aclSetTensorConst(bad, _native.host_ptr(hval), 8) == 0
    assert rt.op("Add", [(d23, rt.buf(a, 24)), (bad, rt.buf(ffi.NULL, 0))], [(d23, rt.buf(out3, 24))]) == 100021
    _native.recent_error()


def test_op_cache_hits_misses_and_bound(rt):
    lib.aiogeHostResetOpCache()
    x = rt.to_device(np.ones(4, np.float32))
    out = rt.malloc(32)
    c0 = _native.counters()
    assert rt.add(x, x, out, (4,)) == 0
    assert rt.add(x, x, out, (4,)) == 0  # same signature: hit
    assert rt.add(x, x, out, (2, 2)) == 0  # other shape: miss
    c1 = _native.counters()
    assert c1["op_cache_misses"] - c0["op_cache_misses"] == 2
    assert c1["op_cache_hits"] - c0["op_cache_hits"] == 1
    assert c1["op_cache_entries"] == 2
    # different attrs miss
    d, bx, bo = rt.desc("float32", (4,)), rt.buf(x, 16), rt.buf(out, 32)
    for dt in (3, 3, 9):
        a = rt.attr(dst_type=dt)
        assert rt.op("Cast", [(d, bx)], [(rt.desc({3: "int32", 9: "int64"}[dt], (4,)), bo)], a) == 0
    c2 = _native.counters()
    assert c2["op_cache_misses"] - c1["op_cache_misses"] == 2
    assert c2["op_cache_hits"] - c1["op_cache_hits"] == 1
    assert lib.aclopSetMaxOpQueueNum(2) == 0
    try:
        assert _native.counters()["op_cache_entries"] == 2
        assert rt.add(x, x, out, (1, 4)) == 0
        c3 = _native.counters()
        assert c3["op_cache_entries"] == 2 and c3["op_cache_evictions"] > c2["op_cache_evictions"]
        assert lib.aclopSetMaxOpQueueNum(0) == 100000
        _native.recent_error()
    finally:
        lib.aclopSetMaxOpQueueNum(20000)
    assert rt.sync() == 0


def test_compile_options():
    assert lib.aclSetCompileopt(0, b"force_fp32") == 0
    n = lib.aclGetCompileoptSize(0)
    buf = ffi.new("char[]", n)
    assert lib.aclGetCompileopt(0, buf, n) == 0 and ffi.string(buf) == b"force_fp32"
    assert lib.aclGetCompileopt(0, buf, 2) == 100000
    assert lib.aclSetCompileopt(0, b"nonsense") == 100000
    assert lib.aclSetCompileopt(2, b"x") == 200006  # ACL_AUTO_TUNE_MODE
    assert lib.aclSetCompileopt(99, b"x") == 500000
    assert lib.aclSetCompileopt(0, ffi.NULL) == 100000
    assert lib.aclopSetCompileFlag(1) == 0 and lib.aclopSetCompileFlag(0) == 0
    assert lib.aclopSetCompileFlag(5) == 100000
    _native.recent_error()
