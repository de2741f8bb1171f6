"""aiogeGraphAddNodes (acl.graph_add_nodes): a graph's nodes added in one call, as one by one."""

from __future__ import annotations

import numpy as np
import pytest

from aioge import _native
from aioge._native import acl, ffi, lib
from aioge.errors import AclError
from aioge.runtime.descs import LaunchCache
from tests.support.rawacl import raw_runtime

from .test_hostrt_graph import ARENA, CONST, INPUT, OUTPUT, G, mlp_descs

pytestmark = pytest.mark.abi


@pytest.fixture
def rt():
    with raw_runtime() as r:
        yield r


def _mlp_nodes(rt):
    """The nodes of y = relu(x @ w + b) (w, b const), as graph_add_nodes takes them."""
    w, b, (dx, dt, dw, db) = mlp_descs(rt)
    operands = ([dx, dw, db, dt, dt, dt], [INPUT, CONST, CONST, ARENA, ARENA, OUTPUT], [0, 0, 0, 0, 0, 0])
    return w, b, operands


def _node_count(g) -> int:
    n = ffi.new("int32_t *")
    assert lib.aiogeGraphGetNodeCount(g.h, 0, n) == 0
    return int(n[0])


def _run_mlp(rt, g, w, b):
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    dx, arena, out = rt.to_device(x), rt.malloc(64), rt.malloc(32)
    assert g.run(arena, [dx], [out]) == 0
    assert rt.sync() == 0
    np.testing.assert_allclose(rt.to_host(out, (2, 4), "float32"), np.maximum(x @ w + b, 0), rtol=1e-6)


@pytest.mark.parametrize("batched", [True, False])
def test_batch_builds_the_graph_one_by_one_would(rt, monkeypatch, batched):
    if not batched:  # a runtime without aiogeGraphAddNodes: one aiogeGraphAddNode per node
        monkeypatch.setattr(acl, "_has", lambda name: name != "aiogeGraphAddNodes" and _native._has(name))
    w, b, operands = _mlp_nodes(rt)
    g = G(rt, [24], [32], arena=64)
    acl.graph_add_nodes(g.h, [0, 0], ["MatMulV2", "Relu"], ["mm", "act"], ([3, 1], [1, 1]), operands,
                        [ffi.NULL, ffi.NULL])  # fmt: skip
    assert _node_count(g) == 2
    _run_mlp(rt, g, w, b)
    g.destroy()


@pytest.mark.parametrize("batched", [True, False])
def test_the_failing_node_is_named_and_the_ones_before_it_added(rt, monkeypatch, batched):
    if not batched:
        monkeypatch.setattr(acl, "_has", lambda name: name != "aiogeGraphAddNodes" and _native._has(name))
    _, _, (descs, locs, ats) = _mlp_nodes(rt)
    g = G(rt, [24], [32], arena=64)
    with pytest.raises(AclError, match=r"compile node 'second one' \(NoSuchOp\)") as ei:
        acl.graph_add_nodes(g.h, [0, 0, 0], ["MatMulV2", "NoSuchOp", "Relu"], ["mm", "second one", "act"],
                            ([3, 1, 1], [1, 1, 1]), (descs + descs[3:], locs + locs[3:], ats + ats[3:]),
                            [ffi.NULL] * 3)  # fmt: skip
    assert "second one" in str(ei.value)
    assert _node_count(g) == 1  # the node before it
    g.destroy()


def test_a_nul_in_a_name_ends_it_as_for_one_node(rt):
    w, b, operands = _mlp_nodes(rt)
    g = G(rt, [24], [32], arena=64)
    acl.graph_add_nodes(g.h, [0, 0], ["MatMulV2", "Relu"], ["mm\0tail", "act"], ([3, 1], [1, 1]), operands,
                        [ffi.NULL, ffi.NULL])  # fmt: skip
    assert _node_count(g) == 2  # "act" stays the second node's name, Relu its op
    _run_mlp(rt, g, w, b)
    g.destroy()


def _raw_add(g, n, types, names, n_in, n_out, n_operands, descs, locs, ats):
    added = ffi.new("int32_t *", -1)
    segs, attrs = ffi.new("int32_t[]", [0] * max(n, 1)), ffi.new("aclopAttr *[]", [ffi.NULL] * max(n, 1))
    rc = lib.aiogeGraphAddNodes(g.h, n, segs, types, len(types), names, len(names), ffi.new("int32_t[]", n_in),
                                ffi.new("int32_t[]", n_out), n_operands, ffi.new("aclTensorDesc *[]", descs),
                                ffi.new("int32_t[]", locs), ffi.new("int64_t[]", ats), attrs, added)  # fmt: skip
    return rc, int(added[0])


def test_arrays_too_short_for_the_counts_are_refused_before_the_node(rt):
    _, _, (descs, locs, ats) = _mlp_nodes(rt)
    g = G(rt, [24], [32], arena=64)
    # the second node claims 3 inputs: past the 6 operands
    rc, added = _raw_add(g, 2, b"MatMulV2\0Relu\0", b"mm\0act\0", [3, 3], [1, 1], 6, descs, locs, ats)
    assert rc == acl.ERROR_INVALID_PARAM and added == 1
    assert "node 1" in _native.recent_error()
    # one op type for two nodes
    g2 = G(rt, [24], [32], arena=64)
    rc, added = _raw_add(g2, 2, b"MatMulV2\0", b"mm\0act\0", [3, 1], [1, 1], 6, descs, locs, ats)
    assert rc == acl.ERROR_INVALID_PARAM and added == 1
    # a list not ended by a NUL
    g3 = G(rt, [24], [32], arena=64)
    rc, added = _raw_add(g3, 1, b"MatMulV2", b"mm\0", [3], [1], 4, descs, locs, ats)
    assert rc == acl.ERROR_INVALID_PARAM and added == 0
    assert _node_count(g) == 1 and _node_count(g2) == 1 and _node_count(g3) == 0
    rc, added = _raw_add(g3, 0, b"", b"", [0], [0], 0, descs, locs, ats)
    assert rc == 0 and added == 0
    for x in (g, g2, g3):
        x.destroy()


def test_attr_handles_of_a_batch_are_live_together(rt):
    cache = LaunchCache()
    cache.MAX_ATTRS = 4
    try:
        first = cache.attrs([{"a": 1}, {"a": 2}, {"a": 3}])
        assert len(set(first)) == 3
        # three more would overflow: the cache is cleared before the first of them, not between them
        hs = cache.attrs([{"b": 1}, {"b": 2}, {"a": 1}])
        assert len(set(hs)) == 3
        assert all(cache.attr(a) == h for a, h in zip([{"b": 1}, {"b": 2}, {"a": 1}], hs, strict=True))
        assert cache.attrs([{"b": 2}]) == hs[1:2]  # 3 + 1 fit: the cached handle, nothing cleared
        with pytest.raises(ValueError, match="at most 4"):
            cache.attrs([{"c": i} for i in range(5)])
    finally:
        cache.clear()
