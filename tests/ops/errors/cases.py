"""The whole bad-descriptor table: one valid call per registered op type and its spoilt
variants (test_registry keeps it complete; the fuzzers mutate it)."""

from __future__ import annotations

from tests.ops.errors import test_elementwise, test_matrix, test_nn, test_onnx_ops, test_reduce, test_shape

CASES = [
    *test_elementwise.CASES,
    *test_matrix.CASES,
    *test_reduce.CASES,
    *test_nn.CASES,
    *test_shape.CASES,
    *test_onnx_ops.CASES,
]
