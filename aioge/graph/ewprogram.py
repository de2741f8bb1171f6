"""Elementwise math shared by the reference executor and ``_FusedElementwise``.

A ``_FusedElementwise`` node computes a small expression over its inputs.
Its ``program`` attr is a list of steps over *registers*:

* registers ``0 .. k-1`` hold the node's ``k`` inputs, in input order; every
  input is broadcast (numpy rules) to the node's output shape;
* step ``i`` is a tuple ``(opcode, srcs, params)``: ``opcode`` is a string
  from :data:`OPCODES`, ``srcs`` a tuple of register numbers (1 for a unary,
  2 for a binary opcode; every src is ``< k + i``), ``params`` a tuple of
  floats (see :data:`OPCODES` for which opcode takes which);
* step ``i`` writes register ``k + i``; the node's output is the register of
  the last step;
* every register has the node's dtype (a float type); compute in that dtype.

Example — ``y = relu(x * s + b)`` with inputs ``(x, s, b)``::

    [("Mul", (0, 1), ()), ("Add", (3, 2), ()), ("Relu", (4,), ())]

:func:`encode_program` packs a program into two fixed-width arrays for C.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

__all__ = (
    "OPCODES",
    "UNARY",
    "BINARY",
    "Step",
    "erf",
    "gelu",
    "apply_unary",
    "apply_binary",
    "apply_activation",
    "validate_program",
    "run_program",
    "encode_program",
)

Step = tuple[str, tuple[int, ...], tuple[float, ...]]


def erf(x: np.ndarray) -> np.ndarray:
    """Error function to ~1e-14, computed in float64 and returned in ``x.dtype``.

    numpy has no erf; Maclaurin series below 2.5, the erfc continued fraction above.
    """
    x64 = np.asarray(x, dtype=np.float64)
    a = np.abs(x64)
    out = np.empty_like(x64)
    small = a < 2.5
    xs = x64[small]
    x2 = xs * xs
    term = xs.copy()
    acc = xs.copy()
    for n in range(1, 64):
        term *= -x2 / n
        acc += term / (2 * n + 1)
    out[small] = acc * (2.0 / math.sqrt(math.pi))
    big = ~small
    xb = a[big]
    f = xb.copy()
    for k in range(80, 0, -1):
        f = xb + (k / 2.0) / f
    erfc = np.exp(-xb * xb) / (math.sqrt(math.pi) * f)
    out[big] = np.copysign(1.0 - erfc, x64[big])
    out[np.isnan(x64)] = np.nan
    return out.astype(np.asarray(x).dtype, copy=False)


def gelu(x: np.ndarray, approximate: str = "none") -> np.ndarray:
    """ONNX Gelu (exact erf form, or the tanh approximation)."""
    if approximate == "tanh":
        c = np.asarray(math.sqrt(2.0 / math.pi), x.dtype)
        return np.asarray(
            0.5 * x * (1.0 + np.tanh(c * (x + np.asarray(0.044715, x.dtype) * x * x * x)))
        ).astype(x.dtype)
    x64 = x.astype(np.float64)
    return (0.5 * x64 * (1.0 + erf(x64 / math.sqrt(2.0)))).astype(x.dtype)


def _c(v: float, like: np.ndarray) -> np.ndarray:
    return np.asarray(v, dtype=like.dtype)


def _leaky(x: np.ndarray, alpha: float = 0.01) -> np.ndarray:
    return np.where(x >= 0, x, x * _c(alpha, x))


def _elu(x: np.ndarray, alpha: float = 1.0) -> np.ndarray:
    return np.where(x > 0, x, _c(alpha, x) * (np.exp(np.minimum(x, 0)) - _c(1, x)))


def _selu(
    x: np.ndarray, alpha: float = 1.67326319217681884765625, gamma: float = 1.05070102214813232421875
) -> np.ndarray:
    neg = _c(alpha, x) * np.exp(np.minimum(x, 0)) - _c(alpha, x)
    return _c(gamma, x) * np.where(x > 0, x, neg)


def _clip(x: np.ndarray, lo: float = -math.inf, hi: float = math.inf) -> np.ndarray:
    return np.minimum(np.maximum(x, _c(lo, x)), _c(hi, x)) if x.dtype.kind == "f" else _clip_int(x, lo, hi)


def _clip_int(x: np.ndarray, lo: float, hi: float) -> np.ndarray:
    info = np.iinfo(x.dtype)
    lo_i = info.min if lo == -math.inf else int(lo)
    hi_i = info.max if hi == math.inf else int(hi)
    return np.asarray(np.minimum(np.maximum(x, x.dtype.type(lo_i)), x.dtype.type(hi_i)))


def _shrink(x: np.ndarray, bias: float = 0.0, lambd: float = 0.5) -> np.ndarray:
    b, lam = _c(bias, x), _c(lambd, x)
    zero = np.zeros((), x.dtype)
    return np.where(x < -lam, x + b, np.where(x > lam, x - b, zero)).astype(x.dtype)


def _sigmoid(x: np.ndarray) -> np.ndarray:
    one = _c(1, x)
    return np.asarray(one / (one + np.exp(-x)))


def _swish(x: np.ndarray) -> np.ndarray:
    return np.asarray(x * _sigmoid(x))


def _hard_swish(x: np.ndarray) -> np.ndarray:
    return np.asarray(x * np.minimum(np.maximum(x * _c(1 / 6, x) + _c(0.5, x), _c(0, x)), _c(1, x)))


def _softplus(x: np.ndarray) -> np.ndarray:
    return np.asarray(np.logaddexp(np.zeros((), x.dtype), x))


def _relu(x: np.ndarray) -> np.ndarray:
    return np.asarray(np.maximum(x, np.zeros((), x.dtype)))


#: unary opcodes -> (function, number of params)
UNARY: dict[str, tuple[Callable[..., np.ndarray], int]] = {
    "Relu": (_relu, 0),
    "LeakyRelu": (_leaky, 1),  # (alpha,)
    "Sigmoid": (_sigmoid, 0),
    "Tanh": (np.tanh, 0),
    "Exp": (np.exp, 0),
    "Log": (np.log, 0),
    "Sqrt": (np.sqrt, 0),
    "Abs": (np.abs, 0),
    "Neg": (np.negative, 0),
    "Reciprocal": (lambda x: _c(1, x) / x, 0),
    "Erf": (erf, 0),
    "Gelu": (gelu, 0),  # exact (erf) form
    "GeluTanh": (lambda x: gelu(x, "tanh"), 0),  # tanh approximation
    "Softplus": (_softplus, 0),
    "Elu": (_elu, 1),  # (alpha,)
    "Selu": (_selu, 2),  # (alpha, gamma)
    "Sign": (np.sign, 0),
    "Clip": (_clip, 2),  # (min, max); +-inf for an absent bound
    "Shrink": (_shrink, 2),  # (bias, lambd)
    "Swish": (_swish, 0),  # x * sigmoid(x) (SiLU)
    "HardSwish": (_hard_swish, 0),  # x * clip(x / 6 + 1/2, 0, 1)
}


def _prelu(x: np.ndarray, slope: np.ndarray) -> np.ndarray:
    return np.where(x < 0, x * slope, x)


def _pow(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    if a.dtype.kind == "f":
        return np.asarray(np.power(a, b.astype(a.dtype, copy=False)))
    return np.power(a.astype(np.float64), b.astype(np.float64)).astype(a.dtype)


def _div(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    if a.dtype.kind in "iu":
        q = a // b
        # ONNX integer division truncates toward zero
        fix = (a % b != 0) & ((a < 0) != (b < 0))
        return np.asarray((q + fix).astype(a.dtype))
    return np.asarray(a / b)


#: binary opcodes -> function (srcs are (a, b); PRelu is (x, slope))
BINARY: dict[str, Callable[[np.ndarray, np.ndarray], np.ndarray]] = {
    "Add": np.add,
    "Sub": np.subtract,
    "Mul": np.multiply,
    "Div": _div,
    "Pow": _pow,
    "Max": np.maximum,
    "Min": np.minimum,
    "PRelu": _prelu,
}

#: opcode -> stable integer id used by :func:`encode_program`
OPCODES: dict[str, int] = {name: i for i, name in enumerate([*UNARY, *BINARY])}


def apply_unary(op: str, x: np.ndarray, params: Sequence[float] = ()) -> np.ndarray:
    """Apply unary opcode ``op`` keeping ``x.dtype``."""
    fn, _ = UNARY[op]
    return np.asarray(fn(x, *params)).astype(x.dtype, copy=False)


def apply_binary(op: str, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Apply binary opcode ``op`` (result in ``a.dtype``)."""
    return np.asarray(BINARY[op](a, b)).astype(a.dtype, copy=False)


#: activations a _FusedConv/_FusedMatMul may carry -> the attrs they read
ACTIVATIONS: dict[str, tuple[str, ...]] = {
    "none": (),
    "Relu": (),
    "LeakyRelu": ("alpha",),
    "Sigmoid": (),
    "Tanh": (),
    "Gelu": (),
    "GeluTanh": (),
    "Clip": ("min", "max"),
    "Swish": (),
    "HardSwish": (),
}


def apply_activation(y: np.ndarray, attrs: dict[str, Any]) -> np.ndarray:
    """Apply a fused op's ``activation`` attr (with ``alpha``/``min``/``max``)."""
    act = attrs.get("activation", "none")
    if act == "none":
        return y
    if act not in ACTIVATIONS:
        raise ValueError(f"unknown activation {act!r}")
    defaults = {"alpha": 0.01, "min": 0.0, "max": 6.0}
    params = [float(attrs.get(p, defaults[p])) for p in ACTIVATIONS[act]]
    return apply_unary(act, y, params)


def validate_program(program: Sequence[Step], n_inputs: int) -> None:
    """Check register numbering and arities; raises ``ValueError``."""
    if not program:
        raise ValueError("empty program")
    for i, step in enumerate(program):
        if len(step) != 3:
            raise ValueError(f"step {i} is not (opcode, srcs, params)")
        op, srcs, params = step
        if op in UNARY:
            want_srcs, want_params = 1, UNARY[op][1]
        elif op in BINARY:
            want_srcs, want_params = 2, 0
        else:
            raise ValueError(f"step {i}: unknown opcode {op!r}")
        if len(srcs) != want_srcs or len(params) != want_params:
            raise ValueError(f"step {i} ({op}) needs {want_srcs} srcs and {want_params} params")
        for s in srcs:
            if not 0 <= s < n_inputs + i:
                raise ValueError(f"step {i} ({op}) reads register {s} before it is written")


def run_program(
    program: Sequence[Step], inputs: Sequence[np.ndarray], out_shape: Sequence[int], dtype: np.dtype
) -> np.ndarray:
    """Interpret a program with numpy (the reference semantics)."""
    regs = [np.broadcast_to(np.asarray(x, dtype=dtype), tuple(out_shape)) for x in inputs]
    for op, srcs, params in program:
        if op in UNARY:
            regs.append(apply_unary(op, regs[srcs[0]], params))
        else:
            regs.append(apply_binary(op, regs[srcs[0]], regs[srcs[1]]))
    return np.array(np.broadcast_to(regs[-1], tuple(out_shape)), dtype=dtype)


def encode_program(program: Sequence[Step]) -> tuple[np.ndarray, np.ndarray]:
    """Pack a program for C: ``int32[n, 4]`` = (opcode id, src0, src1 or -1, n_params)
    and ``float64[n, 2]`` params (unused slots 0)."""
    codes = np.zeros((len(program), 4), np.int32)
    params = np.zeros((len(program), 2), np.float64)
    for i, (op, srcs, ps) in enumerate(program):
        codes[i] = (OPCODES[op], srcs[0], srcs[1] if len(srcs) > 1 else -1, len(ps))
        params[i, : len(ps)] = ps
    return codes, params
