"""A device on a private event-loop thread, for synchronous callers (the torch.compile backend).

Dynamo calls compiled graphs synchronously, from any thread, possibly from
inside a running event loop; aioge's API is async.  One process-wide device
lives on an anyio blocking portal (an event loop in its own thread): compiles
and executions are submitted to it and waited for.  ``close()`` closes the
device and stops the thread; the next use opens a new one, and callers that
hold models of the old one see a new ``generation`` and recompile.
"""

from __future__ import annotations

import atexit
import functools
import threading
from collections.abc import Mapping
from typing import Any

import numpy as np

from ..graph.ir import Graph

__all__ = ("HostRuntime", "runtime", "close_runtime")


class HostRuntime:
    """The process's synchronous front door to one aioge device."""

    def __init__(self, device_id: int = 0) -> None:
        self.device_id = device_id
        self.generation = 0
        self._lock = threading.Lock()
        self._cm: Any = None
        self._portal: Any = None
        self._dev: Any = None

    def _ensure(self) -> tuple[Any, Any]:
        with self._lock:
            if self._dev is None:
                from anyio.from_thread import start_blocking_portal

                from ..runtime.device import open_device

                cm = start_blocking_portal()
                portal = cm.__enter__()

                async def _open() -> Any:
                    return open_device(self.device_id)

                try:
                    self._dev = portal.call(_open)
                except BaseException:
                    cm.__exit__(None, None, None)
                    raise
                self._cm, self._portal = cm, portal
                self.generation += 1
            return self._portal, self._dev

    def compile(self, graph: Graph, **options: Any) -> tuple[Any, int]:
        """Compile ``graph`` on the device; the model and the runtime generation it belongs to."""
        portal, dev = self._ensure()
        model = portal.call(functools.partial(dev.compile, graph, **options))
        return model, self.generation

    def execute(self, model: Any, feeds: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
        """Run one execution and wait for its outputs (numpy arrays)."""
        portal, _ = self._ensure()
        out: dict[str, np.ndarray] = portal.call(model.execute, feeds)
        return out

    def release(self, model: Any) -> None:
        """Close a model of the current generation (models of closed devices are gone already)."""
        with self._lock:
            portal = self._portal
        if portal is not None and not model.closed:
            portal.call(model.aclose)

    def release_soon(self, model: Any, generation: int) -> None:
        """Close a model without waiting (from a finalizer: never blocks, never raises)."""
        with self._lock:
            portal = self._portal if generation == self.generation else None
        if portal is not None and not model.closed:
            try:
                portal.start_task_soon(model.aclose)
            except Exception:
                pass  # the loop is stopping: the device closes the model

    def close(self) -> None:
        """Close the device (and its models) and stop the loop thread."""
        with self._lock:
            cm, portal, dev = self._cm, self._portal, self._dev
            self._cm = self._portal = self._dev = None
        if dev is not None:
            try:
                portal.call(dev.aclose)
            finally:
                cm.__exit__(None, None, None)


_RUNTIME = HostRuntime()


def runtime() -> HostRuntime:
    """The process-wide runtime the torch.compile backend runs on."""
    return _RUNTIME


def close_runtime() -> None:
    """Close the torch.compile backend's device (compiled functions reopen it when next called)."""
    _RUNTIME.close()


atexit.register(close_runtime)
