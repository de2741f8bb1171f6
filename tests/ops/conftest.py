"""Operator-library tests: numerics on asyncio (debug mode) only.

The scheduler suite runs every backend; here the subject is the kernels, so
one event loop is enough.  The helpers of this directory (``opsutil``) are
put on sys.path.
"""

from __future__ import annotations

import os
import sys

import pytest

sys.path.insert(0, os.path.dirname(__file__))


@pytest.fixture
def anyio_backend():
    return ("asyncio", {"debug": True})
