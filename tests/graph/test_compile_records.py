"""The compile's record types (plan steps and buffers, lowered ops and nodes) build their fields in one
dict: they must stay frozen, comparable and hashable dataclasses with the same defaults."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from aioge.graph import Graph, Node
from aioge.graph.executable import kind_of
from aioge.graph.lower import LoweredNode, LoweredOp
from aioge.graph.planner import Buffer, Step


def test_buffer_is_a_frozen_value() -> None:
    b = Buffer("v", "arena", 10, 64, 0, "v", 1, 2)
    same = Buffer(value="v", kind="arena", nbytes=10, size=64, offset=0, root="v", first=1, last=2)
    assert b == same and hash(b) == hash(same)
    assert b != dataclasses.replace(b, offset=64)
    assert dataclasses.astuple(b) == ("v", "arena", 10, 64, 0, "v", 1, 2)
    assert repr(b).startswith("Buffer(value='v', kind='arena'")
    with pytest.raises(dataclasses.FrozenInstanceError):
        b.offset = 1  # type: ignore[misc]


def test_step_defaults_and_frozen() -> None:
    node = Node("Relu", ["x"], ["y"], name="r")
    s = Step(0, node, 1)
    assert (s.waits, s.record, s.alias) == ((), False, False)
    assert dataclasses.replace(s, waits=(3,), record=True) == Step(0, node, 1, (3,), True)
    with pytest.raises(dataclasses.FrozenInstanceError):
        s.stream = 0  # type: ignore[misc]


def test_lowered_op_defaults_are_fresh_dicts() -> None:
    a, b = LoweredOp("Add", ("x", "y"), ("z",)), LoweredOp("Add", ("x", "y"), ("z",))
    assert a == b and a.attrs == {} and a.shapes == {} and not a.alias
    assert a.attrs is not b.attrs and a.shapes is not b.shapes
    c = dataclasses.replace(a, attrs={"k": 1}, alias=True)
    assert (c.op_type, c.inputs, c.outputs, c.attrs, c.alias) == ("Add", ("x", "y"), ("z",), {"k": 1}, True)
    with pytest.raises(dataclasses.FrozenInstanceError):
        a.alias = True  # type: ignore[misc]
    ln = LoweredNode(Node("Add", ["x", "y"], ["z"], name="n"), (a,), {})
    assert ln.ops == (a,) and ln.temps == {}
    with pytest.raises(dataclasses.FrozenInstanceError):
        ln.ops = ()  # type: ignore[misc]


def test_kind_of_normalizes_every_dtype_object() -> None:
    g = Graph("g")
    g.input("a", (2, 3), np.float32)
    g.input("b", [4], np.dtype(np.int64))
    assert kind_of(g, "a") == ((2, 3), np.dtype(np.float32))
    for _ in range(2):  # the second time from the per-process table
        shape, dt = kind_of(g, "b")
        assert shape == (4,) and type(shape) is tuple and dt == np.dtype(np.int64)
    g.values["b"].dtype = np.dtype("U3")  # a dtype object with no ACL type: still refused
    with pytest.raises(TypeError):
        kind_of(g, "b")
