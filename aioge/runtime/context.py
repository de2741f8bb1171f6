"""The per-device state, in one owner: :class:`DeviceContext`.

A :class:`~aioge.Device` is the public façade; what the runtime keeps per
opened device lives here, and every other module reaches it as
``device.context`` (streams, events, tensors, models), never through the
device's private attributes:

* the ACL context handle and :meth:`DeviceContext.bind` (``aclrtSetCurrentContext``);
* the host objects launches reuse (:class:`~aioge.runtime.descs.LaunchCache`);
* the memory pools (device blocks, pinned staging buffers);
* the live sets closed or freed with the device: streams, events, device
  memory, compiled models, compiles in flight;
* closed-ness (:attr:`DeviceContext.closed`, :meth:`DeviceContext.check_open`);
* the process-wide ``aclInit`` / ``aclFinalize`` reference count.
"""

from __future__ import annotations

import threading
import weakref
from typing import Any

from .. import _native
from .._native import acl
from ..errors import ClosedResourceError
from .descs import LaunchCache
from .memory import BlockPool, PinnedPool

__all__ = ("DeviceContext",)

_rt_lock = threading.Lock()
_rt_users = 0


def _runtime_acquire() -> None:
    global _rt_users
    with _rt_lock:
        if _rt_users == 0:
            acl.init()
        _rt_users += 1


def _runtime_release() -> None:
    global _rt_users
    with _rt_lock:
        _rt_users -= 1
        if _rt_users == 0:
            acl.finalize()
            _native.forget_context()


class DeviceContext:
    """One opened device's state: ``aclrtSetDevice`` + an explicit ACL context.

    Made by :class:`~aioge.Device` (which adds the public API and the
    close-in-order lifecycle); :meth:`release` gives everything back.

    Attributes:
        id: the device id.
        handle: the ``aclrtContext``.
        cache: descs, attrs and prepared launches reused by launches on this device.
        pool: freed device blocks kept for reuse (at most a quarter of the device's memory).
        pinned: page-locked host staging buffers.
        streams, events, memory, models: what is closed (or freed) with the device,
            held weakly (a dropped object releases itself).
        compiles: compiles in flight, by (graph id, options): concurrent callers share them.
        closed: True once released (or abandoned at interpreter exit); memory
            finalizers then skip ``aclrtFree``.
    """

    def __init__(self, device_id: int, describe: str) -> None:
        self.id = device_id
        self._describe = describe
        _runtime_acquire()
        try:
            acl.set_device(device_id)
        except BaseException:
            _runtime_release()
            raise
        try:
            self.handle: Any = acl.create_context(device_id)
        except BaseException:
            acl.reset_device(device_id)
            _runtime_release()
            raise
        _native.forget_context()
        _native.bind_context(self.handle)
        self.closed = False
        # typed loosely (Any): the owners of these objects live above this module
        self.streams: weakref.WeakSet[Any] = weakref.WeakSet()
        self.events: weakref.WeakSet[Any] = weakref.WeakSet()
        #: live device memory by id (a plain dict of weak references, cheaper than a WeakSet per
        #: tensor: each block is added when allocated and removed when freed, which its
        #: finalizer does)
        self.memory: dict[int, weakref.ref[Any]] = {}
        self.models: weakref.WeakSet[Any] = weakref.WeakSet()
        self.compiles: dict[Any, Any] = {}  # key -> the compile's ThreadJob (device.py types it)
        self.cache = LaunchCache()
        info = acl.mem_info(acl.MemAttr.HBM)
        self.pool = BlockPool(self.handle, info[1] // 4 if info is not None else 1 << 30)
        self.pinned = PinnedPool()

    def bind(self) -> None:
        """Make this context current on the calling thread (a no-op when it already is)."""
        _native.bind_context(self.handle)

    def check_open(self) -> None:
        """Raise :class:`~aioge.ClosedResourceError` once the device is closed."""
        if self.closed:
            raise ClosedResourceError(f"{self._describe} is closed")

    def release(self) -> None:
        """Free the device memory still held, empty the pools and caches, destroy the
        context, reset the device and drop this device's ``aclInit`` reference."""
        self.bind()
        for ref in list(self.memory.values()):
            m = ref()
            if m is not None:
                m.free()
        self.pool.release()
        self.pinned.release()
        self.cache.clear()
        acl.destroy_context(self.handle)
        acl.reset_device(self.id)
        _native.recent_error()
        _native.forget_context(self.handle)
        self.closed = True  # before releasing ACL: memory finalizers now skip aclrtFree
        _runtime_release()
