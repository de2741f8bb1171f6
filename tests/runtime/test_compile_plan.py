"""The planner on one stream: no step waits, each starts at the clock of the step before it, and
the roots that may not share arena bytes are exactly those whose lives overlap by the
happens-before test of the multi-stream planner (every use of one before the other is produced,
by the steps' vector clocks), all as the general (multi-stream) computation finds them."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from aioge.graph.planner import _parallel_neighbours, _waits


@st.composite
def roots(draw: st.DrawFn) -> tuple[int, list[str], dict[str, set[int]], dict[str, int], set[str]]:
    n_steps = draw(st.integers(min_value=1, max_value=12))
    n = draw(st.integers(min_value=0, max_value=10))
    names = [f"r{i}" for i in range(n)]
    producer = {r: draw(st.integers(min_value=0, max_value=n_steps - 1)) for r in names}
    uses = {r: {producer[r], *draw(st.sets(st.integers(min_value=producer[r], max_value=n_steps - 1)))} for r in names}
    to_end = {r for r in names if draw(st.booleans())}
    return n_steps, names, uses, producer, to_end


@given(roots())
def test_one_stream_conflicts_are_the_clock_test(case: tuple[int, list[str], dict[str, set[int]], dict[str, int],
                                                             set[str]]) -> None:  # fmt: skip
    n_steps, arena, uses, producer, to_end = case
    stream_of, position = [0] * n_steps, list(range(n_steps))
    _, clocks = _waits([[] for _ in range(n_steps)], stream_of, position, 2)  # the general computation
    start_clock = [c[:1] for c in clocks]
    got = _parallel_neighbours(arena, uses, producer, to_end, stream_of, position, start_clock, 1)

    def before(a: str, b: str) -> bool:  # every use of a happens before b is produced, and a is not kept
        return a not in to_end and all(position[u] <= start_clock[producer[b]][0] for u in uses[a])

    want = {a: {b for b in arena if b != a and not (before(a, b) or before(b, a))} for a in arena}
    assert set(got) == set(arena)
    for a in arena:
        assert sorted(got[a]) == sorted(want[a])  # each neighbour once


@given(st.integers(min_value=1, max_value=16).flatmap(
    lambda n: st.tuples(*[st.lists(st.integers(min_value=0, max_value=i - 1), max_size=3) if i else st.just([])
                          for i in range(n)])))  # fmt: skip
def test_one_stream_waits_as_the_general_computation(deps: tuple[list[int], ...]) -> None:
    n = len(deps)
    stream_of, position = [0] * n, list(range(n))
    waits, clock = _waits(list(deps), stream_of, position, 1)
    general_waits, general_clock = _waits(list(deps), stream_of, position, 2)  # a second stream, unused
    assert waits == general_waits == [[] for _ in range(n)]
    assert clock == [c[:1] for c in general_clock]
    assert all(c[1] == -1 for c in general_clock)
