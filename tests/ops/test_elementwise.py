"""Elementwise ops (typed API and CANN-level) against numpy."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import aioge
from aioge import TensorSpec, ops
from tests.ops.opsutil import (
    BF16,
    F16,
    F32,
    F64,
    FLOATS,
    INTS,
    broadcastable_pair,
    check,
    erf,
    few,
    rand,
    rounded,
    shapes,
    up,
)

pytestmark = pytest.mark.anyio

#: the binary, comparison and cast kernels also take these (CANN's ACL_UINT16/32/64)
WIDE_UINTS = [np.dtype(t) for t in (np.uint16, np.uint32, np.uint64)]
ARITH = [F32, F16, BF16, F64, *INTS, *WIDE_UINTS]

BINARY = {
    "add": (ops.add, "Add", np.add),
    "sub": (ops.sub, "Sub", np.subtract),
    "mul": (ops.mul, "Mul", np.multiply),
    "maximum": (ops.maximum, "Maximum", np.maximum),
    "minimum": (ops.minimum, "Minimum", np.minimum),
}


def _wrap(ref: np.ndarray, dt: np.dtype) -> np.ndarray:
    """Integer results wrap to the dtype like the kernels (and numpy's same-dtype ufuncs)."""
    return ref.astype(np.int64).astype(dt) if dt.kind in "iu" else ref


@pytest.mark.parametrize("name", sorted(BINARY))
@few(40)
@given(pair=broadcastable_pair(), dt=st.sampled_from(ARITH), seed=st.integers(0, 2**16))
async def test_binary_broadcast(stream, name, pair, dt, seed):
    fn, _, ref_fn = BINARY[name]
    rng = np.random.default_rng(seed)
    a, b = rand(rng, pair[0], dt), rand(rng, pair[1], dt)
    got = await fn(up(stream, a), up(stream, b)).numpy()
    ref = ref_fn(a.astype(np.float64), b.astype(np.float64))
    if dt.kind in "iu":
        check(got, _wrap(ref, dt))
    else:
        check(got, rounded(ref, dt) if dt in (F16, BF16) else ref, dt, ulps=0.5)


@few(40)
@given(pair=broadcastable_pair(), dt=st.sampled_from(FLOATS), seed=st.integers(0, 2**16))
async def test_div_float(stream, pair, dt, seed):
    rng = np.random.default_rng(seed)
    a, b = rand(rng, pair[0], dt), rand(rng, pair[1], dt, 0.5, 3)
    got = await ops.div(up(stream, a), up(stream, b)).numpy()
    ref = a.astype(np.float64) / b.astype(np.float64)
    check(got, rounded(ref, dt) if dt in (F16, BF16) else ref, dt, ulps=0.5)


@few(30)
@given(
    pair=broadcastable_pair(),
    dt=st.sampled_from([np.dtype(np.int32), np.dtype(np.int64), np.dtype(np.int8)]),
    seed=st.integers(0, 2**16),
)
async def test_div_int_truncates_and_zero(stream, pair, dt, seed):
    rng = np.random.default_rng(seed)
    a, b = rand(rng, pair[0], dt), rand(rng, pair[1], dt)
    got = await ops.div(up(stream, a), up(stream, b)).numpy()
    a64, b64 = np.broadcast_arrays(a.astype(np.int64), b.astype(np.int64))
    with np.errstate(all="ignore"):
        q = np.where(b64 == 0, 0, np.trunc(a64 / np.where(b64 == 0, 1, b64))).astype(np.int64)
    check(got, q.astype(dt))


@few(30)
@given(pair=broadcastable_pair(), dt=st.sampled_from([F32, F16, F64]), seed=st.integers(0, 2**16))
async def test_pow(stream, pair, dt, seed):
    rng = np.random.default_rng(seed)
    a, b = rand(rng, pair[0], dt, 0.1, 3), rand(rng, pair[1], dt, -2, 2)
    got = await ops.pow(up(stream, a), up(stream, b)).numpy()
    ref = a.astype(np.float64) ** b.astype(np.float64)
    check(got, rounded(ref, dt) if dt == F16 else ref, dt, rtol=1e-5, ulps=1)


async def test_pow_int(stream):
    a = np.array([2, -3, 1, -1, 0, 5], np.int32)
    b = np.array([10, 3, -5, -3, 0, -1], np.int32)
    check(await ops.pow(up(stream, a), up(stream, b)).numpy(), np.array([1024, -27, 1, -1, 1, 0], np.int32))


CMP = {
    "equal": (ops.equal, np.equal),
    "not_equal": (ops.not_equal, np.not_equal),
    "less": (ops.less, np.less),
    "less_equal": (ops.less_equal, np.less_equal),
    "greater": (ops.greater, np.greater),
    "greater_equal": (ops.greater_equal, np.greater_equal),
}


@pytest.mark.parametrize("name", sorted(CMP))
@few(25)
@given(pair=broadcastable_pair(), dt=st.sampled_from([*ARITH, np.dtype(np.bool_)]), seed=st.integers(0, 2**16))
async def test_comparisons(stream, name, pair, dt, seed):
    fn, ref_fn = CMP[name]
    rng = np.random.default_rng(seed)
    a, b = rand(rng, pair[0], dt), rand(rng, pair[1], dt)
    if dt.kind == "f" or dt == BF16:
        b = np.where(
            rng.random(pair[1]) < 0.3,
            np.broadcast_to(a, np.broadcast_shapes(a.shape, b.shape))[tuple(slice(0, s) for s in b.shape)]
            if a.shape == b.shape
            else b,
            b,
        ).astype(dt)
    got = await fn(up(stream, a), up(stream, b)).numpy()
    check(got, ref_fn(a.astype(np.float64) if dt == BF16 else a, b.astype(np.float64) if dt == BF16 else b))


async def test_nan_semantics(stream):
    a = np.array([1, np.nan, 3, np.nan], np.float32)
    b = np.array([np.nan, 2, 1, np.nan], np.float32)
    ta, tb = up(stream, a), up(stream, b)
    check(await ops.maximum(ta, tb).numpy(), np.maximum(a, b))
    check(await ops.minimum(ta, tb).numpy(), np.minimum(a, b))
    check(await ops.equal(ta, tb).numpy(), a == b)
    check(await ops.relu(ta).numpy(), np.array([1, np.nan, 3, np.nan], np.float32))
    check(await ops.reduce_max(ta).numpy(), np.max(a))


async def test_scalar_operands(stream):
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    t = up(stream, x)
    check(await ops.add(t, 1.5).numpy(), x + 1.5)
    check(await ops.sub(10.0, t).numpy(), 10 - x)
    check(await ops.mul(t, np.array([1, 2, 3])).numpy(), x * np.array([1, 2, 3], np.float32))


@few(30)
@given(
    shapes3=st.tuples(broadcastable_pair(3), shapes(0, 3, 1, 4)),
    dt=st.sampled_from([*ARITH, np.dtype(np.bool_)]),
    seed=st.integers(0, 2**16),
)
async def test_where_broadcast(stream, shapes3, dt, seed):
    (sa, sb), sc = shapes3
    rng = np.random.default_rng(seed)
    try:
        np.broadcast_shapes(sa, sb, sc)
    except ValueError:
        sc = sa
    c, x, y = rng.random(sc) < 0.5, rand(rng, sa, dt), rand(rng, sb, dt)
    got = await ops.where(up(stream, c), up(stream, x), up(stream, y)).numpy()
    check(
        got,
        np.where(c, x, y).astype(dt) if dt != BF16 else np.where(c, x.astype(np.float64), y.astype(np.float64)),
        dt,
        ulps=0,
    )


async def test_select_rank1_condition_picks_rows(stream):
    c = np.array([True, False, True])
    x = np.arange(12, dtype=np.float32).reshape(3, 4)
    y = -x
    (out,) = aioge.op("Select", [up(stream, c), up(stream, x), up(stream, y)], [TensorSpec((3, 4), "float32")])
    check(await out.numpy(), np.where(c[:, None], x, y))


UNARY = {
    # name: (typed fn, numpy reference in float64, input range, dtypes, extra ulps for half)
    "neg": (ops.neg, np.negative, (-5, 5), [*FLOATS, *INTS[:4]]),
    "abs": (ops.abs, np.abs, (-5, 5), [*FLOATS, *INTS]),
    "exp": (ops.exp, np.exp, (-20, 20), FLOATS),
    "log": (ops.log, np.log, (0.001, 100), FLOATS),
    "sqrt": (ops.sqrt, np.sqrt, (0, 100), FLOATS),
    "rsqrt": (ops.rsqrt, lambda v: 1 / np.sqrt(v), (0.01, 100), FLOATS),
    "reciprocal": (ops.reciprocal, lambda v: 1 / v, (0.1, 10), FLOATS),
    "square": (ops.square, np.square, (-5, 5), [*FLOATS, *INTS]),
    "relu": (ops.relu, lambda v: np.maximum(v, 0), (-5, 5), [*FLOATS, *INTS]),
    "sigmoid": (ops.sigmoid, lambda v: 1 / (1 + np.exp(-v)), (-30, 30), FLOATS),
    "tanh": (ops.tanh, np.tanh, (-10, 10), FLOATS),
    "gelu": (ops.gelu, lambda v: 0.5 * v * (1 + erf(v / np.sqrt(2))), (-6, 6), FLOATS),
    "erf": (ops.erf, erf, (-4, 4), FLOATS),
    "sin": (ops.sin, np.sin, (-10, 10), FLOATS),
    "cos": (ops.cos, np.cos, (-10, 10), FLOATS),
    "floor": (ops.floor, np.floor, (-100, 100), FLOATS),
    "ceil": (ops.ceil, np.ceil, (-100, 100), FLOATS),
    "round": (ops.round, np.rint, (-100, 100), FLOATS),
    "sign": (ops.sign, np.sign, (-3, 3), [*FLOATS, *INTS]),
    "softplus": (ops.softplus, lambda v: np.logaddexp(0, v), (-30, 30), FLOATS),
    "fast_gelu": (ops.fast_gelu, lambda v: v / (1 + np.exp(-1.702 * v)), (-8, 8), FLOATS),
    "swish": (ops.swish, lambda v: v / (1 + np.exp(-v)), (-8, 8), FLOATS),
}


@pytest.mark.parametrize(("name", "dt"), [(n, d) for n in sorted(UNARY) for d in UNARY[n][3]], ids=str)
@few(8)
@given(shape=shapes(0, 4, 1, 7), seed=st.integers(0, 2**16))
async def test_unary(stream, name, dt, shape, seed):
    fn, ref_fn, (lo, hi), _ = UNARY[name]
    rng = np.random.default_rng(seed)
    x = rand(rng, shape, dt, lo, hi)
    if name in ("floor", "ceil", "round") and dt.kind == "f":
        x.flat[: min(3, x.size)] = np.array([2.5, -0.5, 1.5], dt)[: min(3, x.size)]
    got = await fn(up(stream, x)).numpy()
    with np.errstate(all="ignore"):
        ref = ref_fn(x.astype(np.float64))
    if dt.kind in "iu":
        check(got, _wrap(ref, dt))
    elif dt in (F16, BF16):
        check(got, rounded(ref, dt) if name not in ("floor", "ceil", "round") else ref, dt, ulps=1, atol=1e-6)
    elif dt == F64:
        check(got, ref, dt, rtol=1e-12, atol=1e-300)
    else:
        check(got, ref, dt, rtol=4e-6, atol=1e-30)


async def test_unary_specials(stream):
    x = np.array([0.0, -0.0, np.inf, -np.inf, np.nan, 1e-45, -1e-40, 88.8, -104.0, 3.4e38], np.float32)
    t = up(stream, x)
    with np.errstate(all="ignore"):
        for fn, ref in (
            (ops.exp, np.exp),
            (ops.log, np.log),
            (ops.tanh, np.tanh),
            (ops.sqrt, np.sqrt),
            (ops.floor, np.floor),
            (ops.ceil, np.ceil),
            (ops.round, np.rint),
            (ops.abs, np.abs),
        ):
            got = await fn(t).numpy()
            want = ref(x.astype(np.float64)).astype(np.float32)
            check(got, want, rtol=3e-6, atol=1e-44)
            zero = want == 0
            np.testing.assert_array_equal(np.signbit(got[zero]), np.signbit(want[zero]), err_msg=fn.__name__)
        s = await ops.sigmoid(t).numpy()
        check(s, (1 / (1 + np.exp(-x.astype(np.float64)))).astype(np.float32), rtol=3e-6, atol=1e-44)


@pytest.mark.parametrize(
    "fn",
    [ops.exp, ops.sigmoid, ops.tanh, ops.erf, ops.gelu, ops.fast_gelu, ops.swish],
    ids=lambda f: f.__name__,
)
async def test_unary_position_independent(stream, fn):
    """float32 exp-family results do not depend on where an element sits in the buffer (whole
    vectors or the padded tail), specials included: a shifted copy gives the same bits."""
    rng = np.random.default_rng(5)
    specials = np.array([np.nan, -np.nan, np.inf, -np.inf, 0.0, -0.0, 1e-45, 90.0, -105.0, 3.9, 0.92], np.float32)
    x = rng.uniform(-12, 12, 43).astype(np.float32)
    x[::4] = np.resize(specials, x[::4].size)
    with np.errstate(all="ignore"):
        whole = await fn(up(stream, x)).numpy()
        for k in (1, 3, 38, 42):
            part = await fn(up(stream, x[k:].copy())).numpy()
            np.testing.assert_array_equal(part.view(np.uint32), whole[k:].view(np.uint32), err_msg=f"shift {k}")
    assert np.isnan(whole[np.isnan(x)]).all()
    finite = np.isfinite(x)
    assert np.isfinite(whole[finite]).all() or fn is ops.exp


async def test_gelu_tanh_and_leaky(stream):
    x = np.linspace(-6, 6, 301).astype(np.float32)
    t = up(stream, x)
    v = x.astype(np.float64)
    check(
        await ops.gelu(t, approximate="tanh").numpy(),
        0.5 * v * (1 + np.tanh(np.sqrt(2 / np.pi) * (v + 0.044715 * v**3))),
        rtol=1e-5,
        atol=1e-6,
    )
    check(await ops.leaky_relu(t, 0.2).numpy(), np.where(v > 0, v, 0.2 * v))
    check(await ops.round(t, 1).numpy(), np.round(x, 1), rtol=1e-6)


@few(30)
@given(shape=shapes(0, 3, 1, 6), dt=st.sampled_from([*FLOATS, *INTS]), seed=st.integers(0, 2**16))
async def test_clip(stream, shape, dt, seed):
    rng = np.random.default_rng(seed)
    x = rand(rng, shape, dt)
    lv = 1 if dt.kind == "u" else -1
    lo, hi = (np.array(lv, dt), np.array(2, dt))
    got = await ops.clip(up(stream, x), lo, hi).numpy()
    check(got, np.clip(x.astype(np.float64), lv, 2), dt, ulps=0)
    got = await ops.clip(up(stream, x), None, hi).numpy()
    check(got, np.minimum(x.astype(np.float64), 2), dt, ulps=0)


CAST_TYPES = [*FLOATS, *INTS, *WIDE_UINTS, np.dtype(np.bool_)]


@few(60)
@given(
    shape=shapes(0, 3, 1, 8),
    src=st.sampled_from(CAST_TYPES),
    dst=st.sampled_from(CAST_TYPES),
    seed=st.integers(0, 2**16),
)
async def test_cast(stream, shape, src, dst, seed):
    rng = np.random.default_rng(seed)
    x = rand(rng, shape, src, -100, 100)
    got = await ops.cast(up(stream, x), dst).numpy()
    if src.kind == "f" or src == BF16:
        if dst.kind in "iu":
            info = np.iinfo(dst)
            want = np.clip(np.trunc(x.astype(np.float64)), info.min, info.max).astype(dst)
        elif dst == np.bool_:
            want = x.astype(np.float64) != 0
        else:
            want = x.astype(np.float64).astype(np.float32).astype(dst) if dst != F64 else x.astype(np.float64)
            if src in (F64,):
                want = x.astype(dst)
    else:
        want = x.astype(dst) if dst != BF16 else x.astype(np.float32).astype(BF16)
    check(
        got,
        np.asarray(want).astype(np.float64) if got.dtype.kind == "f" or got.dtype == BF16 else want,
        dst,
        ulps=0,
    )


async def test_wide_uint_extremes(stream):
    """uint64 above 2**63 keeps its top bit through Cast, comparisons and division."""
    big = np.array([0, 1, 2**63 - 1, 2**63, 2**64 - 1, 12345678901234567890], np.uint64)
    x = up(stream, big)
    check(await ops.cast(x, "float64").numpy(), big.astype(np.float64), np.float64, ulps=0)
    check(await ops.cast(x, "uint32").numpy(), big.astype(np.uint32))
    check(await ops.cast(up(stream, big.astype(np.float64)), "uint64").numpy(),
          np.array([0, 1, 2**63, 2**63, 2**64 - 1, 12345678901234567168], np.uint64))  # fmt: skip
    check(await ops.less(x, up(stream, big[::-1].copy())).numpy(), big < big[::-1])
    check(await ops.div(x, up(stream, np.full(6, 3, np.uint64))).numpy(), big // 3)
    u32 = np.array([0, 1, 2**31, 2**32 - 1], np.uint32)
    check(await ops.div(up(stream, u32), up(stream, np.array([2**32 - 1, 0, 2, 2**32 - 1], np.uint32))).numpy(),
          np.array([0, 0, 2**30, 1], np.uint32))  # fmt: skip


@pytest.mark.parametrize(
    ("op_type", "attrs", "ref"),
    [
        ("Exp", {"base": -1.0, "scale": 1.0, "shift": 0.0}, np.exp),
        ("Exp", {"base": 2.0, "scale": 0.5, "shift": 1.0}, lambda v: 2.0 ** (1.0 + 0.5 * v)),
        ("Log", {"base": -1.0, "scale": 1.0, "shift": 0.0}, np.log),
        ("Log", {"base": 10.0, "scale": 2.0, "shift": 1.0}, lambda v: np.log10(1 + 2 * v)),
        ("LeakyRelu", {"negative_slope": 0.1}, lambda v: np.where(v > 0, v, 0.1 * v)),
        ("Swish", {"scale": 2.0}, lambda v: v / (1 + np.exp(-2 * v))),
        ("Round", {"decimals": 2}, lambda v: np.round(v, 2)),
        ("Gelu", {}, lambda v: 0.5 * v * (1 + np.tanh(np.sqrt(2 / np.pi) * (v + 0.044715 * v**3)))),
        ("GeluV2", {"approximate": "none"}, lambda v: 0.5 * v * (1 + erf(v / np.sqrt(2)))),
        ("FastGelu", {}, lambda v: v / (1 + np.exp(-1.702 * v))),
        ("Inv", {}, lambda v: 1 / v),
    ],
)
async def test_cann_unary_attrs(stream, op_type, attrs, ref):
    x = np.linspace(0.1, 4, 64).astype(np.float32)
    (y,) = aioge.op(op_type, [up(stream, x)], [TensorSpec(x.shape, "float32")], attrs)
    check(await y.numpy(), ref(x.astype(np.float64)), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize(
    "op_type",
    ["Add", "AddV2", "Sub", "Mul", "RealDiv", "Div", "Maximum", "Minimum", "Pow", "SquaredDifference"],
)
async def test_cann_binary_names(stream, op_type):
    a = np.linspace(0.5, 2, 12).astype(np.float32).reshape(3, 4)
    b = np.linspace(1, 3, 4).astype(np.float32)
    ref = {
        "Add": a + b,
        "AddV2": a + b,
        "Sub": a - b,
        "Mul": a * b,
        "RealDiv": a / b,
        "Div": a / b,
        "Maximum": np.maximum(a, b),
        "Minimum": np.minimum(a, b),
        "Pow": a.astype(np.float64) ** b,
        "SquaredDifference": (a - b) ** 2,
    }[op_type]
    (y,) = aioge.op(op_type, [up(stream, a), up(stream, b)], [TensorSpec((3, 4), "float32")])
    check(await y.numpy(), ref, rtol=1e-6)


async def test_cann_clip_by_value_broadcast(stream):
    x = np.linspace(-3, 3, 24).astype(np.float32).reshape(4, 6)
    lo = np.full((6,), -1, np.float32)
    (y,) = aioge.op(
        "ClipByValue",
        [up(stream, x), up(stream, lo), aioge.Const(np.float32(1.5))],
        [TensorSpec((4, 6), "float32")],
    )
    check(await y.numpy(), np.clip(x, -1, 1.5))


async def test_big_elementwise_uses_pool(stream):
    # big enough to be split over the intra-op pool; result must equal numpy exactly
    a = np.random.default_rng(1).standard_normal(1 << 20).astype(np.float32)
    ta = up(stream, a)
    check(await ops.add(ta, ta).numpy(), a + a, rtol=0)
    check(await ops.exp(ta).numpy(), np.exp(a.astype(np.float64)), rtol=3e-6)
    h = up(stream, a.astype(np.float16))
    check(await ops.mul(h, h).numpy(), rounded(a.astype(np.float16).astype(np.float64) ** 2, F16), F16, ulps=0.5)
