"""The ASGI application: the Open Inference Protocol (KServe v2) over HTTP/REST, on Starlette.

Routes (``/versions/{version}`` forms too; only version ``1`` exists):

* ``GET /v2/health/live``, ``GET /v2/health/ready`` (503 while loading or shutting down)
* ``GET /v2`` -- server metadata; ``POST /v2/repository/index`` -- the models, loaded or not
* ``POST /v2/repository/models/{name}/load`` (or reload), ``.../unload`` -- Triton's model repository extension
* ``GET /v2/models/{name}`` -- model metadata; ``GET /v2/models/{name}/ready``
* ``GET /v2/models/{name}/config`` -- Triton's model configuration extension
* ``GET /v2/models[/{name}]/stats`` -- Triton's statistics extension
* ``POST /v2/models/{name}/infer`` -- JSON tensors or Triton's binary tensor data extension
* ``GET /metrics`` -- Prometheus text format

Errors are ``{"error": "..."}``: 400 for a malformed or mismatching
request, 404 for an unknown model or route, 413 for a body over the limit,
503 with ``Retry-After`` when a queue is full or the server is shutting
down, 504 past a request's deadline, 500 when a batch failed on the device.

``POST .../infer`` -- the one route under load -- is answered by a bare ASGI
handler ahead of Starlette's middleware, router, ``Request`` and
``Response`` (:class:`_InferApp`): those cost about a third of a small
request's time in the server.  Every other route, and any other method on
an infer path, goes through Starlette as usual.
"""

from __future__ import annotations

import contextlib
import json
import os
from collections.abc import AsyncIterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.requests import ClientDisconnect, Request
from starlette.responses import Response
from starlette.routing import Route
from starlette.types import ASGIApp, Receive, Scope, Send

from .errors import InvalidInputError, PayloadTooLargeError
from .metrics import ServeMetrics
from .protocol import HEADER_LENGTH
from .server import MAX_BODY_BYTES, InferenceServer, ModelSpec, Reply, error_reply

if TYPE_CHECKING:
    from collections.abc import Callable

    from prometheus_client import CollectorRegistry

    from ..runtime.device import Device
    from .runner import ModelSource

__all__ = ("app", "build_app")


def _response(r: Reply) -> Response:
    return Response(r.body, r.status, r.headers, r.media_type)


async def read_body(request: Request, limit: int) -> bytes:
    """The request body, refusing (413) past ``limit`` bytes before reading them all."""
    declared = request.headers.get("content-length")
    if declared is not None and declared.isdigit() and int(declared) > limit:
        raise PayloadTooLargeError(f"the body's {declared} bytes exceed the server's limit of {limit}")
    chunks, n = [], 0
    async for chunk in request.stream():
        n += len(chunk)
        if n > limit:
            raise PayloadTooLargeError(f"the body exceeds the server's limit of {limit} bytes")
        chunks.append(chunk)
    return b"".join(chunks)


def infer_target(path: str) -> tuple[str, str | None] | None:
    """``(name, version)`` of an infer path (``/v2/models/{name}[/versions/{version}]/infer``), else None."""
    if not (path.startswith("/v2/models/") and path.endswith("/infer")):
        return None
    parts = path[11:-6].split("/")  # what lies between: name, or name/versions/version
    if len(parts) == 1 and parts[0]:
        return parts[0], None
    if len(parts) == 3 and parts[0] and parts[1] == "versions" and parts[2]:
        return parts[0], parts[2]
    return None


#: the request headers the infer handler reads (ASGI gives the names in lower case)
_READ = frozenset((b"content-length", b"content-encoding", HEADER_LENGTH.encode()))


_JSON = b"application/json"


class _ServeApp(Starlette):
    """The Starlette application, with ``POST /v2/models/{name}/infer`` answered by a bare ASGI handler.

    Same answers as the Starlette route it shadows (the body read under the
    size limit, 413 past it, nothing sent to a client that disconnected),
    without Starlette's per-request middleware, routing and objects.
    Middleware added to the app (``add_middleware``, e.g. Ray Serve's
    replica header) wraps that handler too.
    """

    server: InferenceServer
    _fast: ASGIApp | None = None

    def add_middleware(self, middleware_class: Any, *args: Any, **kwargs: Any) -> None:
        super().add_middleware(middleware_class, *args, **kwargs)
        self._fast = None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and scope["method"] == "POST" and infer_target(scope["path"]) is not None:
            fast = self._fast
            if fast is None:  # the handler inside the user's middleware, as Starlette nests its routes
                fast = self._bare
                for cls, args, kwargs in reversed(self.user_middleware):
                    fast = cls(fast, *args, **kwargs)
                self._fast = fast
            scope["app"] = self
            await fast(scope, receive, send)
            return
        await super().__call__(scope, receive, send)

    async def _bare(self, scope: Scope, receive: Receive, send: Send) -> None:
        target = infer_target(scope["path"])
        assert target is not None
        try:
            await self._infer(scope, receive, send, *target)
        except ClientDisconnect:  # nobody to answer
            pass

    async def _infer(self, scope: Scope, receive: Receive, send: Send, name: str, version: str | None) -> None:
        server = self.server
        headers = {k.decode(): v.decode("latin-1") for k, v in scope["headers"] if k in _READ}
        try:
            try:
                body = await _receive_body(receive, headers.get("content-length"), server.max_body_bytes)
            except PayloadTooLargeError as e:
                reply = error_reply(e)
                if name in server.models:
                    server.refused(server.models[name], 413)
                if server.metrics is not None:
                    server.metrics.http(name if name in server.models else "_unknown", 413)
            else:
                reply = await server.infer(name, body, headers, version)
        except ClientDisconnect:
            raise
        except Exception:  # a bug of ours: a 500 (as Starlette's error middleware would), then let it be logged
            await _respond(send, _INTERNAL)
            raise
        await _respond(send, reply)


_INTERNAL = Reply(500, b'{"error":"internal server error"}', {})


async def _respond(send: Send, r: Reply) -> None:
    head = [(b"content-type", _JSON if r.media_type == "application/json" else r.media_type.encode()),
            (b"content-length", str(len(r.body)).encode())]  # fmt: skip
    if r.headers:
        head += [(k.lower().encode("latin-1"), v.encode("latin-1")) for k, v in r.headers.items()]
    await send({"type": "http.response.start", "status": r.status, "headers": head})
    await send({"type": "http.response.body", "body": r.body})


async def _receive_body(receive: Callable[[], Any], declared: str | None, limit: int) -> bytes:
    """The request body from ASGI messages, refusing (413) past ``limit`` bytes before reading them all."""
    if declared is not None and declared.isdigit() and int(declared) > limit:
        raise PayloadTooLargeError(f"the body's {declared} bytes exceed the server's limit of {limit}")
    chunks: list[bytes] = []
    n = 0
    while True:
        m = await receive()
        if m["type"] == "http.disconnect":
            raise ClientDisconnect()
        chunk = m.get("body", b"")
        if chunk:
            n += len(chunk)
            if n > limit:
                raise PayloadTooLargeError(f"the body exceeds the server's limit of {limit} bytes")
            chunks.append(chunk)
        if not m.get("more_body", False):
            return chunks[0] if len(chunks) == 1 else b"".join(chunks)


def build_app(server: InferenceServer, *, own_lifespan: bool = True) -> Starlette:
    """A Starlette application around ``server`` (entered by the app's lifespan if ``own_lifespan``)."""

    async def live(request: Request) -> Response:
        return _response(server.live())

    async def ready(request: Request) -> Response:
        return _response(server.readiness())

    async def meta(request: Request) -> Response:
        return _response(server.server_metadata())

    async def _params(request: Request) -> tuple[dict[str, Any], Response | None]:
        """The JSON object of a repository request's body (may be empty), or the 400 to answer."""
        raw = await read_body(request, 1 << 20)
        if not raw.strip():
            return {}, None
        try:
            obj = json.loads(raw)
        except ValueError as e:
            return {}, _response(error_reply(InvalidInputError(f"the request is not valid JSON: {e}")))
        if not isinstance(obj, dict):
            return {}, _response(error_reply(InvalidInputError("the request must be a JSON object")))
        return obj, None

    async def index(request: Request) -> Response:
        ready = False
        if request.method == "POST":
            obj, bad = await _params(request)
            if bad is not None:
                return bad
            ready = obj.get("ready", False)
            if not isinstance(ready, bool):
                return _response(error_reply(InvalidInputError("'ready' must be a boolean")))
        return _response(server.repository_index(ready))

    async def load(request: Request) -> Response:
        obj, bad = await _params(request)
        if bad is not None:
            return bad
        params = obj.get("parameters") or {}
        if not isinstance(params, dict) or params:
            return _response(error_reply(InvalidInputError(
                f"load parameters are not supported ({sorted(params) if isinstance(params, dict) else params!r}): "
                "the model's NAME.json beside NAME.onnx holds its options")))  # fmt: skip
        return _response(await server.load(request.path_params["name"]))

    async def unload(request: Request) -> Response:
        obj, bad = await _params(request)
        if bad is not None:
            return bad
        params = obj.get("parameters") or {}
        if not isinstance(params, dict) or set(params) - {"unload_dependents"}:
            return _response(error_reply(InvalidInputError(f"unknown unload parameters: {params!r}")))
        return _response(await server.unload(request.path_params["name"]))

    async def model_meta(request: Request) -> Response:
        p = request.path_params
        return _response(server.model_metadata(p["name"], p.get("version")))

    async def model_ready(request: Request) -> Response:
        p = request.path_params
        return _response(server.model_ready(p["name"], p.get("version")))

    async def infer(request: Request) -> Response:
        p = request.path_params
        try:
            body = await read_body(request, server.max_body_bytes)
        except PayloadTooLargeError as e:
            if p["name"] in server.models:
                server.refused(server.models[p["name"]], 413)
            if server.metrics is not None:
                server.metrics.http(p["name"] if p["name"] in server.models else "_unknown", 413)
            return _response(error_reply(e))
        except ClientDisconnect:  # nobody to answer
            return Response(status_code=400)
        return _response(await server.infer(p["name"], body, request.headers, p.get("version")))

    async def model_config(request: Request) -> Response:
        p = request.path_params
        return _response(server.model_config(p["name"], p.get("version")))

    async def stats(request: Request) -> Response:
        p = request.path_params
        return _response(server.statistics(p.get("name"), p.get("version")))

    async def metrics(request: Request) -> Response:
        return _response(server.metrics_reply())

    async def http_error(request: Request, exc: Exception) -> Response:
        code = exc.status_code if isinstance(exc, HTTPException) else 500
        detail = exc.detail if isinstance(exc, HTTPException) else "internal server error"
        body = json.dumps({"error": f"{detail}: {request.method} {request.url.path}"})
        return Response(body, code, media_type="application/json")

    routes = [  # the infer routes first: Starlette tries routes in order
        Route("/v2/models/{name}/infer", infer, methods=["POST"]),
        Route("/v2/health/live", live, methods=["GET"]),
        Route("/v2/health/ready", ready, methods=["GET"]),
        Route("/v2", meta, methods=["GET"]),
        Route("/v2/repository/index", index, methods=["POST", "GET"]),
        Route("/v2/repository/models/{name}/load", load, methods=["POST"]),
        Route("/v2/repository/models/{name}/unload", unload, methods=["POST"]),
        Route("/metrics", metrics, methods=["GET"]),
        Route("/v2/models/stats", stats, methods=["GET"]),  # ahead of the model called "stats"'s metadata
    ]
    for base in ("/v2/models/{name}", "/v2/models/{name}/versions/{version}"):
        routes += [
            Route(base, model_meta, methods=["GET"]),
            Route(base + "/ready", model_ready, methods=["GET"]),
            Route(base + "/config", model_config, methods=["GET"]),
            Route(base + "/stats", stats, methods=["GET"]),
        ]
    routes.append(Route("/v2/models/{name}/versions/{version}/infer", infer, methods=["POST"]))

    lifespan = None
    if own_lifespan:

        @contextlib.asynccontextmanager
        async def lifespan(app: Starlette) -> AsyncIterator[None]:
            async with server:
                yield

    application = _ServeApp(routes=routes, lifespan=lifespan,
                            exception_handlers={HTTPException: http_error, Exception: http_error})  # fmt: skip
    application.server = server
    application.state.server = server
    return application


def app(
    models: Mapping[str, ModelSpec | ModelSource] | Sequence[str | os.PathLike[str]] | str | os.PathLike[str],
    *,
    device: Device | None = None,
    device_id: int = 0,
    registry: CollectorRegistry | None = None,
    runtime_metrics: bool = False,
    max_body_bytes: int = MAX_BODY_BYTES,
    **defaults: Any,
) -> Starlette:
    """A Starlette application serving ``models`` with the Open Inference Protocol.

    Args:
        models: name -> :class:`~aioge.serve.ModelSpec` (or a bare source: an ONNX path/bytes,
            a Graph, a builder ``batch_size -> Graph``, a CompiledGraph), or paths of ``.onnx``
            files and model-repository directories.
        device: a device to borrow (default: the app opens ``device_id`` at startup and closes it
            at shutdown).
        registry: the ``prometheus_client`` registry of ``/metrics`` (default: one of its own),
            to expose other collectors on the same endpoint.
        runtime_metrics: also expose the runtime's :mod:`aioge.metrics` (launches, streams,
            copies, executions; enabling them costs a Python call per launch).
        max_body_bytes: request bodies above this are refused (413).
        defaults: :class:`~aioge.serve.ModelSpec` fields for models given without one
            (``max_batch_size=32``, ``max_queue_delay=500e-6``, ...).

    Models load (every bucket compiled) at startup, before the server accepts
    connections; at shutdown every accepted request is finished first.

    Example:
        >>> import uvicorn, aioge.serve
        >>> uvicorn.run(aioge.serve.app(["models/"]), host="127.0.0.1", port=8000)
    """
    metrics = ServeMetrics(registry)
    if runtime_metrics:
        from .. import metrics as runtime

        runtime.register(metrics.registry)
    server = InferenceServer(models, device=device, device_id=device_id, metrics=metrics,
                             max_body_bytes=max_body_bytes, **defaults)  # fmt: skip
    return build_app(server)
