"""Fuzzers: hypothesis with a fixed seed and a bounded example count.

``AIOGE_FUZZ_EXAMPLES`` sets the examples per test (CI default below); run by
hand with a large value (and ``AIOGE_FUZZ_RANDOM=1`` for a fresh seed each run)
to fuzz for longer.  The op table of tests/ops (one valid call per registered
op type) is the corpus the op fuzzer mutates, imported from tests.ops.
"""

from __future__ import annotations
