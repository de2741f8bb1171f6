"""optimize's simplify/fold/DCE/CSE loop: it stops only where another round would change nothing."""

from __future__ import annotations

import numpy as np
import onnx
import pytest

import aioge
from aioge.graph import Graph, optimize
from aioge.graph.passes import (
    eliminate_common_subexpressions,
    eliminate_dead_code,
    fold_constants,
    infer_shapes,
    simplify,
)
from aioge.graph.passes.cse import common_subexpressions_pass
from aioge.graph.passes.dce import dead_code_pass
from aioge.graph.reference import run_reference

from .models import MODELS, SMALL


def _structure(g: Graph) -> tuple[object, ...]:
    nodes = [(n.op_type, n.name, list(n.inputs), list(n.outputs), repr(sorted(n.attrs.items()))) for n in g.nodes]
    consts = sorted((k, a.dtype.str, a.shape, np.ascontiguousarray(a).tobytes()) for k, a in g.constants.items())
    values = sorted((k, v.shape, str(v.dtype)) for k, v in g.values.items())
    return nodes, consts, values, list(g.inputs), list(g.outputs)


def _dropout_with_unused_mask() -> Graph:
    g = Graph()
    x = g.input("x", (2, 3))
    g.add_node("Dropout", [x], outputs=["d", "mask"])
    g.output(g.add_node("Relu", ["d"], name="y"))
    return infer_shapes(g)


def test_dce_reports_whether_it_changed_the_graph() -> None:
    g = _dropout_with_unused_mask()
    out, changed = dead_code_pass(g)
    assert changed and out.nodes[0].outputs == ["d"]  # the unused mask blanked (and dropped: trailing)
    assert g.nodes[0].outputs == ["d", "mask"]  # the argument is untouched
    assert not dead_code_pass(out)[1]  # nothing left to do

    h = Graph()
    x = h.input("x", (4,))
    h.add_node("Neg", [x], name="dead")
    h.output(h.add_node("Relu", [x], name="y"))
    h = infer_shapes(h)
    out, changed = dead_code_pass(h)
    assert changed and out.op_counts() == {"Relu": 1}
    assert not dead_code_pass(out)[1]
    assert _structure(eliminate_dead_code(h)) == _structure(out)


def test_a_dropout_made_a_no_op_by_dce_is_removed_by_the_next_round() -> None:
    # round 1: simplify keeps the Dropout (its mask is named), DCE blanks the unused mask, which
    # changes no node or constant count; round 2: simplify drops the Dropout
    g = _dropout_with_unused_mask()
    o = optimize(g, level=1)
    assert o.op_counts() == {"Relu": 1}
    assert o.nodes[0].inputs == ["x"]
    feeds = {"x": np.arange(6, dtype=np.float32).reshape(2, 3) - 3}
    np.testing.assert_array_equal(run_reference(o, feeds)["y"], run_reference(g, feeds)["y"])


def _dup_kept_for_graph_output() -> Graph:
    # a = Relu(x) and b = Relu(x) are duplicates; b is a graph output, so CSE keeps b and drops a.
    # na = Neg(a) was keyed (reading a) before that; nb = Neg(b) is keyed after: one run of CSE
    # cannot see that na and nb are duplicates too, a second run can
    g = Graph()
    x = g.input("x", (4,))
    a = g.add_node("Relu", [x], name="a")
    na = g.add_node("Neg", [a], name="na")
    b = g.add_node("Relu", [x], name="b")
    nb = g.add_node("Neg", [b], name="nb")
    g.output(g.add_node("Add", [na, nb], name="y"), b)
    return infer_shapes(g)


def test_cse_reports_a_merge_a_second_run_can_extend_and_optimize_runs_it() -> None:
    g = _dup_kept_for_graph_output()
    once, rerun = common_subexpressions_pass(g)
    assert rerun and once.op_counts() == {"Relu": 1, "Neg": 2, "Add": 1}
    twice, rerun2 = common_subexpressions_pass(once)
    assert twice.op_counts() == {"Relu": 1, "Neg": 1, "Add": 1} and not rerun2
    assert _structure(eliminate_common_subexpressions(g)) == _structure(once)
    o = optimize(g, level=1)
    assert o.op_counts() == {"Relu": 1, "Neg": 1, "Add": 1}
    feeds = {"x": np.array([-2, -1, 1, 2], np.float32)}
    want, got = run_reference(g, feeds), run_reference(o, feeds)
    for k in ("y", "b"):
        np.testing.assert_array_equal(got[k], want[k])


def test_cse_without_a_kept_duplicate_settles_in_one_run() -> None:
    g = Graph()
    x = g.input("x", (4,))
    a = g.add_node("Relu", [x])
    b = g.add_node("Relu", [x])
    g.output(g.add_node("Add", [g.add_node("Neg", [a]), g.add_node("Neg", [b])], name="y"))
    out, rerun = common_subexpressions_pass(infer_shapes(g))
    assert not rerun and out.op_counts() == {"Relu": 1, "Neg": 1, "Add": 1}


def _fixpoint_models() -> list[tuple[str, onnx.ModelProto]]:
    return [(name, build(**SMALL[name])) for name, build in MODELS.items()]


@pytest.mark.parametrize(("name", "model"), _fixpoint_models(), ids=lambda v: v if isinstance(v, str) else "")
def test_optimize_level1_result_is_a_fixpoint_of_the_loop(name: str, model: onnx.ModelProto) -> None:
    # what optimize stops at: one more round of each pass changes nothing
    o = optimize(aioge.load_onnx(model.SerializeToString()), level=1)
    for p in (simplify, fold_constants, eliminate_dead_code, eliminate_common_subexpressions):
        assert _structure(p(o)) == _structure(o), f"{name}: {p.__name__} still changes the graph"
