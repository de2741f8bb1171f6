"""Fuzzers (issue 9): hypothesis with a fixed seed and a bounded example count.

``AIOGE_FUZZ_EXAMPLES`` sets the examples per test (CI default below); run by
hand with a large value (and ``AIOGE_FUZZ_RANDOM=1`` for a fresh seed each run)
to fuzz for longer.  The op table of tests/ops (one valid call per registered
op type) is the corpus the op fuzzer mutates, so tests/ops goes on sys.path.
"""

from __future__ import annotations

import os
import sys

sys.path.insert(0, os.path.dirname(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(__file__)), "ops"))
