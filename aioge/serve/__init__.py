"""Serving: a dynamic batcher, an Open Inference Protocol (KServe v2) server, Ray Serve scale-out.

* :class:`Batcher` -- many coroutines ``await batcher.infer(feeds)``; one
  ``model.execute`` per batch (usable without HTTP, no extra dependency).
* :func:`load_model` / :class:`BucketedModel` -- a model compiled for a few
  batch sizes (buckets), from ONNX, a Graph builder, a Graph or a CompiledGraph;
  :class:`DynamicModel` -- an ONNX model with symbolic dims besides the batch
  (a sequence length): one dynamic-shape compile, a plan per concrete shape.
* :func:`app` -- a Starlette ASGI application speaking the v2 protocol
  (JSON and Triton's binary tensor extension), several models, ``/metrics``;
  ``python -m aioge serve MODEL.onnx`` runs it under uvicorn (the ``serve`` extra).
* :mod:`aioge.serve.ray` -- the same server as a Ray Serve deployment (the ``ray`` extra).

Example:
    >>> async with aioge.open_device() as dev:
    ...     runner = await aioge.serve.load_model(dev, "mlp.onnx", batch_sizes=(1, 8, 32))
    ...     async with aioge.serve.Batcher(runner) as batcher:
    ...         out = await batcher.infer({"x": row})
    ...     await runner.aclose()
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .batcher import Batcher, BatchObserver
from .errors import (
    DeadlineExceededError,
    InvalidInputError,
    ModelLoadError,
    ModelNotFoundError,
    PayloadTooLargeError,
    QueueFullError,
    ServeError,
)
from .runner import BucketedModel, DynamicModel, Runner, TensorInfo, default_batch_sizes, load_model
from .server import InferenceServer, ModelSpec, discover_models

if TYPE_CHECKING:
    from starlette.applications import Starlette

__all__ = (
    "Batcher",
    "BatchObserver",
    "BucketedModel",
    "DeadlineExceededError",
    "DynamicModel",
    "InferenceServer",
    "InvalidInputError",
    "ModelLoadError",
    "ModelNotFoundError",
    "ModelSpec",
    "PayloadTooLargeError",
    "QueueFullError",
    "Runner",
    "ServeError",
    "TensorInfo",
    "app",
    "default_batch_sizes",
    "discover_models",
    "load_model",
)


def app(*args: Any, **kwargs: Any) -> Starlette:
    """A Starlette ASGI app serving models (see :func:`aioge.serve.asgi.app`; needs the ``serve`` extra)."""
    from .asgi import app as _app

    return _app(*args, **kwargs)


for _name in __all__:
    _obj = globals()[_name]
    if isinstance(_obj, type) and _obj.__module__.startswith("aioge.serve."):
        _obj.__module__ = "aioge.serve"
del _name, _obj
