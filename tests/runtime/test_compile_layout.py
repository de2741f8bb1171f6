"""The executable layout of a compiled model: every operand of every placed op is where the layout
says its value lives, with its value's kind -- a graph value read or written by several ops the
same in each -- and a temporary lies in its stream's scratch after the arena."""

from __future__ import annotations

import numpy as np
import pytest

import aioge
from aioge.graph import lower_node, optimize, plan
from aioge.graph.executable import ABSENT, ARENA, CONST, Layout
from aioge.graph.lower.host import expand_host_ops
from aioge.graph.target import target_for
from tests.graph import models as M


@pytest.mark.parametrize("name", ["mlp", "residual_cnn", "inception", "attention"])
@pytest.mark.parametrize("streams", [1, 2])
def test_operands_are_placed_as_their_values(name: str, streams: int) -> None:
    tgt = target_for("host")
    g = optimize(aioge.load_onnx(getattr(M, name)(small=True)), target=tgt)
    p = plan(g, max_streams=streams)
    lowered = {st.node.name: expand_host_ops(g, lower_node(g, st.node, target=tgt), tgt)
               for st in p.steps if not st.alias}  # fmt: skip
    used = {x for ln in lowered.values() for op in ln.ops for x in op.inputs if isinstance(x, str)}
    b = Layout(g, p, lowered, [c for c in g.constants if c in used])
    values = set(g.values)
    seen = 0
    for op in b.ops:
        if op.name.startswith("output:"):
            continue
        ln = lowered[max((k for k in lowered if op.name == k or op.name.startswith(k + "/")), key=len)]
        names = [x for lop in ln.ops for x in (*lop.inputs, *lop.outputs) if isinstance(x, str)]
        for kind, loc, at in op.inputs + op.outputs:
            if loc in (ABSENT, CONST):
                assert kind is None or isinstance(kind, np.ndarray)
                continue
            graph_values = [n for n in names if n in values and b.operand(n) == (kind, loc, at)]
            if graph_values:
                seen += 1
                for n in graph_values:
                    assert b.operand(n) == (b.value_kind(n), *b.where(n))
            else:  # a temporary: in the scratch after the arena
                assert loc == ARENA and b.arena_bytes <= at < b.total_arena
    assert seen > 0
    for n, r in b._operands.items():  # each made once, for what it is
        assert r == (b.value_kind(n), *b.where(n))
        assert b.operand(n) is r
