"""Progress bars for work that takes over a second (tqdm, from the ``cli`` extra).

Bars go to stderr, appear only after a second (``delay``) and only when
stdout is a terminal: piped or redirected output (``--json > out.json``, CI
logs) never gets one.  Without tqdm installed there is simply no bar.
"""

from __future__ import annotations

import sys
import threading
from types import TracebackType
from typing import Any

__all__ = ("Bar", "enabled")

DELAY_S = 1.0


def enabled(force: bool | None = None) -> bool:
    """Whether bars are shown: ``force`` if given, else when stdout and stderr are terminals."""
    if force is not None:
        return force
    try:
        return sys.stdout.isatty() and sys.stderr.isatty()
    except (AttributeError, ValueError):
        return False


class Bar:
    """``with Bar(total, "bench") as bar: bar.update(1)``; a no-op when disabled or without tqdm.

    Updates may come from any thread (the compile runs on its own).
    """

    def __init__(self, total: float | None, desc: str, *, unit: str = "it", show: bool | None = None) -> None:
        self._bar: Any = None
        self._lock = threading.Lock()
        if not enabled(show):
            return
        try:
            from tqdm import tqdm  # type: ignore[import-untyped,unused-ignore]
        except ImportError:
            return
        fmt = None if unit != "s" else "{desc}: {percentage:3.0f}%|{bar}| {n:.1f}/{total:.1f} s"
        self._bar = tqdm(total=total, desc=desc, unit=unit, delay=DELAY_S, leave=False, file=sys.stderr,
                         dynamic_ncols=True, bar_format=fmt)  # fmt: skip

    def update(self, n: float = 1) -> None:
        if self._bar is not None:
            with self._lock:
                self._bar.update(n)

    def set(self, value: float, *, total: float | None = None, desc: str | None = None) -> None:
        """Move to ``value`` (and change the total or the label)."""
        if self._bar is None:
            return
        with self._lock:
            if total is not None:
                self._bar.total = total
            if desc is not None:
                self._bar.set_description_str(desc, refresh=False)
            self._bar.update(value - self._bar.n)

    def close(self) -> None:
        if self._bar is not None:
            with self._lock:
                self._bar.close()
                self._bar = None

    def __enter__(self) -> Bar:
        return self

    def __exit__(self, et: type[BaseException] | None, e: BaseException | None, tb: TracebackType | None) -> None:
        self.close()
