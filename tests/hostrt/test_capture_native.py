"""Stream capture in the host runtime (CANN's aclmdlRI* calls), driven through the raw C ABI.

While a stream captures, what is put on it is recorded instead of run; aclmdlRIExecuteAsync
replays the recording as one stream task.  Illegal calls fail with CANN's codes and invalidate
the capture.
"""

from __future__ import annotations

import threading

import numpy as np
import pytest

from aioge import _native
from aioge._native import ffi, lib
from tests.support.rawacl import D2D, H2D, raw_runtime

GLOBAL, THREAD_LOCAL, RELAXED = 0, 1, 2
NONE, ACTIVE, INVALIDATED = 0, 1, 2
STREAM_CAPTURED, NOT_CAPTURED, MODE_NOT_SUPPORT = 107027, 107029, 107030
CAPTURE_DEPENDENCY, BLOCK_ASYNC, WRONG_THREAD, MODEL_CAPTURED = 107024, 107041, 107038, 107026
INVALIDATED_RC = 507903


@pytest.fixture
def rt():
    with raw_runtime() as r:
        yield r


def begin(rt, mode=RELAXED, stream=None):
    _native.check(lib.aclmdlRICaptureBegin(rt.stream if stream is None else stream, mode), "begin")


def end(rt, stream=None):
    p = ffi.new("aclmdlRI *")
    rc = lib.aclmdlRICaptureEnd(rt.stream if stream is None else stream, p)
    return rc, p[0]


def info(rt, stream=None):
    st, m = ffi.new("aclmdlRICaptureStatus *"), ffi.new("aclmdlRI *")
    _native.check(lib.aclmdlRICaptureGetInfo(rt.stream if stream is None else stream, st, m), "info")
    return st[0], m[0]


def new_stream():
    p = ffi.new("aclrtStream *")
    _native.check(lib.aclrtCreateStream(p), "aclrtCreateStream")
    return p[0]


def captured_models():
    return _native.counters()["captured_models"]


def f32(rt, ptr, n=4):
    return rt.to_host(ptr, (n,), "float32")


def set_f32(ptr, arr):
    arr = np.ascontiguousarray(arr, np.float32)
    _native.check(lib.aclrtMemcpy(ptr, arr.nbytes, _native.host_ptr(arr), arr.nbytes, H2D), "aclrtMemcpy")


def test_capture_records_instead_of_running_and_replays_as_one_task(rt):
    base = captured_models()
    x = rt.to_device(np.arange(4, dtype=np.float32))
    y, z, w = rt.malloc(16), rt.malloc(16), rt.malloc(16)
    set_f32(z, np.zeros(4))
    set_f32(w, np.zeros(4))
    assert info(rt) == (NONE, ffi.NULL)
    begin(rt)
    status, model = info(rt)
    assert status == ACTIVE and model != ffi.NULL
    assert rt.add(x, x, y, (4,)) == 0  # y = 2x
    assert rt.add(y, y, z, (4,)) == 0  # z = 4x
    assert lib.aclrtMemcpyAsync(w, 16, z, 16, D2D, rt.stream) == 0  # w = z
    rc, m = end(rt)
    assert rc == 0 and m == model
    assert info(rt) == (NONE, ffi.NULL)
    executed = _native.counters()["tasks_executed"]
    assert rt.sync() == 0
    np.testing.assert_array_equal(f32(rt, z), np.zeros(4))  # nothing ran
    for k in range(3):  # replay after each input update
        set_f32(x, np.arange(4) + 10 * k)
        assert lib.aclmdlRIExecuteAsync(m, rt.stream) == 0
        assert rt.sync() == 0
        np.testing.assert_array_equal(f32(rt, w), 4 * (np.arange(4) + 10 * k))
    assert _native.counters()["tasks_executed"] - executed == 3  # one stream task per replay
    assert captured_models() == base + 1
    assert lib.aclmdlRIDestroy(m) == 0
    assert captured_models() == base
    assert lib.aclmdlRIDestroy(m) == 200005  # no longer live
    _native.recent_error()


def test_many_replays_in_flight_and_on_two_streams(rt):
    x = rt.to_device(np.ones(4, np.float32))
    acc = rt.to_device(np.zeros(4, np.float32))
    begin(rt)
    assert rt.add(acc, x, acc, (4,)) == 0  # acc += 1, in place
    rc, m = end(rt)
    assert rc == 0
    other = new_stream()
    try:
        for _ in range(50):
            assert lib.aclmdlRIExecuteAsync(m, rt.stream) == 0
            assert lib.aclmdlRIExecuteAsync(m, other) == 0
        assert lib.aclmdlRIDestroy(m) == 0  # queued replays keep it alive
        assert rt.sync() == 0 and rt.sync(other) == 0
        # replays of one model run one at a time: no increment is lost to a race
        np.testing.assert_array_equal(f32(rt, acc), np.full(4, 100, np.float32))
    finally:
        lib.aclrtDestroyStream(other)


def test_pinned_host_copies_are_replayed_from_the_same_host_buffer(rt):
    hp = ffi.new("void **")
    _native.check(lib.aclrtMallocHost(hp, 16), "aclrtMallocHost")
    try:
        host = np.frombuffer(ffi.buffer(hp[0], 16), np.float32)
        dev, out = rt.malloc(16), rt.malloc(16)
        begin(rt)
        assert lib.aclrtMemcpyAsync(dev, 16, hp[0], 16, H2D, rt.stream) == 0
        assert rt.add(dev, dev, out, (4,)) == 0
        rc, m = end(rt)
        assert rc == 0
        for k in range(3):
            host[:] = np.arange(4) * (k + 1)
            assert lib.aclmdlRIExecuteAsync(m, rt.stream) == 0
            assert rt.sync() == 0
            np.testing.assert_array_equal(f32(rt, out), 2 * np.arange(4) * (k + 1))
        assert lib.aclmdlRIDestroy(m) == 0
    finally:
        lib.aclrtFreeHost(hp[0])


def test_a_failing_task_in_a_replay_names_the_task_and_the_stream_goes_on(rt):
    data = rt.to_device(np.arange(4, dtype=np.float32))
    idx = rt.to_device(np.array([3, 2, 1, 0], np.int64))
    out = rt.malloc(16)
    d_f, d_i = rt.desc("float32", (4,)), rt.desc("int64", (4,))
    begin(rt)
    rc = rt.op("GatherElements", [(d_f, rt.buf(data, 16)), (d_i, rt.buf(idx, 32))], [(d_f, rt.buf(out, 16))])
    assert rc == 0
    rc, m = end(rt)
    assert rc == 0
    assert lib.aclmdlRIExecuteAsync(m, rt.stream) == 0
    assert rt.sync() == 0
    np.testing.assert_array_equal(f32(rt, out), [3, 2, 1, 0])
    bad = np.array([0, 9, 0, 0], np.int64)
    _native.check(lib.aclrtMemcpy(idx, 32, _native.host_ptr(bad), 32, H2D), "aclrtMemcpy")
    assert lib.aclmdlRIExecuteAsync(m, rt.stream) == 0
    assert rt.sync() == 507015  # ACL_ERROR_RT_AICORE_EXCEPTION
    msg = _native.recent_error()
    assert "task 1 of 1 failed" in msg and "GatherElements" in msg and "replay 2" in msg
    good = np.array([1, 1, 1, 1], np.int64)
    _native.check(lib.aclrtMemcpy(idx, 32, _native.host_ptr(good), 32, H2D), "aclrtMemcpy")
    assert lib.aclmdlRIExecuteAsync(m, rt.stream) == 0
    assert rt.sync() == 0
    np.testing.assert_array_equal(f32(rt, out), [1, 1, 1, 1])
    assert lib.aclmdlRIDestroy(m) == 0


def test_events_recorded_in_a_capture_are_recorded_by_each_replay(rt):
    ev = ffi.new("aclrtEvent *")
    _native.check(lib.aclrtCreateEvent(ev), "aclrtCreateEvent")
    try:
        x, y = rt.to_device(np.ones(4, np.float32)), rt.malloc(16)
        begin(rt)
        assert rt.add(x, x, y, (4,)) == 0
        assert lib.aclrtRecordEvent(ev[0], rt.stream) == 0
        assert lib.aclrtStreamWaitEvent(rt.stream, ev[0]) == 0  # its own record: ordered already
        rc, m = end(rt)
        assert rc == 0
        status = ffi.new("aclrtEventRecordedStatus *")
        assert lib.aclrtQueryEventStatus(ev[0], status) == 0 and status[0] == 1  # never recorded: complete
        gate = ffi.new("uint64_t *")
        assert lib.aiogeHostLaunchGate(rt.stream, 10_000, gate) == 0
        assert lib.aclmdlRIExecuteAsync(m, rt.stream) == 0
        assert lib.aclrtQueryEventStatus(ev[0], status) == 0 and status[0] == 0  # the replay's record pends
        assert lib.aiogeHostOpenGate(gate[0]) == 0
        assert lib.aclrtSynchronizeEvent(ev[0]) == 0
        np.testing.assert_array_equal(f32(rt, y), np.full(4, 2, np.float32))
        assert lib.aclmdlRIDestroy(m) == 0
    finally:
        lib.aclrtDestroyEvent(ev[0])


@pytest.mark.parametrize("call", ["synchronize", "query"])
def test_waiting_for_a_capturing_stream_fails_and_invalidates(rt, call):
    x, y = rt.to_device(np.ones(4, np.float32)), rt.malloc(16)
    base = captured_models()
    begin(rt)
    assert rt.add(x, x, y, (4,)) == 0
    if call == "synchronize":
        assert rt.sync() == STREAM_CAPTURED
    else:
        assert lib.aclrtStreamQuery(rt.stream, ffi.new("aclrtStreamStatus *")) == STREAM_CAPTURED
    assert "capturing" in _native.recent_error()
    assert info(rt)[0] == INVALIDATED
    assert rt.add(x, x, y, (4,)) == INVALIDATED_RC  # launches on an invalidated capture say so
    assert "invalidated earlier" in _native.recent_error()
    rc, m = end(rt)
    assert rc == INVALIDATED_RC and m == ffi.NULL
    assert "invalidated" in _native.recent_error()
    assert captured_models() == base
    assert info(rt)[0] == NONE
    assert rt.add(x, x, y, (4,)) == 0 and rt.sync() == 0  # the stream works as before
    np.testing.assert_array_equal(f32(rt, y), np.full(4, 2, np.float32))


def test_unreplayable_work_is_refused_with_cann_codes(rt):
    dev = rt.malloc(16)
    pageable = np.ones(4, np.float32)
    begin(rt)
    # a pageable source would be staged once: not replayable
    assert lib.aclrtMemcpyAsync(dev, 16, _native.host_ptr(pageable), 16, H2D, rt.stream) == MODE_NOT_SUPPORT
    _native.recent_error()
    assert info(rt)[0] == INVALIDATED
    assert end(rt)[0] == INVALIDATED_RC
    _native.recent_error()
    begin(rt)
    # a pageable destination makes the copy synchronous
    assert lib.aclrtMemcpyAsync(_native.host_ptr(pageable), 16, dev, 16, 2, rt.stream) == BLOCK_ASYNC
    _native.recent_error()
    assert end(rt)[0] == INVALIDATED_RC
    _native.recent_error()


def test_a_wait_for_work_outside_the_capture_is_a_dependency_error(rt):
    other = new_stream()
    ev = ffi.new("aclrtEvent *")
    _native.check(lib.aclrtCreateEvent(ev), "aclrtCreateEvent")
    try:
        gate = ffi.new("uint64_t *")
        assert lib.aiogeHostLaunchGate(other, 10_000, gate) == 0
        assert lib.aclrtRecordEvent(ev[0], other) == 0  # pending behind the gate
        begin(rt)
        assert lib.aclrtStreamWaitEvent(rt.stream, ev[0]) == CAPTURE_DEPENDENCY
        assert "outside the capture" in _native.recent_error()
        assert end(rt)[0] == INVALIDATED_RC
        _native.recent_error()
        assert lib.aiogeHostOpenGate(gate[0]) == 0
        assert lib.aclrtSynchronizeStream(other) == 0
        begin(rt)  # a completed event: nothing to wait for
        assert lib.aclrtStreamWaitEvent(rt.stream, ev[0]) == 0
        rc, m = end(rt)
        assert rc == 0 and lib.aclmdlRIDestroy(m) == 0
    finally:
        lib.aclrtDestroyEvent(ev[0])
        lib.aclrtDestroyStream(other)


def _sync_copy_rc(ptr):
    host = np.ones(4, np.float32)
    return lib.aclrtMemcpy(ptr, 16, _native.host_ptr(host), 16, H2D)


def _in_thread(fn):
    out = {}

    def run():
        out["rc"] = fn()
        _native.recent_error()

    t = threading.Thread(target=run)
    t.start()
    t.join()
    return out["rc"]


@pytest.mark.parametrize(
    ("mode", "here", "elsewhere"),
    [(GLOBAL, MODE_NOT_SUPPORT, MODE_NOT_SUPPORT), (THREAD_LOCAL, MODE_NOT_SUPPORT, 0), (RELAXED, 0, 0)],
)
def test_capture_modes_govern_unsafe_calls(rt, mode, here, elsewhere):
    dev = rt.malloc(16)
    begin(rt, mode)
    assert _sync_copy_rc(dev) == here
    _native.recent_error()
    # another thread, bound to the same context
    ctx = ffi.new("aclrtContext *")
    _native.check(lib.aclrtGetCurrentContext(ctx), "ctx")
    assert _in_thread(lambda: lib.aclrtSetCurrentContext(ctx[0]) or _sync_copy_rc(dev)) == elsewhere
    assert info(rt)[0] == ACTIVE  # an unsafe call elsewhere is refused, the capture goes on
    rc, m = end(rt)
    assert rc == 0 and lib.aclmdlRIDestroy(m) == 0
    assert _sync_copy_rc(dev) == 0  # the capture is over


@pytest.mark.parametrize(("mode", "expected"), [(THREAD_LOCAL, WRONG_THREAD), (GLOBAL, WRONG_THREAD), (RELAXED, 0)])
def test_ending_from_another_thread(rt, mode, expected):
    begin(rt, mode)
    ctx = ffi.new("aclrtContext *")
    _native.check(lib.aclrtGetCurrentContext(ctx), "ctx")
    got = {}

    def other():
        lib.aclrtSetCurrentContext(ctx[0])
        got["rc"], got["m"] = end(rt)
        _native.recent_error()

    t = threading.Thread(target=other)
    t.start()
    t.join()
    assert got["rc"] == expected
    if expected:
        rc, m = end(rt)  # the capture went on: its own thread ends it
        assert rc == 0
    else:
        m = got["m"]
    assert lib.aclmdlRIDestroy(m) == 0


def test_misuse_gets_codes(rt):
    assert lib.aclmdlRICaptureBegin(rt.stream, 7) == 100000
    assert lib.aclmdlRICaptureBegin(ffi.NULL, RELAXED) == MODE_NOT_SUPPORT  # the default stream
    assert end(rt)[0] == NOT_CAPTURED
    begin(rt)
    assert lib.aclmdlRICaptureBegin(rt.stream, RELAXED) == STREAM_CAPTURED
    _, model = info(rt)
    assert lib.aclmdlRIExecuteAsync(model, rt.stream) == MODEL_CAPTURED  # not ended yet
    assert lib.aclmdlRIDestroy(model) == MODEL_CAPTURED
    assert lib.aclrtDestroyStream(rt.stream) == STREAM_CAPTURED
    other = new_stream()
    rc, m = end(rt)
    assert rc == 0
    begin(rt, stream=other)
    assert lib.aclmdlRIExecuteAsync(m, other) == MODE_NOT_SUPPORT  # a replay cannot be captured
    assert end(rt, other)[0] == INVALIDATED_RC
    lib.aclrtDestroyStream(other)
    assert lib.aclmdlRIExecuteAsync(ffi.NULL, rt.stream) == 100000
    assert lib.aclmdlRIExecuteAsync(ffi.cast("aclmdlRI", 0x1234), rt.stream) == 200005
    assert lib.aclmdlRICaptureGetInfo(rt.stream, ffi.NULL, ffi.NULL) == 100000
    assert lib.aclmdlRICaptureEnd(rt.stream, ffi.NULL) == 100000
    assert lib.aclmdlRIDestroy(m) == 0
    _native.recent_error()


def test_an_empty_capture_replays_as_nothing(rt):
    begin(rt)
    rc, m = end(rt)
    assert rc == 0 and m != ffi.NULL
    assert lib.aclmdlRIExecuteAsync(m, rt.stream) == 0 and rt.sync() == 0
    assert lib.aclmdlRIDestroy(m) == 0
