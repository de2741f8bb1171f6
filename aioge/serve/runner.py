"""What the batcher runs: a model that executes a whole batch at a few fixed batch sizes.

The batcher only needs the small :class:`Runner` interface: per-row input
and output specs, the batch sizes it can run (:meth:`Runner.bucket`) and
``execute`` of one batch whose leading dimension is such a size.
:class:`BucketedModel` implements it with one compiled graph per batch size
(a *bucket*), because aioge compiles static shapes; a model compiled once for
any batch size only needs ``bucket(n) == n``.

:func:`load_model` builds one from what users have: an ONNX model whose
inputs have a symbolic leading dimension (compiled once per bucket, with
that dimension pinned), a builder function ``batch_size -> Graph``, a
fixed-shape :class:`aioge.Graph` or an already compiled model (one bucket: its
own leading dimension), or any of those without a batch dimension at all
(``max_batch_size == 0``: every request runs alone, with the model's full
shapes).

An ONNX model with symbolic dims besides the batch (a sequence length, say)
loads as a :class:`DynamicModel` (and so does a :class:`aioge.Graph` with
symbolic dims, or a builder whose graph has them: it is built once): compiled once into a
:class:`~aioge.runtime.graphs.dynamic.DynamicCompiledGraph`, whose bounded plan cache
holds one plan per concrete shape (bucket x sequence length ...).  Its specs
have ``-1`` for every symbolic dim.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

import anyio
import numpy as np

from .. import dtypes
from ..graph import Graph
from ..runtime.graphs.dynamic import MAX_PLANS, DynamicCompiledGraph
from ..runtime.graphs.executable import CompiledGraph
from .errors import ModelLoadError

if TYPE_CHECKING:
    from ..runtime.device import Device
    from ..runtime.stream import Stream

__all__ = ("TensorInfo", "Runner", "BucketedModel", "DynamicModel", "load_model", "default_batch_sizes",
           "ModelSource", "check_max_plans")

#: what :func:`load_model` accepts: a path, bytes or ``onnx.ModelProto`` of an ONNX model,
#: a :class:`Graph`, a builder ``batch_size -> Graph`` or a :class:`CompiledGraph`
ModelSource = Any


@dataclass(frozen=True)
class TensorInfo:
    """One input or output: ``shape`` has ``-1`` for the batch dimension of a batching model
    (and for every symbolic dim of a :class:`DynamicModel`)."""

    name: str
    dtype: np.dtype[Any]
    shape: tuple[int, ...]

    @property
    def row_shape(self) -> tuple[int, ...]:
        """The shape of one row (the shape without the batch dimension)."""
        return self.shape[1:] if self.shape and self.shape[0] == -1 else self.shape


@runtime_checkable
class Runner(Protocol):
    """A model the :class:`~aioge.serve.Batcher` can run.

    ``max_batch_size == 0`` means no batch dimension: inputs have the full
    shapes of ``inputs`` and every request runs alone.
    """

    @property
    def name(self) -> str: ...

    @property
    def inputs(self) -> Mapping[str, TensorInfo]:
        """Input name -> spec (``-1`` for the batch dimension)."""
        ...

    @property
    def outputs(self) -> Mapping[str, TensorInfo]: ...

    @property
    def max_batch_size(self) -> int: ...

    @property
    def max_inflight(self) -> int:
        """Executions worth having in flight at once (the batcher's upper bound)."""
        ...

    def bucket(self, rows: int) -> int:
        """The batch size a batch of ``rows`` rows runs at (``>= rows``; padded up to it)."""
        ...

    async def execute(self, feeds: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
        """Run one batch whose leading dimension is ``bucket(n)`` (every input, every output)."""
        ...


def check_max_plans(n: object, what: str = "max_plans") -> int | None:
    """``n`` if it is None or a positive int, else a ValueError saying ``what`` is wrong."""
    if n is None or (isinstance(n, int) and not isinstance(n, bool) and n >= 1):
        return n
    raise ValueError(f"{what} must be a positive integer (the plans a sequence model keeps), not {n!r}")


def default_batch_sizes(max_batch_size: int) -> tuple[int, ...]:
    """Powers of two up to ``max_batch_size``, and ``max_batch_size`` itself."""
    sizes, b = [], 1
    while b < max_batch_size:
        sizes.append(b)
        b *= 2
    sizes.append(max_batch_size)
    return tuple(sizes)


class BucketedModel:
    """A model compiled once per batch size (bucket); implements :class:`Runner`.

    Buckets are compiled up front by :meth:`prepare` (``lazy=False``) or on
    first use; compiles of the same bucket are shared.  The runner owns the
    models it compiled and a stream of its own (executions of one runner
    queue on it, so a batch is uploaded and enqueued while the previous one
    runs); :meth:`aclose` closes them.  An already compiled model passed in
    is used, never closed.
    """

    def __init__(
        self,
        device: Device,
        graph_for: Callable[[int], Graph] | None,
        *,
        name: str,
        batch_sizes: Sequence[int],
        batching: bool = True,
        compiled: CompiledGraph | None = None,
        lazy: bool = False,
        max_inflight: int = 2,
        compile_options: Mapping[str, Any] | None = None,
    ) -> None:
        sizes = tuple(sorted({int(b) for b in batch_sizes}))
        if not sizes or sizes[0] < 1:
            raise ValueError(f"{name}: batch sizes must be positive, got {list(batch_sizes)}")
        self.name = name
        self.device = device
        self.batch_sizes = sizes
        self.max_batch_size = sizes[-1] if batching else 0
        self.max_inflight = int(max_inflight)
        self.lazy = lazy
        self._graph_for = graph_for
        self._options = dict(compile_options or {})
        self._models: dict[int, CompiledGraph] = {}
        self._owned: list[CompiledGraph | DynamicCompiledGraph] = []
        self._locks: dict[int, anyio.Lock] = {}
        self._stream: Stream | None = None
        self.inputs: dict[str, TensorInfo] = {}
        self.outputs: dict[str, TensorInfo] = {}
        if compiled is not None:
            self._models[sizes[0]] = compiled
            self._describe(compiled, sizes[0])

    def __repr__(self) -> str:
        return (f"<aioge.serve.BucketedModel {self.name!r} batch_sizes={list(self.batch_sizes)} "
                f"compiled={sorted(self._models)}>")  # fmt: skip

    @classmethod
    def of(cls, model: CompiledGraph, *, batching: bool = True, name: str | None = None) -> BucketedModel:
        """A one-bucket runner around a compiled model (borrowed, never closed).

        It batches (at its leading dimension) when ``batching`` and every
        input and output shares that leading dimension.
        """
        lead = _common_lead([s for s, _ in (*model.inputs.values(), *model.outputs.values())]) if batching else None
        return cls(model.device, None, name=name or model.graph.name, batch_sizes=[lead or 1],
                   batching=lead is not None, compiled=model, max_inflight=model.max_inflight)  # fmt: skip

    def bucket(self, rows: int) -> int:
        if self.max_batch_size == 0:
            return self.batch_sizes[0]
        for b in self.batch_sizes:
            if b >= rows:
                return b
        raise ValueError(f"{self.name}: a batch of {rows} rows exceeds max_batch_size {self.max_batch_size}")

    async def prepare(self) -> None:
        """Compile the first bucket (it defines the specs) and, unless lazy, every other one."""
        await self._model(self.batch_sizes[0])
        if not self.lazy:
            for b in self.batch_sizes[1:]:
                await self._model(b)

    @property
    def compiled(self) -> dict[int, CompiledGraph]:
        """The compiled model of every bucket compiled so far."""
        return dict(self._models)

    async def execute(self, feeds: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
        first = next(iter(feeds.values()))
        b = int(first.shape[0]) if self.max_batch_size else self.batch_sizes[0]
        model = self._models.get(b) or await self._model(b)
        if self._stream is None or self._stream.closed:
            self._stream = self.device.open_stream()
        out: dict[str, np.ndarray] = await model.execute(feeds, stream=self._stream)
        return out

    async def _model(self, b: int) -> CompiledGraph:
        m = self._models.get(b)
        if m is not None:
            return m
        if b not in self.batch_sizes:
            raise ValueError(f"{self.name}: no bucket of batch size {b} (buckets: {list(self.batch_sizes)})")
        lock = self._locks.setdefault(b, anyio.Lock())
        async with lock:
            m = self._models.get(b)
            if m is not None:
                return m
            assert self._graph_for is not None
            graph = await anyio.to_thread.run_sync(self._graph_for, b)  # ONNX import parses the weights
            compiled = await self.device.compile(graph, max_inflight=max(self.max_inflight, 1), **self._options)
            if not isinstance(compiled, CompiledGraph):  # a bucket's graph must pin every dim
                await compiled.aclose()
                raise ModelLoadError(f"{self.name}: the graph of batch size {b} has symbolic dims {graph.symbolic}")
            m = compiled
            self._owned.append(m)
            try:
                self._describe(m, b)
            except BaseException:
                self._owned.remove(m)
                await m.aclose()
                raise
            self._models[b] = m
            return m

    def _describe(self, m: CompiledGraph, b: int) -> None:
        """Derive (first bucket) or check (later buckets) the per-row specs from a compiled bucket."""
        ins = _specs(self.name, m.inputs, b if self.max_batch_size else None, "input")
        outs = _specs(self.name, m.outputs, b if self.max_batch_size else None, "output")
        if not self.inputs:
            self.inputs, self.outputs = ins, outs
        elif (ins, outs) != (self.inputs, self.outputs):
            raise ModelLoadError(f"{self.name}: the model compiled for batch size {b} has other row shapes "
                                 f"than batch size {self.batch_sizes[0]}")  # fmt: skip

    async def __aenter__(self) -> BucketedModel:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        """Close the models this runner compiled and its stream."""
        owned, self._owned = self._owned, []
        self._models.clear()
        with anyio.CancelScope(shield=True):
            for m in owned:
                await m.aclose()
            if self._stream is not None:
                await self._stream.aclose()
                self._stream = None


class DynamicModel(BucketedModel):
    """A model with symbolic dims besides the batch; implements :class:`Runner`.

    The graph compiles once into a :class:`~aioge.runtime.graphs.dynamic.DynamicCompiledGraph`
    whose plans (one per concrete shape: the bucket and every other symbolic
    dim) are compiled on first use and kept in its bounded LRU
    (``max_plans``, default: twice the buckets, at least the runtime's
    default).  Batches are padded up to a bucket as for
    :class:`BucketedModel`; every request of a batch has the same non-batch
    shapes (the batcher groups them).  Specs have ``-1`` for every symbolic dim.
    """

    def __init__(self, device: Device, graph_for: Callable[[int], Graph], *, name: str,
                 batch_sizes: Sequence[int], batching: bool = True, lazy: bool = False, max_inflight: int = 2,
                 compile_options: Mapping[str, Any] | None = None, max_plans: int | None = None) -> None:  # fmt: skip
        check_max_plans(max_plans, f"{name}: max_plans")
        super().__init__(device, graph_for, name=name, batch_sizes=batch_sizes, batching=batching, lazy=lazy,
                         max_inflight=max_inflight, compile_options=compile_options)  # fmt: skip
        self.max_plans = max_plans or max(MAX_PLANS, 2 * len(self.batch_sizes))
        self._dynamic: DynamicCompiledGraph | None = None

    def __repr__(self) -> str:
        stats = self._dynamic.stats if self._dynamic is not None else None
        return f"<aioge.serve.DynamicModel {self.name!r} batch_sizes={list(self.batch_sizes)} plans={stats}>"

    @property
    def plans(self) -> dict[str, int]:
        """The plan cache's ``stats`` (see :attr:`aioge.DynamicCompiledGraph.stats`)."""
        return self._dynamic.stats if self._dynamic is not None else {}

    async def prepare(self) -> None:
        """Compile the dynamic graph (plans compile on first use of each shape) and derive the specs."""
        if self._dynamic is not None:
            return
        assert self._graph_for is not None
        graph = await anyio.to_thread.run_sync(self._graph_for, 0)  # ONNX import parses the weights
        compiled = await self.device.compile(graph, max_inflight=max(self.max_inflight, 1), **self._options)
        if not isinstance(compiled, DynamicCompiledGraph):  # pragma: no cover - a symbolic input makes it dynamic
            self._owned.append(compiled)
            raise ModelLoadError(f"{self.name}: expected a graph with symbolic dims")
        self._owned.append(compiled)  # closed by aclose like the buckets
        compiled.max_plans = self.max_plans
        self.inputs, self.outputs = _dynamic_specs(self.name, compiled, self.max_batch_size > 0)
        self._dynamic = compiled

    def check_shapes(self, shapes: Mapping[str, Sequence[int]]) -> None:
        """Raise ValueError (naming the input) for shapes the model's dims refuse (a dim name binds one size)."""
        assert self._dynamic is not None
        self._dynamic.graph.bind_dims(shapes)

    async def execute(self, feeds: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
        if self._dynamic is None:
            await self.prepare()
        assert self._dynamic is not None
        if self._stream is None or self._stream.closed:
            self._stream = self.device.open_stream()
        out: dict[str, np.ndarray] = await self._dynamic.execute(feeds, stream=self._stream)
        return out

    async def aclose(self) -> None:
        self._dynamic = None
        await super().aclose()


def _dynamic_specs(name: str, m: DynamicCompiledGraph,
                   batching: bool) -> tuple[dict[str, TensorInfo], dict[str, TensorInfo]]:  # fmt: skip
    """Specs of a dynamic model: ``-1`` for every symbolic dim; the batch dim must lead every input and output."""
    lead: set[Any] = set()
    ins: dict[str, TensorInfo] = {}
    for n, (dims, dt) in m.inputs.items():
        ins[n] = TensorInfo(n, dtypes.normalize(dt), tuple(d if isinstance(d, int) else -1 for d in dims))
        if batching:
            lead.add(dims[0])
    if batching and (len(lead) != 1 or isinstance(next(iter(lead)), int)):
        raise ModelLoadError(f"{name}: the inputs' leading dims {sorted(map(str, lead))} are not one symbolic "
                             "batch dim: serve it with max_batch_size=0")  # fmt: skip
    batch_dim = next(iter(lead)) if batching else None
    outs: dict[str, TensorInfo] = {}
    for n, (odims, odt) in m.outputs.items():
        if odims is None or odt is None:
            raise ModelLoadError(f"{name}: the shape of output {n!r} cannot be inferred without concrete shapes")
        if batching and (not odims or odims[0] != batch_dim):
            raise ModelLoadError(f"{name}: output {n!r} has dims {list(odims)}, whose leading dim is not the "
                                 f"batch dim {batch_dim!r}: serve it with max_batch_size=0")  # fmt: skip
        outs[n] = TensorInfo(n, dtypes.normalize(odt), tuple(d if isinstance(d, int) else -1 for d in odims))
    return ins, outs


def _specs(name: str, kinds: Mapping[str, tuple[tuple[int, ...], Any]], batch: int | None,
           what: str) -> dict[str, TensorInfo]:  # fmt: skip
    out = {}
    for n, (shape, dt) in kinds.items():
        dt = dtypes.normalize(dt)
        if batch is None:
            out[n] = TensorInfo(n, dt, tuple(shape))
            continue
        if not shape or shape[0] != batch:
            raise ModelLoadError(f"{name}: {what} {n!r} has shape {list(shape)}, whose leading dimension "
                                 f"is not the batch size {batch}: serve it with max_batch_size=0")  # fmt: skip
        out[n] = TensorInfo(n, dt, (-1, *shape[1:]))
    return out


def _common_lead(shapes: Sequence[tuple[int, ...] | None]) -> int | None:
    """The leading dimension every shape shares, if any."""
    lead = {s[0] if s else None for s in shapes}
    one = lead.pop() if len(lead) == 1 else None
    return one if one is not None and one >= 1 else None


async def load_model(
    device: Device,
    source: ModelSource,
    *,
    name: str | None = None,
    max_batch_size: int | None = 32,
    batch_sizes: Sequence[int] | None = None,
    lazy: bool = False,
    max_inflight: int = 2,
    compile_options: Mapping[str, Any] | None = None,
    max_plans: int | None = None,
) -> BucketedModel:
    """A :class:`BucketedModel` for ``source``, its first bucket compiled (all of them unless ``lazy``).

    Args:
        source: an ONNX model (path, bytes or ``onnx.ModelProto``), a builder
            ``batch_size -> Graph``, a :class:`aioge.Graph` or a
            :class:`aioge.CompiledGraph` (one bucket: its leading dimension).
        max_batch_size: the largest batch; ``0`` serves the model without a
            batch dimension (inputs of its full shapes, each request alone).
            An ONNX model batches when every input's leading dimension is
            symbolic, else it is served without one.
        batch_sizes: the buckets (default: powers of two up to ``max_batch_size``).
        lazy: compile buckets on first use instead of up front.
        max_inflight: the ``max_inflight`` the buckets are compiled with.
        max_plans: the plan bound of a :class:`DynamicModel` (symbolic dims
            besides the batch; default: twice the buckets, at least
            :data:`aioge.runtime.graphs.dynamic.MAX_PLANS`); ignored by other models.

    Raises:
        ValueError: ``max_plans`` that is not a positive integer.
    """
    check_max_plans(max_plans)
    opts = dict(compile_options or {})
    common: dict[str, Any] = {"lazy": lazy, "max_inflight": max_inflight, "compile_options": opts}
    if isinstance(source, CompiledGraph):
        return BucketedModel.of(source, batching=max_batch_size != 0, name=name)
    if isinstance(source, Graph) and source.symbolic:
        r: BucketedModel = _dynamic_runner(device, source, name or source.name, max_batch_size, batch_sizes, common,
                                           max_plans)  # fmt: skip
    elif isinstance(source, Graph):
        g = source
        lead = _common_lead([g.value(n).shape for n in g.inputs]) if max_batch_size != 0 else None
        r = BucketedModel(device, lambda _b: g, name=name or g.name, batch_sizes=[lead or 1],
                          batching=lead is not None, **common)  # fmt: skip
    elif callable(source) and not isinstance(source, (str, bytes, os.PathLike)):
        mb = 32 if max_batch_size is None else max_batch_size
        sizes = tuple(batch_sizes or default_batch_sizes(mb)) if mb else (1,)
        # the first bucket's graph tells whether the builder makes symbolic dims (then it is the only one)
        first = await anyio.to_thread.run_sync(source, sizes[0])
        if isinstance(first, Graph) and first.symbolic:
            if mb and not _symbolic_lead(first):
                raise ModelLoadError(f"{name or 'model'}: the builder's graph for batch size {sizes[0]} has symbolic "
                                     f"dims {dict(first.symbolic)} but a fixed batch dim: name the batch dim too "
                                     "(e.g. g.input('x', ('N', 'S', 8)): one graph serves every batch size) or "
                                     "serve it with max_batch_size=0")  # fmt: skip
            r = _dynamic_runner(device, first, name or "model", max_batch_size, batch_sizes, common, max_plans)
        else:
            once = {sizes[0]: first}  # built already: handed over once, not kept

            def graph_for(b: int) -> Graph:
                g: Graph | None = once.pop(b, None)
                if g is None:
                    g = source(b)
                return g

            r = BucketedModel(device, graph_for, name=name or "model", batch_sizes=sizes, batching=mb != 0, **common)
    else:
        r = _onnx_runner(device, source, name, max_batch_size, batch_sizes, common, max_plans)
    try:
        await r.prepare()
    except BaseException:
        await r.aclose()
        raise
    return r


def _symbolic_lead(g: Graph) -> bool:
    """Whether every input of ``g`` leads with a symbolic dim (a batch dim that takes any size)."""
    dims = [g.input_dims(n) for n in g.inputs]
    return bool(dims) and all(bool(d) and not isinstance(d[0], int) for d in dims)


def _dynamic_runner(device: Device, g: Graph, name: str, max_batch_size: int | None,
                    batch_sizes: Sequence[int] | None, common: dict[str, Any],
                    max_plans: int | None) -> DynamicModel:  # fmt: skip
    """A :class:`DynamicModel` of a graph with symbolic dims, as for an ONNX model: it batches when every
    input leads with a symbolic dim (and ``max_batch_size != 0``), else it runs each request alone."""
    batching = max_batch_size != 0 and _symbolic_lead(g)
    mb = 32 if max_batch_size is None else max_batch_size
    sizes = (tuple(batch_sizes) if batch_sizes else default_batch_sizes(mb)) if batching else (1,)
    if batching and max(sizes) > mb:
        raise ValueError(f"{name}: batch sizes {list(sizes)} exceed max_batch_size {mb}")
    return DynamicModel(device, lambda _b: g, name=name, batch_sizes=sizes, batching=batching, max_plans=max_plans,
                        **common)  # fmt: skip


def _onnx_runner(device: Device, source: Any, name: str | None, max_batch_size: int | None,
                 batch_sizes: Sequence[int] | None, common: dict[str, Any],
                 max_plans: int | None) -> BucketedModel:  # fmt: skip
    from ..graph import load_onnx

    try:
        import onnx
    except ImportError as e:  # pragma: no cover - the onnx extra
        raise ModelLoadError("serving ONNX models needs the onnx package (pip install 'aioge[onnx]')") from e
    base_dir: str | None = None
    if isinstance(source, (str, os.PathLike)):
        path = Path(source)
        try:
            proto = onnx.load(str(path), load_external_data=False)
        except Exception as e:  # OSError, protobuf's DecodeError ...
            raise ModelLoadError(f"cannot read ONNX model {str(path)!r}: {type(e).__name__}: {e}") from e
        base_dir = str(path.parent)
        name = name or path.stem
    elif isinstance(source, (bytes, bytearray, memoryview)):
        try:
            proto = onnx.load_from_string(bytes(source))
        except Exception as e:
            raise ModelLoadError(f"cannot parse the ONNX model: {type(e).__name__}: {e}") from e
    elif isinstance(source, onnx.ModelProto):
        proto = source
    else:
        raise ModelLoadError(f"cannot serve a {type(source).__name__}: give an ONNX model, a Graph, a builder "
                             "batch_size -> Graph or a CompiledGraph")  # fmt: skip
    name = name or proto.graph.name or "model"
    inits = {t.name for t in proto.graph.initializer}
    rows: dict[str, list[int]] = {}
    symbolic_lead = True
    dynamic = False
    for vi in proto.graph.input:
        if vi.name in inits:
            continue
        dims = vi.type.tensor_type.shape.dim
        if not dims:
            symbolic_lead = False
            continue
        lead_static = dims[0].HasField("dim_value") and dims[0].dim_value > 0
        symbolic_lead = symbolic_lead and not lead_static
        rest = [d.dim_value if d.HasField("dim_value") else -1 for d in dims[1:]]
        dynamic = dynamic or any(d <= 0 for d in rest)
        rows[vi.name] = rest
    batching = symbolic_lead and bool(rows) and max_batch_size != 0
    mb = 32 if max_batch_size is None else max_batch_size
    sizes = (tuple(batch_sizes) if batch_sizes else default_batch_sizes(mb)) if batching else (1,)
    if batching and max(sizes) > mb:
        raise ValueError(f"{name}: batch sizes {list(sizes)} exceed max_batch_size {mb}")
    if dynamic:  # symbolic dims besides the batch: one dynamic compile, a plan per concrete shape
        return DynamicModel(device, lambda _b: load_onnx(proto, base_dir=base_dir), name=name, batch_sizes=sizes,
                            batching=batching, max_plans=max_plans, **common)  # fmt: skip

    def graph_for(b: int) -> Graph:
        shapes = {n: (b, *r) for n, r in rows.items()} if batching else None
        return load_onnx(proto, input_shapes=shapes, base_dir=base_dir)

    if not batching:
        return BucketedModel(device, graph_for, name=name, batch_sizes=[1], batching=False, **common)
    return BucketedModel(device, graph_for, name=name, batch_sizes=sizes, **common)
