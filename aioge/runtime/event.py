"""User-visible events: record a point in a stream, wait for it, time it."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .._native import acl
from ._resources import Resource
from .scheduler import Completion, deadline

if TYPE_CHECKING:
    from .device import Device
    from .stream import Enqueue, Stream

__all__ = ("Event",)


class Event(Resource):
    """An ACL event recorded on a stream (``Stream.record_event()``).

    ``await event.wait()`` resolves when the work captured by the record has
    run; ``other_stream.wait_event(event)`` orders work across streams on the
    device; ``end.elapsed_ms(start)`` gives device time between two records
    (both recorded with ``timing=True``).

    Cancellation: cancelling a wait returns at once and changes nothing.
    """

    def __init__(self, stream: Stream, handle: Any, comp: Completion) -> None:
        self.stream = stream
        self.device: Device = stream.device
        self._handle = handle
        self._comp = comp
        self._opened()
        self.device.context.events.add(self)

    @classmethod
    def _record(cls, tx: Enqueue, timing: bool) -> Event:
        """Record a new event inside ``tx`` (the stream's enqueue transaction)."""
        handle = acl.create_event(acl.EventFlag.SYNC | (acl.EventFlag.TIME_LINE if timing else 0))
        try:
            acl.record_event(handle, tx.handle)
        except BaseException:
            acl.destroy_event(handle)
            raise
        # the lane waits on a pooled twin recorded right behind it, so the
        # user's handle is never recycled
        comp = tx.commit(None, "event")
        return cls(tx.stream, handle, comp)

    def __repr__(self) -> str:
        state = "closed" if self._closed else ("done" if self._comp.done else "pending")
        return f"<aioge.Event of stream {self.stream.id} device={self.device.id} {state}>"

    @property
    def done(self) -> bool:
        """True once the recorded work has run (asks the runtime, never waits)."""
        return self._comp.done or self.query()

    def query(self) -> bool:
        """Ask the runtime (``aclrtQueryEventStatus``) whether the event completed."""
        self._check_open()
        self.device.context.bind()
        return acl.query_event_done(self._handle)

    async def wait(self, *, timeout: float | None = None) -> None:
        """Wait until the captured work has run (raising its error, if any).

        Raises:
            EventSyncTimeoutError: not complete within ``timeout`` seconds (a ``TimeoutError``).
        """
        self._check_open()
        with deadline(timeout, f"wait() of an event of {self.stream._describe()}", event=True):
            await self._comp.wait()

    def __await__(self) -> Any:
        return self.wait().__await__()

    def elapsed_ms(self, start: Event) -> float:
        """Device time in ms from ``start`` to this event (both complete, both ``timing=True``)."""
        self._check_open()
        start._check_open()
        self.device.context.bind()
        return acl.elapsed_ms(start._handle, self._handle)

    def _close(self) -> None:
        if not self.device.closed:
            acl.destroy_event(self._handle)

    _gc_release = _close
