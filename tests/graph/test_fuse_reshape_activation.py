"""A matrix product reshaped, then activated (GPT-2's ``c_fc``: ``Gemm -> Reshape -> Gelu``): the
activation moves before the Reshape, so the bias + activation fusion puts it in the product's
epilogue (``_FusedMatMul`` then ``Reshape``).  Where the Reshape's or the product's output is read
elsewhere, or the node is not an activation the epilogue takes, the graph keeps its order.  Results
equal the unfused graph's (numpy reference)."""

from __future__ import annotations

import numpy as np
import pytest

from aioge.graph import Graph, optimize
from aioge.graph.passes import fuse_bias_activation, infer_shapes
from aioge.graph.reference import run_reference

K, N = 16, 24

#: activation node (op, attrs) -> the epilogue's activation attr
ACTS = {
    "Gelu": (("Gelu", {}), "Gelu"),
    "GeluTanh": (("Gelu", {"approximate": "tanh"}), "GeluTanh"),
    "Relu": (("Relu", {}), "Relu"),
    "Sigmoid": (("Sigmoid", {}), "Sigmoid"),
}


def reshaped_layer(act: str, *, bias: bool = True, reshape_output: bool = False, product_output: bool = False,
                   op: str | None = None) -> Graph:  # fmt: skip
    """x[3, K] @ W[K, N] (+ b) -> Reshape [1, 3, N] -> activation (or ``op``) -> y."""
    rng = np.random.default_rng(0)
    g = Graph("reshaped")
    x = g.input("x", (3, K), "float32")
    y = g.add_node("MatMul", [x, g.constant("w", rng.standard_normal((K, N)).astype(np.float32))], name="mm")
    product = y
    if bias:
        y = g.add_node("Add", [y, g.constant("b", rng.standard_normal(N).astype(np.float32))], name="bias")
    r = g.add_node("Reshape", [y, g.constant("shape", np.array([1, 3, N], np.int64))], name="r")
    (kind, attrs), _ = ACTS[act]
    g.output(g.add_node(op or kind, [r], dict(attrs), name="act"))
    if reshape_output:
        g.output(r)
    if product_output:
        g.output(product)
    return g


def same_results(g: Graph, other: Graph) -> None:
    f = {"x": (np.random.default_rng(3).standard_normal((3, K)) * 2).astype(np.float32)}
    want, got = run_reference(g, f), run_reference(other, f)
    assert set(got) == set(want)
    for name in g.outputs:
        assert got[name].shape == want[name].shape
        np.testing.assert_allclose(got[name], want[name], rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("bias", [True, False])
@pytest.mark.parametrize("act", sorted(ACTS))
def test_the_activation_joins_the_products_epilogue(act, bias):
    g = reshaped_layer(act, bias=bias)
    f = optimize(g)
    assert [n.op_type for n in f.nodes] == ["_FusedMatMul", "Reshape"]
    assert f.nodes[0].attrs["activation"] == ACTS[act][1]
    assert f.nodes[1].inputs[0] == f.nodes[0].outputs[0] and f.nodes[1].outputs == g.outputs
    assert f.values[f.nodes[0].outputs[0]].shape == (3, N) and f.values[g.outputs[0]].shape == (1, 3, N)
    same_results(g, f)


def test_the_swap_alone_keeps_the_graph_topological_and_equal():
    g = infer_shapes(reshaped_layer("Gelu"))
    f = fuse_bias_activation(g)
    produced = set(f.inputs) | set(f.constants)
    for n in f.nodes:
        assert all(i in produced for i in n.inputs if i)
        produced.update(n.outputs)
    assert [n.op_type for n in g.nodes] == ["MatMul", "Add", "Reshape", "Gelu"]  # its argument untouched
    same_results(g, f)


@pytest.mark.parametrize("where", ["reshape_output", "product_output"])
def test_a_value_read_elsewhere_keeps_the_order(where):
    g = reshaped_layer("Gelu", **{where: True})
    f = fuse_bias_activation(infer_shapes(g))
    ops = [n.op_type for n in f.nodes]
    assert ops.index("Reshape") < ops.index("Gelu")
    assert all(n.attrs.get("activation", "none") == "none" for n in f.nodes if n.op_type == "_FusedMatMul")
    same_results(g, f)


def test_a_node_the_epilogue_does_not_take_stays_after_the_reshape():
    g = reshaped_layer("Relu", op="Exp")
    f = fuse_bias_activation(infer_shapes(g))
    assert [n.op_type for n in f.nodes] == ["_FusedMatMul", "Reshape", "Exp"]
    assert f.nodes[0].attrs["activation"] == "none"
    same_results(g, f)
