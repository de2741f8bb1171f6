"""The inference server without the web framework: models, their batchers, the v2 handlers.

:class:`InferenceServer` owns (or borrows) a device, loads every model of
its repository into a :class:`~aioge.serve.BucketedModel` with a
:class:`~aioge.serve.Batcher` of its own configuration, and answers the
protocol's requests as ``(status, headers, body)`` -- the Starlette app
(:func:`aioge.serve.app`) and the Ray Serve deployment are thin shells
around it.

A model repository is a directory of ``NAME.onnx`` files (model ``NAME``),
each optionally beside a ``NAME.json`` holding its :class:`ModelSpec`
fields (``max_batch_size``, ``batch_sizes``, ``max_queue_delay_us``,
``max_queue_size``, ``max_inflight``, ``timeout_ms``, ``lazy``, ``max_plans``).
"""

from __future__ import annotations

import contextlib
import functools
import json
import os
import time
import zlib
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, fields
from pathlib import Path
from typing import TYPE_CHECKING, Any

import anyio
import anyio.abc

from ..errors import AioGeError, ClosedResourceError
from ..runtime.device import Device, open_device
from .batcher import Batcher
from .errors import (
    InvalidInputError,
    ModelLoadError,
    ModelNotFoundError,
    PayloadTooLargeError,
    QueueFullError,
    http_status,
)
from .protocol import HEADER_LENGTH, datatype_of, decode_request, encode_response, model_metadata
from .runner import DynamicModel, ModelSource, Runner, check_max_plans, load_model

if TYPE_CHECKING:
    from types import TracebackType

    from anyio.abc import TaskGroup

    from .metrics import ServeMetrics

__all__ = ("ModelSpec", "InferenceServer", "Reply", "discover_models", "error_reply", "SERVER_NAME")

SERVER_NAME = "aioge"
#: the protocol extensions ``GET /v2`` advertises (Triton's names)
EXTENSIONS = ("binary_tensor_data", "model_repository", "model_configuration", "statistics")
#: Triton's model configuration ``data_type`` of each v2 datatype
_CONFIG_TYPES = {"BOOL": "TYPE_BOOL", "UINT8": "TYPE_UINT8", "UINT16": "TYPE_UINT16", "UINT32": "TYPE_UINT32",
                 "UINT64": "TYPE_UINT64", "INT8": "TYPE_INT8", "INT16": "TYPE_INT16", "INT32": "TYPE_INT32",
                 "INT64": "TYPE_INT64", "FP16": "TYPE_FP16", "FP32": "TYPE_FP32", "FP64": "TYPE_FP64",
                 "BF16": "TYPE_BF16"}  # fmt: skip
#: request bodies above this many bytes (after decompression) are refused with 413
MAX_BODY_BYTES = 64 << 20


@dataclass(frozen=True)
class ModelSpec:
    """One served model: where it comes from and its batcher's configuration.

    ``max_queue_delay`` and ``timeout`` are seconds (``timeout``: the default
    deadline of a request, ``None`` for none; a request's own ``timeout``
    parameter overrides it).  See :func:`~aioge.serve.load_model` for
    ``source``, ``max_batch_size`` (0: no batch dimension), ``batch_sizes``
    and ``lazy``; :class:`~aioge.serve.Batcher` for the rest.  ``max_plans``
    bounds the plan cache of a model with symbolic dims besides the batch
    (:class:`~aioge.serve.DynamicModel`; ``None``: its default); other models
    ignore it.

    Raises:
        ValueError: ``max_plans`` that is not a positive integer.
    """

    source: ModelSource
    max_batch_size: int | None = 32
    batch_sizes: tuple[int, ...] | None = None
    max_queue_delay: float = 500e-6
    max_queue_size: int = 1024
    max_inflight: int = 2
    timeout: float | None = None
    lazy: bool = False
    max_plans: int | None = None

    def __post_init__(self) -> None:
        check_max_plans(self.max_plans)

    @classmethod
    def from_file(cls, path: str | os.PathLike[str], **defaults: Any) -> ModelSpec:
        """The spec of ``NAME.onnx``: ``defaults`` overridden by a ``NAME.json`` beside it."""
        p = Path(path)
        opts = dict(defaults)
        side = p.with_suffix(".json")
        if side.is_file():
            try:
                cfg = json.loads(side.read_text())
            except (OSError, ValueError) as e:
                raise ModelLoadError(f"{side}: {e}") from e
            if not isinstance(cfg, dict):
                raise ModelLoadError(f"{side}: expected a JSON object")
            own = _spec_fields(cfg, str(side))
            if own.get("batch_sizes") and "max_batch_size" not in own:  # the buckets name the largest batch
                own["max_batch_size"] = max(own["batch_sizes"])
            opts.update(own)
        return cls(str(p), **opts)


def _spec_fields(cfg: Mapping[str, Any], where: str) -> dict[str, Any]:
    known = {f.name for f in fields(ModelSpec)} - {"source"}
    out: dict[str, Any] = {}
    for k, v in cfg.items():
        if k == "max_queue_delay_us":
            out["max_queue_delay"] = float(v) / 1e6
        elif k == "timeout_ms":
            out["timeout"] = None if v is None else float(v) / 1e3
        elif k == "batch_sizes":
            out[k] = tuple(int(b) for b in v)
        elif k == "max_plans":
            out[k] = check_max_plans(v, f"{where}: max_plans")
        elif k in known:
            out[k] = v
        else:
            raise ModelLoadError(f"{where}: unknown key {k!r} (known: {sorted(known)}, max_queue_delay_us, "
                                 "timeout_ms)")  # fmt: skip
    return out


def discover_models(paths: Iterable[str | os.PathLike[str]], **defaults: Any) -> dict[str, ModelSpec]:
    """Model specs by name from ``.onnx`` files and repository directories of them."""
    found: dict[str, ModelSpec] = {}
    for raw in paths:
        p = Path(raw)
        files = sorted(p.glob("*.onnx")) if p.is_dir() else [p]
        if p.is_dir() and not files:
            raise ModelLoadError(f"{p}: no .onnx files in the model repository")
        for f in files:
            if not f.is_file():
                raise ModelLoadError(f"{f}: no such model file")
            if f.stem in found:
                raise ModelLoadError(f"two models are called {f.stem!r}")
            found[f.stem] = ModelSpec.from_file(f, **defaults)
    return found


@dataclass
class Reply:
    """An HTTP answer: status, headers, body."""

    status: int
    body: bytes
    headers: dict[str, str]
    media_type: str = "application/json"


def _json(status: int, obj: Any, headers: dict[str, str] | None = None) -> Reply:
    return Reply(status, json.dumps(obj, separators=(",", ":")).encode(), headers or {})


def error_reply(exc: BaseException) -> Reply:
    """The protocol's ``{"error": ...}`` with the status ``exc`` maps to."""
    status = http_status(exc)
    headers: dict[str, str] = {}
    if status == 503:
        retry = exc.retry_after if isinstance(exc, QueueFullError) else 1.0
        headers["Retry-After"] = str(max(1, int(-(-retry // 1))))  # whole seconds, rounded up
    msg = str(exc) if isinstance(exc, AioGeError) else f"{type(exc).__name__}: {exc}"
    return _json(status, {"error": msg}, headers)


class _Served:
    """A loaded model: its runner and batcher, kept open by a task of the server's task group until
    ``done`` is set (unload, reload, shutdown); ``stopped`` is set once both are closed."""

    __slots__ = ("batcher", "done", "name", "runner", "spec", "stopped")

    def __init__(self, name: str, spec: ModelSpec, runner: Runner, batcher: Batcher, done: anyio.Event,
                 stopped: anyio.Event) -> None:  # fmt: skip
        self.name, self.spec, self.runner, self.batcher = name, spec, runner, batcher
        self.done, self.stopped = done, stopped

    def stop(self) -> None:
        """Refuse new requests, send what is queued at once, then close (see ``stopped``)."""
        self.batcher.close_soon()
        self.done.set()


class InferenceServer:
    """Models behind batchers, and the Open Inference Protocol's handlers; use as ``async with``.

    Args:
        models: name -> :class:`ModelSpec` or a bare model source (served with
            ``defaults``); or paths of ``.onnx`` files / repository directories.
        device: the device to use (borrowed); default: open ``device_id`` (owned, closed at exit).
        metrics: a :class:`~aioge.serve.metrics.ServeMetrics` (default: a new one on its own registry;
            ``False`` for none).
        defaults: :class:`ModelSpec` fields for models given without a spec.

    Entering loads every model (all buckets compiled unless lazy) and
    starts the batchers; leaving refuses new requests, finishes every
    accepted one, then closes the models and, if owned, the device.
    """

    def __init__(
        self,
        models: Mapping[str, ModelSpec | ModelSource] | Sequence[str | os.PathLike[str]] | str | os.PathLike[str],
        *,
        device: Device | None = None,
        device_id: int = 0,
        metrics: ServeMetrics | bool | None = None,
        max_body_bytes: int = MAX_BODY_BYTES,
        **defaults: Any,
    ) -> None:
        if isinstance(models, (str, os.PathLike)):
            models = [models]
        #: the model-repository directories served (where ``load`` finds models not loaded at start-up)
        self.repositories: list[Path] = []
        self._defaults = dict(defaults)
        if isinstance(models, Mapping):
            self.specs = {str(n): m if isinstance(m, ModelSpec) else ModelSpec(m, **defaults)
                          for n, m in models.items()}  # fmt: skip
        else:
            self.specs = discover_models(models, **defaults)
            self.repositories = [Path(p) for p in models if Path(p).is_dir()]
        if not self.specs:
            raise ModelLoadError("no models to serve")
        self._device = device
        self._device_id = device_id
        if metrics is None or metrics is True:
            from .metrics import ServeMetrics

            metrics = ServeMetrics()
        self.metrics: ServeMetrics | None = metrics or None
        self.max_body_bytes = int(max_body_bytes)
        self.models: dict[str, _Served] = {}
        self._stack: contextlib.AsyncExitStack | None = None
        self._tg: TaskGroup | None = None
        self._repo_lock: anyio.Lock | None = None
        self.ready = False
        self.draining = False

    @property
    def device(self) -> Device:
        assert self._device is not None, "the server is not running"
        return self._device

    async def __aenter__(self) -> InferenceServer:
        stack = contextlib.AsyncExitStack()
        await stack.__aenter__()
        try:
            dev = self._device
            if dev is None:
                dev = open_device(self._device_id)
                await stack.enter_async_context(dev)
                self._device = dev
            self._repo_lock = anyio.Lock()
            self._tg = await stack.enter_async_context(anyio.create_task_group())
            for name, spec in self.specs.items():
                self.models[name] = await self._start(name, spec)
        except BaseException:
            for m in self.models.values():  # the models loaded so far close (no request reached them)
                m.stop()
            self.models.clear()
            self._tg = None
            await stack.__aexit__(None, None, None)  # a clean exit: the task group waits for their tasks
            raise
        self._stack = stack
        self.ready = True
        return self

    async def __aexit__(
        self, et: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.begin_shutdown()
        for m in self.models.values():
            m.done.set()
        stack, self._stack = self._stack, None
        if stack is not None:  # batchers finish their accepted requests, then models and device close
            await stack.__aexit__(et, exc, tb)
        self._tg = None
        self.models.clear()
        if self._device is not None and self._device.closed:
            self._device = None

    def begin_shutdown(self) -> None:
        """Stop admitting requests (503) and flush the queues; call on SIGTERM."""
        self.ready = False
        self.draining = True
        for m in self.models.values():
            m.batcher.close_soon()

    async def _start(self, name: str, spec: ModelSpec) -> _Served:
        """Load ``spec`` (every bucket compiled unless lazy) and start its batcher, in a task of the
        server's task group that keeps both open until the model is stopped."""
        assert self._tg is not None and self._device is not None
        served: _Served = await self._tg.start(self._host, name, spec, self._device)
        return served

    async def _host(self, name: str, spec: ModelSpec, dev: Device, *,
                    task_status: anyio.abc.TaskStatus[_Served] = anyio.TASK_STATUS_IGNORED) -> None:  # fmt: skip
        try:
            runner = await load_model(dev, spec.source, name=name, max_batch_size=spec.max_batch_size,
                                      batch_sizes=spec.batch_sizes, lazy=spec.lazy,
                                      max_inflight=spec.max_inflight, max_plans=spec.max_plans)  # fmt: skip
        except ModelLoadError:
            raise
        except Exception as e:  # an unsupported op, a bad option ...: say which model
            raise ModelLoadError(f"model {name!r}: {type(e).__name__}: {e}") from e
        stopped = anyio.Event()
        # a dynamic-shape model's plan cache in /metrics while it is served
        source: Callable[[], Mapping[str, int]] | None = None
        if self.metrics is not None and isinstance(runner, DynamicModel):
            source = functools.partial(_plans_of, runner)
        try:
            batcher = Batcher(runner, max_queue_delay=spec.max_queue_delay, max_queue_size=spec.max_queue_size,
                              max_inflight=spec.max_inflight, timeout=spec.timeout, observer=self.metrics,
                              name=name)  # fmt: skip
            async with batcher:
                served = _Served(name, spec, runner, batcher, anyio.Event(), stopped)
                if source is not None and self.metrics is not None:
                    self.metrics.plans(name, source)
                task_status.started(served)
                await served.done.wait()
                batcher.close_soon()
        finally:
            if source is not None and self.metrics is not None:
                self.metrics.plans(name, None, replaces=source)
            with anyio.CancelScope(shield=True):
                await runner.aclose()
            stopped.set()

    # ---- the model repository extension ----
    def _find(self, name: str) -> ModelSpec | None:
        """The spec ``load`` uses for ``name``: a ``NAME.onnx`` of a repository directory (its
        ``NAME.json`` read again), else a file given at start-up (likewise), else its spec as given."""
        for repo in self.repositories:
            for f in repo.glob("*.onnx"):
                if f.stem == name and f.is_file():
                    return ModelSpec.from_file(f, **self._defaults)
        spec = self.specs.get(name)
        if spec is not None and isinstance(spec.source, (str, os.PathLike)) and Path(spec.source).is_file():
            return ModelSpec.from_file(spec.source, **self._defaults)
        return spec

    def repository_models(self) -> dict[str, str]:
        """Every model ``load`` can load: name -> state (READY, UNAVAILABLE)."""
        names = set(self.specs) | {f.stem for r in self.repositories for f in r.glob("*.onnx") if f.is_file()}
        return {n: "READY" if n in self.models and self.ready else "UNAVAILABLE" for n in sorted(names)}

    async def load(self, name: str) -> Reply:
        """``POST /v2/repository/models/{name}/load``: load the model, or reload it (new requests go to
        the new one as soon as it is compiled; the old one finishes what it accepted, then closes)."""
        if self.draining or self._tg is None or self._repo_lock is None:
            return error_reply(ClosedResourceError("the server is shutting down"))
        async with self._repo_lock:
            try:
                spec = self._find(name)
                if spec is None:
                    raise InvalidInputError(f"failed to load {name!r}: no such model in the repository "
                                            f"({', '.join(str(r) for r in self.repositories) or 'none'})")  # fmt: skip
                new = await self._start(name, spec)
            except (ModelLoadError, ValueError, OSError) as e:
                return error_reply(e if isinstance(e, InvalidInputError) else InvalidInputError(str(e)))
            if self.draining:  # shutdown began while it compiled: __aexit__ would not see it
                new.stop()
                await new.stopped.wait()
                return error_reply(ClosedResourceError("the server is shutting down"))
            old = self.models.get(name)
            self.models[name] = new
            self.specs[name] = spec
            if old is not None:
                old.stop()
                await old.stopped.wait()
        return _json(200, {})

    async def unload(self, name: str) -> Reply:
        """``POST /v2/repository/models/{name}/unload``: new requests are refused (404) at once, accepted
        ones finish, then the model closes."""
        if self._repo_lock is None:
            return error_reply(ClosedResourceError("the server is not running"))
        async with self._repo_lock:
            m = self.models.pop(name, None)
            if m is None:
                return error_reply(InvalidInputError(f"failed to unload {name!r}: it is not loaded "
                                                     f"(loaded: {sorted(self.models)})"))  # fmt: skip
            m.stop()
            await m.stopped.wait()
        return _json(200, {})

    # ---- handlers ----
    def model(self, name: str, version: str | None = None) -> _Served:
        m = self.models.get(name)
        if m is None:
            raise ModelNotFoundError(f"unknown model {name!r} (serving {sorted(self.models)})")
        if version not in (None, "", "1"):
            raise ModelNotFoundError(f"model {name!r} has no version {version!r} (versions: ['1'])")
        return m

    def server_metadata(self) -> Reply:
        from .. import __version__

        return _json(200, {"name": SERVER_NAME, "version": __version__, "extensions": list(EXTENSIONS)})

    def live(self) -> Reply:
        return _json(200, {"live": True})

    def readiness(self) -> Reply:
        ok = self.ready and not self.draining
        return _json(200 if ok else 503, {"ready": ok})

    def model_metadata(self, name: str, version: str | None = None) -> Reply:
        try:
            m = self.model(name, version)
        except ModelNotFoundError as e:
            return error_reply(e)
        r = m.runner
        meta = model_metadata(name, r.inputs, r.outputs)
        meta["max_batch_size"] = r.max_batch_size
        return _json(200, meta)

    def model_ready(self, name: str, version: str | None = None) -> Reply:
        try:
            m = self.model(name, version)
        except ModelNotFoundError as e:
            return error_reply(e)
        ok = self.ready and not m.batcher.closing
        return _json(200 if ok else 503, {"name": name, "ready": ok})

    def model_config(self, name: str, version: str | None = None) -> Reply:
        """``GET /v2/models/{name}[/versions/{version}]/config``: Triton's model configuration (its JSON form)."""
        try:
            m = self.model(name, version)
        except ModelNotFoundError as e:
            return error_reply(e)
        return _json(200, model_config(m))

    def statistics(self, name: str | None = None, version: str | None = None) -> Reply:
        """``GET /v2/models[/{name}[/versions/{version}]]/stats``: Triton's statistics extension."""
        if name is None:
            served = list(self.models.values())
        else:
            try:
                served = [self.model(name, version)]
            except ModelNotFoundError as e:
                return error_reply(e)
        return _json(200, {"model_stats": [_model_stats(m) for m in served]})

    def repository_index(self, ready: bool = False) -> Reply:
        """``POST /v2/repository/index``: every model of the repository, loaded or not (``ready``: the
        ready ones only)."""
        out = []
        for n, state in self.repository_models().items():
            if ready and state != "READY":
                continue
            entry = {"name": n, "version": "1", "state": state, "reason": ""}
            if n not in self.models:
                entry["reason"] = "unloaded"
            out.append(entry)
        return _json(200, out)

    def decompress(self, body: bytes, encoding: str | None) -> bytes:
        """The body under its ``Content-Encoding`` (gzip, deflate), bounded by ``max_body_bytes``."""
        if not encoding or encoding == "identity":
            return body
        wbits = {"gzip": 16 + zlib.MAX_WBITS, "deflate": zlib.MAX_WBITS}.get(encoding.strip().lower())
        if wbits is None:
            raise InvalidInputError(f"unsupported Content-Encoding {encoding!r} (gzip, deflate)")
        d = zlib.decompressobj(wbits)
        try:
            out = d.decompress(body, self.max_body_bytes + 1)
        except zlib.error as e:
            raise InvalidInputError(f"the body is not valid {encoding}: {e}") from None
        if len(out) > self.max_body_bytes:
            raise PayloadTooLargeError(f"the decompressed body exceeds {self.max_body_bytes} bytes")
        if not d.eof:
            raise InvalidInputError(f"the {encoding} body is truncated")
        return out

    async def infer(self, name: str, body: bytes, headers: Mapping[str, str], version: str | None = None) -> Reply:
        """``POST /v2/models/{name}/infer``: decode, batch, execute, encode; every failure a protocol error."""
        label = name if name in self.models else "_unknown"  # never a label per made-up name
        t0 = time.perf_counter()
        m: _Served | None = None
        try:
            m = self.model(name, version)
            body = self.decompress(body, headers.get("content-encoding"))
            r = m.runner
            req = decode_request(body, headers.get(HEADER_LENGTH), r.inputs, r.outputs, r.max_batch_size)
        except Exception as e:  # refused before the batcher saw it: counted here
            reply = error_reply(e)
            if m is not None:
                self.refused(m, reply.status, time.perf_counter() - t0)
            if self.metrics is not None:
                self.metrics.http(label, reply.status)
            return reply
        try:
            results = await m.batcher.infer(req.inputs, timeout=req.timeout)
            out, hl = encode_response(name, req, results, r.outputs)
        except Exception as e:  # a request that does not fit, or a device failure of the batch: the server carries on
            reply = error_reply(e)
        else:
            if hl is None:
                reply = Reply(200, out, {})
            else:
                reply = Reply(200, out, {"Inference-Header-Content-Length": str(hl)}, "application/octet-stream")
        if self.metrics is not None:
            self.metrics.http(label, reply.status)
        return reply

    def refused(self, m: _Served, status: int, seconds: float = 0.0) -> None:
        """Count a request of model ``m`` refused before it reached the batcher (``status``: its HTTP status)."""
        m.batcher.statistics.request(False, 0, seconds, None)
        if self.metrics is not None:
            self.metrics.request(m.name, "invalid" if status in (400, 413) else "error", None, seconds)

    def metrics_reply(self) -> Reply:
        from .metrics import CONTENT_TYPE_LATEST

        body = self.metrics.expose() if self.metrics is not None else b""
        return Reply(200, body, {}, CONTENT_TYPE_LATEST)


def _plans_of(runner: DynamicModel) -> dict[str, int]:
    return runner.plans


def _model_stats(m: _Served) -> dict[str, Any]:
    """Triton's ``$model_stat`` of a served model; a model with symbolic dims besides the batch adds
    ``aioge_plans``: its plan cache's statistics (``plans`` held, ``max_plans``, ``compiles``,
    ``evictions``, ``hits``, ``misses``, ``compiling``; see :attr:`aioge.DynamicCompiledGraph.stats`)."""
    out = m.batcher.statistics.to_json(m.name)
    plans = m.runner.plans if isinstance(m.runner, DynamicModel) else None
    if plans:
        out["aioge_plans"] = plans
    return out


def model_config(m: _Served) -> dict[str, Any]:
    """Triton's model configuration of a served model, as its ``/config`` JSON (``ModelConfig`` of
    ``model_config.proto``): tensor ``dims`` without the batch dimension, 64-bit fields as numbers."""
    r, b = m.runner, m.batcher
    batching = r.max_batch_size > 0

    def tensor(t: Any, output: bool) -> dict[str, Any]:
        dims = list(t.shape[1:] if batching else t.shape)
        out: dict[str, Any] = {"name": t.name, "data_type": _CONFIG_TYPES[datatype_of(t.dtype)], "dims": dims}
        if output:
            out.update(label_filename="", is_shape_tensor=False)
        else:
            out.update(format="FORMAT_NONE", is_shape_tensor=False, allow_ragged_batch=False, optional=False)
        return out

    cfg: dict[str, Any] = {
        "name": m.name,
        "platform": "aioge",
        "backend": "aioge",
        "version_policy": {"latest": {"num_versions": 1}},
        "max_batch_size": b.max_batch_size,
        "input": [tensor(t, False) for t in r.inputs.values()],
        "output": [tensor(t, True) for t in r.outputs.values()],
        "instance_group": [{"name": m.name, "kind": "KIND_MODEL", "count": b.max_inflight}],
        "parameters": {},
    }
    if batching:
        sizes = [int(x) for x in getattr(r, "batch_sizes", ()) if x <= b.max_batch_size]
        policy: dict[str, Any] = {
            "timeout_action": "REJECT",
            "allow_timeout_override": True,
            "max_queue_size": b.max_queue_size,
            "default_timeout_microseconds": 0 if b.timeout is None else int(b.timeout * 1e6),
        }
        cfg["dynamic_batching"] = {"preferred_batch_size": sizes or [b.max_batch_size],
                                   "max_queue_delay_microseconds": round(b.max_queue_delay * 1e6),
                                   "preserve_ordering": False, "default_queue_policy": policy}  # fmt: skip
    return cfg
