"""The sunk-graph C API (aiogeGraph*) of the host runtime, driven raw."""

from __future__ import annotations

import numpy as np
import pytest

from aioge import _native
from aioge._native import ffi, lib
from tests.support.rawacl import raw_runtime

pytestmark = pytest.mark.abi

ARENA, INPUT, OUTPUT, CONST, ABSENT = 0, 1, 2, 3, 4


@pytest.fixture
def rt():
    with raw_runtime() as r:
        yield r


class G:
    def __init__(self, rt, in_bytes, out_bytes, arena, segments=1):
        p = ffi.new("aiogeGraph **")
        rc = lib.aiogeGraphCreate(p, len(in_bytes), ffi.new("size_t[]", in_bytes), len(out_bytes),
                                  ffi.new("size_t[]", out_bytes), arena, segments)  # fmt: skip
        assert rc == 0, _native.recent_error()
        self.h = p[0]
        self.rt = rt

    def add(self, op, name, ins, outs, attr=None, seg=0):
        """ins/outs: lists of (desc, loc, at)."""
        return lib.aiogeGraphAddNode(
            self.h, seg, op.encode(), name.encode(),
            len(ins), ffi.new("aclTensorDesc *[]", [d for d, _, _ in ins]),
            ffi.new("int32_t[]", [l for _, l, _ in ins]), ffi.new("int64_t[]", [a for _, _, a in ins]),
            len(outs), ffi.new("aclTensorDesc *[]", [d for d, _, _ in outs]),
            ffi.new("int32_t[]", [l for _, l, _ in outs]),
            ffi.new("int64_t[]", [a for _, _, a in outs]), attr if attr is not None else ffi.NULL,
        )  # fmt: skip

    def run(self, arena, inputs, outputs, stream=None, seg=0):
        return lib.aiogeGraphExecuteAsync(self.h, seg, arena if arena is not None else ffi.NULL, len(inputs),
                                          ffi.new("void *[]", inputs), len(outputs), ffi.new("void *[]", outputs),
                                          self.rt.stream if stream is None else stream)  # fmt: skip

    def destroy(self):
        assert lib.aiogeGraphDestroy(self.h) == 0


def mlp_descs(rt):
    """w, b and the descs x, t (the [2, 4] intermediate and output), w, b (const) of y = relu(x @ w + b)."""
    w = np.arange(12, dtype=np.float32).reshape(3, 4) / 10
    b = np.array([1, -100, 2, -3], np.float32)
    dx, dt = rt.desc("float32", (2, 3)), rt.desc("float32", (2, 4))
    dw, db = rt.desc("float32", (3, 4)), rt.desc("float32", (4,))
    assert lib.aclSetTensorConst(dw, _native.host_ptr(w), w.nbytes) == 0
    assert lib.aclSetTensorConst(db, _native.host_ptr(b), b.nbytes) == 0
    return w, b, (dx, dt, dw, db)


def mlp_graph(rt):
    """y = relu(x @ w + b), w and b const; the intermediate lives in the arena."""
    w, b, (dx, dt, dw, db) = mlp_descs(rt)
    g = G(rt, [24], [32], arena=64)
    assert g.add("MatMulV2", "mm", [(dx, INPUT, 0), (dw, CONST, 0), (db, CONST, 0)], [(dt, ARENA, 0)]) == 0, \
        _native.recent_error()
    assert g.add("Relu", "act", [(dt, ARENA, 0)], [(dt, OUTPUT, 0)]) == 0
    return g, w, b


def test_sunk_graph_runs_as_one_task_and_matches_numpy(rt):
    g, w, b = mlp_graph(rt)
    n = ffi.new("int32_t *")
    assert lib.aiogeGraphGetNodeCount(g.h, 0, n) == 0 and n[0] == 2
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    dx, arena, out = rt.to_device(x), rt.malloc(64), rt.malloc(32)
    before = _native.counters()["tasks_executed"]
    assert g.run(arena, [dx], [out]) == 0
    assert rt.sync() == 0
    assert _native.counters()["tasks_executed"] - before == 1  # the whole graph is one task
    np.testing.assert_allclose(rt.to_host(out, (2, 4), "float32"), np.maximum(x @ w + b, 0), rtol=1e-6)
    assert _native.counters()["graphs"] == 1
    g.destroy()
    assert _native.counters()["graphs"] == 0


def test_concurrent_executions_with_their_own_arenas(rt):
    g, w, b = mlp_graph(rt)
    p = ffi.new("aclrtStream *")
    assert lib.aclrtCreateStream(p) == 0
    s2 = p[0]
    try:
        xs = [np.full((2, 3), i, np.float32) for i in range(6)]
        outs = []
        for i, x in enumerate(xs):
            out = rt.malloc(32)
            assert g.run(rt.malloc(64), [rt.to_device(x)], [out], stream=rt.stream if i % 2 else s2) == 0
            outs.append(out)
        g.destroy()  # queued executions keep the graph alive
        assert rt.sync() == 0 and rt.sync(s2) == 0
        for x, out in zip(xs, outs):
            np.testing.assert_allclose(rt.to_host(out, (2, 4), "float32"), np.maximum(x @ w + b, 0), rtol=1e-6)
    finally:
        lib.aclrtDestroyStream(s2)


def test_build_errors_name_the_node(rt):
    d4, d5 = rt.desc("float32", (4,)), rt.desc("float32", (5,))
    g = G(rt, [32], [16], arena=16)
    assert g.add("Add", "bad_shapes", [(d4, INPUT, 0), (d5, INPUT, 0)], [(d4, OUTPUT, 0)]) == 100021
    msg = _native.recent_error()
    assert "bad_shapes" in msg
    assert g.add("Relu", "overrun", [(d4, ARENA, 8)], [(d4, OUTPUT, 0)]) == 100000  # 8 + 16 > 16
    assert "outside" in _native.recent_error()
    assert g.add("Relu", "no_input", [(d4, INPUT, 3)], [(d4, OUTPUT, 0)]) == 100000
    assert g.add("Relu", "small_output", [(d5, INPUT, 0)], [(d5, OUTPUT, 0)]) == 100000
    assert g.add("Relu", "writes_input", [(d4, INPUT, 0)], [(d4, INPUT, 0)]) == 100000
    assert g.add("Relu", "fake_const", [(d4, CONST, 0)], [(d4, OUTPUT, 0)]) == 100000
    assert g.add("Relu", "bad_loc", [(d4, 9, 0)], [(d4, OUTPUT, 0)]) == 100000
    assert g.add("Nope", "unknown", [(d4, INPUT, 0)], [(d4, OUTPUT, 0)]) == 100024
    assert g.add("Relu", "seg", [(d4, INPUT, 0)], [(d4, OUTPUT, 0)], seg=1) == 100000
    _native.recent_error()
    n = ffi.new("int32_t *")
    assert lib.aiogeGraphGetNodeCount(g.h, 0, n) == 0 and n[0] == 0  # nothing half-added
    g.destroy()
    assert lib.aiogeGraphDestroy(g.h) == 200005
    _native.recent_error()


def test_execute_validates_memory_and_reports_the_failing_node(rt):
    g, _, _ = mlp_graph(rt)
    x = rt.to_device(np.ones((2, 3), np.float32))
    arena, out = rt.malloc(64), rt.malloc(32)
    host = np.zeros(64, np.uint8)
    assert g.run(_native.host_ptr(host), [x], [out]) == 100000  # arena must be device memory
    assert g.run(rt.malloc(16), [x], [out]) == 100000  # arena too small
    assert g.run(arena, [x], []) == 100000  # wrong output count
    assert g.run(arena, [rt.malloc(8)], [out]) == 100000  # input too small
    _native.recent_error()
    assert lib.aiogeHostInjectFailure(rt.stream, 1, 507015) == 0
    assert g.run(arena, [x], [out]) == 0
    assert rt.sync() == 507015
    _native.recent_error()
    # a kernel failing inside the graph: GatherV2 with an out-of-range index, if the op exists
    assert g.run(arena, [x], [out]) == 0
    assert rt.sync() == 0
    g.destroy()


def test_segments_run_on_separate_streams(rt):
    d = rt.desc("float32", (4,))
    g = G(rt, [16], [16, 16], arena=0, segments=2)
    assert g.add("Relu", "a", [(d, INPUT, 0)], [(d, OUTPUT, 0)], seg=0) == 0
    assert g.add("Add", "b", [(d, INPUT, 0), (d, INPUT, 0)], [(d, OUTPUT, 1)], seg=1) == 0
    p = ffi.new("aclrtStream *")
    assert lib.aclrtCreateStream(p) == 0
    try:
        x = rt.to_device(np.array([-1, 2, -3, 4], np.float32))
        o0, o1 = rt.malloc(16), rt.malloc(16)
        assert g.run(None, [x], [o0, o1], seg=0) == 0
        assert g.run(None, [x], [o0, o1], stream=p[0], seg=1) == 0
        assert rt.sync() == 0 and rt.sync(p[0]) == 0
        np.testing.assert_array_equal(rt.to_host(o0, (4,), "float32"), [0, 2, 0, 4])
        np.testing.assert_array_equal(rt.to_host(o1, (4,), "float32"), [-2, 4, -6, 8])
    finally:
        lib.aclrtDestroyStream(p[0])
        g.destroy()
