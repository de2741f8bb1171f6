"""What the runtime's observation hooks test, and the hub they report to.

aioge's enqueue and completion sites each carry one line of the form::

    if _trace.hub is not None: _trace.hub.recorded(comp)

With nobody observing (no profiler running, metrics off) ``hub`` is None and a
hook costs one global load and a compare.  Observers (:mod:`aioge.profiler`,
:mod:`aioge.metrics`) attach to the hub; this module imports neither.

The hook sites, and what the hub passes on:

* ``Stream.__init__`` -> ``stream_opened(stream)`` (after the stream module's
  registry of streams, which metrics read, took it): timing for streams opened
  while profiling;
* ``Lane.submit`` -> ``recorded(comp)``: every launch, copy, marker and event record;
* ``Lane._finish`` -> ``finished(comp, rc)``: its completion, while its events are live;
* ``Stream._wait_for`` / ``Stream.wait_event`` -> ``waited(stream, comp)``: a
  device-side wait of ``stream`` for ``comp`` (of another stream);
* ``launch()`` -> ``annotate(comp, inputs, outputs)``: the op's operands;
* ``CompiledGraph`` -> ``execution_begins`` / ``execution_ends`` around one
  execution, and for sunk segments ``node_times`` (a buffer for the runtime's
  per-node clock, or None) then ``segment``; an execution the runtime ran on the
  caller's thread (no launch, no completion) -> ``node_times`` then ``ran_inline``.
  Observing never changes the route an execution takes.

Hooks run on whatever thread enqueues or completes, some with runtime locks
held: observers must not block, launch work or take a stream's lock.

This module sits below everything it observes and imports none of it: the hub
reads nothing of the streams, completions and compiled graphs it passes on, so
an :class:`Observer` names their types itself (``Observer[Stream, Completion,
CompiledGraph]``), and each hook parameter is exactly what the runtime passed.
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from typing import Any, Generic, TypeVar

__all__ = (
    "COPIES",
    "CompileSteps",
    "Hub",
    "Observer",
    "attach",
    "compile_progress",
    "compile_steps",
    "detach",
    "hub",
    "kind_of",
    "moved_bytes",
)

log = logging.getLogger("aioge")


#: what the hooks pass on, as an observer names them: a stream, a completion, a compiled graph
S = TypeVar("S")
C = TypeVar("C")
M = TypeVar("M")


class Observer(Generic[S, C, M]):
    """Base of the hub's observers: every callback is a no-op unless overridden.

    ``S``, ``C`` and ``M`` are the runtime's stream, completion and compiled-graph
    classes (``Observer[Stream, Completion, CompiledGraph]``): the hub hands the
    runtime's objects through untouched.
    """

    def stream_opened(self, stream: S) -> None: ...

    def recorded(self, comp: C, t_ns: int) -> None: ...

    def annotate(self, comp: C, inputs: Sequence[Any], outputs: Sequence[Any]) -> None: ...

    def waited(self, stream: S, comp: C, t_ns: int) -> None: ...

    def finished(self, comp: C, rc: int, t_ns: int) -> None: ...

    def execution_begins(self, model: M, stream: S, t_ns: int) -> Any:
        return None

    def execution_ends(self, token: Any, join: C, t_ns: int) -> None: ...

    def node_times(self, model: M, segment: int) -> Any:
        return None

    def segment(self, comp: C, model: M, segment: int, times: Any) -> None: ...

    def ran_inline(self, model: M, stream: S, begin_ns: int, end_ns: int, rc: int,
                   times: Any) -> None: ...  # fmt: skip


#: an observer of whatever types: what the hub holds
AnyObserver = Observer[Any, Any, Any]


class Hub:
    """Fans the hooks out to the attached observers.

    ``recorders`` see new work; ``finishers`` see completions (a profiler that
    stopped recording stays a finisher until the work it recorded completed).
    Both are tuples replaced whole, so a hook iterates a stable snapshot.  The hub
    passes the runtime's objects on as they are (hence ``object``: it reads none).
    """

    def __init__(self) -> None:
        self.recorders: tuple[AnyObserver, ...] = ()
        self.finishers: tuple[AnyObserver, ...] = ()

    def stream_opened(self, stream: object) -> None:
        for o in self.recorders:
            o.stream_opened(stream)

    def recorded(self, comp: object) -> None:
        t = time.monotonic_ns()
        for o in self.recorders:
            o.recorded(comp, t)

    def annotate(self, comp: object, inputs: Sequence[Any], outputs: Sequence[Any]) -> None:
        for o in self.recorders:
            o.annotate(comp, inputs, outputs)

    def waited(self, stream: object, comp: object | None) -> None:
        if comp is None:
            return
        t = time.monotonic_ns()
        for o in self.recorders:
            o.waited(stream, comp, t)

    def finished(self, comp: object, rc: int) -> None:
        t = time.monotonic_ns()
        for o in self.finishers:
            o.finished(comp, rc, t)

    def execution_begins(self, model: object, stream: object) -> list[tuple[AnyObserver, Any]] | None:
        t = time.monotonic_ns()
        tokens = [(o, o.execution_begins(model, stream, t)) for o in self.recorders]
        return tokens or None

    def execution_ends(self, tokens: list[tuple[AnyObserver, Any]] | None, join: object) -> None:
        if not tokens:
            return
        t = time.monotonic_ns()
        for o, tok in tokens:
            if tok is not None:
                o.execution_ends(tok, join, t)

    def node_times(self, model: object, segment: int) -> Any:
        for o in self.recorders:
            buf = o.node_times(model, segment)
            if buf is not None:
                return buf
        return None

    def segment(self, comp: object, model: object, segment: int, times: Any) -> None:
        for o in self.recorders:
            o.segment(comp, model, segment, times)

    def ran_inline(self, model: object, stream: object, begin_ns: int, rc: int, times: Any) -> None:
        """An execution of ``model``'s one segment ran on the caller's thread from ``begin_ns`` to now."""
        t = time.monotonic_ns()
        for o in self.recorders:
            o.ran_inline(model, stream, begin_ns, t, rc, times)


#: the hub while anything observes the runtime, else None: the only thing a hook tests
hub: Hub | None = None
_hub = Hub()
_lock = threading.Lock()


def attach(observer: AnyObserver, *, record: bool = True, finish: bool = True) -> None:
    """Start sending hooks to ``observer`` (new work if ``record``, completions if ``finish``)."""
    global hub
    with _lock:
        if record and observer not in _hub.recorders:
            _hub.recorders = (*_hub.recorders, observer)
        if finish and observer not in _hub.finishers:
            _hub.finishers = (*_hub.finishers, observer)
        hub = _hub


def detach(observer: AnyObserver, *, record: bool = True, finish: bool = True) -> None:
    """Stop sending ``observer`` new work (``record``) and/or completions (``finish``)."""
    global hub
    with _lock:
        if record:
            _hub.recorders = tuple(o for o in _hub.recorders if o is not observer)
        if finish:
            _hub.finishers = tuple(o for o in _hub.finishers if o is not observer)
        hub = _hub if (_hub.recorders or _hub.finishers) else None


# ---- what a completion is (shared by the observers) ----------------------------------------------
#: copies by their ``Completion.what``, and their direction
COPIES = {"upload": "H2D", "download": "D2H", "copy": "D2D"}
_MARKERS = ("synchronize", "event")


def kind_of(what: str) -> str:
    """``kernel``, ``graph`` (a sunk segment, ``model[i]``), ``memcpy``, ``memset`` or ``marker``
    (event records, joins) for a ``Completion.what``."""
    if what.endswith("]"):
        return "graph"
    if what in COPIES:
        return "memcpy"
    if what == "zeros":
        return "memset"
    if what in _MARKERS or what.endswith((":join", ":done")):
        return "marker"
    return "kernel"


def moved_bytes(what: str, keep: Any) -> int:
    """Bytes a copy or memset moves, from what its completion keeps (memory, then host array or staging)."""
    if (what not in COPIES and what != "zeros") or not isinstance(keep, tuple) or not keep:
        return 0
    n = getattr(keep[0] if what == "zeros" else keep[-1], "nbytes", 0)
    return int(n) if isinstance(n, int) else 0


# ---- compile steps: DEBUG lines with timings, and progress for the CLI --------------------------
#: while set (by the ``aioge`` command), called as ``compile_progress(step, done, total)`` as a
#: compile advances; ``total`` is an estimate (the pass pipeline repeats until nothing changes)
compile_progress: Callable[[str, int, int], None] | None = None


def compile_steps(name: str, optimize_level: int) -> CompileSteps:
    """The :class:`CompileSteps` of a compile of graph ``name``: one that times each step while
    the ``aioge`` logger logs DEBUG lines or :data:`compile_progress` is set, else one that
    takes nothing down (no clock read per step, no record; its ``on_pass`` is None)."""
    if compile_progress is not None or log.isEnabledFor(logging.DEBUG):
        return CompileSteps(name, optimize_level)
    return _UNOBSERVED


class CompileSteps:
    """Times the steps of one compile: a DEBUG line for each (passes included), one summary."""

    def __init__(self, name: str, optimize_level: int) -> None:
        self.name = name
        self.t0 = time.perf_counter()
        self.steps: list[tuple[str, float]] = []
        # infer_shapes twice, 4 passes x ~2 rounds at level 1+, fuse + dce at 2; plan, lower, load
        self.total = 2 + (8 if optimize_level >= 1 else 0) + (2 if optimize_level >= 2 else 0) + 3

    @property
    def on_pass(self) -> Callable[[str, float], None] | None:
        """``optimize``'s ``on_pass`` callback: :meth:`note`."""
        return self.note

    def note(self, what: str, seconds: float) -> None:
        """Record a finished step (``optimize``'s ``on_pass`` callback)."""
        self.steps.append((what, seconds))
        log.debug("compile %s: %s %.1f ms", self.name, what, seconds * 1e3)
        progress = compile_progress
        if progress is not None:
            self.total = max(self.total, len(self.steps) + 1)
            progress(what, len(self.steps), self.total)

    @contextlib.contextmanager
    def step(self, what: str) -> Iterator[None]:
        t = time.perf_counter()
        yield
        self.note(what, time.perf_counter() - t)

    def finish(self, summary: Callable[[], str]) -> None:
        """The summary DEBUG line (``summary()`` describes the result; made only when logged)."""
        if log.isEnabledFor(logging.DEBUG):
            total = time.perf_counter() - self.t0
            by_step: dict[str, float] = {}
            for what, sec in self.steps:
                by_step[what] = by_step.get(what, 0.0) + sec
            slowest = ", ".join(f"{w} {s * 1e3:.1f}" for w, s in sorted(by_step.items(), key=lambda x: -x[1])[:4])
            log.debug("compile %s: %.1f ms in all (slowest, ms: %s); %s", self.name, total * 1e3, slowest, summary())
        progress = compile_progress
        if progress is not None:
            progress("done", self.total, self.total)


class _Unobserved(CompileSteps):
    """The steps of a compile nobody observes (:func:`compile_steps`): nothing timed or recorded."""

    def __init__(self) -> None:
        super().__init__("", 0)

    @property
    def on_pass(self) -> None:
        return None

    def note(self, what: str, seconds: float) -> None:
        pass

    def step(self, what: str) -> contextlib.nullcontext[None]:  # type: ignore[override]
        return _NO_STEP

    def finish(self, summary: Callable[[], str]) -> None:
        pass


_NO_STEP = contextlib.nullcontext()
_UNOBSERVED = _Unobserved()
