"""The Python core: devices, streams, tensors, aioge.op and the first typed ops."""

from __future__ import annotations

import gc
import warnings

import numpy as np
import pytest

import aioge
from aioge import _native, dtypes, errors
from tests.support.edges import OVERSIZED_SHAPES

pytestmark = [pytest.mark.anyio, pytest.mark.abi]
#: no hooks used: also run against a library with only the ACL symbols (test_abi_mode)
ASCEND = pytest.mark.ascend


@ASCEND
async def test_quickstart_contract(dev):
    assert dev.backend in ("host", "ascend")
    w = np.arange(12, dtype=np.float32).reshape(3, 4)
    async with dev.open_stream() as s:
        x = s.upload(np.ones((2, 3), np.float32))
        y = aioge.ops.add(x, x)
        z = aioge.ops.matmul(y, s.upload(w))
        np.testing.assert_allclose(await z.numpy(), 2 * np.ones((2, 3)) @ w)
        await s.synchronize(timeout=1.0)
        (o,) = aioge.op("Add", [x, x], [aioge.TensorSpec((2, 3), "float32")], attrs={}, stream=s)
        np.testing.assert_array_equal(await o.numpy(), np.full((2, 3), 2, np.float32))


@ASCEND
async def test_shape_mismatch_raises_acl_error_and_stream_stays_usable(stream):
    x = stream.upload(np.ones((2, 3), np.float32))
    with pytest.raises(aioge.OpOutputMismatchError) as ei:
        aioge.op("Add", [x, x], [aioge.TensorSpec((2, 4))], stream=stream)
    e = ei.value
    assert isinstance(e, aioge.AclError) and isinstance(e, ValueError)
    assert e.code == 100022 and e.name == "ACL_ERROR_OP_OUTPUT_NOT_MATCH" and e.op == "Add"
    assert "[2,4]" in e.message
    with pytest.raises(aioge.OpInputMismatchError):
        aioge.op("Add", [x, stream.upload(np.ones((4,), np.float32))], [aioge.TensorSpec((2, 3))], stream=stream)
    with pytest.raises(ValueError, match="do not broadcast"):
        aioge.ops.add(x, stream.upload(np.ones((4,), np.float32)))
    y = aioge.ops.add(x, x)
    np.testing.assert_array_equal(await y.numpy(), np.full((2, 3), 2, np.float32))
    await stream.synchronize()


@ASCEND
async def test_shape_times_itemsize_overflow_is_a_typed_error(stream):
    x = stream.upload(np.ones(4, np.float32))
    for shape in OVERSIZED_SHAPES:
        with pytest.raises(aioge.AclParamError, match="overflows") as ei:
            aioge.op("Relu", [x], [aioge.TensorSpec(shape, "float32")], stream=stream)
        assert ei.value.code == 100000 and str(shape) in ei.value.message
    with pytest.raises(aioge.AclParamError, match="overflows"):
        aioge.ops.broadcast_to(x, (2**62, 4))
    (y,) = aioge.op("Relu", [x], [aioge.TensorSpec((4,), "float32")], stream=stream)
    assert (await y.numpy()).tolist() == [1, 1, 1, 1]


@ASCEND
async def test_generic_op_with_attrs_const_host_and_absent_inputs(stream):
    a = np.arange(6, dtype=np.float32).reshape(2, 3)
    b = np.ones((2, 3), np.float32)
    x, y = stream.upload(a), stream.upload(b)
    (mm,) = aioge.op("MatMul", [x, y, None], [aioge.TensorSpec((2, 2))], {"transpose_x2": True}, stream=stream)
    np.testing.assert_allclose(await mm.numpy(), a @ b.T)
    (c,) = aioge.op("Add", [x, aioge.Const(np.array([1, 2, 3], np.float32))], [aioge.TensorSpec((2, 3))])
    np.testing.assert_array_equal(await c.numpy(), a + [1, 2, 3])
    (h,) = aioge.op("Add", [x, aioge.HostInput(np.array([4, 5, 6], np.float32))], [aioge.TensorSpec((2, 3))])
    np.testing.assert_array_equal(await h.numpy(), a + [4, 5, 6])
    (cast,) = aioge.op("Cast", [x], [aioge.TensorSpec((2, 3), "int64")], {"dst_type": aioge.DataType.INT64})
    np.testing.assert_array_equal(await cast.numpy(), a.astype(np.int64))
    with pytest.raises(aioge.OpAttrMismatchError, match="dst_type"):
        aioge.op("Cast", [x], [aioge.TensorSpec((2, 3), "int64")])
    with pytest.raises(aioge.OpNotFoundError):
        aioge.op("NotAnOp", [x], [aioge.TensorSpec((2, 3))])
    with pytest.raises(TypeError, match="attr"):
        aioge.op("Add", [x, x], [aioge.TensorSpec((2, 3))], {"bad": object()})
    with pytest.raises(ValueError, match="stream="):
        aioge.op("Fills", [], [aioge.TensorSpec((2,))])
    # writing into an existing tensor
    out = stream.zeros((2, 3))
    aioge.op("Add", [x, y], [out])
    np.testing.assert_array_equal(await out.numpy(), a + b)


@ASCEND
async def test_write_then_read_keeps_stream_order(stream):
    x = stream.upload(np.zeros(1000, np.float32))
    one = stream.upload(np.ones(1000, np.float32))
    for _ in range(200):
        aioge.op("Add", [x, one], [x])
    np.testing.assert_array_equal(await x.numpy(), np.full(1000, 200, np.float32))


@ASCEND
async def test_typed_ops_match_numpy(stream):
    rng = np.random.default_rng(0)
    a = rng.standard_normal((4, 5)).astype(np.float32)
    b = rng.standard_normal((5,)).astype(np.float32) + 3
    x, y = stream.upload(a), stream.upload(b)
    np.testing.assert_allclose(await aioge.ops.sub(x, y).numpy(), a - b, rtol=1e-6)
    np.testing.assert_allclose(await aioge.ops.mul(x, y).numpy(), a * b, rtol=1e-6)
    np.testing.assert_allclose(await aioge.ops.div(x, y).numpy(), a / b, rtol=1e-6)
    np.testing.assert_allclose(await aioge.ops.add(2.0, x).numpy(), 2 + a, rtol=1e-6)
    np.testing.assert_array_equal(await aioge.ops.relu(x).numpy(), np.maximum(a, 0))
    np.testing.assert_array_equal(await aioge.ops.cast(x, "float16").numpy(), a.astype(np.float16))
    v = stream.upload(b)
    np.testing.assert_allclose(await aioge.ops.matmul(x, v).numpy(), a @ b, rtol=1e-5)
    np.testing.assert_allclose(await aioge.ops.matmul(v, x.reshape(5, 4)).numpy(), b @ a.reshape(5, 4), rtol=1e-5)
    bt = rng.standard_normal((3, 5, 2)).astype(np.float32)
    np.testing.assert_allclose(await aioge.ops.matmul(x, stream.upload(bt)).numpy(), a @ bt, rtol=1e-5)
    np.testing.assert_allclose(await aioge.ops.matmul(x, x, transpose_b=True).numpy(), a @ a.T, rtol=1e-5, atol=1e-6)
    with pytest.raises(ValueError, match="inner dims"):
        aioge.ops.matmul(x, x)
    with pytest.raises(TypeError, match="dtypes"):
        aioge.ops.add(x, stream.upload(a.astype(np.float64)))


@ASCEND
@pytest.mark.parametrize("dt", ["float32", "float16", "bfloat16", "float64", "int32", "int8"])
async def test_upload_download_round_trip_all_dtypes(stream, dt):
    a = (np.arange(24).reshape(2, 3, 4) - 7).astype(dtypes.normalize(dt))
    t = stream.upload(a)
    assert t.shape == (2, 3, 4) and t.dtype == dtypes.normalize(dt) and t.nbytes == a.nbytes
    back = await t.numpy()
    assert back.dtype == a.dtype
    np.testing.assert_array_equal(back.astype(np.float64), a.astype(np.float64))


@ASCEND
async def test_empty_and_scalar_tensors(stream):
    e = stream.upload(np.zeros((0, 3), np.float32))
    assert (await e.numpy()).shape == (0, 3)
    s = stream.upload(np.float32(2.5))
    assert (await aioge.ops.add(s, s).numpy()) == np.float32(5)
    z = aioge.ops.add(e, e)
    assert (await z.numpy()).shape == (0, 3)


@ASCEND
async def test_tensor_views_and_copies(stream):
    a = np.arange(6, dtype=np.float32)
    t = stream.upload(a)
    v = t.reshape(2, -1)
    assert v.shape == (2, 3)
    c = stream.copy(v)
    aioge.op("Add", [t, t], [t])  # writes through the other view
    np.testing.assert_array_equal(await v.numpy(), (2 * a).reshape(2, 3))
    np.testing.assert_array_equal(await c.numpy(), a.reshape(2, 3))
    with pytest.raises(ValueError):
        t.reshape(4, 2)
    np.testing.assert_array_equal(await stream.zeros((2, 2), "int32").numpy(), np.zeros((2, 2), np.int32))


@ASCEND
async def test_lifecycle_idempotent_close_and_use_after_close(dev):
    s = dev.open_stream()
    x = s.upload(np.ones(3, np.float32))
    await s.aclose()
    await s.aclose()
    s.close()
    assert s.closed
    with pytest.raises(aioge.ClosedResourceError):
        s.upload(np.ones(3, np.float32))
    with pytest.raises(aioge.ClosedResourceError):
        await s.synchronize()
    # the tensor outlives its stream: it moves to the device's default stream
    np.testing.assert_array_equal(await x.numpy(), np.ones(3, np.float32))
    x.close()
    x.close()
    with pytest.raises(aioge.ClosedResourceError):
        aioge.ops.add(x, x)


async def test_close_with_work_in_flight_refuses_and_aclose_drains(dev):
    s = dev.open_stream()
    g = _gate(s)
    x = s.upload(np.ones(4, np.float32))
    with pytest.raises(aioge.BusyResourceError, match="aclose"):
        s.close()
    assert not s.closed
    _native.lib.aiogeHostOpenGate(g)
    await s.aclose()
    assert s.closed
    del x


async def test_device_close_closes_streams_and_frees_memory():
    before = _native.counters()
    async with aioge.open_device(0) as d:
        s = d.open_stream()
        t = s.upload(np.ones(1000, np.float32))
        assert _native.counters()["device_allocations"] == before["device_allocations"] + 1
        await s.synchronize()
    assert s.closed and d.closed
    assert _native.counters()["device_allocations"] == before["device_allocations"]
    with pytest.raises(aioge.ClosedResourceError):
        await t.numpy()
    with pytest.raises(aioge.ClosedResourceError):
        d.open_stream()


@ASCEND
def test_unclosed_stream_warns_when_collected():
    d = aioge.open_device(0)
    try:
        s = d.open_stream()
        # (a tensor would keep its stream alive: tensors hold their home stream)
        with warnings.catch_warnings(record=True) as w:
            warnings.simplefilter("always")
            del s
            gc.collect()
        assert any(issubclass(x.category, ResourceWarning) and "Stream" in str(x.message) for x in w)
    finally:
        d.close()


@ASCEND
async def test_wrong_device_is_a_misuse_error():
    async with aioge.open_device(0) as d1, aioge.open_device(0) as d2:
        s1, s2 = d1.open_stream(), d2.open_stream()
        x = s1.upload(np.ones(2, np.float32))
        with pytest.raises(aioge.WrongDeviceError) as ei:
            aioge.op("Add", [x, x], [aioge.TensorSpec((2,))], stream=s2)
        # two device objects of one id are told apart by their open_device() serial
        assert d1.serial != d2.serial and repr(d1) in str(ei.value) and repr(d2) in str(ei.value), str(ei.value)
        await s1.aclose()
        await s2.aclose()


@ASCEND
async def test_memory_info_and_device_count(dev):
    free, total = dev.memory_info()
    assert 0 < free <= total
    assert aioge.device_count() >= 1


def test_error_classes_by_code():
    assert errors.error_class(100021) is errors.OpInputMismatchError
    assert errors.error_class(507046) is errors.StreamSyncTimeoutError
    assert issubclass(errors.StreamSyncTimeoutError, TimeoutError)
    assert issubclass(errors.OutOfDeviceMemoryError, MemoryError)
    assert errors.error_class(107999) is errors.AclParamError  # unknown code: its band
    assert errors.error_class(207777) is errors.AclResourceError
    assert errors.error_class(300000) is errors.AclCapacityError
    assert errors.error_class(545000) is errors.AclInternalError
    assert errors.error_class(999) is errors.AclError
    e = errors.error_class(507015)(507015, "kernel failed", "Add")
    assert isinstance(e, errors.AicoreExceptionError) and isinstance(e, errors.AclInternalError)
    assert str(e) == "Add: ACL_ERROR_RT_AICORE_EXCEPTION (507015): kernel failed"
    assert errors.code_name(100000) == "ACL_ERROR_INVALID_PARAM"
    assert not issubclass(errors.ClosedResourceError, errors.AclError)
    import pickle

    e2 = pickle.loads(pickle.dumps(e))
    assert type(e2) is type(e) and e2.code == 507015 and e2.op == "Add"


def test_generated_error_table_is_current():
    import subprocess
    import sys
    from pathlib import Path

    tool = Path(__file__).resolve().parents[2] / "tools" / "gen_error_codes.py"
    assert subprocess.run([sys.executable, str(tool), "--check"]).returncode == 0


def test_dtype_mapping():
    assert dtypes.to_acl(np.float32) == aioge.DataType.FLOAT
    assert dtypes.to_acl("bfloat16") == aioge.DataType.BF16 == 27
    assert dtypes.to_numpy(1) == np.float16
    assert dtypes.to_numpy(aioge.DataType.BOOL) == np.bool_
    for dt in ("float32", "float16", "float64", "int8", "uint8", "int16", "uint16", "int32", "uint32", "int64",
               "uint64", "bool", "bfloat16"):  # fmt: skip
        assert dtypes.to_numpy(dtypes.to_acl(dt)) == dtypes.normalize(dt)
    with pytest.raises(TypeError):
        dtypes.normalize("datetime64[s]")
    with pytest.raises(TypeError):
        dtypes.to_numpy(-1)


def test_public_surface():
    for name in aioge.__all__:
        assert hasattr(aioge, name), name
    assert aioge.Tensor.__module__ == "aioge"
    exported = {n for n in dir(aioge) if not n.startswith("_")}
    assert set(aioge.__all__) <= exported


def test_only_native_imports_the_compiled_module():
    from pathlib import Path

    root = Path(aioge.__file__).parent
    offenders = [
        str(p.relative_to(root))
        for p in root.rglob("*.py")
        if p.parent.name != "_native" and ("_hostrt" in p.read_text() or "_acl_abi" in p.read_text())
    ]
    assert offenders == []


def _gate(s, timeout_ms=10_000):
    g = _native.ffi.new("uint64_t *")
    s.device.context.bind()
    _native.check(_native.lib.aiogeHostLaunchGate(s._handle, timeout_ms, g), "gate")
    return g[0]


async def test_caching_allocator_reuses_freed_blocks(dev):
    s = dev.default_stream
    pool = dev.context.pool
    x = s.upload(np.ones(1000, np.float32))
    await x
    before = _native.counters()["device_allocations"]
    hits = pool.hits
    for _ in range(20):
        y = aioge.ops.add(x, 1.0)  # each result frees the previous one's block
        await y
    assert pool.hits - hits >= 18
    assert _native.counters()["device_allocations"] - before <= 2
    np.testing.assert_array_equal(await y.numpy(), np.full(1000, 2, np.float32))


def test_allocator_size_classes_and_release():
    from aioge.runtime.memory import size_class

    assert size_class(0) == 512 and size_class(1) == 512 and size_class(513) == 1024
    assert size_class(1 << 20) == 1 << 20 and size_class((1 << 20) + 1) == 2 << 20
    with _sync_device() as d:
        pool = d.context.pool
        pool.limit = 4096
        t = d.default_stream.empty(512)  # 2048 bytes
        t.close()
        del t
        import gc

        gc.collect()
        assert pool.cached == 2048
        big = d.default_stream.empty(4096)  # does not fit the cache limit when freed
        big.close()
        del big
        gc.collect()
        assert pool.cached == 2048
        pool.release()
        assert pool.cached == 0


def test_allocator_takes_the_newest_and_trims_the_oldest_first():
    with _sync_device() as d:
        pool = d.context.pool
        pool.release()
        pool.limit = 1 << 20
        blocks = [pool.take(n) for n in (512, 1024, 512, 512)]  # pooled in this order below
        for ptr, buf, cap in blocks:
            pool.give(ptr, buf, cap)
        assert pool.cached == 512 * 3 + 1024
        ptr, buf, cap = pool.take(100)  # the newest 512-byte block
        assert (ptr, cap) == (blocks[3][0], 512) and pool.cached == 512 * 2 + 1024
        assert pool.trim(keep=1024 + 512) == 512  # the oldest: the first 512-byte block
        assert pool.trim(keep=512) == 1024  # then the 1024-byte one, pooled second
        assert pool.cached == 512
        last = pool.take(512)
        assert last[0] == blocks[2][0] and pool.cached == 0  # what was left
        pool.give(*last)
        pool.give(ptr, buf, cap)
        assert pool.trim() == 1024 and pool.cached == 0


class _sync_device:
    def __enter__(self):
        self.d = aioge.open_device(0)
        return self.d

    def __exit__(self, *exc):
        self.d.close()


def _in_thread(fn) -> bool:
    """Run ``fn`` on a daemon thread; False if it did not return (a deadlock) within 10 s."""
    import threading

    done = threading.Event()

    def run() -> None:
        fn()
        done.set()

    threading.Thread(target=run, daemon=True).start()
    return done.wait(10)


def test_finalizers_never_wait_for_a_lock_their_own_thread_holds():
    """A collection can run a ticket's or a block's ``__del__`` inside
    code that holds the lock it gives back to (any allocation may collect): giving
    back must not take that lock (it deadlocked), and is settled by the next holder."""
    from aioge.runtime.graphs.executable import _Flight

    flight = _Flight(1)
    tickets = [flight.admit()]
    assert flight.oldest() == (False, None)  # the only slot is taken

    def drop_ticket_under_the_lock() -> None:
        with flight.lock:
            tickets.clear()  # as a collection inside the critical section would

    assert _in_thread(drop_ticket_under_the_lock)
    assert flight.oldest() == (True, None)  # the slot came back
    with _sync_device() as d:
        pool, pinned = d.context.pool, d.context.pinned
        t = d.default_stream.empty(512)
        p = pinned.take(4096)

        def free_under_the_locks() -> None:
            with pool._lock, pinned._lock:
                t._memory().free()
                pinned.give(*p)

        cached = pool.cached
        assert _in_thread(free_under_the_locks)
        assert pinned.take(4096) == p  # settled and reused by the next taker
        pinned.give(*p)
        t2 = d.default_stream.empty(512)
        assert pool.cached == cached and t2._memory().cap == 2048


def test_stream_ids_are_unique_across_threads():
    import sys
    import threading

    with _sync_device() as d:
        streams: list[aioge.Stream] = []
        interval = sys.getswitchinterval()
        sys.setswitchinterval(1e-6)  # make interleavings likely
        try:
            threads = [threading.Thread(target=lambda: streams.extend(d.open_stream() for _ in range(8)))
                       for _ in range(8)]  # fmt: skip
            for th in threads:
                th.start()
            for th in threads:
                th.join()
        finally:
            sys.setswitchinterval(interval)
        assert len({s.id for s in streams}) == len(streams) == 64


async def test_one_dtype_contract_for_ops_and_op():
    """An unsupported dtype is an UnsupportedDataTypeError (a TypeError and a
    ValueError) from the typed ops and from aioge.op alike; the message's grammar is right."""
    async with aioge.open_device(0) as d:
        s = d.default_stream
        i = s.upload(np.ones(3, np.int32))
        b = s.upload(np.ones(3, np.bool_))
        for call in (lambda: aioge.ops.sin(i), lambda: aioge.op("Sin", [i], [aioge.TensorSpec((3,), "int32")])):
            with pytest.raises(aioge.UnsupportedDataTypeError) as ei:
                call()
            assert isinstance(ei.value, TypeError) and isinstance(ei.value, ValueError) and ei.value.code == 100026
            assert "int32" in str(ei.value)
        with pytest.raises(aioge.UnsupportedDataTypeError, match="the operands have dtype bool"):
            aioge.ops.sub(b, b)


def test_the_whole_error_hierarchy_is_exported_and_documented():
    """Every exception class (aioge.errors, aioge.graph's) is importable
    from ``aioge`` and named in the README's Errors section."""
    import pathlib

    import aioge.graph.errors as graph_errors

    readme = (pathlib.Path(__file__).resolve().parents[2] / "README.md").read_text()
    section = readme.split("### Errors", 1)[1].split("\n## ", 1)[0]
    names = [n for n in (*errors.__all__, *graph_errors.__all__, "SessionError") if n[0].isupper()]
    for name in names:
        assert getattr(aioge, name) is getattr(errors, name, getattr(graph_errors, name, aioge.SessionError)), name
        assert name in aioge.__all__, name
        assert f"`{name}`" in section, f"{name} is not documented in the README's Errors section"
    assert issubclass(aioge.MalformedModelError, aioge.AioGeError)


async def test_states_and_reprs_after_close():
    """Events, streams, tensors and launches say their state in their repr, before and after close."""
    d = aioge.open_device(0)
    s = d.open_stream()
    x = s.upload(np.ones(3, np.float32))
    ev = s.record_event()
    await ev.wait()
    assert "done" in repr(ev) and "Event" in repr(ev)
    assert repr(x.launch).startswith("<aioge.Completion #") and "done" in repr(x.launch)
    await s.aclose()
    assert "closed" in repr(s)
    ev.close()
    assert "closed" in repr(ev)
    await d.aclose()
    assert x.closed  # the device took its memory with it
    with pytest.raises(aioge.ClosedResourceError):
        await x.numpy()


async def test_sync_with_and_asarray_are_refused_with_what_to_do_instead():
    """A sync ``with`` and ``np.asarray`` of a device tensor are refused, saying what to do instead."""
    with pytest.raises(TypeError, match="async with"):
        with aioge.open_device(0):
            pass
    async with aioge.open_device(0) as d:
        x = d.default_stream.upload(np.ones(3, np.float32))
        with pytest.raises(TypeError, match=r"await tensor\.numpy\(\)"):
            np.asarray(x)
        with pytest.raises(TypeError, match="async with"):
            with d.open_stream():
                pass


async def test_upload_keeps_numpy_dtype_rules(dev):
    """``upload`` takes ``np.asarray``'s dtype, so Python
    floats are float64 and ints int64, as in numpy; ``dtype=`` picks another."""
    s = dev.default_stream
    assert s.upload([1.0, 2.0]).dtype == np.float64
    assert s.upload([1, 2]).dtype == np.int64
    t = s.upload([1.0, 2.0], "float32")
    assert t.dtype == np.float32
    np.testing.assert_array_equal(await t.numpy(), np.array([1, 2], np.float32))


def test_env_numbers_are_checked_naming_the_variable(monkeypatch):
    """A value that is not a number is refused, never ignored."""
    monkeypatch.setenv("AIOGE_TEST_NUMBER", "lots")
    with pytest.raises(aioge.BackendError, match="AIOGE_TEST_NUMBER='lots' is not a number"):
        _native.env_number("AIOGE_TEST_NUMBER", 1.0)
    monkeypatch.setenv("AIOGE_TEST_NUMBER", "1.5")
    with pytest.raises(aioge.BackendError, match="not an integer"):
        _native.env_number("AIOGE_TEST_NUMBER", 1, integer=True)
    monkeypatch.setenv("AIOGE_TEST_NUMBER", "-1")
    with pytest.raises(aioge.BackendError, match="at least 0"):
        _native.env_number("AIOGE_TEST_NUMBER", 1, minimum=0)
    monkeypatch.setenv("AIOGE_TEST_NUMBER", " 7 ")
    assert _native.env_number("AIOGE_TEST_NUMBER", 1, integer=True) == 7
    monkeypatch.delenv("AIOGE_TEST_NUMBER")
    assert _native.env_number("AIOGE_TEST_NUMBER", 3.0) == 3.0
