"""Planner: order, streams/waits, arena invariants (hypothesis over random DAGs)."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from aioge.graph import Graph, PlanError, load_onnx, optimize, plan
from aioge.graph.passes import infer_shapes
from aioge.graph.reference import run_reference
from tests.graph import models
from tests.graph.plan_sim import execute, random_issue_order


@st.composite
def random_dags(draw: st.DrawFn) -> Graph:
    """Random DAGs of 1-D float32 values with unary, binary, concat, slice, split and alias ops."""
    g = Graph("random")
    lengths: dict[str, int] = {}
    for i in range(draw(st.integers(1, 3))):
        name = g.input(f"in{i}", (draw(st.integers(1, 64)),)).name
        lengths[name] = g.values[name].shape[0]
    names = list(lengths)
    for i in range(draw(st.integers(1, 24))):
        kind = draw(
            st.sampled_from(["unary", "unary", "binary", "binary", "concat", "slice", "split", "alias"])
        )
        a = draw(st.sampled_from(names))
        la = lengths[a]
        if kind == "binary":
            same = [n for n in names if lengths[n] == la]
            node = g.add_node("Add", [a, draw(st.sampled_from(same))], name=f"n{i}")
            outs = {node.output: la}
        elif kind == "concat":
            b = draw(st.sampled_from(names))
            node = g.add_node("Concat", [a, b], {"axis": 0}, name=f"n{i}")
            outs = {node.output: la + lengths[b]}
        elif kind == "slice" and la >= 2:
            c = [g.constant(np.array([v], np.int64)).name for v in (0, la // 2)]
            node = g.add_node("Slice", [a, *c], name=f"n{i}")
            outs = {node.output: la // 2}
        elif kind == "split" and la >= 2:
            node = g.add_node("Split", [a], {"axis": 0}, num_outputs=2, name=f"n{i}")
            outs = {node.outputs[0]: -(-la // 2), node.outputs[1]: la - (-(-la // 2))}
        elif kind == "alias":
            node = g.add_node("Identity", [a], name=f"n{i}")
            outs = {node.output: la}
        else:
            op = draw(st.sampled_from(["Relu", "Neg", "Tanh", "Abs"]))
            node = g.add_node(op, [a], name=f"n{i}")
            outs = {node.output: la}
        lengths.update(outs)
        names.extend(outs)
    produced = [n for n in names if n not in g.inputs]
    picked = draw(st.lists(st.sampled_from(produced), max_size=3, unique=True))
    g.output(*dict.fromkeys([produced[-1], *picked]))
    return infer_shapes(g)


def _check_serial_disjoint(p) -> None:
    """Values live at the same step (issue order) never share arena bytes — checked from scratch."""
    arena = [b for b in p.buffers.values() if b.kind == "arena" and b.size]
    for t in range(len(p.steps) + 1):
        live = sorted((b.offset, b.offset + b.size, b.value) for b in arena if b.first <= t <= b.last)
        for (lo1, hi1, v1), (lo2, hi2, v2) in itertools.pairwise(live):
            assert hi1 <= lo2, f"step {t}: {v1} [{lo1},{hi1}) overlaps {v2} [{lo2},{hi2})"


@given(
    g=random_dags(),
    streams=st.integers(1, 3),
    alignment=st.sampled_from([1, 16, 64]),
    slack=st.sampled_from([None, 0.0, 0.1]),
    seed=st.integers(0, 10**6),
)
@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
def test_plan_invariants_on_random_dags(
    g: Graph, streams: int, alignment: int, slack: float | None, seed: int
) -> None:
    p = plan(g, max_streams=streams, alignment=alignment, memory_slack=slack)
    p.verify()
    _check_serial_disjoint(p)
    assert p.num_streams <= streams
    assert p.max_live_bytes <= p.arena_bytes <= p.no_reuse_bytes
    for b in p.buffers.values():
        if b.kind == "arena":
            assert b.offset % alignment == 0 and b.size % alignment == 0 and b.size >= b.nbytes
    rng = np.random.default_rng(seed)
    feeds = {i: rng.standard_normal(g.values[i].shape).astype(np.float32) for i in g.inputs}
    want = run_reference(g, feeds)
    for s in range(3):
        got = execute(p, feeds, seed=seed + s)
        for k in want:
            np.testing.assert_array_equal(got[k], want[k], err_msg=k)


def _branchy() -> Graph:
    g = Graph("branchy")
    x = g.input("x", (64, 64))
    w = g.constant(np.eye(64, dtype=np.float32))
    a = g.add_node("MatMul", [g.add_node("MatMul", [x, w], name="a1"), w], name="a2")
    b = g.add_node("MatMul", [g.add_node("MatMul", [x, w], name="b1"), w], name="b2")
    g.output(g.add_node("Add", [a, b], name="join"))
    return optimize(g, level=0)


def test_independent_branches_use_two_streams_joined_by_events() -> None:
    g = _branchy()
    p = plan(g, max_streams=2)
    p.verify()
    assert p.num_streams == 2
    by_name = {s.node.name: s for s in p.steps}
    assert by_name["a1"].stream != by_name["b1"].stream
    assert by_name["a2"].stream == by_name["a1"].stream and by_name["b2"].stream == by_name["b1"].stream
    join = by_name["join"]
    other = by_name["b2"] if join.stream == by_name["a2"].stream else by_name["a2"]
    assert join.waits == (other.index,) and other.record
    waited = {w for s in p.steps for w in s.waits}
    assert all(p.steps[w].record for w in waited)
    assert [s.index for s in p.steps] == list(range(len(p.steps)))
    for s, idx in enumerate(p.streams):
        assert idx == sorted(idx) and all(p.steps[i].stream == s for i in idx)
    assert p.joins == tuple(p.streams[s][-1] for s in range(1, p.num_streams))
    # a waited step is never on the waiting stream, and precedes it in issue order
    for s in p.steps:
        assert all(w < s.index and p.steps[w].stream != s.stream for w in s.waits)


def test_single_stream_has_no_waits_and_plans_are_deterministic() -> None:
    g = _branchy()
    p1 = plan(g, max_streams=1)
    assert p1.num_streams == 1 and not any(s.waits for s in p1.steps) and p1.joins == ()
    a, b = plan(g), plan(g)
    assert [(s.node.name, s.stream, s.waits) for s in a.steps] == [
        (s.node.name, s.stream, s.waits) for s in b.steps
    ]
    assert {k: v.offset for k, v in a.buffers.items()} == {k: v.offset for k, v in b.buffers.items()}


def test_small_branches_stay_on_one_stream() -> None:
    g = Graph()
    x = g.input("x", (4,))
    g.output(g.add_node("Add", [g.add_node("Relu", [x]), g.add_node("Neg", [x])]))
    p = plan(optimize(g, level=0), max_streams=2)
    assert p.num_streams == 1


def test_buffers_kinds_and_aliases() -> None:
    g = Graph()
    x = g.input("x", (2, 3))
    r = g.add_node("Relu", [x], name="r")
    v = g.add_node("Reshape", [r, g.constant(np.array([6], np.int64))], name="v")
    e = g.add_node("Exp", [v], name="e")
    passthru = g.add_node("Flatten", [x], name="f")
    g.output(e, passthru)
    p = plan(infer_shapes(g))
    p.verify()
    assert p.buffers["x"].kind == "input" and p.buffers["x"].offset is None
    assert p.buffers["r"].kind == "arena" and p.buffers["r"].nbytes == 24 and p.buffers["r"].size == 64
    assert p.buffers["v"].kind == "alias" and p.buffers["v"].root == "r"
    assert p.buffers["v"].offset == p.buffers["r"].offset
    assert p.buffers["f"].kind == "alias" and p.buffers["f"].root == "x" and p.buffers["f"].offset is None
    assert [s.alias for s in p.steps] == [False, True, False, True]
    assert p.buffers["e"].last == len(p.steps)
    const = next(k for k in g.constants)
    assert p.buffers[const].kind == "constant"
    assert "arena" in p.summary()


def test_chain_reuses_memory_pingpong() -> None:
    g = Graph()
    x = g.input("x", (256,))
    cur = x
    for i in range(10):
        cur = g.add_node("Relu" if i % 2 else "Neg", [cur], name=f"n{i}")
    g.output(cur)
    p = plan(infer_shapes(g))
    assert p.arena_bytes == p.max_live_bytes == 2 * 1024
    assert p.no_reuse_bytes == 10 * 1024


def test_plan_errors() -> None:
    g = Graph()
    x = g.input("x", (2,))
    g.output(g.add_node("Relu", [x]))
    with pytest.raises(PlanError, match="infer_shapes"):
        plan(g)
    with pytest.raises(PlanError, match="max_streams"):
        plan(infer_shapes(g), max_streams=0)
    with pytest.raises(PlanError, match="alignment"):
        plan(infer_shapes(g), alignment=48)


@pytest.mark.parametrize("name", list(models.MODELS))
@pytest.mark.parametrize("small", [True, False])
def test_arena_within_10_percent_of_max_live_on_models(name: str, small: bool) -> None:
    g = optimize(load_onnx(models.MODELS[name](small=small)))
    for streams in (1, 2):
        p = plan(g, max_streams=streams)
        p.verify()
        assert p.arena_bytes <= 1.1 * p.max_live_bytes, p.summary()
        assert p.arena_bytes < p.no_reuse_bytes or len(p.arena_values()) <= 2


@pytest.mark.parametrize("name", list(models.MODELS))
def test_models_execute_correctly_from_the_arena(name: str) -> None:
    m = models.MODELS[name](small=True)
    g = optimize(load_onnx(m))
    feeds = models.sample_inputs(m)
    want = run_reference(g, feeds)
    for streams, slack in ((1, 0.1), (2, 0.1), (3, None)):
        p = plan(g, max_streams=streams, memory_slack=slack)
        for seed in range(3):
            got = execute(p, feeds, seed)
            for k in want:
                np.testing.assert_array_equal(got[k], want[k])


def test_random_issue_order_respects_streams_and_waits() -> None:
    p = plan(_branchy(), max_streams=2)
    for seed in range(10):
        order = random_issue_order(p, seed)
        pos = {i: k for k, i in enumerate(order)}
        for s in p.steps:
            assert all(pos[w] < pos[s.index] for w in s.waits)


def test_memory_slack_trades_overlap_for_memory_with_extra_waits() -> None:
    g = Graph("two_chains")
    x = g.input("x", (128, 128))
    w = g.constant(np.eye(128, dtype=np.float32) * 0.5)
    ends = []
    for b in "ab":
        cur = x
        for i in range(4):
            cur = g.add_node("MatMul", [cur, w], name=f"{b}{i}")
        ends.append(cur)
    g.output(g.add_node("Add", ends, name="join"))
    g = optimize(g, level=0)
    free = plan(g, memory_slack=None)
    tight = plan(g, memory_slack=0.1)
    for p in (free, tight):
        p.verify()
        assert p.num_streams == 2
    assert free.arena_bytes > 1.1 * free.max_live_bytes  # two chains in parallel hold more
    assert tight.arena_bytes <= 1.1 * tight.max_live_bytes
    assert sum(map(len, (s.waits for s in tight.steps))) > sum(map(len, (s.waits for s in free.steps)))
    feeds = {"x": np.random.default_rng(0).standard_normal((128, 128)).astype(np.float32)}
    want = run_reference(g, feeds)["join"]
    for seed in range(5):
        np.testing.assert_array_equal(execute(tight, feeds, seed)["join"], want)
