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
