"""Shape inference's shortcuts give what the full computation gives: reading a shape-determining
input as ints, a node's compile-time outputs, and the reuse of an earlier inference."""

from __future__ import annotations

import importlib

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from aioge.graph import Graph, load_onnx
from aioge.graph.passes import infer_shapes
from aioge.graph.passes.infer_rules import _Ctx

from .models import MODELS

IS = importlib.import_module("aioge.graph.passes.infer_shapes")

_DTYPES = st.sampled_from([np.int64, np.int32, np.uint8, np.uint64, np.int8, np.bool_, np.float32, np.float64])


@settings(max_examples=200, deadline=None)
@given(_DTYPES.flatmap(lambda dt: hnp.arrays(dt, hnp.array_shapes(min_dims=0, max_dims=2, max_side=4))))
def test_ctx_ints_is_int_of_each_element(arr: np.ndarray) -> None:
    if arr.dtype.kind == "f":
        arr = np.nan_to_num(arr, nan=0.0, posinf=1e6, neginf=-1e6)
    c = _Ctx(None, [arr.shape], [arr])  # type: ignore[arg-type]
    got = c.ints(0, "x")
    want = [int(x) for x in arr.reshape(-1)]
    assert got == want
    assert all(type(x) is int for x in got)


def _cleared(g: Graph) -> Graph:
    c = g.copy()
    for k, v in c.values.items():
        if k not in c.inputs and k not in c.constants:
            v.shape = v.dtype = None
    return c


def _shapes(g: Graph) -> dict[str, object]:
    return {k: (v.shape, str(v.dtype)) for k, v in g.values.items()}


@pytest.mark.parametrize("name", sorted(MODELS))
def test_inference_fresh_reused_and_known_values_agree(name: str) -> None:
    g = load_onnx(MODELS[name]().SerializeToString())
    fresh = infer_shapes(_cleared(g))  # no earlier inference to reuse
    assert _shapes(fresh) == _shapes(g)
    again = infer_shapes(g)  # every node's inference reused
    assert _shapes(again) == _shapes(g)
    assert IS.is_inferred(g) and IS.is_inferred(again)
    known = IS.known_values(g)
    memo = IS._MEMO[g]
    for n in g.nodes:  # what inference kept of each node's outputs is known_values' computation
        for o, arr in memo[n.name].known.items():
            assert o in known
            assert arr.dtype == known[o].dtype and np.array_equal(arr, known[o])
        computable = {o for o in n.outputs if o in known and o not in g.constants}
        assert computable == set(memo[n.name].known)
