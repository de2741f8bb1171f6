"""Elementwise trees longer than a ``_FusedElementwise`` program can hold: the fusion cuts
them into several fused nodes, each within the kernel's register file, and the compiled
model computes what the reference does (a chain of 64+ elementwise ops used to fail to
compile with the kernel's attr error)."""

from __future__ import annotations

import numpy as np
import pytest

from aioge.graph import Graph, run_reference
from aioge.graph.passes import fuse_elementwise, infer_shapes
from aioge.graph.passes.fuse import EW_MAX_REGISTERS

pytestmark = pytest.mark.anyio


def unary_chain(n: int) -> Graph:
    g = Graph(f"chain{n}")
    v = g.input("x", (4, 8))
    for i in range(n):
        v = g.add_node("Neg" if i % 2 == 0 else "Relu", [v], name=f"n{i}")
    g.output(v)
    return infer_shapes(g)


def sum_of_inputs(n: int) -> Graph:
    """((x0 + x1) * x2 + x3) * x4 ...: every step brings a new input."""
    g = Graph(f"sum{n}")
    xs = [g.input(f"x{i}", (3, 5)) for i in range(n)]
    v = xs[0]
    for i in range(1, n):
        v = g.add_node("Add" if i % 2 else "Mul", [v, xs[i]], name=f"s{i}")
    g.output(v)
    return infer_shapes(g)


def registers(g: Graph) -> list[int]:
    return [len(n.inputs) + len(n.attrs["program"]) for n in g.nodes if n.op_type == "_FusedElementwise"]


@pytest.mark.parametrize("n", [2, 63, 64, 65, 200])
def test_a_long_unary_chain_is_cut_into_programs_that_fit(n: int) -> None:
    f = fuse_elementwise(unary_chain(n))
    regs = registers(f)
    assert regs and max(regs) <= EW_MAX_REGISTERS
    assert sum(r - 1 for r in regs) + sum(n_.op_type != "_FusedElementwise" for n_ in f.nodes) == n
    if n < EW_MAX_REGISTERS:
        assert f.op_counts() == {"_FusedElementwise": 1}


@pytest.mark.parametrize("n", [32, 33, 100])
def test_a_tree_that_brings_an_input_per_step_is_cut_by_registers(n: int) -> None:
    g = sum_of_inputs(n)
    f = fuse_elementwise(g)
    regs = registers(f)
    assert regs and max(regs) <= EW_MAX_REGISTERS
    plain = sum(n_.op_type != "_FusedElementwise" for n_ in f.nodes)
    assert sum(r - (r + 1) // 2 for r in regs) + plain == n - 1  # each fused node: k inputs, k - 1 steps
    assert (f.op_counts() == {"_FusedElementwise": 1}) == (2 * n - 1 <= EW_MAX_REGISTERS)
    rng = np.random.default_rng(n)
    feeds = {f"x{i}": rng.uniform(0.5, 1.0, (3, 5)).astype(np.float32) for i in range(n)}
    ref, got = run_reference(g, feeds), run_reference(f, feeds)
    np.testing.assert_allclose(got[g.outputs[0]], ref[g.outputs[0]], rtol=1e-5)


@pytest.mark.parametrize("build,n", [(unary_chain, 64), (unary_chain, 300), (sum_of_inputs, 80)])
async def test_long_elementwise_trees_compile_and_match_the_reference(dev, build, n: int) -> None:
    g = build(n)
    rng = np.random.default_rng(7)
    feeds = {name: rng.uniform(0.5, 1.0, g.values[name].shape).astype(np.float32) for name in g.inputs}
    async with await dev.compile(g) as model:
        assert any(op.op_type == "_FusedElementwise" for op in model._build.ops)
        out = await model.execute(feeds)
    ref = run_reference(g, feeds)
    np.testing.assert_allclose(out[g.outputs[0]], ref[g.outputs[0]], rtol=1e-5, atol=1e-6)
