"""Exceptions raised by aioge.

Every ACL return code goes through one checker (``aioge._native.check``),
which raises an :class:`AclError` subclass chosen by code:

* leaf classes for the codes callers handle (``OpInputMismatchError``,
  ``OutOfDeviceMemoryError``, ``StreamSyncTimeoutError`` ...);
* otherwise a band class by the code's leading digit, as CANN groups them:
  1xxxxx caller errors (:class:`AclParamError`, also a ``ValueError``),
  2xxxxx resource errors, 3xxxxx capacity, 5xxxxx internal or device errors.

aioge's own misuse errors (a closed resource, a tensor of another device)
are separate from device errors and never carry an ACL code.

Example:
    >>> try:
    ...     aioge.ops.add(x, y)                      # shapes that do not broadcast
    ... except aioge.OpInputMismatchError as e:
    ...     print(e.code, e.name, e.op)
    100021 ACL_ERROR_OP_INPUT_NOT_MATCH aclopCompileAndExecute
"""

from __future__ import annotations

from typing import ClassVar

from ._error_codes import CODE_NAMES

__all__ = (
    "AioGeError",
    "AclError",
    "AclParamError",
    "AclResourceError",
    "AclCapacityError",
    "AclInternalError",
    "InvalidParamError",
    "UninitializedError",
    "RepeatInitializeError",
    "RepeatFinalizeError",
    "OpTypeMismatchError",
    "OpInputMismatchError",
    "OpOutputMismatchError",
    "OpAttrMismatchError",
    "OpNotFoundError",
    "UnsupportedDataTypeError",
    "FormatMismatchError",
    "UnsupportedDynamicShapeError",
    "RepeatSubscribeError",
    "BadAllocError",
    "ApiNotSupportedError",
    "InvalidResourceHandleError",
    "FeatureUnsupportedError",
    "RuntimeParamError",
    "InvalidDeviceError",
    "ContextNullError",
    "StreamContextError",
    "StreamSubscribeError",
    "ThreadSubscribeError",
    "StreamNoCallbackError",
    "TaskTimeoutError",
    "RuntimeFeatureNotSupportError",
    "OutOfDeviceMemoryError",
    "EventNotCompleteError",
    "ReportTimeoutError",
    "AicoreExceptionError",
    "StreamSyncTimeoutError",
    "EventSyncTimeoutError",
    "StreamCaptureError",
    "CaptureInvalidatedError",
    "ClosedResourceError",
    "BusyResourceError",
    "WrongDeviceError",
    "FeedError",
    "BackendError",
    "error_class",
    "code_name",
)


class AioGeError(Exception):
    """Base class of every exception aioge raises on purpose."""


class AclError(AioGeError):
    """A non-zero ACL return code.

    Attributes:
        code: the ``aclError`` value (e.g. 100021).
        name: its CANN name (e.g. ``"ACL_ERROR_OP_INPUT_NOT_MATCH"``), or ``"unknown"``.
        message: the runtime's text for it (``aclGetRecentErrMsg``), possibly empty.
        op: the ACL call (or aioge operation) that failed.
    """

    #: codes a leaf class stands for (set by subclasses)
    codes: ClassVar[tuple[int, ...]] = ()
    _registry: ClassVar[dict[int, type[AclError]]] = {}

    def __init_subclass__(cls, **kwargs: object) -> None:
        super().__init_subclass__(**kwargs)
        for c in cls.__dict__.get("codes", ()):
            AclError._registry[c] = cls

    def __init__(self, code: int, message: str = "", op: str = "") -> None:
        self.code = int(code)
        self.name = code_name(self.code)
        self.message = message
        self.op = op
        super().__init__(self.code, message, op)

    def __str__(self) -> str:
        where = f"{self.op}: " if self.op else ""
        text = f"{where}{self.name} ({self.code})"
        return f"{text}: {self.message}" if self.message else text

    def __reduce__(self) -> tuple[object, ...]:
        return (type(self), (self.code, self.message, self.op))


class AclParamError(AclError, ValueError):
    """1xxxxx: the caller passed something the runtime refuses."""


class AclResourceError(AclError):
    """2xxxxx: a resource (memory, stream, feature) is unavailable."""


class AclCapacityError(AclError):
    """3xxxxx: a storage or capacity limit was reached."""


class AclInternalError(AclError):
    """5xxxxx: an internal runtime or device-side failure (e.g. a kernel that failed)."""


# ---- leaf classes for the codes worth catching -------------------------------------------
class InvalidParamError(AclParamError):
    codes = (100000,)


class UninitializedError(AclParamError):
    codes = (100001,)


class RepeatInitializeError(AclParamError):
    codes = (100002,)


class RepeatFinalizeError(AclParamError):
    codes = (100037,)


class OpTypeMismatchError(AclParamError):
    codes = (100020,)


class OpInputMismatchError(AclParamError):
    codes = (100021,)


class OpOutputMismatchError(AclParamError):
    codes = (100022,)


class OpAttrMismatchError(AclParamError):
    codes = (100023,)


class OpNotFoundError(AclParamError):
    codes = (100024,)


class UnsupportedDataTypeError(AclParamError, TypeError):
    """An (op, dtype) the runtime does not support: from ``aioge.op`` (the runtime's
    refusal) and from the typed ``aioge.ops`` functions alike.  Also a ``TypeError``
    (the operand has the wrong type) and, as every :class:`AclParamError`, a ``ValueError``."""

    codes = (100026,)


class FormatMismatchError(AclParamError):
    codes = (100027,)


class UnsupportedDynamicShapeError(AclParamError):
    codes = (148050,)


class RepeatSubscribeError(AclParamError):
    codes = (100033,)


class RuntimeParamError(AclParamError):
    codes = (107000,)


class InvalidDeviceError(AclParamError):
    codes = (107001, 200002)


class ContextNullError(AclParamError):
    codes = (107002,)


class StreamContextError(AclParamError):
    codes = (107003,)


class StreamSubscribeError(AclParamError):
    codes = (107011,)


class ThreadSubscribeError(AclParamError):
    codes = (107012, 100035)


class StreamNoCallbackError(AclParamError):
    codes = (107015, 100034)


class TaskTimeoutError(AclParamError, TimeoutError):
    codes = (107020, 107019)


class BadAllocError(AclResourceError, MemoryError):
    codes = (200000,)


class ApiNotSupportedError(AclResourceError):
    codes = (200001,)


class InvalidResourceHandleError(AclResourceError):
    codes = (200005,)


class FeatureUnsupportedError(AclResourceError):
    codes = (200006,)


class RuntimeFeatureNotSupportError(AclResourceError):
    codes = (207000,)


class OutOfDeviceMemoryError(AclResourceError, MemoryError):
    """The device has no room for the allocation (``AIOGE_HOST_DEVICE_MEMORY`` on the host runtime)."""

    codes = (207001, 207018)


class EventNotCompleteError(AclInternalError):
    codes = (507006,)


class ReportTimeoutError(AclInternalError, TimeoutError):
    codes = (507012, 100036)


class AicoreExceptionError(AclInternalError):
    """A kernel failed on the device (the typical asynchronous error)."""

    codes = (507015,)


class StreamSyncTimeoutError(AclInternalError, TimeoutError):
    codes = (507046,)


class EventSyncTimeoutError(AclInternalError, TimeoutError):
    codes = (507047,)


class StreamCaptureError(AclParamError):
    """A call that a stream capture does not allow (CANN's capture codes): waiting for a
    capturing stream, work that cannot be replayed, a dependency on work outside the capture,
    an unsafe call in a strict capture mode, or awaiting a launch that was captured and has
    not run (replay the graph)."""

    codes = (107024, 107025, 107026, 107027, 107028, 107029, 107030, 107031, 107036, 107038, 107041)


class CaptureInvalidatedError(AclInternalError):
    """The stream capture was invalidated by an earlier call it does not allow; ending it
    gives no graph."""

    codes = (507903,)


_BANDS: dict[str, type[AclError]] = {
    "1": AclParamError,
    "2": AclResourceError,
    "3": AclCapacityError,
    "5": AclInternalError,
}


def code_name(code: int) -> str:
    """CANN name of an error code, or ``"unknown"``."""
    return CODE_NAMES.get(int(code), "unknown")


def error_class(code: int) -> type[AclError]:
    """The exception class ``check()`` raises for ``code``."""
    code = int(code)
    cls = AclError._registry.get(code)
    if cls is not None:
        return cls
    return _BANDS.get(str(code)[:1], AclError) if code > 0 else AclError


# ---- aioge's own misuse errors ------------------------------------------------------------
class ClosedResourceError(AioGeError, RuntimeError):
    """The device, stream, event, tensor or model was already closed."""


class BusyResourceError(AioGeError, RuntimeError):
    """The resource still has work in flight (e.g. ``close()`` of a busy stream: use ``aclose()``)."""


class WrongDeviceError(AioGeError, ValueError):
    """An object of one device was used with another device."""


class FeedError(AioGeError, TypeError, ValueError):
    """``execute()`` was given inputs in a form the model does not take.

    Not a dict of input name -> array (a list of arrays, a number, ...), a
    bare array for a model that does not take exactly one input, or missing /
    unknown input names. Both a ``TypeError`` and a ``ValueError``, so code
    catching either keeps working.
    """


class BackendError(AioGeError, ImportError):
    """The selected backend (``AIOGE_BACKEND``) cannot be loaded."""
