"""Execution planner: order, streams and events, and a buffer arena.

``plan(graph, *, max_streams=2, alignment=64, memory_slack=0.1) -> Plan`` for
a shape-inferred graph (run :func:`~aioge.graph.passes.optimize` first).

**Order.**  ``Plan.steps`` lists one :class:`Step` per node in a deterministic
topological order: the *issue order*.  An executor issues steps in this order,
each on its stream.

**Streams and events.**  Independent branches go to different streams
(``0 .. num_streams-1``) by list scheduling with a FLOP-based cost model and a
penalty per cross-stream wait, so small branches stay on one stream.  A step
may start only after (a) the previous step on its stream and (b) every step in
``step.waits`` (indices into ``Plan.steps``, always on other streams and
earlier in issue order).  Redundant waits (already implied transitively) are
omitted.  ``step.record`` is true when some step waits for this one.  An
executor does, in issue order::

    for step in plan.steps:
        for w in step.waits:   aclrtStreamWaitEvent(stream[step.stream], event[w])
        launch(step)           # nothing for step.alias
        if step.record:        aclrtRecordEvent(event[step.index], stream[step.stream])
    for w in plan.joins:       aclrtStreamWaitEvent(stream[0], event[w])   # then sync stream 0

``Plan.joins`` are the last steps of streams 1.. (recorded), so completion of
stream 0 means the whole graph finished.  ``Plan.streams[s]`` lists the step
indices of stream ``s`` in order.

**Aliases.**  Reshape-like steps (Reshape, Flatten, Squeeze, Unsqueeze,
Identity, Dropout without mask) launch nothing: their output is a view of
input 0 (``step.alias``); the value's :class:`Buffer` has ``kind="alias"`` and
``root`` naming the value that owns the storage (an arena value, a graph
input or a constant).  A graph output that aliases a graph input or constant
must be copied out by the executor.

**Arena.**  Every value produced by a non-alias step gets ``[offset,
offset + size)`` in one arena (``size`` = nbytes rounded up to
``alignment``); graph inputs and constants are not in the arena.  Two storage
roots may share bytes only if every use of one (its producing step, every
step reading it or an alias of it) *happens before* the other's producing
step under the stream order and waits — so reuse is safe for the parallel
schedule, not just for the issue order.  Graph outputs stay live to the end.
Offsets are assigned greedily (largest first, and definition order; the
smaller result wins) into the best-fitting gap.  If branches running in
parallel make that arena more than ``1 + memory_slack`` times the bound below,
offsets are re-assigned as for the serial issue order and the reuse is made
safe with extra waits (a step waits for the other stream's last readers of
the bytes it overwrites): memory wins over overlap.  :meth:`Plan.verify`
checks all of this.

``Plan.arena_bytes`` is the peak (arena size), ``Plan.max_live_bytes`` the
lower bound ``max over steps of the aligned bytes live at that step`` in issue
order, ``Plan.no_reuse_bytes`` the sum of all aligned sizes.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ._records import dict_init
from .errors import PlanError
from .ir import Graph, Node
from .schema import ALIAS_OPS

__all__ = ("plan", "Plan", "Step", "Buffer")

@dict_init
@dataclass(frozen=True)
class Step:
    """One node in issue order (see the module docstring)."""

    index: int
    node: Node
    stream: int
    waits: tuple[int, ...] = ()
    record: bool = False
    alias: bool = False


@dict_init
@dataclass(frozen=True)
class Buffer:
    """Where a value lives.

    ``kind``: "arena" (``offset``/``size`` in the arena), "input", "constant",
    or "alias" (a view of ``root``'s storage; ``offset`` is the root's arena
    offset or None).  ``first``/``last``: producing and last reading step
    indices in issue order (-1 for inputs/constants; ``len(steps)`` for values
    that must live to the end).
    """

    value: str
    kind: str
    nbytes: int
    size: int
    offset: int | None
    root: str
    first: int
    last: int


@dataclass
class Plan:
    """The result of :func:`plan`."""

    graph: Graph
    steps: list[Step]
    streams: list[list[int]]
    joins: tuple[int, ...]
    buffers: dict[str, Buffer]
    arena_bytes: int
    max_live_bytes: int
    no_reuse_bytes: int
    alignment: int
    #: step index -> vector clock at its start: for each stream, the highest position on
    #: that stream guaranteed complete (-1: none).  Used for happens-before queries.
    start_clock: list[tuple[int, ...]] = field(repr=False, default_factory=list)
    #: step index -> position within its stream
    position: list[int] = field(repr=False, default_factory=list)
    #: arena root -> steps that use its storage (producer, readers, readers of its aliases)
    uses: dict[str, tuple[int, ...]] = field(repr=False, default_factory=dict)
    #: set when a model loads: bytes of its weights, and of the copies packed once for its kernels
    #: (a constant matrix-product operand in the micro-kernel's panel layout)
    weight_bytes: int = 0
    packed_weight_bytes: int = 0

    @property
    def num_streams(self) -> int:
        """Number of streams used."""
        return len(self.streams)

    def happens_before(self, a: int, b: int) -> bool:
        """Whether step ``a`` is guaranteed complete before step ``b`` starts."""
        return self.start_clock[b][self.steps[a].stream] >= self.position[a]

    def verify(self) -> None:
        """Check the plan's invariants; raise :class:`PlanError` on the first violation.

        * every data dependency happens before its consumer; waits point to
          earlier steps on other streams;
        * arena roots whose byte ranges overlap are ordered: every use of one
          happens before the other is produced (safe under any timing);
        * in issue order, values live at the same step never share bytes;
        * ``max_live_bytes <= arena_bytes <= no_reuse_bytes``.
        """
        producer = {o: s.index for s in self.steps for o in s.node.outputs if o}
        for s in self.steps:
            for w in s.waits:
                if not (w < s.index and self.steps[w].stream != s.stream and self.steps[w].record):
                    raise PlanError(f"step {s.index} waits on step {w} badly", node=s.node.name)
            for x in s.node.inputs:
                if x in producer and not self.happens_before(producer[x], s.index):
                    raise PlanError(f"input {x!r} is not guaranteed ready", node=s.node.name)
        roots = self.arena_values()
        for i, a in enumerate(roots):
            for b in roots[i + 1 :]:
                if b.offset is None or a.offset is None or b.offset >= a.offset + a.size:
                    continue
                if b.offset + b.size <= a.offset or a.size == 0 or b.size == 0:
                    continue
                if not (self._all_before(a, b) or self._all_before(b, a)):
                    raise PlanError(
                        f"values {a.value!r} and {b.value!r} share arena bytes but may be live "
                        "at the same time"
                    )
                if not (a.last < b.first or b.last < a.first):
                    raise PlanError(
                        f"values {a.value!r} and {b.value!r} are live at the same step and overlap"
                    )
        if not self.max_live_bytes <= self.arena_bytes <= self.no_reuse_bytes:
            raise PlanError(
                f"arena {self.arena_bytes} outside [{self.max_live_bytes}, {self.no_reuse_bytes}]"
            )

    def _all_before(self, a: Buffer, b: Buffer) -> bool:
        if a.last >= len(self.steps):
            return False
        return all(self.happens_before(u, b.first) for u in self.uses[a.value])

    def arena_values(self) -> list[Buffer]:
        """Buffers of kind "arena", by offset."""
        return sorted(
            (b for b in self.buffers.values() if b.kind == "arena"), key=lambda b: (b.offset, b.value)
        )

    def summary(self) -> str:
        """Human-readable report."""
        ratio = self.arena_bytes / self.max_live_bytes if self.max_live_bytes else 1.0
        waits = sum(len(s.waits) for s in self.steps)
        return (
            f"plan {self.graph.name}: {len(self.steps)} steps on {self.num_streams} stream(s), "
            f"{waits} waits; "
            f"arena {self.arena_bytes} B (max-live bound {self.max_live_bytes} B, ratio {ratio:.3f}; "
            f"no reuse {self.no_reuse_bytes} B)"
        )


# ------------------------------------------------------------------ cost model
_WAIT_COST = 2.0e5  # "flops" one cross-stream wait costs (event record+wait, cache traffic)


def _cost(g: Graph, n: Node) -> float:
    out = sum(g.values[o].size for o in n.outputs if o)
    op = n.op_type
    if op in ("Conv", "_FusedConv", "_NchwcConv2D", "ConvTranspose"):
        w = g.values[n.inputs[1]].shape or (1, 1)
        per = math.prod(w[1:]) if op != "ConvTranspose" else w[0] * math.prod(w[2:])
        return 2.0 * out * per
    if op in ("MatMul", "_FusedMatMul", "Gemm"):
        a = g.values[n.inputs[0]].shape or (1,)
        trans = bool(n.attrs.get("trans_a") or n.attrs.get("transA"))
        k = a[-2] if trans and len(a) >= 2 else a[-1]
        return 2.0 * out * k
    if op == "_FusedElementwise":
        return float(out) * len(n.attrs.get("program") or [1])
    ins = sum(g.values[i].size for i in n.inputs if i)
    return float(max(out, ins))


def _is_alias(n: Node) -> bool:
    return n.op_type in ALIAS_OPS and len([o for o in n.outputs if o]) == 1


# ------------------------------------------------------------------ planning
def plan(
    graph: Graph, *, max_streams: int = 2, alignment: int = 64, memory_slack: float | None = 0.1
) -> Plan:
    """Plan ``graph`` (see the module docstring).

    ``memory_slack``: if the parallel-safe arena exceeds ``(1 + memory_slack)``
    times the max-live bound, offsets are re-assigned as for the serial issue
    order and extra waits make that reuse safe (trading some overlap between
    streams for memory).  ``None`` never adds such waits.

    Raises:
        PlanError: if a value lacks a shape/dtype or the arguments are invalid.
    """
    if max_streams < 1:
        raise PlanError(f"max_streams must be >= 1, not {max_streams}")
    if alignment < 1 or alignment & (alignment - 1):
        raise PlanError(f"alignment must be a power of two, not {alignment}")
    g = graph
    nbytes: dict[str, int] = {}  # each value's bytes, once
    prod = math.prod
    for name, v in g.values.items():
        shape, dt = v.shape, v.dtype
        if shape is None or dt is None:
            raise PlanError(f"value {v.name!r} has no shape/dtype; run infer_shapes/optimize first")
        nbytes[name] = prod(shape) * dt.itemsize  # Value.nbytes, without its two property calls
    order = g.topological_order()
    n_steps = len(order)
    producer: dict[str, int] = {o: i for i, n in enumerate(order) for o in n.outputs if o}
    # the steps each step reads from (only several streams need them: one orders every step after the last)
    deps: list[list[int]] = (
        [sorted({producer[x] for x in n.inputs if x in producer}) for n in order]
        if max_streams > 1
        else [[]] * n_steps
    )
    alias = [_is_alias(n) for n in order]

    # ---- streams: list scheduling over the issue order
    stream_of = [0] * n_steps
    finish = [0.0] * n_steps
    free = [0.0] * max_streams
    used = 1
    # one stream: every step goes on stream 0 (nothing to choose, the loop below would agree)
    for i, n in enumerate(order if max_streams > 1 else ()):
        cost = 0.0 if alias[i] else _cost(g, n)
        if alias[i] or max_streams == 1:
            s = stream_of[deps[i][0]] if deps[i] else 0
            cands = [s]
        else:
            pref = stream_of[deps[i][0]] if deps[i] else 0
            cands = [pref, *[s for s in range(min(used + 1, max_streams)) if s != pref]]
        best, best_t, best_score = cands[0], 0.0, math.inf
        for s in cands:
            ready = max(
                [finish[d] + (0.0 if stream_of[d] == s else _WAIT_COST) for d in deps[i]], default=0.0
            )
            t = max(free[s], ready) + cost
            # leaving the preferred stream costs a wait now or at the later join
            score = t + (0.0 if s == cands[0] else _WAIT_COST)
            if score < best_score - 1e-9:
                best, best_t, best_score = s, t, score
        stream_of[i] = best
        finish[i] = best_t
        free[best] = best_t
        used = max(used, best + 1)

    # ---- positions within streams
    streams: list[list[int]] = [[] for _ in range(used)]
    position = [0] * n_steps
    for i in range(n_steps):
        position[i] = len(streams[stream_of[i]])
        streams[stream_of[i]].append(i)

    # ---- storage roots, uses, lifetimes
    root: dict[str, str] = {}
    kind: dict[str, str] = {}
    for name in g.inputs:
        root[name], kind[name] = name, "input"
    for name in g.constants:
        root[name], kind[name] = name, "constant"
    for i, n in enumerate(order):
        for o in n.outputs:
            if not o:
                continue
            if alias[i]:
                root[o], kind[o] = root[n.inputs[0]], "alias"
            else:
                root[o], kind[o] = o, "arena"
    uses: dict[str, set[int]] = {r: {producer[r]} for r, k in kind.items() if k == "arena"}
    last_use: dict[str, int] = {r: producer[r] for r in uses}
    last_reader: dict[str, int] = {}
    for i, n in enumerate(order):
        for x in n.inputs:
            if not x:
                continue
            last_reader[x] = i
            r = root.get(x)
            if r in uses:
                uses[r].add(i)
                last_use[r] = i  # i only grows (and a value's producer comes before its readers)
    to_end = {root[o] for o in g.outputs if root.get(o) in uses}
    for r in to_end:
        last_use[r] = n_steps

    def aligned(n: int) -> int:
        return -(-n // alignment) * alignment

    arena = [r for r in uses if nbytes[r] > 0]
    size = {r: aligned(nbytes[r]) for r in arena}

    # ---- bound: live bytes per step in issue order
    events: list[int] = [0] * (n_steps + 2)
    for r in arena:
        events[producer[r]] += size[r]
        events[min(last_use[r], n_steps) + 1] -= size[r]
    live = peak = 0
    for i in range(n_steps + 1):
        live += events[i]
        peak = max(peak, live)

    # ---- phase 1: waits from data deps only; reuse only between happens-before-ordered roots
    waits, start_clock = _waits(deps, stream_of, position, used)
    offsets = _assign(
        arena,
        size,
        _parallel_neighbours(arena, uses, producer, to_end, stream_of, position, start_clock, used),
        producer,
        peak,
    )
    arena_bytes = max((offsets[r] + size[r] for r in arena), default=0)
    if memory_slack is not None and used > 1 and arena_bytes > (1.0 + memory_slack) * peak:
        # ---- phase 2: reuse as in the serial issue order, made safe by extra waits
        first_np = np.array([producer[r] for r in arena], np.int64)
        last_np = np.array([last_use[r] for r in arena], np.int64)
        offsets = _assign(
            arena,
            size,
            _neighbours(
                arena,
                lambda rows: (
                    ~((last_np[rows, None] < first_np[None, :]) | (last_np[None, :] < first_np[rows, None]))
                ),
            ),
            producer,
            peak,
        )
        arena_bytes = max((offsets[r] + size[r] for r in arena), default=0)
        mem_deps = [list(d) for d in deps]
        by_offset = sorted(arena, key=lambda r: offsets[r])
        for b in arena:
            lo, hi = offsets[b], offsets[b] + size[b]
            for a in by_offset:
                if offsets[a] >= hi:
                    break
                if a != b and offsets[a] + size[a] > lo and last_use[a] < producer[b]:
                    mem_deps[producer[b]].extend(uses[a])
        waits, start_clock = _waits(mem_deps, stream_of, position, used)

    joins = tuple(streams[s][-1] for s in range(1, used) if streams[s])
    recorded = {w for ws in waits for w in ws} | set(joins)
    steps = [
        Step(i, order[i], stream_of[i], tuple(sorted(waits[i])) if waits[i] else (), i in recorded, alias[i])
        for i in range(n_steps)
    ]

    outputs = set(g.outputs)
    buffers: dict[str, Buffer] = {}
    get_offset, read_last = offsets.get, last_reader.get
    for name, k in kind.items():
        if k == "arena":  # its own root, made by its producer
            buffers[name] = Buffer(name, k, nbytes[name], size.get(name, 0), get_offset(name, 0), name,
                                   producer[name], last_use[name])  # fmt: skip
            continue
        first = producer.get(name, -1)
        last = n_steps if name in outputs else read_last(name, first)
        if k == "alias":
            r = root[name]
            off = (0 if nbytes[r] == 0 else get_offset(r)) if kind.get(r) == "arena" else None
        else:  # an input or a constant: its own root, in no arena
            r, off = name, None
        buffers[name] = Buffer(name, k, nbytes[name], 0, off, r, first, last)
    return Plan(
        g,
        steps,
        streams,
        joins,
        buffers,
        arena_bytes,
        peak,
        sum(size.values()),
        alignment,
        start_clock,
        position,
        {r: tuple(sorted(uses[r])) for r in arena},
    )


def _waits(
    deps: list[list[int]], stream_of: list[int], position: list[int], used: int
) -> tuple[list[list[int]], list[tuple[int, ...]]]:
    """Minimal cross-stream waits covering ``deps``, and each step's start vector clock."""
    n = len(deps)
    if used == 1:
        # one stream: each step starts after the one before it (``deps`` name only earlier steps, the
        # issue order being topological), so no dependency needs a wait
        return [[] for _ in range(n)], [(p - 1,) for p in position]
    end_clock: list[tuple[int, ...]] = [()] * n
    start_clock: list[tuple[int, ...]] = [()] * n
    last_on: list[int | None] = [None] * used
    waits: list[list[int]] = [[] for _ in range(n)]
    for i in range(n):
        s = stream_of[i]
        prev = last_on[s]
        clock = list(end_clock[prev]) if prev is not None else [-1] * used
        # latest steps first: waiting on them often implies the earlier ones
        for d in sorted(set(deps[i]) - {i}, key=lambda d: -d):
            t = stream_of[d]
            if clock[t] >= position[d]:
                continue
            waits[i].append(d)
            clock = [max(a, b) for a, b in zip(clock, end_clock[d], strict=False)]
        start_clock[i] = tuple(clock)
        clock[s] = position[i]
        end_clock[i] = tuple(clock)
        last_on[s] = i
    return waits, start_clock


def _neighbours(values: list[str], conflict_rows: Callable[[np.ndarray], np.ndarray]) -> dict[str, list[str]]:
    """Conflict lists from a vectorized ``conflict_rows(rows) -> bool[len(rows), len(values)]``."""
    out: dict[str, list[str]] = {v: [] for v in values}
    n = len(values)
    for lo in range(0, n, 256):  # row blocks bound the temporary matrices
        rows = np.arange(lo, min(lo + 256, n))
        c = conflict_rows(rows)
        c[np.arange(len(rows)), rows] = False
        ii, jj = np.nonzero(c)
        for i, j in zip(ii.tolist(), jj.tolist(), strict=True):  # Python ints: no numpy scalar per pair
            out[values[lo + i]].append(values[j])
    return out


def _parallel_neighbours(
    arena: list[str],
    uses: dict[str, set[int]],
    producer: dict[str, int],
    to_end: set[str],
    stream_of: list[int],
    position: list[int],
    start_clock: list[tuple[int, ...]],
    used: int,
) -> dict[str, list[str]]:
    """Roots conflict unless every use of one happens before the other's producing step."""
    if used == 1:
        # one stream: every step starts after the one before it, so a root is live from its producing
        # step to its last use (to the end for a graph output) and two roots conflict when those
        # intervals meet: a sweep in issue order finds the pairs (the matrix below costs more than
        # the whole plan of a small graph)
        out: dict[str, list[str]] = {r: [] for r in arena}
        end = {r: math.inf if r in to_end else max(uses[r]) for r in arena}
        live: list[str] = []
        for r in sorted(arena, key=producer.__getitem__):
            first = producer[r]
            live = [a for a in live if end[a] >= first]
            for a in live:
                out[a].append(r)
                out[r].append(a)
            live.append(r)
        return out
    # the last use of each root on each stream (-1: none), in Python ints (a numpy scalar per use was
    # most of this on CNNs)
    rows: list[list[int]] = []
    for r in arena:
        row = [-1] * used
        for u in uses[r]:
            s = stream_of[u]
            if position[u] > row[s]:
                row[s] = position[u]
        rows.append(row)
    front = np.array(rows, np.int64).reshape(len(arena), used)
    clock = np.array([start_clock[producer[r]] for r in arena], np.int64).reshape(len(arena), used)
    ends = np.array([r in to_end for r in arena], bool)

    def conflicts(idx: np.ndarray) -> np.ndarray:
        # before[a, b]: all uses of a complete before b is produced
        a_before_b = (front[idx, None, :] <= clock[None, :, :]).all(axis=2) & ~ends[idx, None]
        b_before_a = (front[None, :, :] <= clock[idx, None, :]).all(axis=2) & ~ends[None, :]
        result: np.ndarray = ~(a_before_b | b_before_a)
        return result

    return _neighbours(arena, conflicts)


def _assign(
    values: Sequence[str],
    size: dict[str, int],
    neighbours: dict[str, list[str]],
    producer: dict[str, int],
    bound: int = 0,
) -> dict[str, int]:
    """Best-fit offsets; tries two greedy orders and keeps the smaller arena.

    ``bound``: a lower bound on any arena (the most bytes live at one step: roots live together
    conflict); an order that reaches it is kept without trying the next, which cannot be smaller.
    """
    vals = list(values)
    best: dict[str, int] | None = None
    best_peak = math.inf
    keys: tuple[Callable[[str], Any], ...] = (lambda v: (-size[v], producer[v]), producer.__getitem__)
    for key in keys:
        if best_peak <= bound:
            break
        offsets: dict[str, int] = {}
        placed = offsets.get
        peak = 0
        for v in sorted(vals, key=key):
            busy = sorted([(o, o + size[u]) for u in neighbours[v] if (o := placed(u)) is not None])
            at = offsets[v] = _best_fit(busy, size[v])
            if at + size[v] > peak:
                peak = at + size[v]
        if peak < best_peak:
            best, best_peak = offsets, peak
    return best or {}


def _best_fit(busy: list[tuple[int, int]], need: int) -> int:
    """Smallest gap of at least ``need`` bytes between sorted busy intervals (else the end)."""
    if not busy:
        return 0
    best_off, best_gap = None, math.inf
    cursor = 0
    for lo, hi in busy:
        if lo > cursor:
            gap = lo - cursor
            if need <= gap < best_gap:
                best_off, best_gap = cursor, gap
        if hi > cursor:
            cursor = hi
    return cursor if best_off is None else best_off
