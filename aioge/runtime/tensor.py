"""Device tensors.

A :class:`Tensor` is device memory with a shape and a dtype, ordered by the
stream that last wrote it: awaiting it waits for that launch, reading it on
another stream makes that stream wait for it on the device.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from .. import dtypes
from ..errors import ClosedResourceError, InvalidParamError
from .scheduler import Completion

if TYPE_CHECKING:
    from .device import Device
    from .scheduler import Lane
    from .stream import Stream

__all__ = ("Tensor", "TensorSpec")

_MAX_BYTES = (1 << 63) - 1  # the runtime counts elements and bytes in int64


class TensorSpec:
    """Shape and dtype of a tensor to allocate (an output of :func:`aioge.op`).

    Example:
        >>> aioge.TensorSpec((2, 3), "float32")
        TensorSpec((2, 3), float32)
    """

    __slots__ = ("dtype", "shape")

    def __init__(self, shape: Sequence[int], dtype: dtypes.DTypeLike = "float32") -> None:
        self.shape = _shape(shape)
        self.dtype = dtypes.normalize(dtype)

    @property
    def nbytes(self) -> int:
        return math.prod(self.shape) * self.dtype.itemsize

    def __repr__(self) -> str:
        return f"TensorSpec({self.shape}, {self.dtype})"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, TensorSpec) and (self.shape, self.dtype) == (other.shape, other.dtype)

    def __hash__(self) -> int:
        return hash((self.shape, self.dtype))


def _shape(shape: Sequence[int] | int) -> tuple[int, ...]:
    if isinstance(shape, (int, np.integer)):
        shape = (int(shape),)
    out = tuple(int(d) for d in shape)
    if any(d < 0 for d in out):
        raise ValueError(f"shape {out} has a negative dim")
    return out


class DeviceMemory:
    """One ``aclrtMalloc`` block and its ``aclDataBuffer``.

    Freed when the last reference goes: the tensors' (several tensors may
    view one block, e.g. after a reshape), and those of queued launches that
    use it (their completions keep it alive until they ran).  Ordering state
    lives here, so every view sees the same last writer and readers.
    """

    __slots__ = ("__weakref__", "buffer", "cap", "context", "device", "nbytes", "ptr", "readers", "stream", "writer")

    def __init__(self, device: Device, nbytes: int, stream: Stream) -> None:
        ctx = self.context = device.context
        ctx.check_open()
        self.ptr, self.buffer, self.cap = ctx.pool.take(nbytes)
        self.nbytes = nbytes
        self.device = device
        #: stream of the last write (or of the allocation)
        self.stream = stream
        self.writer: Completion | None = None
        #: latest read per stream (by its lane, which does not keep the stream
        #: alive): a write on another stream waits for them (write-after-read)
        self.readers: dict[Lane, Completion] = {}
        ctx.memory.add(self)

    def home(self) -> Stream:
        """The stream of the last write, or the device's default stream once that one closed."""
        s = self.stream
        return s if not s.closed else self.device.default_stream

    def free(self) -> None:
        """Give the block back (to the device's pool, or to the runtime); idempotent."""
        ptr, self.ptr = self.ptr, None
        if ptr is None:
            return
        ctx = self.context
        ctx.memory.discard(self)
        if not ctx.closed:  # once closed, the device released everything already
            ctx.pool.give(ptr, self.buffer, self.cap)

    def __del__(self) -> None:
        try:
            self.free()
        except Exception:
            pass


class Tensor:
    """A device-resident tensor.

    Created by :meth:`Stream.upload`, :func:`aioge.op`, the ``aioge.ops``
    functions and model execution -- never directly.

    Attributes:
        shape: tuple of dims.
        dtype: numpy dtype.
        stream: the stream of the launch that last wrote it.  Once that stream
            is closed, launches that pick a stream from the tensor (``aioge.ops``,
            ``numpy()``) use the device's default stream instead.

    Awaiting a tensor (``await t`` or ``await t.ready()``) waits until the
    launch that produced it has run on the device and raises that launch's
    error, if any.

    Lifecycle: dropping the last reference frees the memory once queued work
    using it has run; ``close()`` drops it early and makes later use raise
    :class:`~aioge.ClosedResourceError`.
    """

    __slots__ = ("__weakref__", "_mem", "dtype", "shape")

    def __init__(self, mem: DeviceMemory, shape: tuple[int, ...], dtype: np.dtype) -> None:
        self._mem: DeviceMemory | None = mem
        self.shape = shape
        self.dtype = dtype

    @classmethod
    def _empty(cls, stream: Stream, shape: tuple[int, ...], dtype: np.dtype) -> Tensor:
        nbytes = math.prod(shape) * dtype.itemsize
        if nbytes > _MAX_BYTES:  # refuse before aclrtMalloc, with the shape in the message
            msg = f"shape {shape} x itemsize {dtype.itemsize} overflows int64 ({nbytes} bytes)"
            raise InvalidParamError(100000, msg, "Tensor")
        return cls(DeviceMemory(stream.device, nbytes, stream), shape, dtype)

    def reshape(self, *shape: Any) -> Tensor:
        """A view with another shape of the same memory (no device work).

        One dim may be -1.  The view shares ordering with this tensor.
        """
        if len(shape) == 1 and not isinstance(shape[0], (int, np.integer)):
            shape = tuple(shape[0])
        dims = list(int(d) for d in shape)
        if dims.count(-1) > 1:
            raise ValueError("only one dim may be -1")
        if -1 in dims:
            known = math.prod(d for d in dims if d != -1)
            if known == 0 or self.size % known:
                raise ValueError(f"cannot reshape {self.shape} to {tuple(dims)}")
            dims[dims.index(-1)] = self.size // known
        if math.prod(dims) != self.size or any(d < 0 for d in dims):
            raise ValueError(f"cannot reshape {self.shape} to {tuple(dims)}")
        return Tensor(self._memory(), tuple(dims), self.dtype)

    # ---- properties ----
    @property
    def nbytes(self) -> int:
        return math.prod(self.shape) * self.dtype.itemsize

    @property
    def size(self) -> int:
        return math.prod(self.shape)

    @property
    def ndim(self) -> int:
        return len(self.shape)

    @property
    def stream(self) -> Stream:
        """The stream of the launch that last wrote it."""
        return self._memory().stream

    @property
    def device(self) -> Device:
        return self._memory().device

    @property
    def launch(self) -> Completion | None:
        """The :class:`~aioge.Completion` of the launch that last wrote it (None if never written)."""
        return self._writer

    @property
    def _writer(self) -> Completion | None:
        m = self._mem
        return None if m is None else m.writer

    @property
    def spec(self) -> TensorSpec:
        return TensorSpec(self.shape, self.dtype)

    @property
    def closed(self) -> bool:
        """True after ``close()``, and once its device closed (its memory is gone then)."""
        m = self._mem
        return m is None or m.ptr is None

    def _memory(self) -> DeviceMemory:
        m = self._mem
        if m is None or m.ptr is None:
            raise ClosedResourceError("tensor is closed" if m is None else "the tensor's device is closed")
        return m

    def __repr__(self) -> str:
        state = "closed" if self.closed else ("ready" if self.is_ready() else "pending")
        return f"<aioge.Tensor shape={self.shape} dtype={self.dtype} {state}>"

    def __array__(self, dtype: Any = None, copy: Any = None) -> np.ndarray:
        """Refused: the data is on the device (numpy would make a 0-d object array of it)."""
        raise TypeError("an aioge.Tensor is device memory: copy it to the host with `await tensor.numpy()`")

    # ---- readiness ----
    def is_ready(self) -> bool:
        """True when the launch that wrote it has run (asks the runtime, never waits)."""
        w = self._writer
        if w is None or w.done:
            return True
        w.lane.poll()
        return w.done

    async def ready(self) -> Tensor:
        """Wait until the producing launch has run; return ``self``.

        Raises:
            AclError: the producing launch failed on the device.

        Cancellation: returns control at once; the launch still runs and its
        buffers stay alive until it has.
        """
        w = self._writer
        if w is not None:
            await w.wait()
        return self

    def __await__(self) -> Any:
        return self.ready().__await__()

    async def numpy(self, *, timeout: float | None = None, stream: Stream | None = None) -> np.ndarray:
        """Copy to a new host array, in stream order.

        The copy is enqueued on the tensor's stream (or ``stream``, which then
        waits for the tensor on the device) behind the launch that wrote it,
        into page-locked staging memory; the loop is never blocked.

        Args:
            timeout: seconds to wait before raising :class:`~aioge.StreamSyncTimeoutError`.
            stream: the stream to copy on (e.g. a dedicated copy-out stream).

        Raises:
            AclError: the producing launch (or the copy) failed.
            StreamSyncTimeoutError: the copy did not complete within ``timeout`` (a ``TimeoutError``).

        Cancellation: returns control at once; the staging memory is released
        once the copy has run.
        """
        s = stream if stream is not None else self._memory().home()
        return await s._download(self, timeout)

    def close(self) -> None:
        """Drop this tensor's memory reference now (idempotent)."""
        self._mem = None

    async def aclose(self) -> None:
        self.close()

    async def __aenter__(self) -> Tensor:
        return self

    async def __aexit__(self, *exc: object) -> None:
        self.close()
