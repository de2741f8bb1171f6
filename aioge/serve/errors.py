"""Exceptions of the serving layer.

Each maps to one status of the Open Inference Protocol's HTTP binding
(:func:`http_status`; the gRPC binding's codes: :func:`grpc_status_name`):
a request a client got wrong is a 400, an unknown model a 404, a full
queue a 503 with ``Retry-After``, a passed deadline a 504.  A batch that
fails on the device fails every request in it with the device's own
:class:`aioge.AclError` (a 500).
"""

from __future__ import annotations

from ..errors import AioGeError, ClosedResourceError

__all__ = (
    "ServeError",
    "InvalidInputError",
    "ModelNotFoundError",
    "ModelLoadError",
    "QueueFullError",
    "DeadlineExceededError",
    "PayloadTooLargeError",
    "http_status",
    "grpc_status_name",
)


class ServeError(AioGeError):
    """Base class of the serving layer's errors."""


class InvalidInputError(ServeError, ValueError):
    """A request's tensors do not fit the model (names, dtypes, shapes, data): refused alone."""


class ModelNotFoundError(ServeError, LookupError):
    """No model of that name (or version) is served."""


class ModelLoadError(ServeError):
    """A model source cannot be served (no batch dimension where one is needed, unknown dtype ...)."""


class PayloadTooLargeError(ServeError, ValueError):
    """A request body larger than the server accepts."""


class QueueFullError(ServeError):
    """The model's queue holds ``max_queue_size`` requests: refused at once, try again later.

    Attributes:
        retry_after: seconds after which a retry is likely to be admitted (an estimate).
    """

    def __init__(self, message: str, retry_after: float = 1.0) -> None:
        super().__init__(message)
        self.retry_after = retry_after


class DeadlineExceededError(ServeError, TimeoutError):
    """The request's deadline passed (a request still queued then is never executed)."""


def http_status(exc: BaseException) -> int:
    """The HTTP status the protocol gives ``exc``."""
    if isinstance(exc, ModelNotFoundError):
        return 404
    if isinstance(exc, PayloadTooLargeError):
        return 413
    if isinstance(exc, InvalidInputError):
        return 400
    if isinstance(exc, (QueueFullError, ClosedResourceError)):
        return 503
    if isinstance(exc, DeadlineExceededError):
        return 504
    return 500


def grpc_status_name(exc: BaseException) -> str:
    """The name of the ``grpc.StatusCode`` the protocol's gRPC binding gives ``exc``."""
    if isinstance(exc, ModelNotFoundError):
        return "NOT_FOUND"
    if isinstance(exc, PayloadTooLargeError):
        return "RESOURCE_EXHAUSTED"
    if isinstance(exc, InvalidInputError):
        return "INVALID_ARGUMENT"
    if isinstance(exc, (QueueFullError, ClosedResourceError)):
        return "UNAVAILABLE"
    if isinstance(exc, DeadlineExceededError):
        return "DEADLINE_EXCEEDED"
    return "INTERNAL"
