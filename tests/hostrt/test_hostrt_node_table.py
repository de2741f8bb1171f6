"""acl.node_table: a layout's placed ops as the batches acl.graph_add_nodes_by_value takes (its arrays as
int32/int64 memoryviews, added by one C call of aiogeGraphAddNodesByValue, or as lists where the runtime
has no such call); the graph is the one the same table given as lists builds."""

from __future__ import annotations

import numpy as np
import pytest

from aioge import _native, dtypes
from aioge._layout import NCHW_OPS
from aioge._native import acl, ffi
from aioge.errors import AclError
from aioge.graph.executable import PlacedOp
from aioge.runtime.graphs.executable import _FORMATS
from tests.support.rawacl import raw_runtime

from .test_hostrt_graph import ARENA, CONST, INPUT, OUTPUT, G
from .test_hostrt_graph_batch import _node_count, _run_mlp

pytestmark = pytest.mark.abi


@pytest.fixture
def rt():
    with raw_runtime() as r:
        yield r


F32 = np.dtype(np.float32)


def _mlp_ops(second: str = "Relu") -> tuple[np.ndarray, np.ndarray, list[PlacedOp]]:
    """y = relu(x @ w + b) (w, b const) as placed ops: the intermediate in the arena, y the output."""
    w = np.arange(12, dtype=np.float32).reshape(3, 4) / 10
    b = np.array([1, -100, 2, -3], np.float32)
    t = (F32, (2, 4))
    mm = PlacedOp("MatMulV2", "mm", 0, [((F32, (2, 3)), INPUT, 0), (w, CONST, 0), (b, CONST, 0)], [(t, ARENA, 0)], {})
    act = PlacedOp(second, "second one", 0, [(t, ARENA, 0)], [(t, OUTPUT, 0)], {})
    return w, b, [mm, act]


def _table(ops: list[PlacedOp], node_batch: int = 1024) -> list:
    return acl.node_table(ops, NCHW_OPS, dtypes.ACL_CODE, dtypes.normalize, _FORMATS, node_batch, 1 << 20)


def test_the_table_of_placed_ops():
    """One desc per distinct (dtype, shape) of the plain operands, one per const value (in the order met)."""
    w, b, ops = _mlp_ops()
    ((segs, types, names, (n_in, n_out), (index, locs, ats), (dts, fmts, nds, dims, consts), attrs),) = _table(ops)
    f32, nd = dtypes.ACL_CODE[F32], int(acl.Format.ND)
    assert (segs.tolist(), types, names, n_in.tolist(), n_out.tolist()) == ([0, 0], ["MatMulV2", "Relu"],
                                                                              ["mm", "second one"], [3, 1], [1, 1])
    assert (index.tolist(), locs.tolist(), ats.tolist()) == ([0, 1, 2, 3, 3, 3], [INPUT, CONST, CONST, ARENA,
                                                                                   ARENA, OUTPUT], [0] * 6)
    assert (dts.tolist(), fmts.tolist(), nds.tolist(), dims.tolist()) == ([f32] * 4, [nd] * 4, [2, 2, 1, 2],
                                                                          [2, 3, 3, 4, 4, 2, 4])
    assert consts[0] is None and consts[1] is w and consts[2] is b and consts[3] is None
    assert attrs == [{}, {}]
    assert (segs.format, ats.format, dims.format) == ("i", "q", "q")


def test_batches_start_their_descs_anew():
    _, _, ops = _mlp_ops()
    one, two = _table(ops, node_batch=1)
    assert one[2] == ["mm"] and two[2] == ["second one"]
    assert two[4][0].tolist() == [0, 0] and two[5][0].tolist() == [dtypes.ACL_CODE[F32]]


@pytest.mark.parametrize("native", [True, False])
def test_the_table_builds_the_graph(rt, monkeypatch, native):
    if not native:  # a runtime without the call: the arrays as lists, the descs made in Python
        monkeypatch.setattr(acl, "_has", lambda name: name != "aiogeGraphAddNodesByValue" and _native._has(name))
    w, b, ops = _mlp_ops()
    before = _native.counters()["tensor_descs"]
    g = G(rt, [24], [32], arena=64)
    for segs, types, names, counts, operands, table, attrs in _table(ops):
        acl.graph_add_nodes_by_value(g.h, segs, types, names, counts, operands, table, [ffi.NULL] * len(attrs))
    assert _native.counters()["tensor_descs"] == before
    assert _node_count(g) == 2
    w0, b0 = w.copy(), b.copy()
    w[:] = 0  # the graph holds its own copy of the const values
    b[:] = 0
    _run_mlp(rt, g, w0, b0)
    g.destroy()


@pytest.mark.parametrize("native", [True, False])
def test_the_failing_node_is_named(rt, monkeypatch, native):
    if not native:
        monkeypatch.setattr(acl, "_has", lambda name: name != "aiogeGraphAddNodesByValue" and _native._has(name))
    _, _, ops = _mlp_ops("NoSuchOp")
    g = G(rt, [24], [32], arena=64)
    with pytest.raises(AclError, match=r"compile node 'second one' \(NoSuchOp\)"):
        for segs, types, names, counts, operands, table, attrs in _table(ops):
            acl.graph_add_nodes_by_value(g.h, segs, types, names, counts, operands, table, [ffi.NULL] * len(attrs))
    assert _node_count(g) == 1  # the node before it
    g.destroy()


def test_a_dtype_without_a_code_raises_as_the_table_lookup_does():
    op = PlacedOp("Relu", "r", 0, [((np.dtype("U4"), (2,)), ARENA, 0)], [((F32, (2,)), ARENA, 0)], {})
    with pytest.raises(KeyError):
        _table([op])
