"""optimize's passes skip re-checking the order and re-pruning only when they know the working graph
is tidy: a graph whose nodes are listed out of order optimizes to the same computation, and each
pass's tidy form gives what its public form gives."""

from __future__ import annotations

import numpy as np
import pytest

import aioge
from aioge.graph import optimize
from aioge.graph.passes import infer_shapes
from aioge.graph.passes.cse import common_subexpressions_pass
from aioge.graph.passes.dce import dead_code_pass
from aioge.graph.passes.fold_constants import fold_constants_pass
from aioge.graph.passes.simplify import simplify_pass
from aioge.graph.reference import run_reference

from .models import MODELS, SMALL, sample_inputs


@pytest.mark.parametrize("name", sorted(MODELS))
def test_nodes_listed_out_of_order_optimize_to_the_same_outputs(name: str) -> None:
    model = MODELS[name](**SMALL[name])
    feeds = sample_inputs(model)
    g = aioge.load_onnx(model.SerializeToString())
    shuffled = g.copy()
    shuffled.nodes = shuffled.nodes[::-1]  # reversed: no node after the ones it reads
    want = run_reference(g, feeds)
    for level in (1, 2):
        got = run_reference(optimize(shuffled, level=level), feeds)
        assert list(got) == list(want)
        for k in want:
            np.testing.assert_allclose(got[k], want[k], rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("name", sorted(MODELS))
def test_a_pass_on_a_tidy_graph_gives_what_it_gives_on_any(name: str) -> None:
    g = infer_shapes(aioge.load_onnx(MODELS[name](**SMALL[name]).SerializeToString()))
    g, tidy = simplify_pass(g)
    assert tidy  # sorted, and pruned by the pass
    for p in (fold_constants_pass, simplify_pass):
        a, tidy_a = p(g)
        b, tidy_b = p(g, tidy=True)
        assert tidy_a and tidy_b
        assert str(a) == str(b)
    for p in (dead_code_pass, common_subexpressions_pass):
        a, flag_a = p(g)
        b, flag_b = p(g, tidy=True)
        assert flag_a == flag_b and str(a) == str(b)
