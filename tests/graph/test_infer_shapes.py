"""Shape and dtype inference, including compile-time shape values."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from aioge.graph import DynamicShapeError, Graph, GraphTypeError, ShapeInferenceError
from aioge.graph.passes import infer_shapes


def _one(
    op: str,
    shapes: list[tuple[int, ...]],
    attrs: dict | None = None,
    consts: dict | None = None,
    dtype: str = "float32",
    n_out: int = 1,
) -> list[tuple[int, ...]]:
    g = Graph()
    ins = [g.input(f"x{i}", s, dtype).name for i, s in enumerate(shapes)]
    for k, v in (consts or {}).items():
        g.constant(v, name=k)
        ins.append(k)
    n = g.add_node(op, ins, attrs or {}, num_outputs=n_out, name="n")
    g.output(n)
    g2 = infer_shapes(g)
    return [g2.values[o].shape for o in n.outputs]


@pytest.mark.parametrize(
    ("op", "shapes", "attrs", "consts", "want"),
    [
        ("Add", [(2, 1, 4), (3, 1)], {}, {}, [(2, 3, 4)]),
        ("MatMul", [(5, 2, 3), (3, 7)], {}, {}, [(5, 2, 7)]),
        ("MatMul", [(3,), (2, 3, 4)], {}, {}, [(2, 4)]),
        ("Gemm", [(4, 3), (5, 4)], {"transA": 1, "transB": 1}, {}, [(3, 5)]),
        (
            "Conv",
            [(1, 4, 9, 9), (6, 2, 3, 3)],
            {"group": 2, "strides": [2, 2], "pads": [1, 1, 1, 1]},
            {},
            [(1, 6, 5, 5)],
        ),
        ("Conv", [(1, 3, 7), (2, 3, 3)], {"auto_pad": "SAME_UPPER", "strides": [2]}, {}, [(1, 2, 4)]),
        (
            "ConvTranspose",
            [(1, 4, 5, 5), (4, 3, 3, 3)],
            {"strides": [2, 2], "group": 2},
            {},
            [(1, 6, 11, 11)],
        ),
        (
            "MaxPool",
            [(1, 2, 8, 8)],
            {"kernel_shape": [3, 3], "strides": [2, 2], "ceil_mode": 1},
            {},
            [(1, 2, 4, 4)],
        ),
        ("GlobalAveragePool", [(2, 3, 5, 7)], {}, {}, [(2, 3, 1, 1)]),
        ("Flatten", [(2, 3, 4)], {"axis": 2}, {}, [(6, 4)]),
        ("Flatten", [(2, 3, 4)], {"axis": 0}, {}, [(1, 24)]),
        ("Reshape", [(2, 3, 4)], {}, {"s": np.array([0, -1], np.int64)}, [(2, 12)]),
        ("Transpose", [(2, 3, 4)], {}, {}, [(4, 3, 2)]),
        ("Squeeze", [(1, 3, 1)], {}, {}, [(3,)]),
        ("Unsqueeze", [(3,)], {}, {"a": np.array([0, -1], np.int64)}, [(1, 3, 1)]),
        ("Concat", [(2, 3), (2, 5)], {"axis": -1}, {}, [(2, 8)]),
        ("Split", [(7, 2)], {"axis": 0}, {}, [(3, 2), (3, 2), (1, 2)]),
        (
            "Slice",
            [(10, 5)],
            {},
            {
                "s": np.array([-1, 1], np.int64),
                "e": np.array([-11, 100], np.int64),
                "a": np.array([0, 1], np.int64),
                "st": np.array([-3, 2], np.int64),
            },
            [(4, 2)],
        ),
        ("Gather", [(5, 6)], {"axis": 1}, {"i": np.zeros((2, 3), np.int64)}, [(5, 2, 3)]),
        ("Expand", [(3, 1)], {}, {"s": np.array([2, 1, 4], np.int64)}, [(2, 3, 4)]),
        ("Tile", [(2, 3)], {}, {"r": np.array([2, 1], np.int64)}, [(4, 3)]),
        ("Pad", [(2, 3)], {}, {"p": np.array([1, 0, 2, -1], np.int64)}, [(5, 2)]),
        ("Shape", [(2, 3, 4)], {"start": 1}, {}, [(2,)]),
        ("ReduceSum", [(2, 3, 4)], {"keepdims": 0}, {"a": np.array([1], np.int64)}, [(2, 4)]),
        ("ReduceMean", [(2, 3, 4)], {}, {}, [(1, 1, 1)]),
        ("LayerNormalization", [(2, 3, 4), (4,)], {}, {}, [(2, 3, 4)]),
    ],
)
def test_shapes(op: str, shapes: list, attrs: dict, consts: dict, want: list) -> None:
    n_out = len(want)
    assert _one(op, shapes, attrs, consts, n_out=n_out) == want


def test_layernorm_stat_outputs_and_dtypes() -> None:
    g = Graph()
    x = g.input("x", (2, 3, 4), "float16")
    s = g.constant(np.ones(4, np.float16))
    n = g.add_node("LayerNormalization", [x, s], {"axis": 1}, num_outputs=3, name="ln")
    g.output(n)
    g2 = infer_shapes(g)
    vals = [g2.values[o] for o in n.outputs]
    assert [v.shape for v in vals] == [(2, 3, 4), (2, 1, 1), (2, 1, 1)]
    assert [str(v.dtype) for v in vals] == ["float16", "float32", "float32"]


def test_comparison_and_cast_dtypes() -> None:
    g = Graph()
    x = g.input("x", (3,), "float32")
    lt = g.add_node("Less", [x, x])
    c = g.add_node("Cast", [lt], {"to": "int32"})
    g.output(lt, c)
    g2 = infer_shapes(g)
    assert g2.values[lt.output].dtype == np.bool_ and g2.values[c.output].dtype == np.int32


def test_shape_values_propagate_through_shape_arithmetic() -> None:
    g = Graph()
    x = g.input("x", (2, 6, 4))
    shp = g.add_node("Shape", [x])
    b = g.add_node("Gather", [shp, g.constant(np.array([0], np.int64))])
    target = g.add_node("Concat", [b, g.constant(np.array([-1], np.int64))], {"axis": 0})
    r = g.add_node("Reshape", [x, target], name="r")
    g.output(r)
    assert infer_shapes(g).values["r"].shape == (2, 24)


@pytest.mark.parametrize(
    ("op", "shapes", "attrs", "consts", "match"),
    [
        ("Add", [(2, 3), (4,)], {}, {}, "do not broadcast"),
        ("MatMul", [(2, 3), (4, 5)], {}, {}, "inner dimensions"),
        ("Conv", [(1, 3, 8, 8), (4, 2, 3, 3)], {}, {}, "does not fit 3 input channels"),
        ("Reshape", [(2, 3)], {}, {"s": np.array([4, 2], np.int64)}, "cannot reshape"),
        ("Concat", [(2, 3), (3, 3)], {"axis": 1}, {}, "does not concatenate"),
        ("Squeeze", [(2, 3)], {}, {"a": np.array([0], np.int64)}, "cannot squeeze"),
        ("Transpose", [(2, 3)], {"perm": [0, 0]}, {}, "not a permutation"),
        ("Softmax", [(2, 3)], {"axis": 2}, {}, "out of range"),
        ("Gemm", [(2, 3), (2, 3)], {}, {}, "inner dimensions"),
    ],
)
def test_shape_errors_name_the_node(op: str, shapes: list, attrs: dict, consts: dict, match: str) -> None:
    with pytest.raises(ShapeInferenceError, match=match) as e:
        _one(op, shapes, attrs, consts)
    assert e.value.node == "n" and "node 'n'" in str(e.value)


def test_runtime_shape_input_is_a_dynamic_shape_error() -> None:
    g = Graph()
    x = g.input("x", (2, 3))
    s = g.input("s", (2,), "int64")
    g.output(g.add_node("Reshape", [x, s], name="dyn"))
    with pytest.raises(DynamicShapeError, match=r"dyn.*compile-time constant"):
        infer_shapes(g)


def test_inference_type_error() -> None:
    g = Graph()
    x = g.input("x", (2, 3))
    g.output(g.add_node("Reshape", [x, g.constant(np.array([3, 2], np.float32))], name="r"))
    with pytest.raises(GraphTypeError, match=r"'r'"):
        infer_shapes(g)


def test_declared_shape_conflict() -> None:
    g = Graph()
    x = g.input("x", (2, 3))
    n = g.add_node("Relu", [x], name="relu")
    g.values[n.output].shape = (3, 2)
    g.output(n)
    with pytest.raises(ShapeInferenceError, match=r"declared"):
        infer_shapes(g)


def test_inference_does_not_mutate_and_sorts_nodes() -> None:
    g = Graph()
    x = g.input("x", (2,))
    a = g.add_node("Relu", [x], name="a")
    b = g.add_node("Neg", [a], name="b")
    g.output(b)
    g.nodes.reverse()
    g2 = infer_shapes(g)
    assert g.values["a"].shape is None
    assert [n.name for n in g2.nodes] == ["a", "b"]


def _counting_dtype_checks(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Count check_node_dtypes calls (by node name) in the importer and in shape inference."""
    import sys

    from aioge.graph import onnx_import, schema

    calls: list[str] = []
    real = schema.check_node_dtypes

    def counting(node, in_dtypes):  # type: ignore[no-untyped-def]
        calls.append(node.name)
        return real(node, in_dtypes)

    monkeypatch.setattr(onnx_import, "check_node_dtypes", counting)
    monkeypatch.setattr(sys.modules["aioge.graph.passes.infer_shapes"], "check_node_dtypes", counting)
    return calls


@pytest.mark.parametrize("name", ["residual_cnn", "inception", "attention"])
def test_load_onnx_checks_each_nodes_dtypes_once_and_infers_what_infer_shapes_infers(monkeypatch, name):
    import aioge
    from tests.graph import models

    data = getattr(models, name)().SerializeToString()
    calls = _counting_dtype_checks(monkeypatch)
    g = aioge.load_onnx(data)
    assert sorted(calls) == sorted(n.name for n in g.nodes)  # the importer's check, not inference's again
    # an independent inference of the same graph (a copy with no node output's shape) agrees
    fresh = g.copy()
    for n in fresh.nodes:
        for o in n.outputs:
            if o:
                fresh.values[o].shape = fresh.values[o].dtype = None
    again = infer_shapes(fresh)
    assert [n.name for n in again.nodes] == [n.name for n in g.nodes]
    assert {k: (v.shape, v.dtype) for k, v in again.values.items()} == {
        k: (v.shape, v.dtype) for k, v in g.values.items()
    }


def test_a_node_fed_other_dtypes_than_it_was_checked_with_is_checked_again(monkeypatch):
    from aioge.graph.passes.infer_shapes import infer_in_place

    def graph() -> Graph:
        g = Graph()
        x = g.input("x", (2, 3), "float32")
        g.output(g.add_node("Relu", [g.add_node("Neg", [x], name="neg", outputs=["y"])], name="relu", outputs=["z"]))
        return g

    f32, i64 = np.dtype("float32"), np.dtype("int64")
    calls = _counting_dtype_checks(monkeypatch)
    g = infer_in_place(graph(), checked={"x": f32, "y": f32, "z": f32})
    assert calls == [] and g.values["y"].dtype == g.values["z"].dtype == f32 and g.values["z"].shape == (2, 3)
    g = infer_in_place(graph(), checked={"x": f32, "y": f32})  # relu's output never checked
    assert calls == ["relu"]
    calls.clear()
    # checked with an int64 input: not what it is fed now -> checked (and inferred) again
    g = infer_in_place(graph(), checked={"x": i64, "y": i64, "z": i64})
    assert calls == ["neg", "relu"] and g.values["z"].dtype == f32
    calls.clear()
    # an int64 graph whose dtype check was never made: an error naming the node, as without it
    g = Graph()
    x = g.input("x", (2,), "int64")
    g.output(g.add_node("Sqrt", [x], name="sqrt"))
    with pytest.raises(GraphTypeError, match="sqrt"):
        infer_in_place(g, checked={"x": np.dtype("int64")})


def _edits() -> list[tuple[str, Any]]:
    """Edits of a load_onnx graph: none, and ones that do or do not change what inference sees."""
    return [
        ("none", lambda g: None),
        ("an input added", lambda g: g.nodes[0].inputs.append("zz")),
        ("an attr added", lambda g: g.nodes[-1].attrs.__setitem__("foo", 1)),
        ("a shape changed", lambda g: setattr(g.values[g.nodes[1].outputs[0]], "shape", (1,))),
        ("an output repeated", lambda g: g.outputs.append(g.outputs[0])),
        ("nodes reordered", lambda g: g.nodes.reverse()),
        ("list attrs copied", lambda g: g.nodes[0].attrs.update(
            {k: list(v) for k, v in g.nodes[0].attrs.items() if isinstance(v, list)})),
        ("list attrs as tuples", lambda g: [n.attrs.update(
            {k: tuple(v) for k, v in n.attrs.items() if isinstance(v, list)}) for n in g.nodes]),
        ("list attrs as arrays", lambda g: [n.attrs.update(
            {k: np.array(v) for k, v in n.attrs.items() if isinstance(v, list)}) for n in g.nodes]),
        ("a list attr longer", lambda g: [n.attrs.update(
            {k: [*v, 1] for k, v in n.attrs.items() if isinstance(v, list)}) for n in g.nodes[:1]]),
        ("attrs reordered", lambda g: [n.attrs.update(dict(reversed(list(n.attrs.items())))) for n in g.nodes]),
        ("a constant replaced", lambda g: g.constants.update({k: v.copy() for k, v in list(g.constants.items())[:1]})),
        ("a value dropped", lambda g: g.values.pop(next(iter(g.values)))),
    ]  # fmt: skip


def _plain_snapshot(g: Any) -> tuple[Any, ...]:
    """What inference reads or writes, as lists and dicts (each list attr copied): the comparison
    ``is_inferred`` makes with its own snapshot."""
    nodes = [
        (n.op_type, n.domain, n.name, list(n.inputs), list(n.outputs),
         {k: list(v) if isinstance(v, list) else v for k, v in n.attrs.items()})
        for n in g.nodes
    ]  # fmt: skip
    values = {k: (v.shape, v.dtype) for k, v in g.values.items()}
    return (nodes, values, [id(a) for a in g.constants.values()], list(g.constants), list(g.inputs),
            list(g.outputs), dict(g.symbolic))  # fmt: skip


@pytest.mark.parametrize("model", ["mlp", "inception", "attention"])
def test_is_inferred_compares_as_the_snapshot_does(model):
    """is_inferred (load_onnx's graph, then edited) says what comparing a new snapshot of the
    graph with the one taken at inference says, edit by edit."""
    import importlib

    from aioge.graph import load_onnx
    from tests.graph import models as M

    mod = importlib.import_module("aioge.graph.passes.infer_shapes")
    data = getattr(M, model)().SerializeToString()
    seen = set()
    for what, edit in _edits():
        g = load_onnx(data)
        assert g in mod._INFERRED
        before = _plain_snapshot(g)
        edit(g)
        try:
            want = bool(before == _plain_snapshot(g))
        except (ValueError, TypeError):
            want = False
        assert mod.is_inferred(g) == want, what
        seen.add(want)
    assert seen == {True, False}
