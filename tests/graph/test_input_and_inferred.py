"""Graph.input's static-shape path and is_inferred's comparison of the values in another order."""

from __future__ import annotations

import importlib

import numpy as np
import pytest

from aioge.graph import Graph, load_onnx
from aioge.graph.errors import DynamicShapeError
from aioge.graph.ir import normalize_dtype


@pytest.mark.parametrize(
    "shape",
    [(2, 3), (), (0, 4), [5], (np.int64(2), 3), (np.int32(7),)],
)
def test_input_static_shape_is_python_ints(shape):
    g = Graph()
    v = g.input("x", shape, "float32")
    assert v.shape == tuple(int(d) for d in shape)
    assert all(type(d) is int for d in v.shape)
    assert v.dtype == np.dtype("float32")
    assert g.inputs == ["x"] and "x" not in g.symbolic


@pytest.mark.parametrize("shape", [(2, -1), (True, 3), (2.0, 3)])
def test_input_bad_static_dims_raise(shape):
    with pytest.raises(DynamicShapeError):
        Graph().input("x", shape)


def test_input_symbolic_dims():
    g = Graph()
    v = g.input("x", ("n", 3, None), np.float16)
    assert v.shape is None and v.dtype == np.dtype("float16")
    assert g.symbolic["x"] == ("n", 3, None)


@pytest.mark.parametrize("dt", [np.dtype("float32"), np.dtype(">i4"), np.dtype("bool"), "int8", np.float64])
def test_normalize_dtype_of_a_dtype_is_itself(dt):
    got = normalize_dtype(dt)
    assert got == np.dtype(dt)
    if isinstance(dt, np.dtype):
        assert got is dt


def test_is_inferred_values_in_another_order():
    from tests.graph import models as M

    mod = importlib.import_module("aioge.graph.passes.infer_shapes")
    data = M.mlp().SerializeToString()
    g = load_onnx(data)
    assert mod.is_inferred(g)
    g.values = dict(reversed(list(g.values.items())))  # the same records, another order
    assert mod.is_inferred(g)
    name = next(iter(g.values))
    v = g.values[name]
    g.values[name] = type(v)(v.name, v.shape, np.dtype("float16") if v.dtype != np.float16 else np.dtype("float32"))
    assert not mod.is_inferred(g)
    g2 = load_onnx(data)
    n = g2.nodes[0]
    n.inputs = list(n.inputs)  # the same names in a new list
    assert mod.is_inferred(g2)
    n.outputs.append("")
    assert not mod.is_inferred(g2)
