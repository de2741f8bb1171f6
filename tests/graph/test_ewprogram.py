"""Elementwise math and the _FusedElementwise program format."""

from __future__ import annotations

import math

import numpy as np
import pytest

from aioge.graph.ewprogram import (
    BINARY,
    OPCODES,
    UNARY,
    apply_activation,
    encode_program,
    erf,
    run_program,
    validate_program,
)


def test_erf_matches_math_erf() -> None:
    xs = np.concatenate([np.linspace(-7, 7, 2001), [0.0, 1e-12, -1e-9, 2.4999, 2.5, 2.5001, 30, -30]])
    want = np.array([math.erf(v) for v in xs])
    got = erf(xs)
    np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-15)
    assert erf(np.array([np.inf, -np.inf], np.float64)).tolist() == [1.0, -1.0]
    assert np.isnan(erf(np.array([np.nan]))[0])
    assert erf(np.ones(3, np.float32)).dtype == np.float32


def test_opcodes_are_unique_and_cover_unary_and_binary() -> None:
    assert set(OPCODES) == set(UNARY) | set(BINARY)
    assert sorted(OPCODES.values()) == list(range(len(OPCODES)))


def test_run_program_broadcasts_registers() -> None:
    x = np.arange(6, dtype=np.float32).reshape(2, 3) - 2
    s = np.array([2.0], np.float32)
    prog = [("Mul", (0, 1), ()), ("Clip", (2,), (-1.0, 5.0)), ("Neg", (3,), ())]
    y = run_program(prog, [x, s], (2, 3), np.dtype(np.float32))
    np.testing.assert_array_equal(y, -np.clip(x * 2, -1, 5))
    assert y.dtype == np.float32 and y.flags.writeable


@pytest.mark.parametrize(
    ("prog", "match"),
    [
        ([], "empty"),
        ([("Nope", (0,), ())], "unknown opcode"),
        ([("Add", (0,), ())], "needs 2 srcs"),
        ([("Relu", (1,), ())], "before it is written"),
        ([("LeakyRelu", (0,), ())], "1 params"),
        ([("Relu", (0,))], "not \\(opcode"),
    ],
)
def test_validate_program_errors(prog: list, match: str) -> None:
    with pytest.raises(ValueError, match=match):
        validate_program(prog, 1)


def test_encode_program_layout() -> None:
    prog = [("Add", (0, 1), ()), ("Selu", (2,), (1.5, 2.0)), ("Clip", (3,), (-math.inf, 6.0))]
    codes, params = encode_program(prog)
    assert codes.tolist() == [
        [OPCODES["Add"], 0, 1, 0],
        [OPCODES["Selu"], 2, -1, 2],
        [OPCODES["Clip"], 3, -1, 2],
    ]
    assert params.tolist() == [[0.0, 0.0], [1.5, 2.0], [-math.inf, 6.0]]


def test_activations() -> None:
    y = np.array([-2.0, 0.5, 8.0], np.float32)
    assert apply_activation(y, {"activation": "none"}) is y
    np.testing.assert_array_equal(apply_activation(y, {"activation": "Relu"}), [0, 0.5, 8])
    np.testing.assert_allclose(apply_activation(y, {"activation": "LeakyRelu", "alpha": 0.5}), [-1, 0.5, 8])
    np.testing.assert_array_equal(
        apply_activation(y, {"activation": "Clip", "min": 0.0, "max": 6.0}), [0, 0.5, 6]
    )
    np.testing.assert_allclose(apply_activation(y, {"activation": "Swish"}), y / (1 + np.exp(-y)), rtol=1e-6)
    np.testing.assert_allclose(apply_activation(y, {"activation": "HardSwish"}), [-1 / 3, 0.5 * 7 / 12, 8])
    with pytest.raises(ValueError):
        apply_activation(y, {"activation": "Mish"})
