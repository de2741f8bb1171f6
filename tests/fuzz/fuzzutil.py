"""Settings and invariants shared by the fuzzers."""

from __future__ import annotations

import os

from hypothesis import HealthCheck, settings

EXAMPLES = int(os.environ.get("AIOGE_FUZZ_EXAMPLES", "6"))

FUZZ = settings(
    deadline=None,
    derandomize=os.environ.get("AIOGE_FUZZ_RANDOM", "") != "1",
    database=None,
    max_examples=EXAMPLES,
    suppress_health_check=list(HealthCheck),
)


def fuzz(scale: float = 1) -> settings:
    """The fuzz settings with ``scale`` times the example count."""
    return settings(FUZZ, max_examples=max(1, int(EXAMPLES * scale)))


# integers at the edges of every width an attr, a shape or an offset goes through
I64_MAX, I64_MIN = 2**63 - 1, -(2**63)
INT_EDGES = (0, -1, 1, 2, 2**31 - 1, 2**31, 2**31 + 1, -(2**31) - 1, 2**32, 2**62, I64_MAX, I64_MIN, I64_MIN + 1)
