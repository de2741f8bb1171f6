"""Nodes a rewrite emits with their outputs' shapes given (``carry_node``): optimize's final
inference takes them as inferred, and gives what inferring every node afresh gives."""

from __future__ import annotations

import importlib

import numpy as np
import pytest

from aioge.graph import ASCEND, HOST, Graph, Node, load_onnx, optimize
from aioge.graph.passes import infer_shapes

from .models import MODELS
from .test_passes_infer_reuse import _cleared, _shapes

IS = importlib.import_module("aioge.graph.passes.infer_shapes")


@pytest.mark.parametrize("target", [HOST, ASCEND], ids=["host", "ascend"])
@pytest.mark.parametrize("name", sorted(MODELS))
def test_optimized_shapes_are_a_fresh_inference(name: str, target: object) -> None:
    g = load_onnx(MODELS[name]().SerializeToString())
    o = optimize(g, 2, target=target)  # type: ignore[arg-type]
    fresh = infer_shapes(_cleared(o))  # every node inferred from its inputs
    assert _shapes(fresh) == _shapes(o)
    assert [n.op_type for n in fresh.nodes] == [n.op_type for n in o.nodes]


def test_carried_fused_and_blocked_nodes_are_not_inferred_again(monkeypatch: pytest.MonkeyPatch) -> None:
    g = load_onnx(MODELS["inception"]().SerializeToString())
    inferred: list[str] = []
    real = IS._infer_node

    def spy(node: Node, shapes: list, values: list) -> list:  # type: ignore[type-arg]
        inferred.append(node.op_type)
        return real(node, shapes, values)

    monkeypatch.setattr(IS, "_infer_node", spy)
    o = optimize(g, 2, target=HOST)
    ops = {n.op_type for n in o.nodes}
    assert "_NchwcConv2D" in ops and "_NchwcConv2D" not in inferred and "_FusedConv" not in inferred


def _one_relu() -> Graph:
    g = Graph("g")
    x = g.input("x", (1, 4), np.float32)
    g.output(g.add_node("Relu", [x], name="r", outputs=["y"]))
    return infer_shapes(g)


def test_carry_node_outside_optimize_records_nothing() -> None:
    g = _one_relu()
    IS.carry_node(g, g.nodes[0])
    assert g not in IS._CARRIED


def test_a_carried_node_fed_differently_is_inferred_again() -> None:
    g = _one_relu().copy()
    g._scratch = True
    g.values["y"].shape = (1, 4)
    IS.carry_node(g, g.nodes[0])
    assert g in IS._CARRIED
    g.values["x"].shape = (2, 4)  # the input now has another shape: the entry no longer applies
    g.values["y"].shape = None
    out = infer_shapes(g)
    assert out.values["y"].shape == (2, 4)
    assert g not in IS._CARRIED  # taken up by that inference
