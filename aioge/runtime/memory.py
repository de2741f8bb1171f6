"""A caching allocator of device blocks, one per device.

Freed blocks (a tensor's memory once its last reference and every queued
launch using it are gone, i.e. once the device is done with it) are kept by
size class and handed to the next allocation of that class, instead of an
``aclrtMalloc``/``aclrtFree`` pair per tensor -- slow on a real device, and
two runtime calls here.  Each block carries its ``aclDataBuffer`` (sized to
the block's capacity; descriptors give the bytes an op actually uses).

Memory that a compiled plan owns (its arenas, its weights) is *not* kept: the plan marks it
(:meth:`BlockPool.release_block`) and it goes back to the runtime when it is freed, so a
plan closed or evicted (a dynamic-shape model makes one per input shape) leaves no blocks of
sizes nobody asks for again behind.  :meth:`trim` frees cached blocks, oldest first, down to
a number of bytes (a model's close trims the device's pool).

Blocks come back from finalizers (``__del__``), which a garbage collection
can run on any thread at any allocation -- also inside a pool's own critical
section -- so giving back never waits for the pool's lock: the block is
queued (``deque.append`` is atomic) and settled by whoever holds the lock next.
"""

from __future__ import annotations

import collections
import ctypes
import ctypes.util
import functools
import threading
from typing import Any, Generic, TypeVar

from .. import _native
from .._native import acl
from ..errors import InvalidParamError, error_class

__all__ = ("BlockPool", "PinnedPool", "size_class", "trim_host_heap")

B = TypeVar("B")  # what a pool hands out: a device block (ptr, aclDataBuffer) or a host pointer

_SMALL = 1 << 20


def size_class(nbytes: int) -> int:
    """Capacity a request is rounded to: 512 B steps up to 1 MiB, then 1 MiB steps."""
    n = nbytes if type(nbytes) is int else int(nbytes)
    if n < 1:
        n = 1
    step = 512 if n <= _SMALL else _SMALL
    return (n + step - 1) // step * step


class _SizeClassPool(Generic[B]):
    """Free items by capacity (size class), bounded by ``limit`` cached bytes: the take /
    give / settle / release protocol both pools share.  A subclass says how an item of a
    capacity is made (``_allocate``) and unmade (``_destroy``)."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        #: free items by capacity, each with the number it was pooled under (oldest first): the
        #: order trim() frees them in, found when it runs (rare), so taking and giving stay cheap;
        #: a capacity's list stays when emptied (the next give of that size refills it)
        self._free: dict[int, list[tuple[int, B]]] = {}
        self._lock = threading.Lock()
        self._returned: collections.deque[tuple[B, int]] = collections.deque()
        self._seq = 0  # items pooled so far
        #: keys (:meth:`_key`) of items destroyed instead of pooled when given back
        self._transient: set[Any] = set()
        self.cached = 0
        self.hits = 0
        self.misses = 0

    def _allocate(self, cap: int) -> B:
        raise NotImplementedError

    def _destroy(self, item: B) -> None:
        raise NotImplementedError

    def _allocate_many(self, caps: list[int]) -> list[B]:
        """``_allocate`` of each of ``caps``; should one fail, those made are destroyed."""
        out: list[B] = []
        try:
            for cap in caps:
                out.append(self._allocate(cap))
        except BaseException:
            for it in out:
                self._destroy(it)
            raise
        return out

    def _key(self, item: B) -> Any:
        """What marks an item transient (its pointer)."""
        return item

    def _settle(self) -> list[B]:
        """Pool the items given back; return those over the limit (and transient ones), to
        destroy outside the lock.  Caller holds the lock."""
        over = []
        ret = self._returned
        transient = self._transient
        free = self._free
        while ret:
            item, cap = ret.popleft()
            if transient and self._key(item) in transient:
                transient.discard(self._key(item))
                over.append(item)
            elif self.cached + cap <= self.limit:
                self._seq += 1
                items = free.get(cap)
                if items is None:
                    free[cap] = [(self._seq, item)]
                else:
                    items.append((self._seq, item))
                self.cached += cap
            else:
                over.append(item)
        return over

    def trim(self, keep: int = 0) -> int:
        """Free cached items, the longest cached first, until at most ``keep`` bytes stay
        cached; the bytes freed."""
        with self._lock:
            over = self._settle()
            gone = []
            freed = 0
            free = self._free
            while self.cached > keep:  # (then some list holds an item)
                cap = min((c for c in free if free[c]), key=lambda c: free[c][0][0])  # the oldest item's
                gone.append(free[cap].pop(0)[1])
                self.cached -= cap
                freed += cap
        for it in (*over, *gone):
            self._destroy(it)
        return freed

    def _take(self, nbytes: int) -> tuple[B, int]:
        """An item of at least ``nbytes`` and its capacity: a cached one (the newest of its
        class), else a new one."""
        cap = size_class(nbytes)
        if cap >= 1 << 64:  # cffi would raise a bare OverflowError converting it to size_t
            raise InvalidParamError(100000, f"{nbytes} bytes overflow size_t", "aclrtMalloc")
        lock = self._lock
        lock.acquire()  # by hand: `with` on a lock costs about twice acquire() + release(), per tensor
        try:
            over = self._settle() if self._returned else None
            items = self._free.get(cap)
            hit = bool(items)
            if items:
                item = items.pop()[1]
                self.cached -= cap
                self.hits += 1
            else:
                self.misses += 1
        finally:
            lock.release()
        if over:
            for it in over:
                self._destroy(it)
        if hit:
            return item, cap
        return self._allocate(cap), cap

    def _take_many(self, sizes: list[int]) -> list[tuple[B, int]]:
        """``_take`` of each of ``sizes``, as one step: the lock held once for the cached ones, the
        rest made after it.  Should one fail, those taken so far are given back."""
        caps = [size_class(n) for n in sizes]
        if caps and max(caps) >= 1 << 64:
            n = sizes[caps.index(max(caps))]
            raise InvalidParamError(100000, f"{n} bytes overflow size_t", "aclrtMalloc")
        got: list[Any] = [None] * len(caps)
        lock = self._lock
        lock.acquire()
        try:
            over = self._settle() if self._returned else None
            free = self._free
            hits = 0
            for i, cap in enumerate(caps):
                items = free.get(cap)
                if items:
                    got[i] = items.pop()[1]
                    self.cached -= cap
                    hits += 1
            self.hits += hits
            self.misses += len(caps) - hits
        finally:
            lock.release()
        if over:
            for it in over:
                self._destroy(it)
        try:
            miss = [i for i, it in enumerate(got) if it is None]
            if miss:
                for i, it in zip(miss, self._allocate_many([caps[i] for i in miss]), strict=True):
                    got[i] = it
        except BaseException:
            for it, cap in zip(got, caps):
                if it is not None:
                    self._give(it, cap)
            raise
        return list(zip(got, caps))

    def _give(self, item: B, cap: int) -> None:
        """Return an item (lock-free: see the module docstring)."""
        self._returned.append((item, cap))
        lock = self._lock
        if lock.acquire(False):  # never waits: this thread may hold it already
            try:
                over = self._settle()
            finally:
                lock.release()
            for it in over:
                self._destroy(it)

    def release(self) -> None:
        """Free every cached item."""
        with self._lock:
            items = [it for bl in self._free.values() for _, it in bl]
            self._free.clear()
            self.cached = 0
            while self._returned:  # popleft: a finalizer may append meanwhile
                items.append(self._returned.popleft()[0])
        for it in items:
            self._destroy(it)


class BlockPool(_SizeClassPool[tuple[Any, Any]]):
    """Free blocks ``(ptr, aclDataBuffer)`` of one device, by capacity, bounded by ``limit`` cached bytes."""

    def __init__(self, ctx: Any, limit: int) -> None:
        super().__init__(limit)
        self._ctx = ctx

    def take(self, nbytes: int) -> tuple[Any, Any, int]:
        """A block of at least ``nbytes``: ``(ptr, aclDataBuffer, capacity)``."""
        (ptr, buf), cap = self._take(nbytes)
        return ptr, buf, cap

    def take_many(self, sizes: list[int]) -> list[tuple[Any, Any, int]]:
        """:meth:`take` of each of ``sizes``: ``[(ptr, aclDataBuffer, capacity)]``."""
        return [(ptr, buf, cap) for (ptr, buf), cap in self._take_many(sizes)]

    def give(self, ptr: Any, buf: Any, cap: int) -> None:
        """Return a block the device is done with (lock-free: see the module docstring)."""
        self._give((ptr, buf), cap)

    def _key(self, item: tuple[Any, Any]) -> Any:
        return item[0]

    def release_block(self, ptr: Any) -> None:
        """Free the block at ``ptr`` (handed out by this pool) when it comes back, instead of
        pooling it: memory a compiled plan owns (see the module docstring)."""
        self._transient.add(ptr)

    def _allocate(self, cap: int) -> tuple[Any, Any]:
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
        return ptr, buf

    def _allocate_many(self, caps: list[int]) -> list[tuple[Any, Any]]:
        _native.bind_context(self._ctx)
        rc, out = acl.malloc_blocks(caps)  # one call for all while the runtime has the memory
        if rc:  # the rest one by one: _allocate retries after giving the cache back, and raises
            _native.recent_error()  # this failure's message: _allocate's own call reports it again
            try:
                out.extend(self._allocate(cap) for cap in caps[len(out):])
            except BaseException:
                for it in out:
                    self._destroy(it)
                raise
        return out

    def _destroy(self, item: tuple[Any, Any]) -> None:
        ptr, buf = item
        acl.destroy_data_buffer(buf)
        _native.bind_context(self._ctx)
        acl.free(ptr)


class PinnedPool(_SizeClassPool[Any]):
    """Page-locked host staging buffers (``aclrtMallocHost``) for downloads, reused by size class."""

    def __init__(self, limit: int = 64 << 20) -> None:
        super().__init__(limit)

    def take(self, nbytes: int) -> tuple[Any, int]:
        """A buffer of at least ``nbytes``: ``(ptr, capacity)``."""
        return self._take(nbytes)

    def give(self, ptr: Any, cap: int) -> None:
        """Return a buffer (lock-free: see the module docstring)."""
        self._give(ptr, cap)

    def _allocate(self, cap: int) -> Any:
        return acl.malloc_host(cap)

    def _destroy(self, item: Any) -> None:
        acl.free_host(item)


@functools.cache
def _malloc_trim() -> Any:
    """glibc's ``malloc_trim``, or None (another C library)."""
    try:
        fn = ctypes.CDLL(ctypes.util.find_library("c") or None).malloc_trim
    except (OSError, AttributeError):
        return None
    fn.argtypes = [ctypes.c_size_t]
    fn.restype = ctypes.c_int
    return fn


#: the bytes a caller must have freed for :func:`trim_host_heap` to trim: below them, the pages given
#: back are few, and the next allocations fault them back in (zeroed by the kernel) -- a small model
#: closed and loaded again paid more for those faults at its load than its close gave back
TRIM_MIN_BYTES = 1 << 20


def trim_host_heap(freed: int | None = None) -> bool:
    """Give the C heap's free pages back to the system (glibc's ``malloc_trim``).

    Freed memory otherwise stays in the process (the allocator keeps it for later mallocs),
    which on the host runtime, where device memory is host memory, keeps a closed model's
    megabytes counted in its RSS.  Closing a model (or evicting a plan) calls it: ~1 ms with
    a 300 MB heap.  ``freed``: the bytes the caller just freed (a model's arenas, weights and
    packed copies), under :data:`TRIM_MIN_BYTES` nothing is trimmed; None: trim regardless.
    False where nothing was trimmed or the C library has no ``malloc_trim``.
    """
    if freed is not None and freed < TRIM_MIN_BYTES:
        return False
    fn = _malloc_trim()
    if fn is None:
        return False
    fn(0)
    return True
