"""Conv + BatchNormalization folding of several pairs at once: the same constants as folding each
pair on its own (the scale and bias arithmetic runs once over all the pairs' channels)."""

from __future__ import annotations

import importlib

import numpy as np
import pytest

from aioge.graph import Graph
from aioge.graph.passes import fold_conv_batchnorm, infer_shapes

fuse_mod = importlib.import_module("aioge.graph.passes.fuse")

RNG = np.random.default_rng(7)


def _chain(dtype: str = "float32", bias: tuple[bool, ...] = (True, False, True)) -> Graph:
    """Convs (with or without a bias), each followed by a BatchNormalization with its own epsilon."""
    g = Graph("chain")
    v = g.input("x", (1, 3, 6, 6), dtype)
    cin = 3
    for k, b in enumerate(bias):
        cout = 4 + 4 * k
        ins = [v, g.constant(RNG.standard_normal((cout, cin, 3, 3)).astype(dtype), name=f"w{k}")]
        if b:
            ins.append(g.constant(RNG.standard_normal(cout).astype(dtype), name=f"b{k}"))
        c = g.add_node("Conv", ins, {"pads": [1, 1, 1, 1]}, name=f"conv{k}")
        params = [
            RNG.standard_normal(cout).astype(dtype) + 2,
            RNG.standard_normal(cout).astype(dtype),
            RNG.standard_normal(cout).astype(dtype),
            np.abs(RNG.standard_normal(cout)).astype(dtype) + 0.5,
        ]
        v = g.add_node("BatchNormalization", [c, *(g.constant(p) for p in params)], {"epsilon": 10.0 ** -(k + 3)},
                       name=f"bn{k}")  # fmt: skip
        cin = cout
    g.output(v)
    return infer_shapes(g)


def _one_at_a_time(g: Graph) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """Each conv's folded (weights, bias), folding its pair alone."""
    out = {}
    for conv in [n for n in g.nodes if n.op_type == "Conv"]:
        bn = next(n for n in g.nodes if n.op_type == "BatchNormalization" and n.inputs[0] == conv.outputs[0])
        out[conv.name] = fuse_mod._bn_fold_one(g, conv, bn)
    return out


@pytest.mark.parametrize(
    ("dtype", "bias", "batched"),
    [("float32", (True, False, True), True), ("float64", (True, False, True), False), ("float32", (False,), False)],
)
def test_folding_all_pairs_at_once_gives_each_pairs_own_constants(dtype: str, bias: tuple[bool, ...],
                                                                  batched: bool) -> None:  # fmt: skip
    g = _chain(dtype, bias)
    pairs = [(c, b) for c in g.nodes if c.op_type == "Conv"
             for b in g.nodes if b.op_type == "BatchNormalization" and b.inputs[0] == c.outputs[0]]  # fmt: skip
    # float32 throughout and more than one pair: in one go; else pair by pair
    assert bool(fuse_mod._bn_folded(g, pairs)) == batched
    want = _one_at_a_time(g)
    f = fold_conv_batchnorm(g)
    assert f.op_counts() == {"Conv": len(bias)}
    for conv in f.nodes:
        w, b = (f.constants[i] for i in conv.inputs[1:3])
        w0, b0 = want[conv.name]
        assert w.dtype == w0.dtype and b.dtype == b0.dtype
        assert w.tobytes() == w0.tobytes() and b.tobytes() == b0.tobytes()
