"""Graph._validate_structure names what first defined a value a node defines again."""

from __future__ import annotations

import numpy as np
import pytest

from aioge.graph import Graph
from aioge.graph.errors import DuplicateValueError
from aioge.graph.ir import Node


@pytest.mark.parametrize(
    ("first", "by"),
    [("input", "input"), ("constant", "constant"), ("node", "node 'a'")],
)
def test_a_value_defined_twice_names_its_first_definition(first: str, by: str) -> None:
    g = Graph()
    g.input("x", (2,), np.float32)
    if first == "constant":
        g.set_constant("v", np.ones(2, np.float32))
    elif first == "node":
        g.add_node("Relu", ["x"], name="a", outputs=["v"])
    else:
        g.input("v", (2,), np.float32)
    g.nodes.append(Node("Relu", ["x"], ["v"], {}, "b"))
    with pytest.raises(DuplicateValueError, match=rf"node 'b' \(Relu\): output 'v' is already defined \(by {by}\)$"):
        g._validate_structure()


def test_set_constant_gives_its_value_the_arrays_shape_as_python_ints() -> None:
    g = Graph()
    g.set_constant("c", np.zeros((3, 1, 2), np.int64))
    v = g.values["c"]
    assert v.shape == (3, 1, 2) and all(type(d) is int for d in v.shape) and v.dtype == np.dtype("int64")
