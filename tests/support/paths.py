"""Where the checkout is (tests run subprocesses and read files relative to it)."""

from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
TESTS = ROOT / "tests"
