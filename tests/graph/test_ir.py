"""IR builder, printing, copying and validation."""

from __future__ import annotations

import numpy as np
import pytest

from aioge.errors import AioGeError
from aioge.graph import (
    DanglingValueError,
    DuplicateValueError,
    DynamicShapeError,
    Graph,
    GraphCycleError,
    GraphError,
    GraphTypeError,
    Node,
    UnknownOpError,
    Value,
)
from aioge.graph.ir import normalize_shape
from aioge.graph.passes import infer_shapes
from aioge.graph.reference import run_reference


def mlp_graph() -> Graph:
    g = Graph("mlp")
    x = g.input("x", (8, 16), "float32")
    w = g.constant(np.full((16, 4), 0.5, np.float32), name="w")
    b = g.constant(np.arange(4, dtype=np.float32), name="b")
    y = g.add_node("MatMul", [x, w], name="mm")
    z = g.add_node("Add", [y, b], name="bias")
    r = g.add_node("Relu", [z], name="act")
    g.output(r)
    return g


def test_builder_creates_values_and_runs() -> None:
    g = mlp_graph()
    g.validate()
    assert g.inputs == ["x"] and g.outputs == ["act"]
    assert isinstance(g.values["x"], Value) and g.values["x"].shape == (8, 16)
    assert g.values["x"].dtype == np.float32
    assert g.values["w"].shape == (16, 4) and "w" in g.constants
    assert not g.constants["w"].flags.writeable
    assert g.values["mm"].shape is None  # not inferred yet
    out = run_reference(infer_shapes(g), {"x": np.ones((8, 16), np.float32)})
    np.testing.assert_allclose(out["act"], np.ones((8, 4)) * 8 + np.arange(4))


def test_str_lists_inputs_constants_nodes_outputs() -> None:
    text = str(infer_shapes(mlp_graph()))
    assert "graph mlp" in text
    assert "input  %x: float32[8x16]" in text
    assert "const  %w: float32[16x4]" in text
    assert "%mm: float32[8x4] = MatMul(%x, %w)  # mm" in text
    assert text.strip().endswith("-> (%act)")
    assert "Relu" in repr(mlp_graph().nodes[-1])


def test_attrs_and_multi_output_nodes() -> None:
    g = Graph()
    x = g.input("x", (4, 6))
    s = g.add_node("Split", [x], {"axis": 1}, num_outputs=3, name="sp")
    assert s.outputs == ["sp:0", "sp:1", "sp:2"]
    with pytest.raises(GraphError, match=r"has 3 outputs"):
        _ = s.output
    g.output(s)
    g2 = infer_shapes(g)
    assert [g2.values[o].shape for o in g2.outputs] == [(4, 2)] * 3
    assert "axis=1" in str(g2)


def test_inputs_may_be_nodes_values_or_names_and_absent() -> None:
    g = Graph()
    x = g.input("x", (3,))
    r = g.add_node("Relu", [x])
    c = g.add_node("Clip", [r, None, g.constant(np.float32(1.0))])
    assert c.inputs[1] == ""
    g.output(c)
    out = run_reference(infer_shapes(g), {"x": np.array([-1, 0.5, 3], np.float32)})
    np.testing.assert_array_equal(out[c.output], [0, 0.5, 1])


def test_cycle_error_names_nodes() -> None:
    g = Graph()
    x = g.input("x", (2,))
    g.nodes.append(Node("Add", ["x", "b"], ["a"], name="n_a"))
    g.nodes.append(Node("Relu", ["a"], ["b"], name="n_b"))
    g.values["a"], g.values["b"] = Value("a"), Value("b")
    g.output("a")
    with pytest.raises(GraphCycleError) as e:
        g.validate()
    assert "n_a" in str(e.value) and "n_b" in str(e.value)
    assert e.value.node in ("n_a", "n_b")
    assert isinstance(e.value, AioGeError) and isinstance(e.value, ValueError)
    del x


def test_dangling_input_names_the_node() -> None:
    g = Graph()
    g.input("x", (2,))
    n = g.add_node("Add", ["x", "missing"], name="adder")
    g.output(n)
    with pytest.raises(DanglingValueError, match=r"node 'adder' \(Add\): input 'missing'") as e:
        g.validate()
    assert e.value.node == "adder"


def test_dangling_output() -> None:
    g = Graph()
    g.input("x", (2,))
    with pytest.raises(DanglingValueError):
        g.output("nope")
    g.outputs.append("nope")
    with pytest.raises(DanglingValueError, match=r"graph output 'nope'"):
        g.validate()


def test_type_mismatch_names_the_node() -> None:
    g = Graph()
    x = g.input("x", (2,), "float32")
    i = g.input("i", (2,), "int64")
    n = g.add_node("Add", [x, i], name="mixed")
    g.output(n)
    with pytest.raises(GraphTypeError, match=r"node 'mixed' \(Add\).*int64.*float32") as e:
        g.validate()
    assert isinstance(e.value, TypeError)


def test_type_errors_propagate_through_inferred_dtypes() -> None:
    g = Graph()
    x = g.input("x", (2,), "float32")
    s = g.add_node("Shape", [x], name="shape")  # int64
    n = g.add_node("Mul", [x, s], name="bad_mul")
    g.output(n)
    with pytest.raises(GraphTypeError, match=r"bad_mul"):
        g.validate()
    g2 = Graph()
    y = g2.input("y", (2,), "int64")
    g2.output(g2.add_node("Sqrt", [y], name="isqrt"))
    with pytest.raises(GraphTypeError, match=r"isqrt.*expected a float type"):
        g2.validate()


def test_duplicate_definitions() -> None:
    g = Graph()
    g.input("x", (2,))
    with pytest.raises(DuplicateValueError):
        g.input("x", (2,))
    g.add_node("Relu", ["x"], name="r")
    with pytest.raises(DuplicateValueError):
        g.add_node("Relu", ["x"], name="r")
    g.nodes.append(Node("Neg", ["x"], ["r"], name="r2"))
    with pytest.raises(DuplicateValueError, match=r"2"):
        g.validate()


def test_unknown_op_arity_and_attrs() -> None:
    g = Graph()
    g.input("x", (2,))
    g.output(g.add_node("Frobnicate", ["x"], name="f"))
    with pytest.raises(UnknownOpError, match=r"'f'.*Frobnicate"):
        g.validate()
    g = Graph()
    g.input("x", (2,))
    g.output(g.add_node("Add", ["x"], name="one_input_add"))
    with pytest.raises(GraphError, match=r"one_input_add.*has 1 inputs"):
        g.validate()
    g = Graph()
    g.input("x", (2,))
    g.output(g.add_node("Relu", ["x"], {"alpha": 1.0}, name="relu_alpha"))
    with pytest.raises(GraphError, match=r"elu_alpha.*unknown attribute"):
        g.validate()


def test_static_shapes_only() -> None:
    g = Graph()
    g.input("b", ("batch", 3))  # symbolic input dims make a dynamic graph (test_dynamic.py)
    with pytest.raises(DynamicShapeError):
        normalize_shape(("batch", 3))
    with pytest.raises(DynamicShapeError):
        g.input("x", (-1, 3))
    with pytest.raises(GraphError):
        g.input("y", (1,), "not-a-dtype")


def test_copy_is_independent_and_topological_order_is_deterministic() -> None:
    g = mlp_graph()
    c = g.copy()
    c.nodes[0].inputs[0] = "changed"
    c.values["x"].shape = (1, 1)
    assert g.nodes[0].inputs[0] == "x" and g.values["x"].shape == (8, 16)
    assert c.constants["w"] is g.constants["w"]
    shuffled = g.copy()
    shuffled.nodes.reverse()
    assert [n.name for n in shuffled.topological_order()] == ["mm", "bias", "act"]


def test_graph_helpers() -> None:
    g = mlp_graph()
    assert [n.name for n in g.consumers()["mm"]] == ["bias"]
    assert g.producers()["act"].name == "act"
    assert g.node("mm").op_type == "MatMul"
    assert g.op_counts() == {"MatMul": 1, "Add": 1, "Relu": 1}
    g.replace_uses("act", "bias")
    assert g.outputs == ["bias"]
    g.remove_nodes([g.node("act")])
    g.prune_values()
    assert "act" not in g.values
    g.validate()
    assert g.fresh_name("mm") not in g.values


def test_builder_orders_are_name_first_and_the_old_constant_order_warns() -> None:
    g = Graph()
    a = g.constant("a", np.ones(2, np.float32))
    b = g.constant(np.zeros(2, np.float32), name="b")  # keyword form of the older order: no warning
    c = g.constant(np.ones(3, np.float32))  # a fresh name
    assert (a.name, b.name) == ("a", "b") and c.name.startswith("const") and c.shape == (3,)
    with pytest.warns(DeprecationWarning, match=r"constant\(name, array\)"):
        d = g.constant(np.ones(1, np.int64), "d")
    assert d.name == "d" and g.constants["d"].dtype == np.int64
    with pytest.raises(GraphError, match="named twice"):
        g.constant("e", np.ones(1), name="f")
    with pytest.raises(GraphError, match="needs an array"):
        g.constant("e")


def test_chaining_single_and_multi_output_nodes() -> None:
    g = Graph()
    x = g.input("x", (4, 6))
    h = g.add_node("Relu", [g.add_node("Neg", [x])])  # a Node stands for its output
    parts = g.add_node("Split", [h, g.constant("sizes", np.array([2, 4]))], {"axis": 1}, num_outputs=2)
    with pytest.raises(GraphError, match="has 2 outputs"):
        g.add_node("Relu", [parts])
    g.output(g.add_node("Exp", [parts.out(1)]), parts.out(0))
    with pytest.raises(GraphError, match="no output 2"):
        parts.out(2)
    xv = np.linspace(-1, 1, 24, dtype=np.float32).reshape(4, 6)
    out = run_reference(infer_shapes(g), {"x": xv})
    np.testing.assert_allclose(out[g.outputs[0]], np.exp(np.maximum(-xv, 0)[:, 2:]), rtol=1e-6)
    assert out[g.outputs[1]].shape == (4, 2)


def test_validate_checks_shapes_when_the_inputs_are_static() -> None:
    from aioge.graph import ShapeInferenceError

    g = Graph()
    a = g.input("a", (2, 2))
    g.output(g.add_node("MatMul", [a, g.constant("b", np.ones((3, 3), np.float32))], name="mm"))
    with pytest.raises(ShapeInferenceError, match=r"'mm' \(MatMul\).*inner dimensions"):
        g.validate()
    g.validate(shapes=False)  # structure and dtypes only
