"""aioge: an asyncio-native runtime for Huawei Ascend CANN.

Launch ACL single operators and GE-style graphs and simply ``await`` them;
device work composes with asyncio (and trio, through anyio) without ever
blocking the event loop.  Runs on the embedded host runtime (any Linux box)
or on a real ``libascendcl.so`` (``AIOGE_BACKEND=ascend``).

Example:
    >>> import aioge, numpy as np
    >>> async def main():
    ...     async with aioge.open_device(0) as dev, dev.open_stream() as s:
    ...         x = s.upload(np.ones((2, 3), np.float32))
    ...         y = aioge.ops.add(x, x)
    ...         print(await y.numpy())
"""

from __future__ import annotations

from . import dtypes, errors, metrics, ops
from ._native import backend
from .dtypes import DataType, Format, bfloat16
from .errors import (
    AclCapacityError,
    AclError,
    AclInternalError,
    AclParamError,
    AclResourceError,
    AicoreExceptionError,
    AioGeError,
    ApiNotSupportedError,
    BackendError,
    BadAllocError,
    BusyResourceError,
    CaptureInvalidatedError,
    ClosedResourceError,
    ContextNullError,
    EventNotCompleteError,
    EventSyncTimeoutError,
    FeatureUnsupportedError,
    FeedError,
    FormatMismatchError,
    InvalidDeviceError,
    InvalidParamError,
    InvalidResourceHandleError,
    OpAttrMismatchError,
    OpInputMismatchError,
    OpNotFoundError,
    OpOutputMismatchError,
    OpTypeMismatchError,
    OutOfDeviceMemoryError,
    RepeatFinalizeError,
    RepeatInitializeError,
    RepeatSubscribeError,
    ReportTimeoutError,
    RuntimeFeatureNotSupportError,
    RuntimeParamError,
    StreamCaptureError,
    StreamContextError,
    StreamNoCallbackError,
    StreamSubscribeError,
    StreamSyncTimeoutError,
    TaskTimeoutError,
    ThreadSubscribeError,
    UninitializedError,
    UnsupportedDataTypeError,
    UnsupportedDynamicShapeError,
    WrongDeviceError,
)
from .frontends import from_torch
from .graph import Graph, load_onnx
from .graph.errors import (
    DanglingValueError,
    DuplicateValueError,
    DynamicShapeError,
    ExternalDataError,
    GraphCycleError,
    GraphError,
    GraphTypeError,
    LoweringError,
    MalformedModelError,
    OnnxImportError,
    PlanError,
    ShapeInferenceError,
    UnknownOpError,
    UnsupportedOpError,
    UnsupportedOpsetError,
)
from .profiler import Profiler, profile
from .runtime.capture import CapturedGraph
from .runtime.descs import Attr
from .runtime.device import Device, device_count, open_device
from .runtime.graphs.dynamic import DynamicCompiledGraph
from .runtime.graphs.executable import CompiledGraph
from .runtime.launch import Const, HostInput, op
from .runtime.opcache import OpCacheInfo, op_cache_info, set_op_cache_max_bytes
from .runtime.scheduler import Completion
from .runtime.stream import Event, Stream, Tensor, TensorSpec
from .session import Session, SessionError

__version__ = "0.1.0"

__all__ = (
    "AclCapacityError",
    "AclError",
    "AclInternalError",
    "AclParamError",
    "AclResourceError",
    "AicoreExceptionError",
    "AioGeError",
    "ApiNotSupportedError",
    "Attr",
    "BackendError",
    "BadAllocError",
    "BusyResourceError",
    "CaptureInvalidatedError",
    "CapturedGraph",
    "ClosedResourceError",
    "CompiledGraph",
    "DynamicCompiledGraph",
    "Completion",
    "Const",
    "ContextNullError",
    "DanglingValueError",
    "DataType",
    "Device",
    "DuplicateValueError",
    "DynamicShapeError",
    "Event",
    "EventNotCompleteError",
    "EventSyncTimeoutError",
    "ExternalDataError",
    "FeatureUnsupportedError",
    "FeedError",
    "Format",
    "FormatMismatchError",
    "Graph",
    "GraphCycleError",
    "GraphError",
    "GraphTypeError",
    "HostInput",
    "InvalidDeviceError",
    "InvalidParamError",
    "InvalidResourceHandleError",
    "LoweringError",
    "MalformedModelError",
    "OnnxImportError",
    "OpAttrMismatchError",
    "OpCacheInfo",
    "OpInputMismatchError",
    "OpNotFoundError",
    "OpOutputMismatchError",
    "OpTypeMismatchError",
    "OutOfDeviceMemoryError",
    "PlanError",
    "RepeatFinalizeError",
    "RepeatInitializeError",
    "RepeatSubscribeError",
    "ReportTimeoutError",
    "RuntimeFeatureNotSupportError",
    "RuntimeParamError",
    "Profiler",
    "Session",
    "SessionError",
    "ShapeInferenceError",
    "Stream",
    "StreamCaptureError",
    "StreamContextError",
    "StreamNoCallbackError",
    "StreamSubscribeError",
    "StreamSyncTimeoutError",
    "TaskTimeoutError",
    "Tensor",
    "TensorSpec",
    "ThreadSubscribeError",
    "UninitializedError",
    "UnknownOpError",
    "UnsupportedDataTypeError",
    "UnsupportedDynamicShapeError",
    "UnsupportedOpError",
    "UnsupportedOpsetError",
    "WrongDeviceError",
    "backend",
    "bfloat16",
    "device_count",
    "dtypes",
    "errors",
    "load_onnx",
    "from_torch",
    "metrics",
    "op",
    "op_cache_info",
    "set_op_cache_max_bytes",
    "open_device",
    "ops",
    "profile",
)

for _name in __all__:
    _obj = globals()[_name]
    if isinstance(_obj, type) and _obj.__module__.startswith("aioge."):
        _obj.__module__ = "aioge"
del _name, _obj
