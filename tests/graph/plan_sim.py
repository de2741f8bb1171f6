"""Execute a Plan inside one real byte arena, in a random order the plan allows.

The order is a random linear extension of the plan's partial order (stream
order + waits), so any hazard a parallel executor could hit shows up as a
wrong result for some seed.
"""

from __future__ import annotations

import random
from collections.abc import Mapping

import numpy as np

from aioge.graph.planner import Plan
from aioge.graph.reference import evaluate_node


def random_issue_order(plan: Plan, seed: int) -> list[int]:
    rng = random.Random(seed)
    heads = [0] * plan.num_streams
    done: set[int] = set()
    order: list[int] = []
    while len(order) < len(plan.steps):
        ready = []
        for s, steps in enumerate(plan.streams):
            if heads[s] < len(steps):
                i = steps[heads[s]]
                if all(w in done for w in plan.steps[i].waits):
                    ready.append(s)
        assert ready, "deadlock: no stream can make progress"
        s = rng.choice(ready)
        i = plan.streams[s][heads[s]]
        heads[s] += 1
        done.add(i)
        order.append(i)
    return order


def execute(plan: Plan, feeds: Mapping[str, np.ndarray], seed: int = 0) -> dict[str, np.ndarray]:
    g = plan.graph
    arena = np.full(max(plan.arena_bytes, 1), 0xCD, np.uint8)  # garbage, so reads of unwritten bytes show

    def view(name: str) -> np.ndarray:
        b = plan.buffers[name]
        v = g.values[name]
        root = plan.buffers[b.root]
        if root.kind == "input":
            return np.asarray(feeds[b.root]).reshape(v.shape)
        if root.kind == "constant":
            return g.constants[b.root].reshape(v.shape)
        assert root.offset is not None
        raw = arena[root.offset : root.offset + v.nbytes]
        return raw.view(v.dtype).reshape(v.shape)

    for i in random_issue_order(plan, seed):
        step = plan.steps[i]
        if step.alias:
            continue
        n = step.node
        ins = [view(x).copy() if x else None for x in n.inputs]
        outs = evaluate_node(n, ins)
        for name, arr in zip(n.outputs, outs, strict=False):
            if name:
                view(name)[...] = arr
    return {o: view(o).copy() for o in g.outputs}
