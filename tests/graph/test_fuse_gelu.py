"""Exporters' decomposed erf Gelu becomes one Gelu, which the bias + activation fusion puts in the
matrix product's epilogue; arrangements that are not Gelu stay as they are.  Results equal the
unfused graph's (numpy reference) and onnxruntime's on the device."""

from __future__ import annotations

import math

import numpy as np
import pytest

import aioge
from aioge.graph import Graph, optimize
from aioge.graph.passes import fuse_gelu, infer_shapes
from aioge.graph.reference import run_reference

K, N = 16, 24


def gelu_graph(arrangement: str, *, sqrt2: float = math.sqrt(2.0), half: float = 0.5, one: float = 1.0,
               matmul: bool = True, extra_use: bool = False) -> Graph:  # fmt: skip
    """x[3, K] (@ W[K, N] + b) -> the erf Gelu written as ``arrangement`` -> y."""
    rng = np.random.default_rng(0)
    g = Graph("gelu")
    x = g.input("x", (3, K), "float32")
    if matmul:
        h = g.add_node("MatMul", [x, g.constant("w", rng.standard_normal((K, N)).astype(np.float32))], name="mm")
        x = g.add_node("Add", [h, g.constant("b", rng.standard_normal(N).astype(np.float32))], name="bias")
    c = lambda name, v: g.constant(name, np.array(v, np.float32))  # noqa: E731
    if arrangement == "mul_inv_sqrt2":
        scaled = g.add_node("Mul", [c("r", 1 / sqrt2), x], name="scale")
    else:
        scaled = g.add_node("Div", [x, c("s", sqrt2)], name="scale")
    e = g.add_node("Add", [g.add_node("Erf", [scaled], name="erf"), c("one", one)], name="plus1")
    if arrangement in ("x_then_half", "mul_inv_sqrt2"):  # torch: (x * (1 + erf)) * 0.5
        y = g.add_node("Mul", [g.add_node("Mul", [x, e], name="m1"), c("half", half)], name="m2")
    elif arrangement == "half_then_x":  # ((1 + erf) * 0.5) * x
        y = g.add_node("Mul", [x, g.add_node("Mul", [e, c("half", half)], name="m1")], name="m2")
    else:  # "half_x_first": (x * 0.5) * (1 + erf)
        y = g.add_node("Mul", [g.add_node("Mul", [x, c("half", half)], name="hx"), e], name="m1")
    g.output(y)
    if extra_use:
        g.output(e)
    return g


def ops_of(g: Graph) -> list[str]:
    return [n.op_type for n in g.nodes]


def feeds(g: Graph) -> dict[str, np.ndarray]:
    """Every graph input, standard normal x 3 (seeded)."""
    rng = np.random.default_rng(3)
    return {name: (rng.standard_normal(g.values[name].shape) * 3).astype(np.float32) for name in g.inputs}


def same_results(g: Graph, other: Graph, rtol: float = 1e-5) -> None:
    f = feeds(g)
    want, got = run_reference(g, f), run_reference(other, f)
    for name in g.outputs:
        np.testing.assert_allclose(got[name], want[name], rtol=rtol, atol=1e-5)


ARRANGEMENTS = ["x_then_half", "half_then_x", "half_x_first", "mul_inv_sqrt2"]


@pytest.mark.parametrize("arrangement", ARRANGEMENTS)
def test_each_arrangement_becomes_one_gelu(arrangement):
    g = gelu_graph(arrangement, matmul=False)
    f = fuse_gelu(infer_shapes(g))
    assert ops_of(f) == ["Gelu"] and f.outputs == g.outputs
    same_results(g, f)


@pytest.mark.parametrize("arrangement", ARRANGEMENTS)
def test_the_pipeline_puts_it_in_the_products_epilogue(arrangement):
    g = gelu_graph(arrangement)
    f = optimize(g)
    assert ops_of(f) == ["_FusedMatMul"] and f.nodes[0].attrs["activation"] == "Gelu"
    same_results(g, f, rtol=1e-4)


@pytest.mark.parametrize("change", [{"sqrt2": 1.5}, {"half": 0.25}, {"one": 2.0}, {"extra_use": True}])
def test_what_is_not_gelu_stays(change):
    g = gelu_graph("x_then_half", matmul=False, **change)
    f = fuse_gelu(infer_shapes(g))
    assert "Erf" in ops_of(f) and "Gelu" not in ops_of(f)
    same_results(g, f)


def test_a_broadcasting_constant_stops_it():
    g = Graph("bcast")
    x = g.input("x", (3, K), "float32")
    scaled = g.add_node("Div", [x, g.constant("s", np.array(math.sqrt(2), np.float32))])
    e = g.add_node("Add", [g.add_node("Erf", [scaled]), g.constant("one", np.array(1.0, np.float32))])
    half = g.constant("half", np.full((2, 1, 1), 0.5, np.float32)[:1])  # one element, rank 3: broadcasts y
    g.output(g.add_node("Mul", [g.add_node("Mul", [x, e]), half]))
    f = fuse_gelu(infer_shapes(g))
    assert "Gelu" not in ops_of(f)


@pytest.mark.anyio
async def test_on_the_device_it_matches_the_unfused_graph():
    g = gelu_graph("x_then_half")
    x = np.random.default_rng(4).standard_normal((3, K)).astype(np.float32) * 3
    want = run_reference(g, {"x": x})[g.outputs[0]]
    async with aioge.open_device(0) as dev:
        model = await dev.compile(g)
        got = (await model.execute({"x": x}))[g.outputs[0]]
        await model.aclose()
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)
