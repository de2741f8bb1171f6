"""Per-channel Mul/Div/Add/Sub chains after a Conv fold into its weights and bias (BatchNorm as
Caffe2-era exporters write it); anything that is not per output channel, or not affine in the
conv's output, stays as it is.  Results equal the unfolded graph's."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from aioge.graph import Graph, optimize
from aioge.graph.passes import fold_conv_batchnorm, infer_shapes
from aioge.graph.reference import run_reference

C = 4


def conv_chain(steps: list[tuple[str, np.ndarray, bool]], *, bias: bool = True, seed: int = 0,
               extra_use: bool = False) -> Graph:  # fmt: skip
    """x -> Conv -> steps... -> Relu; a step is (op, constant, constant first)."""
    rng = np.random.default_rng(seed)
    g = Graph("chain")
    x = g.input("x", (2, 3, 6, 6), "float32")
    ins = [x, g.constant("w", rng.standard_normal((C, 3, 3, 3)).astype(np.float32))]
    if bias:
        ins.append(g.constant("b", rng.standard_normal(C).astype(np.float32)))
    h = g.add_node("Conv", ins, {"pads": [1, 1, 1, 1]}, name="conv")
    first = h
    for i, (op, c, c_first) in enumerate(steps):
        k = g.constant(f"c{i}", c.astype(np.float32))
        h = g.add_node(op, [k, h] if c_first else [h, k], name=f"{op.lower()}{i}")
    g.output(g.add_node("Relu", [h], name="relu"))
    if extra_use:
        g.output(first)
    return g


def ops_of(g: Graph) -> list[str]:
    return [n.op_type for n in g.nodes]


def same_results(g: Graph, folded: Graph) -> None:
    x = np.random.default_rng(9).standard_normal((2, 3, 6, 6)).astype(np.float32)
    want, got = run_reference(g, {"x": x}), run_reference(folded, {"x": x})
    for name in g.outputs:
        np.testing.assert_allclose(got[name], want[name], rtol=1e-5, atol=1e-5)


def per_channel(rng: np.random.Generator, shape: tuple[int, ...]) -> np.ndarray:
    return rng.uniform(0.5, 2.0, shape)


@pytest.mark.parametrize("shape", [(C, 1, 1), (1, C, 1, 1), (1,), ()], ids=["C11", "1C11", "one", "scalar"])
@pytest.mark.parametrize("bias", [True, False])
def test_batchnorm_as_mul_add_folds_into_the_conv(shape, bias):
    rng = np.random.default_rng(1)
    g = conv_chain([("Mul", per_channel(rng, shape), False), ("Add", per_channel(rng, shape), True)], bias=bias)
    f = fold_conv_batchnorm(infer_shapes(g))
    assert ops_of(f) == ["Conv", "Relu"]
    same_results(g, f)


def test_div_and_sub_fold_when_the_conv_output_comes_first():
    rng = np.random.default_rng(2)
    g = conv_chain([("Div", per_channel(rng, (C, 1, 1)), False), ("Sub", per_channel(rng, (C, 1, 1)), False),
                    ("Mul", per_channel(rng, (C, 1, 1)), True)])  # fmt: skip
    f = fold_conv_batchnorm(infer_shapes(g))
    assert ops_of(f) == ["Conv", "Relu"]
    same_results(g, f)


@pytest.mark.parametrize(
    "step",
    [
        ("Sub", np.ones((C, 1, 1)), True),  # c - x: the sign flips, not a shift of the conv's bias alone
        ("Div", np.ones((C, 1, 1)), True),  # c / x: not affine at all
        ("Div", np.array([1.0, 0.0, 2.0, 3.0]).reshape(C, 1, 1), False),  # a zero channel: inf is the graph's
        ("Mul", np.ones((1, 1, 1, 6)), False),  # per column, not per channel
        ("Add", np.ones((2, C, 1, 1)), False),  # per batch item
        ("Mul", np.ones((1, 1, 6, 6)), False),  # per pixel
    ],
    ids=["c-x", "c/x", "div0", "per-column", "per-batch", "per-pixel"],
)
def test_steps_that_are_not_per_channel_affine_stay(step):
    g = conv_chain([step])
    f = fold_conv_batchnorm(infer_shapes(g))
    assert step[0] in ops_of(f)
    same_results(g, f)


def test_a_conv_output_with_another_use_is_not_rewritten():
    rng = np.random.default_rng(3)
    g = conv_chain([("Mul", per_channel(rng, (C, 1, 1)), False)], extra_use=True)
    f = fold_conv_batchnorm(infer_shapes(g))
    assert "Mul" in ops_of(f)
    same_results(g, f)


def test_the_whole_pipeline_fuses_the_folded_conv_with_its_activation():
    rng = np.random.default_rng(4)
    g = conv_chain([("Mul", per_channel(rng, (C, 1, 1)), False), ("Add", per_channel(rng, (C, 1, 1)), False)])
    o = optimize(g)
    assert ops_of(o) == ["_FusedConv"], ops_of(o)
    same_results(g, o)


@settings(max_examples=40, deadline=None)
@given(
    ops=st.lists(st.sampled_from(["Mul", "Div", "Add", "Sub"]), min_size=1, max_size=4),
    shapes=st.lists(st.sampled_from([(C, 1, 1), (1, C, 1, 1), (1,), ()]), min_size=4, max_size=4),
    bias=st.booleans(),
    seed=st.integers(0, 2**16),
)
def test_any_per_channel_chain_folds_and_computes_the_same(ops, shapes, bias, seed):
    rng = np.random.default_rng(seed)
    g = conv_chain([(op, per_channel(rng, shapes[i]), op in ("Mul", "Add") and bool(i % 2))
                    for i, op in enumerate(ops)], bias=bias, seed=seed)  # fmt: skip
    f = fold_conv_batchnorm(infer_shapes(g))
    assert ops_of(f) == ["Conv", "Relu"]
    same_results(g, f)
