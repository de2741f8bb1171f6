"""``python -m aioge``: the ``aioge`` command (see :mod:`aioge.cli`)."""

from __future__ import annotations

from .cli import main

if __name__ == "__main__":
    raise SystemExit(main())
