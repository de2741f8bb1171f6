"""One lifecycle for every object that owns a runtime handle.

* a synchronous factory creates it; it is used as ``async with`` (a plain
  ``with`` is refused with a ``TypeError`` saying so);
* ``close()`` and ``aclose()`` are idempotent; ``aclose()`` drains pending
  work gracefully and falls back to ``close()`` on error or cancellation,
  then re-raises;
* using it after close raises :class:`~aioge.ClosedResourceError`;
* garbage collection of an open resource emits a ``ResourceWarning`` and
  releases what can be released safely.  (Tensors opt out of the warning:
  dropping a tensor is the normal way to free it, as with numpy.)
* at interpreter exit, an ``atexit`` hook closes the roots still open (the
  devices, which close what they own, in order), with a ``ResourceWarning``
  each: the process exits normally, and nothing starts a thread while the
  interpreter finalises (it could never run, and joining it would hang).
"""

from __future__ import annotations

import atexit
import sys
import time
import warnings
import weakref
from types import TracebackType
from typing import Any

from .._native import env_number
from ..errors import ClosedResourceError

__all__ = ("Resource", "close_at_exit", "finalizing")

#: seconds the exit hook waits, in all, for work still running on the devices
#: (``AIOGE_EXIT_TIMEOUT``, default 10); what runs longer is left to the process exit
EXIT_TIMEOUT = env_number("AIOGE_EXIT_TIMEOUT", 10.0, minimum=0)
_at_exit: dict[int, weakref.ref[Resource]] = {}  # insertion order: the order they were opened


def finalizing() -> bool:
    """True while the interpreter shuts down: no new thread may be started."""
    return sys.is_finalizing() or _exiting


_exiting = False


def close_at_exit(res: Resource) -> None:
    """Have the exit hook close ``res`` if it is still open then (held weakly)."""
    key = id(res)
    _at_exit[key] = weakref.ref(res, lambda _r: _at_exit.pop(key, None))


def _close_all_at_exit() -> None:
    """The ``atexit`` hook: close every root still open, newest first, waiting
    at most :data:`EXIT_TIMEOUT` seconds in all for work still running."""
    global _exiting
    _exiting = True
    deadline = time.monotonic() + EXIT_TIMEOUT
    for ref in reversed(list(_at_exit.values())):
        res = ref()
        if res is None or res.closed:
            continue
        try:
            what = res._close_at_exit(deadline)
            warnings.warn(f"unclosed {res._describe()} at interpreter exit{what}: aioge closed it "
                          "(close it with `async with` or `aclose()`)", ResourceWarning, stacklevel=1)  # fmt: skip
        except Exception as e:  # never turn the exit into a traceback
            warnings.warn(f"unclosed {res._describe()} at interpreter exit: closing it failed: {e!r}",
                          ResourceWarning, stacklevel=1)  # fmt: skip
    _at_exit.clear()


atexit.register(_close_all_at_exit)


class Resource:
    """Base class: subclasses implement ``_close()`` and optionally ``_drain()``."""

    _closed: bool = True  # until __init__ of the subclass calls _opened()
    _warn_on_gc: bool = True

    def _opened(self) -> None:
        self._closed = False

    @property
    def closed(self) -> bool:
        """True once ``close()``/``aclose()`` has run."""
        return self._closed

    def _check_open(self) -> None:
        if self._closed:
            raise ClosedResourceError(f"{self._describe()} is closed")

    def _describe(self) -> str:
        return type(self).__name__

    # --- subclass hooks ---
    def _close(self) -> None:
        """Release the handles now (may raise BusyResourceError if work is in flight)."""

    async def _drain(self) -> None:
        """Wait for pending work so that ``_close()`` can succeed."""

    def _gc_release(self) -> None:
        """Best-effort release from ``__del__`` (must never block or raise)."""

    def _close_at_exit(self, deadline: float) -> str:
        """Close from the exit hook, waiting until ``deadline`` at most; say what was closed with it."""
        self._force_close()
        return ""

    # --- public lifecycle ---
    def close(self) -> None:
        """Release the resource now.  Idempotent."""
        if self._closed:
            return
        self._close()
        self._closed = True

    async def aclose(self) -> None:
        """Wait for pending work, then release.  Idempotent.

        Cancellation: if cancelled (or the drain fails), the resource is
        closed as far as that is safe without waiting, and the exception
        propagates.
        """
        if self._closed:
            return
        try:
            await self._drain()
        except BaseException:
            self._force_close()
            raise
        self.close()

    def _force_close(self) -> None:
        try:
            self.close()
        except Exception:
            self._gc_release()
            self._closed = True

    def __enter__(self) -> Any:
        self._force_close()  # the `with` statement drops it: release it now rather than leak it
        raise TypeError(f"{type(self).__name__} is an async context manager: use `async with`, "
                        "or call `close()` or `await obj.aclose()`")  # fmt: skip

    def __exit__(self, *exc: object) -> None:  # pragma: no cover (__enter__ refuses)
        pass

    async def __aenter__(self) -> Any:
        self._check_open()
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.aclose()

    def __del__(self) -> None:
        if getattr(self, "_closed", True):
            return
        try:
            if self._warn_on_gc:
                warnings.warn(f"unclosed {self._describe()}", ResourceWarning, stacklevel=2, source=self)
        finally:  # released even when warnings are errors
            try:
                self._gc_release()
            except Exception:
                pass
