"""aiogeGraphAddNodesByValue (acl.graph_add_nodes_by_value): a graph's nodes added in one call with
their descs given by value, as with desc handles; the descs live for the call only."""

from __future__ import annotations

import numpy as np
import pytest

from aioge import _native, dtypes
from aioge._native import acl, ffi
from aioge.errors import AclError
from tests.support.rawacl import raw_runtime

from .test_hostrt_graph import ARENA, CONST, INPUT, OUTPUT, G
from .test_hostrt_graph_batch import _node_count, _run_mlp

pytestmark = pytest.mark.abi


@pytest.fixture
def rt():
    with raw_runtime() as r:
        yield r


F32 = dtypes.ACL_CODE[np.dtype(np.float32)]
ND = int(acl.Format.ND)


def _mlp_by_value():
    """w, b and y = relu(x @ w + b) (w, b const) as graph_add_nodes_by_value takes it: descs x [2, 3],
    t [2, 4] (shared by the intermediate and the output), w, b."""
    w = np.arange(12, dtype=np.float32).reshape(3, 4) / 10
    b = np.array([1, -100, 2, -3], np.float32)
    table = ([F32] * 4, [ND] * 4, [2, 2, 2, 1], [2, 3, 2, 4, 3, 4, 4], [None, None, w, b])
    operands = ([0, 2, 3, 1, 1, 1], [INPUT, CONST, CONST, ARENA, ARENA, OUTPUT], [0] * 6)
    return w, b, operands, table


@pytest.mark.parametrize("native", [True, False])
def test_by_value_builds_the_graph_handles_would(rt, monkeypatch, native):
    if not native:  # a runtime without the call: the descs are made and destroyed in Python
        monkeypatch.setattr(acl, "_has", lambda name: name != "aiogeGraphAddNodesByValue" and _native._has(name))
    w, b, operands, table = _mlp_by_value()
    before = _native.counters()["tensor_descs"]
    g = G(rt, [24], [32], arena=64)
    acl.graph_add_nodes_by_value(g.h, [0, 0], ["MatMulV2", "Relu"], ["mm", "act"], ([3, 1], [1, 1]), operands,
                                 table, [ffi.NULL, ffi.NULL])  # fmt: skip
    assert _native.counters()["tensor_descs"] == before  # none outlives the call
    assert _node_count(g) == 2
    w[:] = 0  # the graph holds its own copy of the const values
    b[:] = 0
    _, _, _, (_, _, _, _, (_, _, w0, b0)) = _mlp_by_value()
    _run_mlp(rt, g, w0, b0)
    g.destroy()


@pytest.mark.parametrize("native", [True, False])
def test_the_failing_node_is_named_and_no_desc_is_left(rt, monkeypatch, native):
    if not native:
        monkeypatch.setattr(acl, "_has", lambda name: name != "aiogeGraphAddNodesByValue" and _native._has(name))
    _, _, (index, locs, ats), table = _mlp_by_value()
    before = _native.counters()["tensor_descs"]
    g = G(rt, [24], [32], arena=64)
    with pytest.raises(AclError, match=r"compile node 'second one' \(NoSuchOp\)"):
        acl.graph_add_nodes_by_value(g.h, [0, 0, 0], ["MatMulV2", "NoSuchOp", "Relu"], ["mm", "second one", "act"],
                                     ([3, 1, 1], [1, 1, 1]), (index + index[3:], locs + locs[3:], ats + ats[3:]),
                                     table, [ffi.NULL] * 3)  # fmt: skip
    assert _node_count(g) == 1  # the node before it
    assert _native.counters()["tensor_descs"] == before
    g.destroy()


@pytest.mark.parametrize("native", [True, False])
@pytest.mark.parametrize("bad", ["dtype", "ndim"])
def test_a_desc_that_cannot_be_made_adds_no_node(rt, monkeypatch, native, bad):
    if not native:
        monkeypatch.setattr(acl, "_has", lambda name: name != "aiogeGraphAddNodesByValue" and _native._has(name))
    _, _, operands, (dts, fmts, nds, dims, consts) = _mlp_by_value()
    if bad == "dtype":
        dts = [*dts[:1], 9999, *dts[2:]]
    else:  # more dims than a desc can have
        nds, dims = [*nds[:1], 129, *nds[2:]], dims[:2] + [1] * 129 + dims[4:]
    before = _native.counters()["tensor_descs"]
    g = G(rt, [24], [32], arena=64)
    with pytest.raises(AclError) as ei:
        acl.graph_add_nodes_by_value(g.h, [0, 0], ["MatMulV2", "Relu"], ["mm", "act"], ([3, 1], [1, 1]), operands,
                                     (dts, fmts, nds, dims, consts), [ffi.NULL, ffi.NULL])  # fmt: skip
    assert ei.value.code == acl.ERROR_INVALID_PARAM
    assert ("unknown data type" if bad == "dtype" else "numDims") in str(ei.value)
    assert "'mm'" not in str(ei.value)  # the desc is to blame, not the first node
    assert _node_count(g) == 0
    assert _native.counters()["tensor_descs"] == before
    g.destroy()


def test_an_operand_past_the_table_is_refused(rt):
    _, _, (_, locs, ats), table = _mlp_by_value()
    g = G(rt, [24], [32], arena=64)
    with pytest.raises(AclError, match="not in the table") as ei:
        acl.graph_add_nodes_by_value(g.h, [0, 0], ["MatMulV2", "Relu"], ["mm", "act"], ([3, 1], [1, 1]),
                                     ([0, 2, 3, 1, 4, 1], locs, ats), table, [ffi.NULL, ffi.NULL])  # fmt: skip
    assert ei.value.code == acl.ERROR_INVALID_PARAM
    assert "'mm'" not in str(ei.value)
    assert _node_count(g) == 0
    g.destroy()


def test_names_pack_as_c_strings():
    # one NUL after each; a NUL inside a name ends it there, as the C string of aiogeGraphAddNode would
    assert acl._nul_separated(["mm", "act"]) == b"mm\0act\0"
    assert acl._nul_separated(["m\0m", "act", "x\0"]) == b"m\0act\0x\0"
    assert acl._nul_separated(["é"]) == "é".encode() + b"\0"
