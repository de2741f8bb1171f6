"""Shared helpers of the operator tests: hypothesis settings, dtype
strategies, tolerance checks relative to the result dtype's rounding, and
single-node onnxruntime references."""

from __future__ import annotations

import functools
import math
from typing import Any

import numpy as np
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st

import aioge

BF16 = aioge.bfloat16
F32, F16, F64 = np.dtype(np.float32), np.dtype(np.float16), np.dtype(np.float64)
FLOATS = [F32, F16, BF16, F64]
INTS = [np.dtype(t) for t in (np.int8, np.int16, np.int32, np.int64, np.uint8)]

# deterministic, CI-sized: every test states its own max_examples on top of this
OPS = settings(
    deadline=None,
    derandomize=True,
    database=None,
    max_examples=30,
    suppress_health_check=[
        HealthCheck.function_scoped_fixture,
        HealthCheck.too_slow,
        HealthCheck.data_too_large,
    ],
)


def few(n: int) -> settings:
    return settings(OPS, max_examples=n)


def shapes(
    min_dims: int = 0, max_dims: int = 4, min_side: int = 1, max_side: int = 6
) -> st.SearchStrategy[tuple[int, ...]]:
    return st.lists(st.integers(min_side, max_side), min_size=min_dims, max_size=max_dims).map(tuple)


def broadcastable_pair(max_dims: int = 4) -> st.SearchStrategy[tuple[tuple[int, ...], tuple[int, ...]]]:
    """Two shapes that broadcast: drop leading dims and set some dims to 1."""

    @st.composite
    def build(draw: Any) -> tuple[tuple[int, ...], tuple[int, ...]]:
        out = draw(shapes(0, max_dims, 1, 5))

        def derive() -> tuple[int, ...]:
            k = draw(st.integers(0, len(out)))
            sub = list(out[len(out) - k :])
            for i in range(len(sub)):
                if draw(st.booleans()):
                    sub[i] = 1
            return tuple(sub)

        return derive(), derive()

    return build()


def rand(rng: np.random.Generator, shape: tuple[int, ...], dt: Any, lo: float = -3, hi: float = 3) -> np.ndarray:
    dt = np.dtype(dt)
    if dt == np.bool_:
        return rng.random(shape) < 0.5
    if dt.kind in "iu":
        info = np.iinfo(dt)
        return rng.integers(max(info.min, -100), min(info.max, 100) + 1, size=shape).astype(dt)
    return rng.uniform(lo, hi, size=shape).astype(np.float64).astype(dt)


def ulp(ref: np.ndarray, dt: Any) -> np.ndarray:
    """The spacing of ``dt`` at each value of ``ref``."""
    dt = np.dtype(dt)
    with np.errstate(all="ignore"):
        return _ulp(ref, dt)


def _ulp(ref: np.ndarray, dt: np.dtype) -> np.ndarray:
    if dt == BF16:
        a = np.abs(ref.astype(np.float64))
        e = np.floor(np.log2(np.maximum(a, 2.0**-126)))
        return 2.0 ** (e - 7)
    return np.spacing(np.abs(ref.astype(np.float64)).astype(dt)).astype(np.float64)


def check(
    got: np.ndarray,
    ref: Any,
    dt: Any = None,
    *,
    rtol: float | None = None,
    atol: float = 0.0,
    ulps: float = 1.0,
) -> None:
    """Assert ``got`` matches ``ref`` (computed in float64).

    float32/float64: a relative tolerance; float16/bfloat16: within ``ulps``
    units of the result dtype's rounding (the kernels compute in float32
    and round once) plus ``atol``; integers and bool: exact.
    """
    with np.errstate(all="ignore"):
        _check(got, np.asarray(ref), np.dtype(got.dtype if dt is None else dt), rtol, atol, ulps)


def _check(got: np.ndarray, ref: np.ndarray, dt: np.dtype, rtol: float | None, atol: float, ulps: float) -> None:
    assert got.dtype == dt, f"dtype {got.dtype} != {dt}"
    assert got.shape == ref.shape, f"shape {got.shape} != {ref.shape}"
    if dt.kind in "iub":
        np.testing.assert_array_equal(got, ref.astype(dt))
        return
    g = got.astype(np.float64)
    r = ref.astype(np.float64)
    nan_ref = np.isnan(r)
    np.testing.assert_array_equal(np.isnan(g), nan_ref, err_msg="NaN positions differ")
    fin = np.isfinite(r)
    np.testing.assert_array_equal(g[~fin & ~nan_ref], r[~fin & ~nan_ref], err_msg="infinities differ")
    if dt in (F16, BF16):
        tol = ulps * ulp(r, dt) + atol
    else:
        rt = rtol if rtol is not None else (1e-5 if dt == F32 else 1e-12)
        tol = rt * np.abs(r) + atol + (1e-6 if dt == F32 else 1e-14)
    err = np.abs(g - r)
    bad = fin & (err > tol)
    if bad.any():
        i = tuple(np.argwhere(bad)[0])
        t = tol[i] if np.ndim(tol) else tol
        msg = f"{bad.sum()} of {bad.size} values off; first at {i}: got {g[i]!r}, want {r[i]!r} (tol {t!r})"
        raise AssertionError(msg)


def rounded(ref: np.ndarray, dt: Any) -> np.ndarray:
    """``ref`` rounded to dt and back to float64 (the exactly-rounded expected value)."""
    with np.errstate(all="ignore"):
        return np.asarray(ref, np.float64).astype(dt).astype(np.float64)


# ----------------------------------------------------------- onnxruntime
@functools.lru_cache(maxsize=256)
def _ort_session(
    op: str, attrs: tuple[tuple[str, Any], ...], in_specs: tuple[tuple[tuple[int, ...], str], ...], opset: int
) -> Any:

    import onnxruntime as ort
    from onnx import TensorProto, helper

    tp = {"float32": TensorProto.FLOAT, "float64": TensorProto.DOUBLE, "float16": TensorProto.FLOAT16}
    names = [f"i{j}" for j in range(len(in_specs))]
    node = helper.make_node(op, names, ["y"], **dict(attrs))
    inputs = [helper.make_tensor_value_info(n, tp[dt], list(sh)) for n, (sh, dt) in zip(names, in_specs, strict=False)]
    g = helper.make_graph([node], "g", inputs, [helper.make_tensor_value_info("y", tp[in_specs[0][1]], None)])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])
    m.ir_version = min(m.ir_version, 9)
    so = ort.SessionOptions()
    so.intra_op_num_threads = 1
    so.log_severity_level = 3
    return ort.InferenceSession(m.SerializeToString(), so, providers=["CPUExecutionProvider"])


def ort_run(op: str, inputs: list[np.ndarray], opset: int = 17, **attrs: Any) -> np.ndarray:
    """Run one ONNX node on onnxruntime's CPU provider."""
    key = tuple(sorted((k, tuple(v) if isinstance(v, list) else v) for k, v in attrs.items()))
    specs = tuple((tuple(a.shape), str(a.dtype)) for a in inputs)
    sess = _ort_session(op, key, specs, opset)
    out = sess.run(None, {f"i{j}": a for j, a in enumerate(inputs)})
    return np.asarray(out[0])


def erf(x: np.ndarray) -> np.ndarray:
    return np.vectorize(math.erf, otypes=[np.float64])(np.asarray(x, np.float64))


def up(stream: Any, arr: Any) -> Any:
    """Upload keeping the shape (``Stream.upload`` makes 0-d arrays 1-d)."""
    a = np.asarray(arr)
    return stream.upload(a).reshape(a.shape)
