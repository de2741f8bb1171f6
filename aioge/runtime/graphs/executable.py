"""Compiled graphs: GE's CompileGraph + LoadGraph, then ``await model.execute(...)``.

``model = await dev.compile(graph)`` optimises the graph (shape inference,
constant folding, DCE, CSE, fusion), plans it (issue order, streams joined
by events, a liveness-based arena), lowers every node to CANN single ops
and loads the result:

* **sunk** (the host runtime): the whole plan lives inside the C runtime as
  an ``aiogeGraph``; each run of consecutive steps of one stream (a
  *segment*) executes as ONE stream task -- no Python and no GIL between
  nodes (GE's model sinking).  Segments on different streams overlap and
  join through events.
* **per-op** (any backend): every lowered op goes through
  ``aclopCompileAndExecute`` on one stream, with a tensor per value.

Both give the same results.  Weights (graph constants) are uploaded once at
compile time -- on the host runtime, all but those its kernels read only through
the copies packed for them at compile.  One model may be executed by many coroutines at once: every
execution gets its own arena (from a pool) and input/output buffers; the
segments of a multi-stream plan run on the caller's stream plus auxiliary
streams of that caller's own, so executions on different streams overlap;
``execute()`` waits (asynchronously) while ``max_inflight`` executions are
in flight, which also bounds the arenas leased.
"""

from __future__ import annotations

import collections
import math
import sys
import threading
import time
import weakref
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

import anyio
import numpy as np

from ... import _native, dtypes
from ..._layout import NCHW_OPS, data_format
from ..._native import acl
from ...errors import AclError, BusyResourceError, FeedError, error_class
from ...graph import LoweredNode
from ...graph.executable import Layout, aligned, kind_of
from ...graph.lower.host import host_attrs
from .. import _trace
from .._resources import Resource
from ..launch import Const, launch
from ..memory import trim_host_heap
from ..scheduler import Completion, deadline, wait_all
from ..stream import DeviceMemory, Tensor

if TYPE_CHECKING:
    from ...graph import Graph, Plan
    from ..device import Device
    from ..stream import Stream

__all__ = ("MAX_INFLIGHT", "CompiledGraph", "SharedWeights")

#: executions of one model in flight at once before ``execute()`` waits (``model.max_inflight``)
MAX_INFLIGHT = 8
#: caller streams that get auxiliary streams of their own; further ones share those round-robin
MAX_AUX_SETS = 8


#: CompiledGraph._load adds the nodes in batches of at most this many (one runtime call each) ...
_NODE_BATCH = 1024
#: ... and ends a batch where the const descs it holds (each a copy of its value) pass this many bytes
_CONST_BATCH_BYTES = 1 << 20
#: the formats and dtype of a batch's descs: ND, NCHW (the 4-D operands of NCHW_OPS), and an absent operand's
_FORMATS = (int(acl.Format.ND), int(acl.Format.NCHW), int(acl.DataType.UNDEFINED), int(acl.Format.UNDEFINED))


class _Flight:
    """The executions in flight of one model and its idle arenas.

    Shared by the model and its tickets but referencing neither, so a model
    dropped while executions run can be collected; the tickets keep this.
    A ticket may be collected on any thread, at any allocation -- also by a
    collection that code holding ``lock`` started -- so giving it back takes
    no lock: it is queued (``deque.append`` is atomic), and whoever holds the
    lock next settles the queue.
    """

    def __init__(self, limit: int) -> None:
        self.lock = threading.Lock()
        self.limit = limit
        self.live = 0  # tickets alive (once ``returned`` is settled)
        self.peak = 0
        self.arenas: list[DeviceMemory] = []  # idle, ready for reuse
        self.made = 0  # arenas allocated so far
        self.joins: collections.deque[Completion] = collections.deque()  # last completion of each execution
        self.returned: collections.deque[DeviceMemory | None] = collections.deque()  # tickets given back
        self.closed = False

    def give_back(self, mem: DeviceMemory | None) -> None:
        """A ticket's release (from ``__del__``): lock-free, settled now if the lock is free."""
        self.returned.append(mem)
        self.try_settle()

    def try_settle(self) -> None:
        """Settle the tickets given back, unless someone holds the lock (then they will)."""
        if self.lock.acquire(blocking=False):  # never waits: this thread may hold it already
            try:
                self.settle()
            finally:
                self.lock.release()

    def settle(self) -> None:
        """Account for the tickets given back; caller holds the lock."""
        ret = self.returned
        while ret:
            mem = ret.popleft()
            if mem is not None and mem.ptr is not None and not self.closed:
                self.arenas.append(mem)  # back in the pool before the slot: arenas never outnumber slots
            self.live -= 1

    def take_arena(self) -> DeviceMemory | None:
        with self.lock:
            self.settle()
            return self.arenas.pop() if self.arenas else None

    def admit(self) -> _Ticket:
        with self.lock:
            self.settle()
            self.live += 1
            self.peak = max(self.peak, self.live)
        return _Ticket(self)

    def track(self, join: Completion) -> None:
        """Note an execution's last completion (dropping finished ones: the deque stays short)."""
        with self.lock:
            joins = self.joins
            while joins and joins[0]._done:
                joins.popleft()
            joins.append(join)

    def oldest(self) -> tuple[bool, Completion | None]:
        """Take a slot if there is room; else the oldest execution still running (to wait for)."""
        with self.lock:
            self.settle()
            joins = self.joins
            while joins and joins[0]._done:
                joins.popleft()
            if self.live < self.limit:
                self.live += 1
                self.peak = max(self.peak, self.live)
                return True, None
            return False, joins[0] if joins else None


class _Ticket:
    """One execution in flight: its slot and its arena, given back when the
    last completion holding the ticket lets go of it (the device is done)."""

    __slots__ = ("flight", "mem")

    def __init__(self, flight: _Flight) -> None:
        self.flight = flight
        self.mem: DeviceMemory | None = None

    def __del__(self) -> None:
        self.flight.give_back(self.mem)


class _Now:
    """The synchronous path of a small execution from host memory (host runtime).

    When the graph is cheap (its runs take at most ``AIOGE_HOST_INLINE_US``
    of CPU time; before its first run: it fits ``AIOGE_HOST_INLINE_BYTES``)
    and the stream is idle, one C call (``aiogeGraphExecuteHostNow``) copies
    the feeds in, runs the nodes and copies the outputs out on the caller's
    thread: no event, no completion, no wake-up, which would cost more than
    such work on a busy machine.  Everything that does not
    change between runs is made once: a private arena and the pointer
    arrays into it; a run only writes its host pointers.  One run at a time
    (a second thread takes the general path), and the execution holds no
    ``max_inflight`` slot: it is over when the call returns.
    """

    __slots__ = ("arena", "costly", "host_in", "host_out", "in_ptrs", "ins", "lock", "n_in", "out_ptrs", "outs", "ran",
                 "skip", "weights")  # fmt: skip

    def __init__(self, model: CompiledGraph, arena: DeviceMemory) -> None:
        assert model._io_at is not None
        in_at, out_at = model._io_at
        self.lock = threading.Lock()
        self.arena = arena
        self.weights = [w._memory() for w in model._weights]
        self.ins = [(n, shape, dt) for n, (shape, dt) in model.inputs.items()]
        self.outs = [(n, shape, dt) for n, (shape, dt) in model.outputs.items()]
        self.n_in = len(in_at) + len(model._weight_at)
        self.in_ptrs = acl.offset_pointers(arena.ptr, in_at, model._weight_ptrs())
        self.out_ptrs = acl.offset_pointers(arena.ptr, out_at, [])
        self.host_in = acl.pointer_list([acl.NULL] * self.n_in)  # the weights' entries stay NULL
        self.host_out = acl.pointer_list([acl.NULL] * len(out_at))
        self.ran = acl.int32_out()
        #: verdicts "too costly" in a row, and executions left that take the general path without asking
        self.costly = 0
        self.skip = 0

    def ready(self) -> bool:
        """The weights' uploads have run (later runs need no ordering at all)."""
        if self.weights and any(m.writer is not None and not m.writer._done for m in self.weights):
            return False
        self.weights = []
        return True

    def run(self, model: CompiledGraph, feeds: Any, s: Stream) -> dict[str, Any] | None:
        """Run now; None when this execution must take the general path (which also reports bad feeds).

        A graph too costly to run now (``ran`` -1) asks again only after 1, 3, 7 ... 31 executions
        that did not (asking costs its outputs' allocation and a C call); its measure follows its
        runs wherever they ran, so a graph that became cheap runs now within that many."""
        if self.skip:
            self.skip -= 1  # benign race between threads: the count is advice
            return None
        if not self.lock.acquire(blocking=False):
            return None
        try:
            if model._closed or s._closed or (self.weights and not self.ready()):
                return None
            host_in, host_out = self.host_in, self.host_out
            from_buffer = acl.host_buffer
            keep = []
            i = 0
            try:
                for name, shape, dt in self.ins:
                    a = feeds[name]
                    if type(a) is not np.ndarray:
                        if isinstance(a, Tensor):
                            return None  # on the device already: the general path uses it in place
                        a = _host_array(a)  # a torch CPU tensor: a view, no copy
                    if a.shape != shape or a.dtype != dt:
                        return None
                    b = from_buffer(a)  # ValueError: not contiguous
                    host_in[i] = b
                    keep.append(b)
                    keep.append(a)
                    i += 1
                if len(feeds) != i:
                    return None
            except (KeyError, TypeError, ValueError, BufferError):
                return None
            res = {}
            j = 0
            for name, shape, dt in self.outs:
                res[name] = o = np.empty(shape, dt)
                b = from_buffer(o)
                host_out[j] = b
                keep.append(b)
                j += 1
            hub = _trace.hub  # observed or not, the same route: the runtime also times every node
            times = hub.node_times(model, 0) if hub is not None else None
            begin = time.monotonic_ns() if hub is not None else 0
            ran = self.ran
            with s._enqueue.lock:  # the stream's lock: open-ness, the call and a failure's note as one
                if s._closed:
                    return None
                model.device.context.bind()
                rc = _execute_now(model._handle, 0, self.arena.ptr, self.n_in, self.in_ptrs, host_in, j, self.out_ptrs,
                                  host_out, s._handle, _NULL if times is None else times,
                                  0 if times is None else len(times), ran)  # fmt: skip
                if ran[0] != 1:
                    if rc:
                        acl.raise_for(rc, f"execute() of {model._describe()}")
                    if ran[0] < 0:
                        self.costly = n = min(self.costly + 1, _NOW_BACKOFF)
                        self.skip = (1 << n) - 1
                    return None
                self.costly = 0
                if rc:
                    err = (rc, _native.recent_error(), f"{model.graph.name}: execution from host memory")
                    s._lane.record_failure(err)  # the stream's next synchronize() reports it too
            if hub is not None:
                hub.ran_inline(model, s, begin, rc, times)
            if rc:
                raise error_class(rc)(*err)
            return res
        finally:
            self.lock.release()


class SharedWeights:
    """The device copies of one model's constant arrays, shared by all of its plans.

    A dynamic-shape model compiles a plan per input shape; each plan's weights that are one of the
    model's own constant arrays (the same array object, as specialisation and the passes keep an
    untouched constant) come from here: uploaded once, freed when the model closes and no plan
    or execution holds them any more.  Arrays the passes made for one plan (a folded constant)
    stay that plan's own.
    """

    def __init__(self, arrays: Mapping[str, np.ndarray]) -> None:
        self._lock = threading.Lock()
        self._arrays = {id(a): a for a in arrays.values()}  # only these are shared
        self._tensors: dict[int, Tensor] = {}
        self.closed = False

    def get(self, stream: Stream, a: np.ndarray, host: np.ndarray | None = None) -> Tensor | None:
        """The model's device copy of ``a`` (uploaded on first use, from ``host``: ``a`` made
        contiguous, when the caller has it); None: not one of its constants."""
        k = id(a)
        with self._lock:
            if self.closed or self._arrays.get(k) is not a:
                return None
            t = self._tensors.get(k)
            if t is None:
                # under the lock: concurrent compiles of two shapes upload it once
                t = self._tensors[k] = _owned(stream._upload(a if host is None else host, None, None, now=True))
            return t

    @property
    def nbytes(self) -> int:
        """Bytes of the device copies made so far."""
        with self._lock:
            return sum(t.nbytes for t in self._tensors.values())

    def close(self) -> None:
        """Drop the copies (each goes back to the runtime once no plan or execution holds it)."""
        with self._lock:
            self.closed = True
            self._tensors.clear()
            self._arrays.clear()


#: a graph too costly to run now asks again after at most ``2**_NOW_BACKOFF - 1`` executions
_NOW_BACKOFF = 5

#: pack constant matrix-product operands once at load (off: the kernels pack per call; benchmarks A/B it)
_PACK_WEIGHTS = True


class CompiledGraph(Resource):
    """A graph compiled and loaded on a device (``await dev.compile(graph)``).

    Attributes:
        inputs / outputs: ``{name: (shape, dtype)}`` in graph order.
        mode: ``"sunk"`` (one device task per segment) or ``"per_op"``.
        plan: the :class:`aioge.graph.Plan` (arena bytes, streams, steps).

    Streams: an execution's first segment chain runs on its ``stream=``; the
    other streams of a multi-stream plan are auxiliary streams owned by the
    model, one set per caller stream (created on first use, up to
    :data:`MAX_AUX_SETS` sets; further caller streams share them
    round-robin, and a closed caller's set passes to the next newcomer), so
    executions on different streams never queue behind each other.

    Lifecycle: close it (``async with``, ``aclose()``), or the device closes
    it; a model collected open emits ``ResourceWarning`` and releases its
    graph and buffers once running executions no longer need them.
    """

    def __init__(self, device: Device, graph: Graph, plan: Plan, build: Layout, mode: str,
                 lowered: Mapping[str, LoweredNode], max_inflight: int = MAX_INFLIGHT,
                 shared: SharedWeights | None = None) -> None:  # fmt: skip
        self.device = device
        self._shared = shared
        self.graph = graph
        self.plan = plan
        self.mode = mode
        self._build = build
        self._lowered = lowered
        self.inputs = {n: kind_of(graph, n) for n in graph.inputs}
        self.outputs = {n: kind_of(graph, n) for n in graph.outputs}
        self._handle: Any = None
        self._lock = threading.Lock()
        self._flight = _Flight(_positive(max_inflight))
        self._aux_sets: list[list[Stream]] = []
        self._aux_of: weakref.WeakKeyDictionary[Stream, int] = weakref.WeakKeyDictionary()
        self._aux_next = 0
        #: the weights uploaded to the device (each plan's own, or its model's shared copy)
        self._weights: list[Tensor] = []
        #: per weight of ``build.weights``: its device copy, or None where the graph reads it only
        #: through the copies packed for its kernels (not uploaded: see _load)
        self._weight_at: list[Tensor | None] = []
        #: per arena: the graph's scratch, then (one-task executions from host memory) a slot per
        #: user input and output; None where executions cannot be one task (see _load)
        self._io_at: tuple[list[int], list[int]] | None = None
        self._arena_bytes = max(build.total_arena, 1)
        self._now: _Now | None = None
        #: one-task executions from host memory: per arena (by address), its input and output pointers
        self._io_ptrs: dict[Any, tuple[Any, Any]] = {}
        self._opened()

    def __repr__(self) -> str:
        return (f"<aioge.CompiledGraph {self.graph.name!r} mode={self.mode} nodes={len(self._build.ops)} "
                f"segments={len(self._build.segments)} arena={self._build.total_arena}B>")  # fmt: skip

    @property
    def max_inflight(self) -> int:
        """Executions in flight at once before ``execute()`` waits for one to finish.

        Each one in flight holds an arena, so this also bounds the arenas
        the model leases (besides the one of its synchronous path, whose runs
        are over when the call returns).  ``launch()`` never waits but counts too.
        """
        return self._flight.limit

    @max_inflight.setter
    def max_inflight(self, n: int) -> None:
        self._flight.limit = _positive(n)

    @property
    def stats(self) -> dict[str, int]:
        """``in_flight`` executions, their ``peak``, ``arenas`` allocated (the synchronous path's
        included), ``aux_streams`` opened."""
        f = self._flight
        with f.lock:
            f.settle()
        return {"in_flight": f.live, "peak": f.peak, "arenas": f.made,
                "aux_streams": sum(len(a) for a in self._aux_sets)}  # fmt: skip

    # ---- loading (runs on a worker thread) ----
    def _load(self) -> None:
        dev = self.device
        dev.context.bind()
        b = self._build
        s0 = dev.default_stream
        # each weight made contiguous once, packed from (_pack_weights) and uploaded from (one copy, at
        # once: Stream._upload's now); an array already contiguous is not copied.  A folded fill (a
        # broadcast scalar view) is materialised only where its bytes are read: a kernel may pack it
        # from its value alone, and one read only through packed copies is never uploaded
        consts = self.graph.constants
        arrays = [np.asarray(consts[name]) for name in b.weights]
        host: list[np.ndarray | None] = [a if a.flags.c_contiguous else None if _is_fill(a) else _native.contiguous(a)
                                         for a in arrays]  # fmt: skip
        if self.mode == "per_op":
            self._upload_weights(arrays, host, [False] * len(host))
            return
        in_bytes = [math.prod(sh) * dt.itemsize for sh, dt in self.inputs.values()] + [a.nbytes for a in arrays]
        out_bytes = [math.prod(sh) * dt.itemsize for sh, dt in self.outputs.values()]
        self._handle = acl.graph_create(in_bytes, out_bytes, b.total_arena, max(len(b.segments), 1))
        cache = dev.context.cache
        # the nodes go to the runtime in batches (one call each), their operands' descs by value (the
        # runtime makes them for the call): a batch ends where the const values its descs copy pass
        # _CONST_BATCH_BYTES, or at _NODE_BATCH nodes.  A batch's descs: one per distinct (dtype, shape,
        # 4-D NCHW) of the non-const operands (the runtime copies a desc's contents into each node, so
        # operands alike share one; inception: 85 -> 26), one for an absent operand, one per const operand
        for segs, types, names, counts, operands, table, attrs in acl.node_table(
                b.ops, NCHW_OPS, dtypes.ACL_CODE, dtypes.normalize, _FORMATS, _NODE_BATCH, _CONST_BATCH_BYTES):
            acl.graph_add_nodes_by_value(self._handle, segs, types, names, counts, operands, table,
                                         cache.attrs(attrs))  # fmt: skip
        self._upload_weights(arrays, host, self._pack_weights(arrays, host))
        if len(b.segments) == 1 and self.plan.num_streams <= 1:
            slots: list[int] = []
            end = aligned(b.total_arena)
            for n in in_bytes[: len(self.inputs)] + out_bytes:
                slots.append(end)
                end += aligned(n)
            self._io_at = (slots[: len(self.inputs)], slots[len(self.inputs) :])
            self._arena_bytes = max(end, 1)
            if _execute_now is not None and _inline_bytes():
                self._now = _Now(self, _owned_memory(DeviceMemory(dev, self._arena_bytes, s0)))
                with self._flight.lock:
                    self._flight.made += 1  # an arena of the model's too: the one its runs now use

    def _pack_weights(self, arrays: list[np.ndarray], host: list[np.ndarray | None]) -> list[bool]:
        """Pack the weights the kernels have a packed form of (a constant matrix-product operand, a
        convolution's filter), once, from ``host`` (their contiguous host arrays, in ``Layout.weights``
        order; None: a fill of ``arrays`` not materialised yet, packed from its value where the kernel
        can, else materialised into ``host`` here); per weight, whether the graph reads it only
        through those packed copies."""
        self.plan.weight_bytes = sum(a.nbytes for a in arrays)
        if not _PACK_WEIGHTS:
            return [False] * len(host)
        first = len(self.inputs)
        packed = 0
        fills = [i for i, h in enumerate(host) if h is None]
        if fills:
            values: list[Any] = [None] * len(host)
            held = []  # each fill's one value, alive through the call
            for i in fills:
                a = arrays[i]
                v = _native.contiguous(a[(0,) * a.ndim])
                held.append(v)
                values[i] = _native.host_ptr(v)
            done = acl.graph_pack_fill_weights(self._handle, first, values)
            if done is not None:
                packed, _, need = done
            for i in fills:
                if done is None or need[i]:
                    host[i] = _native.contiguous(arrays[i])
        ptrs = [_NULL if h is None else _native.host_ptr(h) for h in host]
        packed += acl.graph_pack_weights(self._handle, first, ptrs, None)[0]
        self.plan.packed_weight_bytes = packed
        return acl.graph_pack_only_weights(self._handle, first, len(host)) if packed else [False] * len(host)

    def _upload_weights(self, arrays: list[np.ndarray], host: list[np.ndarray | None], pack_only: list[bool]) -> None:
        """Upload the weights but those the graph reads only through packed copies (``pack_only``);
        a fill not materialised yet (``host`` None) is materialised to be uploaded."""
        s0 = self.device.default_stream
        shared = self._shared
        consts = self.graph.constants
        at: list[Tensor | None] = []
        mine: list[int] = []  # where this plan's own copies go in ``at``
        up: list[np.ndarray] = []  # and their host arrays
        for a, name, h, skip in zip(arrays, self._build.weights, host, pack_only, strict=True):
            w = None
            if not skip:
                if h is None:
                    h = _native.contiguous(a)
                if shared is not None:
                    w = shared.get(s0, consts[name], h)
                if w is None:
                    mine.append(len(at))
                    up.append(h)
            at.append(w)
        if mine:
            for i, w in zip(mine, s0._upload_all(up), strict=True):
                at[i] = _owned(w)
        self._weight_at = at
        self._weights = [w for w in at if w is not None]

    def _weight_ptrs(self) -> list[Any]:
        """Per weight, its device pointer (NULL: not uploaded, read only through packed copies)."""
        return [w._memory().ptr if w is not None else _NULL for w in self._weight_at]

    @property
    def weight_device_bytes(self) -> int:
        """Bytes of the weights this plan holds on the device (those read only through the copies
        packed for its kernels are not uploaded; ``plan.weight_bytes`` counts every weight)."""
        return sum(w.nbytes for w in self._weights)

    # ---- execution ----
    def _check_feeds(self, feeds: Mapping[str, Any]) -> bool:
        """Raise for feeds the model does not take; True when every one is a numpy array."""
        inputs = self.inputs
        if len(feeds) == len(inputs):  # the common case first: numpy arrays of the model's kinds
            for n, (shape, dt) in inputs.items():
                x = feeds.get(n)
                if type(x) is not np.ndarray or x.shape != shape or x.dtype != dt:
                    break
            else:
                return True  # every input given (as many names as it takes), each of its shape and dtype
        check_feed_names(self.graph.name, self.inputs, feeds)
        for n, (shape, dt) in self.inputs.items():
            x = _host_array(feeds[n])
            xs = x.shape if isinstance(x, Tensor) else np.shape(x)
            xd = x.dtype if isinstance(x, Tensor) else np.asarray(x).dtype
            if tuple(xs) != shape:
                raise ValueError(f"{self.graph.name}: input {n!r} has shape {tuple(xs)}, the model takes {shape}")
            if dtypes.normalize(xd) != dt:
                raise TypeError(f"{self.graph.name}: input {n!r} has dtype {xd}, the model takes {dt}")
        return False

    async def execute(
        self,
        feeds: Mapping[str, Any] | Any,
        *,
        stream: Stream | None = None,
        as_tensors: bool = False,
        timeout: float | None = None,
        as_torch: bool = False,
    ) -> dict[str, Any]:
        """Run the model once.

        Args:
            feeds: input name -> numpy array or torch CPU tensor (uploaded) or :class:`Tensor` (used in place);
                for a model of exactly one input, that one array or tensor by itself.
            stream: the stream for the main segment chain (default: the device's).
            as_tensors: return output Tensors (stay on the device) instead of numpy arrays.
            as_torch: return torch tensors (sharing memory with the downloaded arrays).
            timeout: seconds before :class:`~aioge.StreamSyncTimeoutError` (a ``TimeoutError``).

        Returns:
            output name -> numpy array (or Tensor).

        Raises:
            FeedError: not a dict of input name -> array (nor one array for a model of one input), or
                missing / unknown input names (a TypeError and a ValueError; nothing launched).
            ValueError/TypeError: a feed of the wrong shape or dtype (nothing launched).
            AclError: a node failed on the device (its message names the node).

        Backpressure: waits while ``max_inflight`` executions of the model
        are in flight, and while ``stream`` is above its high-water mark.

        Cancellation: returns control at once; the execution still runs to
        completion and its buffers are released afterwards.
        """
        if type(feeds) is not dict:
            feeds = feeds_dict(self.graph.name, self.inputs, feeds)
        now = self._now
        s0 = stream if stream is not None else self.device.default_stream
        if now is not None and not as_tensors:
            res = now.run(self, feeds, s0)
            if res is not None:
                return res if not as_torch else _as_torch(res)
        self._check_open()
        if as_torch and as_tensors:
            raise ValueError("as_torch and as_tensors exclude each other")
        arrays = self._check_feeds(feeds)
        await s0.drain()
        ticket: _Ticket | None = await self._admit()
        if (
            self._io_at is not None
            and not as_tensors
            and (arrays or not any(isinstance(feeds[n], Tensor) for n in self.inputs))
        ):
            # host memory in and out, one segment: one task, the copies inside it
            assert ticket is not None
            host = [feeds[n] for n in self.inputs] if arrays else [_host_array(feeds[n]) for n in self.inputs]
            res, comp = self._run_host(host, s0, ticket)
            ticket = None
            with deadline(timeout, f"execute() of {self._describe()}"):
                await comp.wait()
        else:
            try:
                ins: list[Tensor] = []
                uploads: list[Completion] = []  # this execution's copies in: their failures are its own
                for n in self.inputs:
                    x = feeds[n]
                    if not isinstance(x, Tensor):
                        x = s0._upload(_host_array(x), None, f"{self.graph.name}: input {n!r} (upload)")
                        uploads.append(x._writer)  # type: ignore[arg-type]
                    ins.append(x)
                assert ticket is not None
                outs, comps = self._launch(ins, None, s0, ticket, uploads)
            finally:
                ticket = None  # the launches hold it now (until the device is done); never a traceback
            with deadline(timeout, f"execute() of {self._describe()}"):
                if as_tensors:
                    await wait_all(comps[-1:])  # the join: it stands for everything the execution enqueued
                    return dict(outs)
                # the outputs' writer (the join) raises the first failure among the copies in
                # and the nodes; enqueue every copy-out at once, then wait for them in order
                downloads = [(name, t._memory().home()._enqueue_download(t)) for name, t in outs.items()]
                res = {name: await d.result() for name, d in downloads}
        return res if not as_torch else _as_torch(res)

    def launch(
        self, inputs: Sequence[Tensor], outputs: Sequence[Tensor] | None = None, *, stream: Stream | None = None
    ) -> tuple[dict[str, Tensor], list[Completion]]:
        """Enqueue one execution and return at once (GE's ExecuteGraphWithStreamAsync).

        ``inputs`` are device tensors in graph input order; ``outputs``
        optional tensors to write into (else allocated).  Returns the output
        tensors and the launch completions in enqueue order (await them, or
        the stream); the last one, also the outputs' writer, joins them all
        and raises the first failure among them.
        Never waits: it counts against ``max_inflight`` but ignores it.
        """
        self._check_open()
        s0 = stream if stream is not None else self.device.default_stream
        self._check_launch(inputs, outputs)
        return self._launch(inputs, outputs, s0, self._flight.admit())

    def _check_launch(self, inputs: Sequence[Tensor], outputs: Sequence[Tensor] | None) -> None:
        if len(inputs) != len(self.inputs):
            raise ValueError(f"{self.graph.name}: {len(inputs)} inputs given, the model takes {len(self.inputs)}")
        for t, (name, (shape, dt)) in zip(inputs, self.inputs.items()):
            if not isinstance(t, Tensor):
                raise TypeError(f"{self.graph.name}: input {name!r} must be a Tensor")
            if t.shape != shape or t.dtype != dt:
                raise ValueError(
                    f"{self.graph.name}: input {name!r} is {t.shape} {t.dtype}, the model takes {shape} {dt}"
                )
        if outputs is not None:
            if len(outputs) != len(self.outputs):
                raise ValueError(f"{self.graph.name}: {len(outputs)} outputs given, the model has {len(self.outputs)}")
            for t, (name, (shape, dt)) in zip(outputs, self.outputs.items()):
                if not isinstance(t, Tensor) or t.shape != shape or t.dtype != dt:
                    raise ValueError(f"{self.graph.name}: output {name!r} must be a Tensor {shape} {dt}")

    def _launch(
        self,
        inputs: Sequence[Tensor],
        outputs: Sequence[Tensor] | None,
        s0: Stream,
        ticket: _Ticket,
        pre: Sequence[Completion] = (),
    ) -> tuple[dict[str, Tensor], list[Completion]]:
        """Enqueue a checked execution; ``ticket`` goes to its completions.

        ``pre`` are launches of ``s0`` the execution made first (its copies in):
        the join inherits their errors too.
        """
        self._check_open()
        observed = _trace.hub.execution_begins(self, s0) if _trace.hub is not None else None
        if self.mode == "per_op":
            outs, comps = self._run_per_op(s0, list(inputs))
            if outputs is not None:  # copy into the caller's tensors, in stream order
                for y, (name, t) in zip(outputs, list(outs.items())):
                    comps.append(launch(s0, "Identity", [t], [y], what=f"{self.graph.name}: output {name!r}"))
                    outs[name] = y
            with s0._enqueue as tx:  # one stream: a marker after the last launch holds the ticket and joins them all
                done = tx.commit(ticket, f"{self.graph.name}:done", writes=[t._memory() for t in outs.values()],
                                 deps=[*pre, *comps])  # fmt: skip
            self._flight.track(done)
            if observed is not None and _trace.hub is not None:
                _trace.hub.execution_ends(observed, done)
            return outs, [*comps, done]
        result = self._run_sunk(s0, list(inputs), outputs, ticket, list(pre))
        if observed is not None and _trace.hub is not None:
            _trace.hub.execution_ends(observed, result[1][-1])
        return result

    async def _admit(self) -> _Ticket:
        """Wait for room among the executions in flight; a ticket that holds the slot."""
        f = self._flight
        pause = 0.0002
        while True:
            ok, oldest = f.oldest()
            if ok:
                return _Ticket(f)
            if oldest is None or oldest._done:
                # a finished execution is giving its ticket back on another thread
                await anyio.sleep(pause)
                pause = min(pause * 2, 0.01)
            else:
                await oldest._wait_pending()  # drives its lane: completes without anybody else awaiting it

    def _arena(self, ticket: _Ticket) -> DeviceMemory:
        f = self._flight
        mem = f.take_arena()
        if mem is None or mem.ptr is None:
            mem = _owned_memory(DeviceMemory(self.device, self._arena_bytes, self.device.default_stream))
            with f.lock:
                f.made += 1
        ticket.mem = mem
        return mem

    def _aux_for(self, s0: Stream) -> list[Stream]:
        """The auxiliary streams of executions whose main stream is ``s0`` (opened on first use)."""
        if self.plan.num_streams <= 1:
            return []
        with self._lock:
            k = self._aux_of.get(s0)
            if k is None:
                taken = {i for s, i in self._aux_of.items() if not s.closed}
                k = next((i for i in range(len(self._aux_sets)) if i not in taken), None)
                if k is None and len(self._aux_sets) < MAX_AUX_SETS:
                    self._aux_sets.append([self.device.open_stream() for _ in range(1, self.plan.num_streams)])
                    k = len(self._aux_sets) - 1
                elif k is None:
                    k = self._aux_next % len(self._aux_sets)
                    self._aux_next += 1
                self._aux_of[s0] = k
            return self._aux_sets[k]

    def _run_sunk(
        self, s0: Stream, ins: list[Tensor], given: Sequence[Tensor] | None, ticket: _Ticket, pre: list[Completion]
    ) -> tuple[dict[str, Tensor], list[Completion]]:
        b = self._build
        streams = [s0, *self._aux_for(s0)]
        arena = self._arena(ticket)
        if given is not None:
            outs = dict(zip(self.outputs, given))
        else:
            outs = {n: Tensor._empty(s0, shape, dt) for n, (shape, dt) in self.outputs.items()}
        user_mems = [t._memory() for t in ins]
        in_mems = user_mems + [w._memory() for w in self._weights]
        out_mems = [t._memory() for t in outs.values()]
        in_ptrs = acl.pointer_list([m.ptr for m in user_mems] + self._weight_ptrs())
        out_ptrs = acl.pointer_list([m.ptr for m in out_mems])
        keep = (ticket, in_mems, out_mems)
        del ticket
        comps: dict[int, Completion] = {}
        n_in, n_out = len(user_mems) + len(self._weight_at), len(out_mems)
        # one stream: the last segment is the join, standing for the copies in and the segments before it
        last = b.segments[-1].index if b.segments and len(streams) == 1 else -1
        for seg in b.segments:
            s = streams[seg.stream]
            with s._enqueue as tx:
                tx.order(in_mems, out_mems)
                for w in seg.waits:
                    tx.wait(comps.get(w))
                tx.mark_start()
                # profiling: the runtime also times every node
                times = _trace.hub.node_times(self, seg.index) if _trace.hub is not None else None
                acl.graph_execute(self._handle, seg.index, arena.ptr, (n_in, in_ptrs), (n_out, out_ptrs), tx.handle,
                                  times, f"{self.graph.name} segment {seg.index}")  # fmt: skip
                deps = [*pre, *comps.values()] if seg.index == last else None
                # reads and writes are noted once, at the join (the graph as a whole)
                comps[seg.index] = tx.commit(keep, f"{self.graph.name}[{seg.index}]", deps=deps)
                if times is not None and _trace.hub is not None:
                    _trace.hub.segment(comps[seg.index], self, seg.index, times)
        # the outputs are written by the graph as a whole: their writer is the join of all segments
        if last >= 0:
            join = comps[last]
            with s0._enqueue as tx:
                tx.note(join, reads=in_mems, writes=out_mems)
        else:
            with s0._enqueue as tx:
                for c in comps.values():
                    tx.wait(c)
                join = tx.commit(keep, f"{self.graph.name}:join", reads=in_mems, writes=out_mems,
                                 deps=[*pre, *comps.values()])  # fmt: skip
        self._flight.track(join)
        return outs, [*comps.values(), *([] if last >= 0 else [join])]

    def _run_host(self, arrays: list[Any], s0: Stream, ticket: _Ticket) -> tuple[dict[str, Any], Completion]:
        """One task from host memory to host memory: copies in, the graph's one segment, copies out.

        One enqueue and one completion per execution (instead of one per copy): what makes small
        executions cheap.  The outputs are new host arrays that only this execution writes."""
        assert self._io_at is not None
        in_at, out_at = self._io_at
        arena = self._arena(ticket)
        host_in = [a if type(a) is np.ndarray and a.flags.c_contiguous else _native.contiguous(a) for a in arrays]
        res = {n: np.empty(shape, dt) for n, (shape, dt) in self.outputs.items()}
        weights = [w._memory() for w in self._weights]
        # the arena's pointers (its slots, then the weights) are the same on every run from it
        io = self._io_ptrs.get(arena.ptr)
        if io is None:
            if len(self._io_ptrs) >= 4 * MAX_INFLIGHT:  # arenas come back at other addresses
                self._io_ptrs.clear()
            io = self._io_ptrs[arena.ptr] = (acl.offset_pointers(arena.ptr, in_at, self._weight_ptrs()),
                                             acl.offset_pointers(arena.ptr, out_at, []))  # fmt: skip
        in_ptrs, out_ptrs = io
        n_w = len(self._weight_at)
        host_in_ptrs = acl.pointer_list([_native.host_ptr(a) for a in host_in] + [acl.NULL] * n_w)
        host_out_ptrs = acl.pointer_list([_native.host_ptr(a) for a in res.values()])
        keep = (ticket, host_in, res, weights, in_ptrs, host_in_ptrs, out_ptrs, host_out_ptrs)
        del ticket
        hub = _trace.hub  # observed or not, the same route: the runtime also times every node
        observed = hub.execution_begins(self, s0) if hub is not None else None
        times = hub.node_times(self, 0) if hub is not None else None
        with s0._enqueue as tx:
            tx.order(weights)
            tx.mark_start()
            acl.graph_execute_host(self._handle, 0, arena.ptr, (len(in_at) + n_w, in_ptrs, host_in_ptrs),
                                   (len(out_at), out_ptrs, host_out_ptrs), tx.handle, times,
                                   f"{self.graph.name} segment 0")  # fmt: skip
            comp = tx.commit(keep, f"{self.graph.name}[0]", reads=weights,
                             name=f"{self.graph.name}: execution from host memory")  # fmt: skip
        self._flight.track(comp)
        if hub is not None:
            if times is not None:
                hub.segment(comp, self, 0, times)
            hub.execution_ends(observed, comp)
        return res, comp

    def _run_per_op(self, s0: Stream, ins: list[Tensor]) -> tuple[dict[str, Tensor], list[Completion]]:
        """Launch every lowered op on ``s0``; the outputs and every launch, in order."""
        b = self._build
        comps: list[Completion] = []
        vals: dict[str, Tensor] = dict(zip(b.inputs, ins))
        for name, w in zip(b.weights, self._weight_at, strict=True):
            assert w is not None, "per-op plans upload every weight"
            vals[name] = w
        g = self.graph
        for st in self.plan.steps:
            node = st.node
            if st.alias:
                src = vals[node.inputs[0]]
                vals[node.outputs[0]] = src.reshape(kind_of(g, node.outputs[0])[0])
                continue
            ln = self._lowered[node.name]
            temps = dict(ln.temps)
            for op in ln.ops:
                args: list[Any] = []
                for x in op.inputs:
                    if x is None:
                        args.append(None)
                    elif isinstance(x, str):
                        args.append(vals[x])
                    else:
                        args.append(Const(_native.contiguous(x.value)))
                if op.alias:
                    o = op.outputs[0]
                    shape = temps[o][0] if o in temps else kind_of(g, o)[0]
                    vals[o] = vals[op.inputs[0]].reshape(tuple(shape))  # type: ignore[index]
                    continue
                outs = []
                for o in op.outputs:
                    if o in temps:
                        shape, dt = temps[o]
                    else:
                        shape, dt = kind_of(g, o)
                    t = Tensor._empty(s0, tuple(shape), dtypes.normalize(dt))
                    vals[o] = t
                    outs.append(t)
                fmts = None
                if op.op_type in NCHW_OPS:
                    fmts = [int(acl.Format[data_format(op.op_type, a.ndim if isinstance(a, Tensor) else 0)])
                            for a in [*args, *outs]]  # fmt: skip
                what = f"{g.name}: node {node.name!r} ({op.op_type})"
                comps.append(launch(s0, op.op_type, args, outs, host_attrs(op.op_type, op.attrs), fmts, what))
        result: dict[str, Tensor] = {}
        for n in b.outputs:
            t = vals[n]
            shared = [*ins, *self._weights, *result.values()]
            if any(t._mem is x._mem for x in shared):  # never hand out an input's or a weight's memory
                t = s0.copy(t)
                comps.append(t.launch)  # type: ignore[arg-type]
            result[n] = t
        return result, comps

    # ---- lifecycle ----
    def _aux_streams(self) -> list[Stream]:
        return [s for aux in self._aux_sets for s in aux]

    async def _drain(self) -> None:
        for c in list(self._flight.joins):  # this model's executions, whatever their stream
            if not c._done:
                await c._wait_pending()
        for s in self._aux_streams():
            try:
                await s.synchronize()
            except AclError:
                pass  # already raised to the execution it failed (the join inherits it)

    def _close(self) -> None:
        busy = [s for s in self._aux_streams() if not s.closed and s.in_flight]
        if busy:
            raise BusyResourceError(f"{self._describe()} has executions in flight: use `await model.aclose()`")
        for s in self._aux_streams():
            s.close()
        # what it holds of the heap: its arenas, weights and packed copies (before _release drops them)
        held = self._arena_bytes * self._flight.made + self.weight_device_bytes + self.plan.packed_weight_bytes
        self._release()
        self.device.context.models.discard(self)
        # what it freed, back to the system: a dynamic model's plans come and go with shapes, and the
        # C heap otherwise keeps the peak of their arenas and packed weights (~1 ms, at an eviction);
        # not after a small model's close (see TRIM_MIN_BYTES)
        trim_host_heap(held)

    def _release(self) -> None:
        """Drop the graph, weights and idle arenas; running executions hold what they use."""
        self._aux_sets = []
        self._io_ptrs = {}
        self._aux_of = weakref.WeakKeyDictionary()
        f = self._flight
        f.closed = True  # returning tickets free their arenas instead of pooling them
        f.try_settle()  # settles what was given back (lock-free: this may run in __del__)
        if not self.device.closed:
            if self._handle is not None:
                acl.graph_destroy(self._handle)  # queued executions keep the C graph alive until they ran
        self._handle = None
        arenas, f.arenas = f.arenas, []
        now, self._now = self._now, None
        if now is not None:
            arenas.append(now.arena)  # a run holds the model open: none is running
        for m in arenas:
            m.free()  # idle: no execution uses them
        self._weights = []
        self._weight_at = []

    def _gc_release(self) -> None:
        # collected open: aux streams drain on their own threads if busy; the rest is safe now
        for s in self._aux_streams():
            s._force_close()
        self._release()

    def _describe(self) -> str:
        return f"CompiledGraph {self.graph.name!r}"


_execute_now = acl.graph_execute_host_now_rc
_NULL = acl.NULL


def _is_fill(a: np.ndarray) -> bool:
    """Whether ``a`` (not C-contiguous) is one number repeated: a broadcast scalar, as a folded fill is."""
    return a.dtype.kind in "biuf" and not any(a.strides)


def _owned_memory(mem: DeviceMemory) -> DeviceMemory:
    """Memory a plan owns (an arena, a weight): back to the runtime when freed, not to the device's
    pool -- a dynamic-shape model's plans come and go, each with sizes of its own."""
    mem.context.pool.release_block(mem.ptr)
    return mem


def _owned(t: Tensor) -> Tensor:
    _owned_memory(t._memory())
    return t


def _inline_bytes() -> int:
    """The host runtime's AIOGE_HOST_INLINE_BYTES (it validates the value at aclInit)."""
    return int(_native.env_number("AIOGE_HOST_INLINE_BYTES", 65536, minimum=0, integer=True))


def _as_torch(res: dict[str, Any]) -> dict[str, Any]:
    from ..._tensors import from_numpy

    return {name: from_numpy(a) for name, a in res.items()}


def _is_array(x: Any) -> bool:
    """A numpy array, a torch tensor or a device :class:`Tensor`: what one input can be."""
    if isinstance(x, (np.ndarray, Tensor)):
        return True
    torch = sys.modules.get("torch")
    return torch is not None and isinstance(x, torch.Tensor)


def _takes(inputs: Mapping[str, tuple[Any, Any]]) -> str:
    """The inputs a model takes, as the dict execute() wants: ``{'x': float32[4, 8], ...}``."""
    items = []
    for n, (shape, dt) in inputs.items():
        dims = ", ".join(str(d) if d is not None else "?" for d in shape) if shape is not None else "..."
        items.append(f"{n!r}: {np.dtype(dt).name if dt is not None else '?'}[{dims}]")
    return "{" + ", ".join(items) + "}"


def feeds_dict(name: str, inputs: Mapping[str, tuple[Any, Any]], feeds: Any) -> Mapping[str, Any]:
    """What execute() was given as the dict of input name -> array it works on.

    A mapping is returned as it is; one array (numpy, torch, :class:`Tensor`)
    is the input of a model of exactly one input. Anything else is a
    :class:`~aioge.FeedError` saying what the model takes, on every route.
    """
    if isinstance(feeds, Mapping):
        return feeds
    takes = _takes(inputs)
    if _is_array(feeds):
        if len(inputs) == 1:
            return {next(iter(inputs)): feeds}
        raise FeedError(
            f"{name}: execute() was given one array, but the model takes {len(inputs)} inputs; "
            f"pass a dict of input name -> array: {takes}"
        )
    what = type(feeds).__name__
    if isinstance(feeds, (list, tuple)):
        what = f"a {what} of {len(feeds)}"
    one = " (or, for a model of one input, that one array)" if len(inputs) == 1 else ""
    raise FeedError(
        f"{name}: execute() takes a dict of input name -> numpy array, torch CPU tensor or Tensor{one} "
        f"(inputs: {', '.join(repr(n) for n in inputs)}), not {what}; the model takes {takes}"
    )


def check_feed_names(name: str, inputs: Mapping[str, Any], feeds: Mapping[str, Any]) -> None:
    missing = [n for n in inputs if n not in feeds]
    extra = [n for n in feeds if n not in inputs]
    if missing or extra:
        raise FeedError(f"{name}: missing inputs {missing}, unknown inputs {extra}")


def _host_array(x: Any) -> Any:
    """Feeds as numpy: a torch CPU tensor as a view sharing its memory (no copy), others unchanged."""
    torch = sys.modules.get("torch")
    if torch is not None and isinstance(x, torch.Tensor):
        from ..._tensors import to_numpy

        return to_numpy(x, check_grad=False)
    return x if isinstance(x, Tensor) else np.asarray(x)


def _positive(n: int) -> int:
    if int(n) < 1:
        raise ValueError(f"max_inflight must be >= 1, not {n}")
    return int(n)
