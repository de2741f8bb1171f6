"""The extreme values the suite throws at the runtime, in one place: the regression tests
(tests/hostrt/test_hostrt_overflow.py, tests/runtime/test_core.py, tests/hostrt/test_hostrt.py)
pin particular ones, and the fuzzers (tests/fuzz) draw from the same tables."""

from __future__ import annotations

I64_MAX, I64_MIN = 2**63 - 1, -(2**63)

# integers at the edges of every width an attr, a shape or an offset goes through
INT_EDGES = (0, -1, 1, 2, 2**31 - 1, 2**31, 2**31 + 1, -(2**31) - 1, 2**32, 2**62, I64_MAX, I64_MIN, I64_MIN + 1)

# offsets and sizes that wrap int64 arithmetic once added to, multiplied or negated
OVERFLOW_EDGES = (I64_MAX, I64_MAX - 1, 2**62, 2**31 + 1, 2**31 - 1, I64_MIN, I64_MIN + 1)

# dimensions past int32 element counts and size_t byte sizes (a descriptor with one is metadata:
# fine to create, refused when it sizes a buffer)
BIG_DIMS = (0, 2**31, 2**40, 2**62)

# shapes whose byte size (2**62 float32s) or element count (2**64) does not fit
OVERSIZED_SHAPES = ((2**62,), (2**31, 2**31, 4))

# every data type the host runtime's kernels are registered for
DTYPES = ("float32", "float16", "bfloat16", "float64", "int8", "uint8", "int16", "int32", "int64", "bool", "uint16")
