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
        for o, arr in memo[n.name][IS._KNOWN]:
            assert o in known
            assert arr.dtype == known[o].dtype and np.array_equal(arr, known[o])
        computable = {o for o in n.outputs if o in known and o not in g.constants}
        assert computable == {o for o, _ in memo[n.name][IS._KNOWN]}


def _broadcast_by_numpy(shapes: list[tuple[int, ...]]) -> tuple[int, ...] | None:
    try:
        return tuple(np.broadcast_shapes(*shapes))
    except ValueError:
        return None


@settings(max_examples=300, deadline=None)
@given(
    st.lists(st.lists(st.integers(0, 3), max_size=4).map(tuple), min_size=1, max_size=4),
    st.booleans(),
)
def test_broadcast_shapes_is_numpys(shapes: list[tuple[int, ...]], same: bool) -> None:
    from aioge import _shapes as S

    if same:  # all operands of one shape: the common case
        shapes = [shapes[0]] * len(shapes)
    want = _broadcast_by_numpy(shapes)
    if want is None:
        with pytest.raises(ValueError):
            S.broadcast_shapes(*shapes)
    else:
        got = S.broadcast_shapes(*shapes)
        assert got == want and type(got) is tuple


def _same_rule_reference(allowed, tied, out, extra):  # type: ignore[no-untyped-def]
    """``schema.same``'s rule as the checks read one after another: allowed dtypes of the tied
    inputs, then of the extra inputs, then the tied inputs' agreement."""
    from aioge.graph import schema as SC

    def rule(node, dts):  # type: ignore[no-untyped-def]
        pos = range(len(dts)) if tied is None else [i for i in tied if i < len(dts)]
        for i in pos:
            SC._check_in(node, i, dts[i], allowed)
        for i, allow in (extra or {}).items():
            if i < len(dts):
                SC._check_in(node, i, dts[i], allow)
        t = SC._same(node, dts, list(pos))
        n_out = max(1, len(node.outputs))
        return [SC.BOOL] * n_out if out == "bool" else [t] * n_out

    return rule


_DTS = [None, np.dtype("float32"), np.dtype("float16"), np.dtype("int64"), np.dtype("int32"), np.dtype("bool")]


@settings(max_examples=400, deadline=None)
@given(
    st.lists(st.sampled_from(_DTS), max_size=4),
    st.sampled_from(["float", "int", "any"]),
    st.one_of(st.none(), st.lists(st.integers(0, 4), max_size=3)),
    st.sampled_from(["same", "bool"]),
    st.dictionaries(st.integers(0, 4), st.sampled_from(["float", "int", "i64"]), max_size=2),
    st.integers(1, 2),
)
def test_same_rule_gives_what_the_checks_in_order_give(dts, allowed, tied, out, extra, n_out):  # type: ignore[no-untyped-def]
    from aioge.graph import schema as SC
    from aioge.graph.ir import Node

    sets = {"float": SC.FLOAT_TYPES, "int": SC.IDX_TYPES, "any": SC.ANY_TYPES, "i64": frozenset({np.dtype("int64")})}
    ex = {i: sets[k] for i, k in extra.items()}
    node = Node("Add", [f"x{i}" for i in range(len(dts))], [f"y{i}" for i in range(n_out)], {}, "n")
    fast, ref = SC.same(sets[allowed], tied, out, ex), _same_rule_reference(sets[allowed], tied, out, ex)
    try:
        want: object = ref(node, list(dts))
    except Exception as e:
        want = (type(e), str(e))
    try:
        got: object = fast(node, list(dts))
    except Exception as e:
        got = (type(e), str(e))
    assert got == want
