"""Pow by a broadcast constant exponent (x ** 2, x ** 3, x ** 0.5, x ** -1 ...): the kernels' short
forms agree with numpy's power (libm pow) within an ulp or two, and exactly on its special values
(NaN, +-inf, +-0, negative bases); other exponents and a per-element exponent still run pow."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import aioge
from aioge import ops
from aioge.graph import Graph
from tests.ops.opsutil import few, up

pytestmark = pytest.mark.anyio

SHORT = [2.0, 3.0, 1.0, 0.0, 0.5, -0.5, -1.0, -2.0]
OTHER = [1.5, -3.0, 4.0, 2.5]
SPECIAL = [0.0, -0.0, np.inf, -np.inf, np.nan, -1.0, -2.5, 1.0, 1e-30, -1e-30, 1e30, 3e38, 1e-45]


def ulps_apart(got: np.ndarray, want: np.ndarray) -> np.ndarray:
    """Ulp distance of same-signed finite values; specials must be equal bit patterns (NaN: any NaN)."""
    it = np.int32 if got.dtype == np.float32 else np.int64
    g, w = got.view(it).astype(np.int64), want.view(it).astype(np.int64)
    return np.abs(g - w)


def assert_pow_like_numpy(got: np.ndarray, x: np.ndarray, y: float, ulps: int) -> None:
    # an exponent array: numpy's scalar 0.5 takes sqrt (sqrt(-inf) = NaN, sqrt(-0) = -0), not pow
    want = np.power(x, np.full_like(x, y))
    assert got.dtype == want.dtype and got.shape == want.shape
    np.testing.assert_array_equal(np.isnan(got), np.isnan(want))
    ok = ~np.isnan(want)
    np.testing.assert_array_equal(np.signbit(got[ok]), np.signbit(want[ok]))
    np.testing.assert_array_equal(np.isinf(got[ok]), np.isinf(want[ok]))
    special = ok & (np.isinf(want) | (want == 0) | ~np.isfinite(x))
    np.testing.assert_array_equal(got[special], want[special])
    assert int(ulps_apart(got[ok], want[ok]).max(initial=0)) <= ulps


def bases(rng: np.random.Generator, n: int, dt: np.dtype) -> np.ndarray:
    x = rng.standard_normal(n) * np.exp(rng.uniform(-20, 20, n))
    x[rng.integers(0, n, n // 8)] = rng.choice(SPECIAL, n // 8)
    with np.errstate(over="ignore"):
        return x.astype(dt)


@pytest.mark.parametrize("y", SHORT + OTHER)
@few(20)
@given(
    n=st.integers(1, 300), dt=st.sampled_from([np.dtype(np.float32), np.dtype(np.float64)]), seed=st.integers(0, 2**16)
)
async def test_pow_by_a_constant_is_numpys(stream, y, n, dt, seed):
    x = bases(np.random.default_rng(seed), n, dt)
    with np.errstate(all="ignore"):
        got = await ops.pow(up(stream, x), up(stream, np.array(y, dt))).numpy()
        assert_pow_like_numpy(got, x, y, ulps=1 if dt == np.float32 else 2)


@pytest.mark.parametrize("y", SHORT)
async def test_every_special_base(stream, y):
    x = np.array(SPECIAL * 3, np.float32).reshape(3, -1)  # a (1, 1) exponent broadcasts per row
    with np.errstate(all="ignore"):
        got = await ops.pow(up(stream, x), up(stream, np.full((1, 1), y, np.float32))).numpy()
        assert_pow_like_numpy(got, x, y, ulps=1)


async def test_an_exponent_per_element_still_runs_pow(stream):
    x = np.array([-8.0, 4.0, 2.0, -0.0, 9.0], np.float32)
    y = np.array([3.0, 0.5, -1.0, 0.5, 2.0], np.float32)
    got = await ops.pow(up(stream, x), up(stream, y)).numpy()
    np.testing.assert_array_equal(got, np.power(x, y))


async def test_half_types_round_once(stream):
    x = np.linspace(-3, 3, 50).astype(np.float16)
    got = await ops.pow(up(stream, x), up(stream, np.array(3.0, np.float16))).numpy()
    np.testing.assert_array_equal(got, np.power(x.astype(np.float64), 3).astype(np.float16))


@pytest.mark.parametrize("y", SHORT + OTHER)
async def test_the_fused_program_step(y):
    """Pow by a constant inside a fused elementwise chain (its exponent register holds one value)."""
    g = Graph("pow")
    x = g.input("x", (4, 700), "float32")
    p = g.add_node("Pow", [x, g.constant("y", np.array(y, np.float32))])
    g.output(g.add_node("Neg", [p]))
    xs = bases(np.random.default_rng(1), 4 * 700, np.dtype(np.float32)).reshape(4, 700)
    async with aioge.open_device(0) as dev:
        model = await dev.compile(g)
        got = (await model.execute({"x": xs}))[g.outputs[0]]
        await model.aclose()
    with np.errstate(all="ignore"):
        assert_pow_like_numpy(-got, xs, y, ulps=1)
