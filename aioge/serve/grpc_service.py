"""Triton's ``inference.GRPCInferenceService`` on ``grpc.aio``, beside the HTTP server.

:class:`GrpcService` answers the Open Inference Protocol's gRPC binding
with the message and service classes ``tritonclient[grpc]`` generates
(``tritonclient.grpc.service_pb2``, ``service_pb2_grpc``), for the same
:class:`~aioge.serve.InferenceServer` the HTTP app serves: same models,
batchers, statistics and metrics, on the same event loop (asyncio or uvloop).

Implemented: ``ServerLive``, ``ServerReady``, ``ModelReady``,
``ServerMetadata``, ``ModelMetadata``, ``ModelConfig``, ``ModelStatistics``,
``RepositoryIndex``, ``RepositoryModelLoad``/``Unload``, ``ModelInfer``
(inputs as typed ``contents`` or ``raw_input_contents``; outputs always as
``raw_output_contents``, as Triton answers) and ``ModelStreamInfer`` (a
bidirectional stream: every request is answered on the stream as soon as
it is done, an error as the response's ``error_message``).  The other
methods of the service (shared memory, trace and log settings) answer
UNIMPLEMENTED.

Errors are gRPC status codes: INVALID_ARGUMENT for a request that does not
fit its model (names, datatypes, shapes, raw sizes), NOT_FOUND for an
unknown model or version, UNAVAILABLE when a queue is full or the server is
shutting down, DEADLINE_EXCEEDED past the request's deadline (its
``timeout`` parameter, in microseconds, or the call's own gRPC deadline,
whichever comes first), INTERNAL when a batch failed on the device.
"""

from __future__ import annotations

import asyncio
import json
import math
import time
from collections.abc import AsyncIterator
from typing import TYPE_CHECKING, Any

import grpc  # type: ignore[import-untyped, unused-ignore]
import numpy as np
from google.protobuf import json_format  # type: ignore[import-untyped, unused-ignore]
from tritonclient.grpc import model_config_pb2, service_pb2, service_pb2_grpc  # type: ignore[import-untyped, unused-ignore]

from .errors import InvalidInputError, ModelNotFoundError, grpc_status_name, http_status
from .protocol import _check_shape, datatype_of

if TYPE_CHECKING:
    from .server import InferenceServer, Reply, _Served

__all__ = ("GrpcService", "decode_infer_request", "encode_infer_response")

pb = service_pb2

#: the ``InferTensorContents`` field of each datatype that has one (FP16 and BF16 are raw only)
_CONTENTS = {"BOOL": "bool_contents", "INT8": "int_contents", "INT16": "int_contents", "INT32": "int_contents",
             "INT64": "int64_contents", "UINT8": "uint_contents", "UINT16": "uint_contents",
             "UINT32": "uint_contents", "UINT64": "uint64_contents", "FP32": "fp32_contents",
             "FP64": "fp64_contents"}  # fmt: skip
#: gRPC status of an HTTP status the shared handlers answer
_FROM_HTTP = {400: "INVALID_ARGUMENT", 404: "NOT_FOUND", 413: "RESOURCE_EXHAUSTED", 503: "UNAVAILABLE",
              504: "DEADLINE_EXCEEDED"}  # fmt: skip


def _bad(msg: str) -> InvalidInputError:
    return InvalidInputError(msg)


def _param(p: Any) -> Any:
    """The value of an ``InferParameter`` (None when unset)."""
    which = p.WhichOneof("parameter_choice")
    return None if which is None else getattr(p, which)


class GrpcRequest:
    """A decoded ``ModelInferRequest``: input arrays, requested outputs, the deadline."""

    __slots__ = ("id", "inputs", "outputs", "rows", "timeout")

    def __init__(self, inputs: dict[str, np.ndarray], rows: int, rid: str, outputs: list[str] | None,
                 timeout: float | None) -> None:  # fmt: skip
        self.inputs, self.rows, self.id, self.outputs, self.timeout = inputs, rows, rid, outputs, timeout


def decode_infer_request(req: Any, m: _Served) -> GrpcRequest:
    """Check a ``ModelInferRequest`` against the served model ``m``; :class:`InvalidInputError` if it does not fit.

    Declared shapes are compared with the model's (and the batch limit) before any size is used;
    raw sizes and typed element counts must match the declared shapes exactly.
    """
    r = m.runner
    specs, outs, mb = r.inputs, r.outputs, r.max_batch_size
    timeout: float | None = None
    t = req.parameters.get("timeout") if "timeout" in req.parameters else None
    if t is not None:
        v = _param(t)
        if not isinstance(v, (int, float)) or isinstance(v, bool) or not math.isfinite(v) or v < 0:
            raise _bad("parameter 'timeout' must be a number of microseconds >= 0")
        timeout = float(v) / 1e6 if v > 0 else None
    items = req.inputs
    if not items:
        raise _bad("a request needs inputs")
    raws = req.raw_input_contents
    if raws and len(raws) != len(items):
        raise _bad(f"raw_input_contents holds {len(raws)} tensors for {len(items)} inputs (all inputs raw, "
                   "or none)")  # fmt: skip
    arrays: dict[str, np.ndarray] = {}
    rows: int | None = None
    for i, item in enumerate(items):
        name = item.name
        spec = specs.get(name)
        if spec is None:
            raise _bad(f"unknown input {name!r} (the model takes {list(specs)})")
        if name in arrays:
            raise _bad(f"input {name!r} is given twice")
        want = datatype_of(spec.dtype)
        if item.datatype != want:
            raise _bad(f"input {name!r} has datatype {item.datatype!r}, the model takes {want}")
        shape = _check_shape([int(d) for d in item.shape], spec, mb)
        if mb > 0:
            if rows is not None and shape[0] != rows:
                raise _bad(f"input {name!r} has {shape[0]} rows, another input {rows}")
            rows = shape[0]
        count = math.prod(shape)  # bounded: each dim matched the model's or the batch limit
        given = [f.name for f, _ in item.contents.ListFields()]
        if raws:
            if given:
                raise _bad(f"input {name!r} has both contents and raw_input_contents")
            raw = raws[i]
            nbytes = count * spec.dtype.itemsize
            if len(raw) != nbytes:
                raise _bad(f"input {name!r}: {len(raw)} raw bytes for shape {shape} of {want} ({nbytes} bytes)")
            a = np.frombuffer(raw, dtype=spec.dtype, count=count).reshape(shape)
        else:
            field = _CONTENTS.get(want)
            if field is None:
                raise _bad(f"input {name!r}: {want} tensors are sent as raw_input_contents (no typed contents)")
            if given != [field]:
                if not given:
                    raise _bad(f"input {name!r} has no data (contents.{field} or raw_input_contents)")
                raise _bad(f"input {name!r} of {want} has contents {given}, expected {field}")
            values = getattr(item.contents, field)
            if len(values) != count:
                raise _bad(f"input {name!r}: {len(values)} values in contents.{field}, shape {shape} needs {count}")
            a = _typed(values, spec.dtype, name, want).reshape(shape)
        arrays[name] = a
    missing = [n for n in specs if n not in arrays]
    if missing:
        raise _bad(f"missing inputs {missing}")
    wanted: list[str] | None = None
    if req.outputs:
        wanted = []
        for o in req.outputs:
            if o.name not in outs:
                raise _bad(f"unknown output {o.name!r} (the model has {list(outs)})")
            if "classification" in o.parameters and _param(o.parameters["classification"]):
                raise _bad("the classification extension is not supported")
            wanted.append(o.name)
    return GrpcRequest(arrays, rows if rows is not None else 1, req.id, wanted, timeout)


def _typed(values: Any, dt: np.dtype[Any], name: str, want: str) -> np.ndarray:
    """An array of ``dt`` from a repeated contents field (integers range-checked: INT8 in int_contents ...)."""
    if dt.kind in "iu" and dt.itemsize < 4:
        wide = np.array(values, dtype=np.int64)
        info = np.iinfo(dt)
        if wide.size and (int(wide.min()) < info.min or int(wide.max()) > info.max):
            raise _bad(f"input {name!r}: values out of range for {want}")
        return wide.astype(dt)
    return np.array(values, dtype=dt)


def encode_infer_response(name: str, req: GrpcRequest, results: dict[str, np.ndarray], m: _Served) -> Any:
    """The ``ModelInferResponse``: every output (or the requested ones) as ``raw_output_contents``."""
    outs = m.runner.outputs
    names = req.outputs if req.outputs is not None else list(outs)
    resp = pb.ModelInferResponse(model_name=name, model_version="1", id=req.id)
    for n in names:
        a = np.ascontiguousarray(results[n])
        resp.outputs.add(name=n, datatype=datatype_of(outs[n].dtype), shape=a.shape)
        resp.raw_output_contents.append(a.tobytes())
    return resp


def _code(name: str) -> grpc.StatusCode:
    code: grpc.StatusCode = getattr(grpc.StatusCode, name)
    return code


class GrpcService(service_pb2_grpc.GRPCInferenceServiceServicer):  # type: ignore[misc]
    """Triton's ``GRPCInferenceService`` for an :class:`~aioge.serve.InferenceServer` (entered elsewhere).

    ``await start(host, port)`` binds and serves (the port chosen is returned: 0 picks a free one);
    ``begin_shutdown()`` ends the streams once their accepted requests are answered (new unary calls
    are refused by the closing batchers); ``await stop(grace)`` waits for the calls still running.
    Messages up to the server's ``max_body_bytes`` are accepted and sent.
    """

    def __init__(self, server: InferenceServer) -> None:
        self.server = server
        self._grpc: Any = None
        self._closing: asyncio.Event | None = None

    # ---- life cycle ----
    def bind(self, host: str, port: int) -> int:
        """Make the ``grpc.aio`` server (on the running loop) and bind ``host:port``; the port bound."""
        limit = max(self.server.max_body_bytes, 4 << 20) + (1 << 16)  # room for the message's own fields
        options = [("grpc.max_receive_message_length", limit), ("grpc.max_send_message_length", limit),
                   ("grpc.so_reuseport", 0)]  # fmt: skip
        self._closing = asyncio.Event()
        srv = grpc.aio.server(options=options)
        service_pb2_grpc.add_GRPCInferenceServiceServicer_to_server(self, srv)
        where = f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
        try:
            bound = srv.add_insecure_port(where)
        except RuntimeError as e:
            raise OSError(f"cannot listen on {where} (gRPC): {e}") from None
        if bound == 0:
            raise OSError(f"cannot listen on {where} (gRPC)")
        self._grpc = srv
        return int(bound)

    async def start(self) -> None:
        await self._grpc.start()

    def begin_shutdown(self) -> None:
        if self._closing is not None:
            self._closing.set()

    async def stop(self, grace: float | None = None) -> None:
        """Stop accepting calls and wait up to ``grace`` seconds (None: as long as they take) for the rest."""
        self.begin_shutdown()
        if self._grpc is not None:
            await self._grpc.stop(1e9 if grace is None else grace)
            self._grpc = None

    # ---- helpers ----
    async def _abort(self, context: Any, exc: BaseException) -> Any:
        await context.abort(_code(grpc_status_name(exc)), _message(exc))

    async def _reply(self, context: Any, r: Reply) -> Any:
        """The JSON of a shared handler's reply, or the call aborted with its status."""
        obj = json.loads(r.body) if r.body else {}
        if r.status != 200:
            err = obj.get("error", "") if isinstance(obj, dict) else ""
            await context.abort(_code(_FROM_HTTP.get(r.status, "INTERNAL")), _short(str(err)))
        return obj

    def _count(self, model: str, code: str) -> None:
        if self.server.metrics is not None:
            self.server.metrics.grpc(model, code)

    # ---- health and metadata ----
    async def ServerLive(self, request: Any, context: Any) -> Any:
        return pb.ServerLiveResponse(live=True)

    async def ServerReady(self, request: Any, context: Any) -> Any:
        s = self.server
        return pb.ServerReadyResponse(ready=s.ready and not s.draining)

    async def ModelReady(self, request: Any, context: Any) -> Any:
        s = self.server
        try:
            m = s.model(request.name, request.version)
        except ModelNotFoundError:
            return pb.ModelReadyResponse(ready=False)
        return pb.ModelReadyResponse(ready=s.ready and not m.batcher.closing)

    async def ServerMetadata(self, request: Any, context: Any) -> Any:
        obj = await self._reply(context, self.server.server_metadata())
        return pb.ServerMetadataResponse(name=obj["name"], version=obj["version"], extensions=obj["extensions"])

    async def ModelMetadata(self, request: Any, context: Any) -> Any:
        obj = await self._reply(context, self.server.model_metadata(request.name, request.version))
        out = pb.ModelMetadataResponse(name=obj["name"], versions=obj["versions"], platform=obj["platform"])
        for side in ("inputs", "outputs"):
            for t in obj[side]:
                getattr(out, side).add(name=t["name"], datatype=t["datatype"], shape=t["shape"])
        return out

    async def ModelConfig(self, request: Any, context: Any) -> Any:
        obj = await self._reply(context, self.server.model_config(request.name, request.version))
        cfg = json_format.ParseDict(obj, model_config_pb2.ModelConfig())
        return pb.ModelConfigResponse(config=cfg)

    async def ModelStatistics(self, request: Any, context: Any) -> Any:
        obj = await self._reply(context, self.server.statistics(request.name or None, request.version or None))
        # Triton's message has no field for aioge_plans (the plan cache of a dynamic-shape model)
        return json_format.ParseDict(obj, pb.ModelStatisticsResponse(), ignore_unknown_fields=True)

    # ---- the model repository ----
    async def RepositoryIndex(self, request: Any, context: Any) -> Any:
        obj = await self._reply(context, self.server.repository_index(request.ready))
        return json_format.ParseDict({"models": obj}, pb.RepositoryIndexResponse())

    async def RepositoryModelLoad(self, request: Any, context: Any) -> Any:
        if request.parameters:
            await context.abort(grpc.StatusCode.INVALID_ARGUMENT,
                                f"load parameters are not supported ({sorted(request.parameters)}): the model's "
                                "NAME.json beside NAME.onnx holds its options")  # fmt: skip
        await self._reply(context, await self.server.load(request.model_name))
        return pb.RepositoryModelLoadResponse()

    async def RepositoryModelUnload(self, request: Any, context: Any) -> Any:
        unknown = set(request.parameters) - {"unload_dependents"}
        if unknown:
            await context.abort(grpc.StatusCode.INVALID_ARGUMENT, f"unknown unload parameters: {sorted(unknown)}")
        await self._reply(context, await self.server.unload(request.model_name))
        return pb.RepositoryModelUnloadResponse()

    # ---- inference ----
    async def _infer(self, req: Any, context: Any) -> Any:
        """A ``ModelInferResponse``, or raises the request's error (counted in the statistics and metrics)."""
        s = self.server
        name = req.model_name
        label = name if name in s.models else "_unknown"  # never a label per made-up name
        t0 = time.perf_counter()
        m: _Served | None = None
        try:
            m = s.model(name, req.model_version)
            r = decode_infer_request(req, m)
        except Exception as e:  # refused before the batcher saw it: counted here
            if m is not None:
                s.refused(m, http_status(e), time.perf_counter() - t0)
            self._count(label, grpc_status_name(e))
            raise
        timeout = r.timeout
        left = context.time_remaining() if context is not None else None
        if left is not None:  # the call's own deadline bounds the request's
            timeout = left if timeout is None else min(timeout, left)
        try:
            results = await m.batcher.infer(r.inputs, timeout=timeout)
            resp = encode_infer_response(name, r, results, m)
        except Exception as e:
            self._count(label, grpc_status_name(e))
            raise
        self._count(label, "OK")
        return resp

    async def ModelInfer(self, request: Any, context: Any) -> Any:
        try:
            return await self._infer(request, context)
        except Exception as e:
            await self._abort(context, e)

    async def ModelStreamInfer(self, request_iterator: AsyncIterator[Any], context: Any) -> None:
        """Each request of the stream answered on it when done (out of order under batching: ``id`` tells);
        a failed one as an ``error_message``.  Ends when the client ends its side, or at shutdown once
        the requests read are answered."""
        lock = asyncio.Lock()
        pending: set[asyncio.Task[None]] = set()

        async def one(req: Any) -> None:
            try:
                resp = pb.ModelStreamInferResponse(infer_response=await self._infer(req, None))
            except Exception as e:
                resp = pb.ModelStreamInferResponse(error_message=_message(e),
                                                   infer_response=pb.ModelInferResponse(
                                                       model_name=req.model_name, id=req.id))  # fmt: skip
            async with lock:
                await context.write(resp)

        closing = self._closing
        assert closing is not None
        stop = asyncio.ensure_future(closing.wait())
        try:
            while not closing.is_set():
                read = asyncio.ensure_future(context.read())
                done, _ = await asyncio.wait((read, stop), return_when=asyncio.FIRST_COMPLETED)
                if read not in done:
                    read.cancel()
                    break
                req = read.result()
                if req is grpc.aio.EOF:
                    break
                t = asyncio.ensure_future(one(req))
                pending.add(t)
                t.add_done_callback(pending.discard)
            if pending:
                await asyncio.gather(*pending, return_exceptions=True)
        finally:
            stop.cancel()
            for t in pending:
                t.cancel()


#: longest error message sent (gRPC carries it in a trailer, which has a size limit: a made-up model name
#: of 10 kB would turn the call's NOT_FOUND into RESOURCE_EXHAUSTED)
_MAX_MESSAGE = 1024


def _message(exc: BaseException) -> str:
    from ..errors import AioGeError

    return _short(str(exc) if isinstance(exc, AioGeError) else f"{type(exc).__name__}: {exc}")


def _short(msg: str) -> str:
    return msg if len(msg) <= _MAX_MESSAGE else msg[: _MAX_MESSAGE - 3] + "..."
