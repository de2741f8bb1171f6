"""Small helpers for tests that drive the ACL ABI directly through ``aioge._native``."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Sequence
from typing import Any

import numpy as np

from aioge import _native, dtypes
from aioge._native import ffi, lib

H2H, H2D, D2H, D2D, DEFAULT = 0, 1, 2, 3, 4
ND = 2


def rc_msg(rc: int) -> tuple[int, str]:
    return rc, _native.recent_error()


class Raw:
    """An initialised runtime with one device, its default context and a stream."""

    def __init__(self) -> None:
        rc = lib.aclInit(ffi.NULL)
        assert rc in (0, 100002), rc
        _native.recent_error()
        _native.check(lib.aclrtSetDevice(0), "aclrtSetDevice")
        _native.forget_context()
        p = ffi.new("aclrtStream *")
        _native.check(lib.aclrtCreateStream(p), "aclrtCreateStream")
        self.stream = p[0]
        self._allocs: list[Any] = []
        self._handles: list[tuple[Any, Any]] = []

    def malloc(self, nbytes: int) -> Any:
        p = ffi.new("void **")
        _native.check(lib.aclrtMalloc(p, nbytes, 0), "aclrtMalloc")
        self._allocs.append(p[0])
        return p[0]

    def free(self, ptr: Any) -> None:
        self._allocs.remove(ptr)
        _native.check(lib.aclrtFree(ptr), "aclrtFree")

    def to_device(self, arr: np.ndarray) -> Any:
        arr = np.ascontiguousarray(arr)
        p = self.malloc(max(arr.nbytes, 1))
        if arr.nbytes:
            _native.check(lib.aclrtMemcpy(p, arr.nbytes, _native.host_ptr(arr), arr.nbytes, H2D), "aclrtMemcpy")
        return p

    def to_host(self, ptr: Any, shape: Sequence[int], dtype: Any) -> np.ndarray:
        out = np.empty(tuple(shape), dtypes.normalize(dtype))
        if out.nbytes:
            _native.check(lib.aclrtMemcpy(_native.host_ptr(out), out.nbytes, ptr, out.nbytes, D2H), "aclrtMemcpy")
        return out

    def desc(self, dtype: Any, shape: Sequence[int], fmt: int = ND) -> Any:
        dt = int(dtypes.to_acl(dtype)) if not isinstance(dtype, int) else dtype
        d = lib.aclCreateTensorDesc(dt, len(shape), ffi.new("int64_t[]", list(shape)) if shape else ffi.NULL, fmt)
        assert d != ffi.NULL, _native.recent_error()
        self._handles.append((lib.aclDestroyTensorDesc, d))
        return d

    def buf(self, ptr: Any, size: int) -> Any:
        b = lib.aclCreateDataBuffer(ptr, size)
        assert b != ffi.NULL
        self._handles.append((lib.aclDestroyDataBuffer, b))
        return b

    def attr(self, **ints: Any) -> Any:
        a = lib.aclopCreateAttr()
        self._handles.append((lib.aclopDestroyAttr, a))
        for k, v in ints.items():
            if isinstance(v, bool):
                _native.check(lib.aclopSetAttrBool(a, k.encode(), int(v)), "attr")
            else:
                _native.check(lib.aclopSetAttrInt(a, k.encode(), v), "attr")
        return a

    def op(self, op_type: str, ins: list[tuple[Any, Any]], outs: list[tuple[Any, Any]], attr: Any = None,
           stream: Any = None) -> int:  # fmt: skip
        """Launch; ``ins``/``outs`` are (desc, buffer) pairs.  Returns the raw code."""
        return int(lib.aclopCompileAndExecute(
            op_type.encode(),
            len(ins), ffi.new("aclTensorDesc *[]", [d for d, _ in ins]),
            ffi.new("aclDataBuffer *[]", [b for _, b in ins]),
            len(outs), ffi.new("aclTensorDesc *[]", [d for d, _ in outs]),
            ffi.new("aclDataBuffer *[]", [b for _, b in outs]),
            attr if attr is not None else ffi.NULL, 0, 0, ffi.NULL, self.stream if stream is None else stream,
        ))  # fmt: skip

    def add(self, a: Any, b: Any, out: Any, shape: Sequence[int], dtype: Any = "float32", stream: Any = None) -> int:
        n = int(np.prod(shape)) * dtypes.itemsize(dtype)
        d = self.desc(dtype, shape)
        return self.op("Add", [(d, self.buf(a, n)), (d, self.buf(b, n))], [(d, self.buf(out, n))], stream=stream)

    def sync(self, stream: Any = None) -> int:
        return int(lib.aclrtSynchronizeStream(self.stream if stream is None else stream))

    def close(self) -> None:
        for fn, h in reversed(self._handles):
            fn(h)
        for p in self._allocs:
            lib.aclrtFree(p)
        lib.aclrtDestroyStream(self.stream)
        lib.aclrtResetDevice(0)
        lib.aclFinalize()
        _native.recent_error()
        _native.forget_context()


@contextlib.contextmanager
def raw_runtime() -> Iterator[Raw]:
    r = Raw()
    try:
        yield r
    finally:
        r.close()
