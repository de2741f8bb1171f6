"""The paths a real Ascend takes, with no aioge test hooks in the library.

These tests run twice: here on the host runtime, and (``test_abi_mode``) in
a subprocess with ``AIOGE_BACKEND=ascend`` against a standalone
``libascendcl.so`` that exports only the ACL symbols -- no ``aiogeHost*``,
no ``aiogeGraph*``.  There, launches complete through the completion-lane
threads under asyncio, models run per op through
``aclopCompileAndExecute``, and the host extras report that they are absent.
Nothing here may use a hook; every check holds on both libraries.
"""

from __future__ import annotations

import os
import threading
from pathlib import Path

import numpy as np
import onnxruntime as ort
import pytest

import aioge
from aioge import Const, HostInput, TensorSpec, _native
from tests.graph import models as M

pytestmark = [pytest.mark.anyio, pytest.mark.ascend]

#: set by test_abi_mode: where the models' outputs go, to compare with the host backend's
DUMP_DIR = os.environ.get("AIOGE_TEST_DUMP_DIR", "")

MODELS = {
    "residual_cnn": lambda: M.residual_cnn(small=True),
    "attention": lambda: M.attention(small=True),
}


@pytest.fixture
def anyio_backend():
    return ("asyncio", {"debug": True})


def test_host_extras_degrade_cleanly():
    if _native.has_host_hooks:
        assert aioge.op_cache_info() is not None and _native.blas_info()
        return
    assert aioge.backend == "ascend"
    assert aioge.op_cache_info() is None  # documented: no statistics, no error
    assert _native.blas_info() == ""
    with pytest.raises(aioge.BackendError, match="host counters"):
        _native.counters()
    with pytest.raises(aioge.BackendError):
        _native.op_types()


async def test_upload_ops_generic_op_and_await(dev):
    assert dev.backend == _native.backend
    async with dev.open_stream() as s:
        a = np.arange(6, dtype=np.float32).reshape(2, 3)
        w = np.linspace(-1, 1, 12, dtype=np.float32).reshape(3, 4)
        x = s.upload(a)
        y = aioge.ops.add(x, x)
        z = aioge.ops.matmul(y, s.upload(w))
        np.testing.assert_allclose(await z.numpy(), (a + a) @ w, rtol=1e-6)
        (c,) = aioge.op("Cast", [x], [TensorSpec((2, 3), "int32")], {"dst_type": 3}, stream=s)
        (f,) = aioge.op("Add", [x, Const(np.float32(0.5))], [TensorSpec((2, 3))], stream=s)
        (m,) = aioge.op("MatMul", [x, s.upload(w), None], [TensorSpec((2, 4))], stream=s)
        (r,) = aioge.op("ReduceSum", [x, HostInput(np.array([1]))], [TensorSpec((2,))], {"keep_dims": False}, stream=s)
        await m  # one launch on its own
        np.testing.assert_array_equal(await c.numpy(), a.astype(np.int32))
        np.testing.assert_array_equal(await f.numpy(), a + 0.5)
        np.testing.assert_allclose(await m.numpy(), a @ w, rtol=1e-6)
        np.testing.assert_array_equal(await r.numpy(), a.sum(axis=1))
        await s.synchronize(timeout=5.0)
        if not _native.has_host_hooks:  # no notify fd: a completion-lane thread drove the awaits
            assert any(t.name.startswith("aioge-lane-") for t in threading.enumerate())


async def test_errors_carry_their_code_and_the_stream_stays_usable(stream):
    x = stream.upload(np.ones((2, 3), np.float32))
    # refused at launch: ACL's code and the runtime's text
    with pytest.raises(aioge.OpInputMismatchError) as ei:
        aioge.op("Add", [x, stream.upload(np.ones((3, 2), np.float32))], [TensorSpec((2, 3))])
    assert ei.value.code == 100021 and "broadcast" in ei.value.message
    # failed on the device: the launch's awaiters and the stream's next synchronize get the code
    (bad,) = aioge.op("GatherV2", [x, stream.upload(np.array([0, 7], np.int32)), HostInput(np.array([0]))],
                      [TensorSpec((2, 3))])  # fmt: skip
    with pytest.raises(aioge.errors.AicoreExceptionError) as ei:
        await bad
    assert ei.value.code == 507015 and "out of range" in ei.value.message
    with pytest.raises(aioge.errors.AicoreExceptionError):
        await stream.synchronize()
    np.testing.assert_array_equal(await aioge.ops.add(x, x).numpy(), np.full((2, 3), 2, np.float32))


async def test_synchronize_timeout_on_a_blocked_stream(stream):
    # a blocking host callback holds the stream until this test's report thread runs it:
    # plain ACL, so the timeout path is driven the same way on both libraries
    ffi, lib = _native.ffi, _native.lib
    ran = threading.Event()
    go = threading.Event()

    @ffi.callback("void(void *)")
    def callback(_user):
        ran.set()

    ctx = stream.device.context.handle
    tid: list[int] = []
    ready = threading.Event()

    def reporter():
        _native.check(lib.aclrtSetCurrentContext(ctx), "aclrtSetCurrentContext")
        tid.append(threading.get_ident())
        ready.set()
        go.wait(30)
        lib.aclrtProcessReport(10_000)
        _native.recent_error()

    t = threading.Thread(target=reporter, daemon=True)
    t.start()
    ready.wait(30)
    _native.bind_context(ctx)
    _native.check(lib.aclrtSubscribeReport(tid[0], stream._handle), "aclrtSubscribeReport")
    try:
        x = stream.upload(np.ones(4, np.float32))
        _native.check(lib.aclrtLaunchCallback(callback, ffi.NULL, lib.ACL_CALLBACK_BLOCK, stream._handle),
                      "aclrtLaunchCallback")  # fmt: skip
        y = aioge.ops.add(x, x)  # queued behind the callback
        with pytest.raises(TimeoutError):
            await stream.synchronize(timeout=0.2)
        assert not ran.is_set()
        go.set()
        await stream.synchronize(timeout=30)
        assert ran.is_set()
        np.testing.assert_array_equal(await y.numpy(), np.full(4, 2, np.float32))
    finally:
        go.set()
        t.join(30)
        _native.bind_context(ctx)
        _native.check(lib.aclrtUnSubscribeReport(tid[0], stream._handle), "aclrtUnSubscribeReport")


def ort_outputs(proto, feeds):
    sess = ort.InferenceSession(proto.SerializeToString(), providers=["CPUExecutionProvider"])
    return dict(zip((o.name for o in sess.get_outputs()), sess.run(None, feeds)))


@pytest.mark.parametrize("name", list(MODELS))
async def test_onnx_model_in_the_backends_mode(compiled, name):
    proto = MODELS[name]()
    feeds = M.sample_inputs(proto)
    model = await compiled(aioge.load_onnx(proto))  # "auto": sunk on the host runtime, else per op
    assert model.mode == ("sunk" if _native.has_graph_api else "per_op")
    out = await model.execute(feeds)
    ref = ort_outputs(proto, feeds)
    assert set(out) == set(ref)
    for k in ref:
        np.testing.assert_allclose(out[k], ref[k], rtol=1e-4, atol=1e-5, err_msg=f"{name}/{model.mode}/{k}")
    if DUMP_DIR:
        np.savez(Path(DUMP_DIR, f"{name}.npz"), **out)


@pytest.mark.parametrize("as_tensors", [False, True], ids=["numpy", "tensors"])
async def test_a_failed_node_is_raised_by_its_execution(dev, compiled, as_tensors):
    """On this backend's mode (per op here, sunk on the host runtime), a node that fails before the
    last one is the execution's error, not garbage outputs."""
    from tests.runtime.test_executable import gather_chain

    model = await compiled(gather_chain())
    x = np.arange(12, dtype=np.float32).reshape(4, 3)
    with pytest.raises(aioge.errors.AicoreExceptionError, match="out of range") as ei:
        await model.execute({"x": x, "idx": np.array([0, 99])}, as_tensors=as_tensors)
    assert "pick" in str(ei.value), str(ei.value)
    with pytest.raises(aioge.errors.AicoreExceptionError):
        await dev.default_stream.synchronize()
    out = await model.execute({"x": x, "idx": np.array([3, 1])})
    np.testing.assert_array_equal(out["act"], np.maximum(2 * x[[3, 1]], 0))
