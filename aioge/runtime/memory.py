"""A caching allocator of device blocks, one per device.

Freed blocks (a tensor's memory once its last reference and every queued
launch using it are gone, i.e. once the device is done with it) are kept by
size class and handed to the next allocation of that class, instead of an
``aclrtMalloc``/``aclrtFree`` pair per tensor -- slow on a real device, and
two runtime calls here.  Each block carries its ``aclDataBuffer`` (sized to
the block's capacity; descriptors give the bytes an op actually uses).

Blocks come back from finalizers (``__del__``), which a garbage collection
can run on any thread at any allocation -- also inside a pool's own critical
section -- so giving back never waits for the pool's lock: the block is
queued (``deque.append`` is atomic) and settled by whoever holds the lock next.
"""

from __future__ import annotations

import collections
import threading
from typing import Any

from .. import _native
from .._native import acl
from ..errors import InvalidParamError, error_class

__all__ = ("BlockPool", "PinnedPool", "size_class")

_SMALL = 1 << 20


def size_class(nbytes: int) -> int:
    """Capacity a request is rounded to: 512 B steps up to 1 MiB, then 1 MiB steps."""
    n = max(int(nbytes), 1)
    step = 512 if n <= _SMALL else _SMALL
    return (n + step - 1) // step * step


class BlockPool:
    """Free blocks of one device, by capacity, bounded by ``limit`` cached bytes."""

    def __init__(self, ctx: Any, limit: int) -> None:
        self._ctx = ctx
        self.limit = limit
        self._free: dict[int, list[tuple[Any, Any]]] = {}
        self._lock = threading.Lock()
        self._returned: collections.deque[tuple[Any, Any, int]] = collections.deque()
        self.cached = 0
        self.hits = 0
        self.misses = 0

    def _settle(self) -> list[tuple[Any, Any]]:
        """Pool the blocks given back; return those over the limit, to destroy
        outside the lock.  Caller holds the lock."""
        over = []
        ret = self._returned
        while ret:
            ptr, buf, cap = ret.popleft()
            if self.cached + cap <= self.limit:
                self._free.setdefault(cap, []).append((ptr, buf))
                self.cached += cap
            else:
                over.append((ptr, buf))
        return over

    def take(self, nbytes: int) -> tuple[Any, Any, int]:
        """A block of at least ``nbytes``: ``(ptr, aclDataBuffer, capacity)``."""
        cap = size_class(nbytes)
        if cap >= 1 << 64:  # cffi would raise a bare OverflowError converting it to size_t
            raise InvalidParamError(100000, f"{nbytes} bytes overflow size_t", "aclrtMalloc")
        with self._lock:
            over = self._settle() if self._returned else []
            blocks = self._free.get(cap)
            block = blocks.pop() if blocks else None
            if block is not None:
                self.cached -= cap
                self.hits += 1
            else:
                self.misses += 1
        for b in over:
            self._destroy(*b)
        if block is not None:
            return block[0], block[1], cap
        _native.bind_context(self._ctx)
        rc, ptr = acl.malloc_rc(cap)
        if rc:
            msg = _native.recent_error()
            if self.cached or self._returned:  # give the cached blocks back to the device, then try once more
                self.release()
                rc, ptr = acl.malloc_rc(cap)
                msg = _native.recent_error() if rc else ""
            if rc:
                raise error_class(rc)(rc, msg, "aclrtMalloc")
        try:
            buf = acl.create_data_buffer(ptr, cap)
        except BaseException:
            acl.free(ptr)
            raise
        return ptr, buf, cap

    def give(self, ptr: Any, buf: Any, cap: int) -> None:
        """Return a block the device is done with (lock-free: see the module docstring)."""
        self._returned.append((ptr, buf, cap))
        if self._lock.acquire(blocking=False):  # never waits: this thread may hold it already
            try:
                over = self._settle()
            finally:
                self._lock.release()
            for b in over:
                self._destroy(*b)

    def _destroy(self, ptr: Any, buf: Any) -> None:
        acl.destroy_data_buffer(buf)
        _native.bind_context(self._ctx)
        acl.free(ptr)

    def release(self) -> None:
        """Free every cached block."""
        with self._lock:
            blocks = [b for bl in self._free.values() for b in bl]
            self._free.clear()
            self.cached = 0
            while self._returned:  # popleft: a finalizer may append meanwhile
                ptr, buf, _cap = self._returned.popleft()
                blocks.append((ptr, buf))
        for ptr, buf in blocks:
            self._destroy(ptr, buf)


class PinnedPool:
    """Page-locked host staging buffers (``aclrtMallocHost``) for downloads, reused by size class."""

    def __init__(self, limit: int = 64 << 20) -> None:
        self.limit = limit
        self._free: dict[int, list[Any]] = {}
        self._lock = threading.Lock()
        self._returned: collections.deque[tuple[Any, int]] = collections.deque()
        self.cached = 0

    def _settle(self) -> list[Any]:
        """Pool the buffers given back; return those over the limit. Caller holds the lock."""
        over = []
        ret = self._returned
        while ret:
            ptr, cap = ret.popleft()
            if self.cached + cap <= self.limit:
                self._free.setdefault(cap, []).append(ptr)
                self.cached += cap
            else:
                over.append(ptr)
        return over

    def take(self, nbytes: int) -> tuple[Any, int]:
        cap = size_class(nbytes)
        if cap >= 1 << 64:  # cffi would raise a bare OverflowError converting it to size_t
            raise InvalidParamError(100000, f"{nbytes} bytes overflow size_t", "aclrtMalloc")
        with self._lock:
            over = self._settle() if self._returned else []
            blocks = self._free.get(cap)
            ptr = blocks.pop() if blocks else None
            if ptr is not None:
                self.cached -= cap
        for p in over:
            acl.free_host(p)
        if ptr is not None:
            return ptr, cap
        return acl.malloc_host(cap), cap

    def give(self, ptr: Any, cap: int) -> None:
        """Return a buffer (lock-free: see the module docstring)."""
        self._returned.append((ptr, cap))
        if self._lock.acquire(blocking=False):  # never waits: this thread may hold it already
            try:
                over = self._settle()
            finally:
                self._lock.release()
            for p in over:
                acl.free_host(p)

    def release(self) -> None:
        with self._lock:
            ptrs = [p for bl in self._free.values() for p in bl]
            self._free.clear()
            self.cached = 0
            while self._returned:  # popleft: a finalizer may append meanwhile
                ptrs.append(self._returned.popleft()[0])
        for p in ptrs:
            acl.free_host(p)
