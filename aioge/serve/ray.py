"""Scale-out on Ray Serve: the same v2 server in every replica (the ``ray`` extra).

Each replica is a Ray actor process that builds the Starlette app of
:func:`aioge.serve.app` and runs its lifespan: it opens its own device, loads
the models and starts their batchers, and closes them when Ray retires it.
Requests reach a replica's async ASGI entry point through Ray's HTTP proxy
(or a ``DeploymentHandle``), which awaits that replica's batcher -- the
same Open Inference Protocol body, JSON or binary, as the single-process
server.  Responses carry ``x-aioge-replica`` naming the replica that
answered.

Example:
    >>> from ray import serve
    >>> import aioge.serve.ray
    >>> serve.run(aioge.serve.ray.deployment({"mlp": "/models/mlp.onnx"}, num_replicas=2), route_prefix="/")
    >>> # POST http://127.0.0.1:8000/v2/models/mlp/infer

Models must be reachable from every replica: ONNX paths on a shared file
system (or the same machine), ONNX bytes, or ModelSpecs of those (they are
pickled to the replicas; a builder function travels with cloudpickle).
"""

from __future__ import annotations

import importlib
import os
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any

__all__ = ("deployment", "ReplicaHeader")

Scope = dict[str, Any]
Receive = Callable[[], Awaitable[dict[str, Any]]]
Send = Callable[[dict[str, Any]], Awaitable[None]]


class ReplicaHeader:
    """ASGI middleware adding ``x-aioge-replica: <id>`` to every HTTP response."""

    def __init__(self, app: Callable[[Scope, Receive, Send], Awaitable[None]], replica: str) -> None:
        self.app = app
        self.value = replica.encode()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return

        async def send_with_header(message: dict[str, Any]) -> None:
            if message["type"] == "http.response.start":
                message = dict(message)
                message["headers"] = [*message.get("headers", []), (b"x-aioge-replica", self.value)]
            await send(message)

        await self.app(scope, receive, send_with_header)


def _replica_id(serve: Any) -> str:
    try:
        ctx = serve.get_replica_context()
        rid = getattr(ctx, "replica_id", None)
        return str(getattr(rid, "unique_id", None) or rid or ctx.replica_tag)
    except Exception:  # outside a replica, or another Ray version's context
        return f"pid-{os.getpid()}"


def deployment(
    models: Mapping[str, Any] | Sequence[str | os.PathLike[str]] | str | os.PathLike[str],
    *,
    num_replicas: int = 2,
    name: str = "aioge",
    ray_actor_options: Mapping[str, Any] | None = None,
    max_ongoing_requests: int = 256,
    **server_options: Any,
) -> Any:
    """A Ray Serve application (``serve.run(...)`` it) of ``num_replicas`` aioge servers.

    Args:
        models: as for :func:`aioge.serve.app` (paths, or name -> ModelSpec / source).
        num_replicas: replicas, each with its own device, models and batchers.
        ray_actor_options: Ray resources of each replica (default ``{"num_cpus": 1}``).
        max_ongoing_requests: requests a replica takes at once (its batcher queues them);
            beyond it Ray queues them in the proxy.
        server_options: keyword arguments of :func:`aioge.serve.app` (``device_id``,
            ``max_body_bytes``) and :class:`~aioge.serve.ModelSpec` defaults
            (``max_batch_size``, ``max_queue_delay``, ...).
    """
    serve = importlib.import_module("ray.serve")
    options = dict(server_options)
    spec = models if isinstance(models, Mapping) else list(models) if not isinstance(models, (str, os.PathLike)) \
        else [models]  # fmt: skip

    def build_app() -> Any:  # runs in each replica
        from aioge.serve.asgi import app as make_app

        application = make_app(spec, **options)
        application.add_middleware(ReplicaHeader, replica=_replica_id(importlib.import_module("ray.serve")))
        return application

    class AiogeDeployment:
        """A replica: the aioge v2 server (its ASGI app is the ingress)."""

    AiogeDeployment.__name__ = AiogeDeployment.__qualname__ = name
    ingress = serve.ingress(build_app)(AiogeDeployment)
    dep = serve.deployment(ingress, name=name, num_replicas=num_replicas,
                           ray_actor_options=dict(ray_actor_options or {"num_cpus": 1}),
                           max_ongoing_requests=max_ongoing_requests)  # fmt: skip
    return dep.bind()
