"""A lowered node's last copy of a temporary into its output is folded into the op that made it."""

from __future__ import annotations

import numpy as np
import pytest

from aioge.graph import HOST, Graph, lower_node
from aioge.graph.lower import _forward_copies
from aioge.graph.lower._base import Builder
from aioge.graph.passes import infer_shapes
from aioge.graph.reference import run_reference
from tests.graph.cann_emulator import run_lowered


def _recurrent(op: str, direction: str, seq_lens: bool = False) -> Graph:
    rng = np.random.default_rng(3)
    t, b, i, h = 4, 2, 3, 5
    g_ = {"LSTM": 4, "GRU": 3}[op]
    nd = 2 if direction == "bidirectional" else 1
    g = Graph()
    x = g.input("x", (t, b, i), "float32").name
    w = g.constant(rng.standard_normal((nd, g_ * h, i)).astype(np.float32), name="w").name
    r = g.constant(rng.standard_normal((nd, g_ * h, h)).astype(np.float32), name="r").name
    bias = g.constant(rng.standard_normal((nd, 2 * g_ * h)).astype(np.float32), name="b").name
    lens = g.constant(np.array([4, 2], np.int32), name="lens").name if seq_lens else ""
    outs = 3 if op == "LSTM" else 2
    n = g.add_node(op, [x, w, r, bias, lens], {"hidden_size": h, "direction": direction}, name="n", num_outputs=outs)
    for o in n.outputs:
        g.output(o)
    return infer_shapes(g)


@pytest.mark.parametrize("op", ["LSTM", "GRU"])
@pytest.mark.parametrize("direction", ["forward", "reverse", "bidirectional"])
@pytest.mark.parametrize("seq_lens", [False, True])
def test_recurrent_outputs_are_written_by_their_ops(op: str, direction: str, seq_lens: bool) -> None:
    g = _recurrent(op, direction, seq_lens)
    node = g.node("n")
    ln = lower_node(g, node)
    # no op copies a temporary into a node output when the op that made it can write it
    for op_ in ln.ops:
        if op_.op_type == "Identity" and not op_.alias and op_.outputs[0] in node.outputs:
            src = op_.inputs[0]
            made = [o for o in ln.ops if src in o.outputs]
            assert src not in ln.temps or any(o.alias for o in made), (op_, [o.op_type for o in ln.ops])
    # every name an op writes is a temporary or one of the node's outputs, and each output is written once
    written = [o for op_ in ln.ops for o in op_.outputs]
    assert all(o in ln.temps or o in node.outputs for o in written)
    for o in node.outputs:
        assert written.count(o) == 1, o
    # and the lowered ops still compute the node
    feeds = {"x": np.random.default_rng(5).standard_normal((4, 2, 3)).astype(np.float32)}
    got = run_lowered(g, feeds)
    want = run_reference(g, feeds)
    for o in g.outputs:
        np.testing.assert_allclose(got[o], want[o], rtol=1e-5, atol=1e-5)


def _builder() -> tuple[Graph, Builder, str, str]:
    g = Graph()
    x = g.input("x", (2, 3), "float32").name
    n = g.add_node("Relu", [x], {}, name="n")
    g.output(n)
    g = infer_shapes(g)
    return g, Builder(g, g.node("n"), HOST), x, g.node("n").outputs[0]


def test_the_copy_folds_into_its_producer() -> None:
    _, L, x, y = _builder()
    t = L.to("Relu", [x], (2, 3), np.float32)
    L.op("Identity", [t], [y])
    _forward_copies(L)
    assert [(o.op_type, o.inputs, o.outputs) for o in L.ops] == [("Relu", (x,), (y,))]
    assert t not in L.temps


def test_a_copy_with_a_second_reader_stays() -> None:
    _, L, x, y = _builder()
    t = L.to("Relu", [x], (2, 3), np.float32)
    L.op("Identity", [t], [y])
    L.to("Mul", [t, t], (2, 3), np.float32)
    _forward_copies(L)
    assert [o.op_type for o in L.ops] == ["Relu", "Identity", "Mul"]


def test_a_copy_that_reshapes_stays() -> None:
    _, L, x, y = _builder()
    t = L.to("Relu", [x], (6,), np.float32)  # a different shape: the copy describes it anew
    L.op("Identity", [t], [y])
    _forward_copies(L)
    assert [o.op_type for o in L.ops] == ["Relu", "Identity"]


def test_a_copy_of_a_view_stays() -> None:
    _, L, x, y = _builder()
    v = L.reshape(L.to("Neg", [x], (3, 2), np.float32), (2, 3))  # made by a view, not an op
    L.op("Identity", [v], [y])
    _forward_copies(L)
    assert [o.op_type for o in L.ops] == ["Neg", "Reshape", "Identity"]
