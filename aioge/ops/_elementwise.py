"""Elementwise ops with numpy semantics (broadcasting, dtype checks).

Operands of a binary op must have the same dtype (no implicit promotion:
cast first); one of them may be a Python/numpy scalar or array, used as a
constant of the other operand's dtype.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from .. import dtypes
from ..runtime.stream import Tensor
from ._common import (
    ALL,
    FLOATS,
    INTS,
    SIGNED,
    as_tensor_like,
    broadcast_shape,
    check_dtype,
    dtype_of,
    emit,
    require_tensor,
    shape_of,
)

__all__ = (
    "abs",
    "add",
    "cast",
    "ceil",
    "clip",
    "cos",
    "div",
    "equal",
    "erf",
    "exp",
    "fast_gelu",
    "floor",
    "gelu",
    "greater",
    "greater_equal",
    "leaky_relu",
    "less",
    "less_equal",
    "log",
    "maximum",
    "minimum",
    "mul",
    "neg",
    "not_equal",
    "pow",
    "reciprocal",
    "relu",
    "round",
    "rsqrt",
    "sigmoid",
    "sign",
    "sin",
    "softplus",
    "sqrt",
    "square",
    "sub",
    "swish",
    "tanh",
    "where",
)

_BOOL = np.dtype(np.bool_)
#: uint16/32/64: the binary, comparison and cast kernels take them (the unary ones do not)
_WIDE_UINTS = frozenset(np.dtype(d) for d in ("uint16", "uint32", "uint64"))
_ARITH = FLOATS | INTS | _WIDE_UINTS


def _binary(op_type: str, name: str, a: Any, b: Any, allowed: frozenset[np.dtype], *, bool_out: bool = False) -> Tensor:
    if type(a) is Tensor and type(b) is Tensor and a.dtype == b.dtype and a.shape == b.shape and a.dtype in allowed:
        return emit(op_type, [a, b], [(a.shape, _BOOL if bool_out else a.dtype)])[0]  # the common case, fast
    if type(a) is not Tensor and type(b) is Tensor:
        a = as_tensor_like(a, b)
    else:
        a = require_tensor(a, "a")
        b = as_tensor_like(b, a)
    da, db = dtype_of(a), dtype_of(b)
    if da != db:
        raise TypeError(f"{name}: operands have different dtypes ({da} and {db}); cast one first")
    check_dtype(name, da, allowed, "the operands")
    shape = broadcast_shape(name, shape_of(a), shape_of(b))
    return emit(op_type, [a, b], [(shape, _BOOL if bool_out else da)])[0]


def add(a: Any, b: Any) -> Tensor:
    """Elementwise ``a + b`` with numpy broadcasting (CANN ``Add``).

    Example:
        >>> y = aioge.ops.add(x, 1.0)
    """
    return _binary("Add", "add", a, b, _ARITH)


def sub(a: Any, b: Any) -> Tensor:
    """Elementwise ``a - b`` with broadcasting (CANN ``Sub``).

    Example:
        >>> y = aioge.ops.sub(x, x)
    """
    return _binary("Sub", "sub", a, b, _ARITH)


def mul(a: Any, b: Any) -> Tensor:
    """Elementwise ``a * b`` with broadcasting (CANN ``Mul``).

    Example:
        >>> y = aioge.ops.mul(x, 2.0)
    """
    return _binary("Mul", "mul", a, b, _ARITH)


def div(a: Any, b: Any) -> Tensor:
    """Elementwise ``a / b`` with broadcasting (CANN ``RealDiv`` for floats, ``Div`` for integers).

    Floating dtypes divide exactly (numpy ``true_divide``); integer dtypes
    truncate toward zero (as C and ONNX do) and give 0 for a zero divisor.

    Example:
        >>> y = aioge.ops.div(x, 4.0)
    """
    if type(a) is Tensor:
        op = "RealDiv" if a.dtype in FLOATS else "Div"
    elif type(b) is Tensor:
        op = "RealDiv" if b.dtype in FLOATS else "Div"
    else:
        op = "Div"
    return _binary(op, "div", a, b, _ARITH)


def pow(a: Any, b: Any) -> Tensor:
    """Elementwise ``a ** b`` with broadcasting (CANN ``Pow``).

    Integer powers use exact repeated squaring (wrapping); a negative
    integer exponent gives 0 unless ``|a| == 1``.

    Example:
        >>> y = aioge.ops.pow(x, 2.0)
    """
    return _binary("Pow", "pow", a, b, _ARITH)


def maximum(a: Any, b: Any) -> Tensor:
    """Elementwise maximum, NaN-propagating like ``numpy.maximum`` (CANN ``Maximum``).

    Example:
        >>> y = aioge.ops.maximum(x, 0.0)
    """
    return _binary("Maximum", "maximum", a, b, _ARITH)


def minimum(a: Any, b: Any) -> Tensor:
    """Elementwise minimum, NaN-propagating like ``numpy.minimum`` (CANN ``Minimum``).

    Example:
        >>> y = aioge.ops.minimum(x, 1.0)
    """
    return _binary("Minimum", "minimum", a, b, _ARITH)


def equal(a: Any, b: Any) -> Tensor:
    """Elementwise ``a == b`` as bool (CANN ``Equal``).

    Example:
        >>> m = aioge.ops.equal(x, 0.0)
    """
    return _binary("Equal", "equal", a, b, ALL | _WIDE_UINTS, bool_out=True)


def not_equal(a: Any, b: Any) -> Tensor:
    """Elementwise ``a != b`` as bool (CANN ``NotEqual``).

    Example:
        >>> m = aioge.ops.not_equal(x, 0.0)
    """
    return _binary("NotEqual", "not_equal", a, b, ALL | _WIDE_UINTS, bool_out=True)


def less(a: Any, b: Any) -> Tensor:
    """Elementwise ``a < b`` as bool (CANN ``Less``).

    Example:
        >>> m = aioge.ops.less(x, 0.5)
    """
    return _binary("Less", "less", a, b, ALL | _WIDE_UINTS, bool_out=True)


def less_equal(a: Any, b: Any) -> Tensor:
    """Elementwise ``a <= b`` as bool (CANN ``LessEqual``).

    Example:
        >>> m = aioge.ops.less_equal(x, 0.5)
    """
    return _binary("LessEqual", "less_equal", a, b, ALL | _WIDE_UINTS, bool_out=True)


def greater(a: Any, b: Any) -> Tensor:
    """Elementwise ``a > b`` as bool (CANN ``Greater``).

    Example:
        >>> m = aioge.ops.greater(x, 0.5)
    """
    return _binary("Greater", "greater", a, b, ALL | _WIDE_UINTS, bool_out=True)


def greater_equal(a: Any, b: Any) -> Tensor:
    """Elementwise ``a >= b`` as bool (CANN ``GreaterEqual``).

    Example:
        >>> m = aioge.ops.greater_equal(x, 0.5)
    """
    return _binary("GreaterEqual", "greater_equal", a, b, ALL | _WIDE_UINTS, bool_out=True)


def where(condition: Any, x: Any, y: Any) -> Tensor:
    """``numpy.where(condition, x, y)``: pick from ``x`` where true, else ``y``, all three broadcast.

    CANN ``Select`` when the three shapes are equal, ``SelectV2`` otherwise.
    ``x`` or ``y`` may be a scalar (a constant of the other's dtype).

    Example:
        >>> y = aioge.ops.where(aioge.ops.greater(x, 0.0), x, 0.0)
    """
    c = require_tensor(condition, "condition")
    if c.dtype != _BOOL:
        raise TypeError(f"where: condition must be bool, got {c.dtype}")
    if type(x) is Tensor:
        yy = as_tensor_like(y, x)
        xx: Any = x
    elif type(y) is Tensor:
        xx = as_tensor_like(x, y)
        yy = y
    else:
        raise TypeError("where: x or y must be an aioge.Tensor")
    dx, dy = dtype_of(xx), dtype_of(yy)
    if dx != dy:
        raise TypeError(f"where: x and y have different dtypes ({dx} and {dy})")
    check_dtype("where", dx, ALL | _WIDE_UINTS)
    shapes = (c.shape, shape_of(xx), shape_of(yy))
    out = broadcast_shape("where", *shapes)
    op = "Select" if shapes[0] == shapes[1] == shapes[2] else "SelectV2"
    return emit(op, [c, xx, yy], [(out, dx)])[0]


def _unary(
    op_type: str, name: str, x: Any, allowed: frozenset[np.dtype], attrs: dict[str, Any] | None = None
) -> Tensor:
    x = require_tensor(x)
    check_dtype(name, x.dtype, allowed)
    return emit(op_type, [x], [(x.shape, x.dtype)], attrs)[0]


def neg(x: Any) -> Tensor:
    """``-x`` (CANN ``Neg``).

    Example:
        >>> y = aioge.ops.neg(x)
    """
    return _unary("Neg", "neg", x, FLOATS | SIGNED)


def abs(x: Any) -> Tensor:
    """``|x|`` (CANN ``Abs``).

    Example:
        >>> y = aioge.ops.abs(x)
    """
    return _unary("Abs", "abs", x, FLOATS | INTS)


def exp(x: Any) -> Tensor:
    """``e ** x`` (CANN ``Exp`` with base -1, scale 1, shift 0).

    Example:
        >>> y = aioge.ops.exp(x)
    """
    return _unary("Exp", "exp", x, FLOATS)


def log(x: Any) -> Tensor:
    """Natural logarithm (CANN ``Log`` with base -1, scale 1, shift 0); ``log(0) = -inf``.

    Example:
        >>> y = aioge.ops.log(x)
    """
    return _unary("Log", "log", x, FLOATS)


def sqrt(x: Any) -> Tensor:
    """Square root (CANN ``Sqrt``).

    Example:
        >>> y = aioge.ops.sqrt(x)
    """
    return _unary("Sqrt", "sqrt", x, FLOATS)


def rsqrt(x: Any) -> Tensor:
    """``1 / sqrt(x)`` (CANN ``Rsqrt``).

    Example:
        >>> y = aioge.ops.rsqrt(x)
    """
    return _unary("Rsqrt", "rsqrt", x, FLOATS)


def reciprocal(x: Any) -> Tensor:
    """``1 / x`` (CANN ``Reciprocal``).

    Example:
        >>> y = aioge.ops.reciprocal(x)
    """
    return _unary("Reciprocal", "reciprocal", x, FLOATS)


def square(x: Any) -> Tensor:
    """``x * x`` (CANN ``Square``).

    Example:
        >>> y = aioge.ops.square(x)
    """
    return _unary("Square", "square", x, FLOATS | INTS)


def relu(x: Any) -> Tensor:
    """``max(x, 0)`` elementwise (CANN ``Relu``); NaN stays NaN.

    Example:
        >>> y = aioge.ops.relu(x)
    """
    return _unary("Relu", "relu", x, FLOATS | INTS)


def leaky_relu(x: Any, alpha: float = 0.01) -> Tensor:
    """``x if x > 0 else alpha * x`` (CANN ``LeakyRelu``, attr ``negative_slope``; ONNX default alpha).

    Example:
        >>> y = aioge.ops.leaky_relu(x, alpha=0.1)
    """
    return _unary("LeakyRelu", "leaky_relu", x, FLOATS, {"negative_slope": float(alpha)})


def sigmoid(x: Any) -> Tensor:
    """Logistic ``1 / (1 + e**-x)`` (CANN ``Sigmoid``).

    Example:
        >>> y = aioge.ops.sigmoid(x)
    """
    return _unary("Sigmoid", "sigmoid", x, FLOATS)


def tanh(x: Any) -> Tensor:
    """Hyperbolic tangent (CANN ``Tanh``).

    Example:
        >>> y = aioge.ops.tanh(x)
    """
    return _unary("Tanh", "tanh", x, FLOATS)


def gelu(x: Any, approximate: str = "none") -> Tensor:
    """GELU as in ONNX ``Gelu``: ``approximate="none"`` is ``0.5 x (1 + erf(x / sqrt 2))``
    (CANN ``GeluV2``); ``"tanh"`` is the tanh approximation (CANN ``Gelu``).

    Example:
        >>> y = aioge.ops.gelu(x, approximate="tanh")
    """
    if approximate == "tanh":
        return _unary("Gelu", "gelu", x, FLOATS)
    if approximate != "none":
        raise ValueError(f"gelu: approximate must be 'none' or 'tanh', got {approximate!r}")
    return _unary("GeluV2", "gelu", x, FLOATS, {"approximate": "none"})


def fast_gelu(x: Any) -> Tensor:
    """``x * sigmoid(1.702 x)`` (CANN ``FastGelu``).

    Example:
        >>> y = aioge.ops.fast_gelu(x)
    """
    return _unary("FastGelu", "fast_gelu", x, FLOATS)


def swish(x: Any, scale: float = 1.0) -> Tensor:
    """``x * sigmoid(scale * x)`` (CANN ``Swish``); SiLU for ``scale=1``.

    Example:
        >>> y = aioge.ops.swish(x)
    """
    return _unary("Swish", "swish", x, FLOATS, {"scale": float(scale)})


def softplus(x: Any) -> Tensor:
    """``log(1 + e**x)``, computed without overflow (CANN ``Softplus``).

    Example:
        >>> y = aioge.ops.softplus(x)
    """
    return _unary("Softplus", "softplus", x, FLOATS)


def erf(x: Any) -> Tensor:
    """Error function (CANN ``Erf``).

    Example:
        >>> y = aioge.ops.erf(x)
    """
    return _unary("Erf", "erf", x, FLOATS)


def sin(x: Any) -> Tensor:
    """Sine (CANN ``Sin``).

    Example:
        >>> y = aioge.ops.sin(x)
    """
    return _unary("Sin", "sin", x, FLOATS)


def cos(x: Any) -> Tensor:
    """Cosine (CANN ``Cos``).

    Example:
        >>> y = aioge.ops.cos(x)
    """
    return _unary("Cos", "cos", x, FLOATS)


def floor(x: Any) -> Tensor:
    """Round toward -inf (CANN ``Floor``).

    Example:
        >>> y = aioge.ops.floor(x)
    """
    return _unary("Floor", "floor", x, FLOATS)


def ceil(x: Any) -> Tensor:
    """Round toward +inf (CANN ``Ceil``).

    Example:
        >>> y = aioge.ops.ceil(x)
    """
    return _unary("Ceil", "ceil", x, FLOATS)


def round(x: Any, decimals: int = 0) -> Tensor:
    """Round half to even, like ``numpy.round`` (CANN ``Round``, attr ``decimals``).

    Example:
        >>> y = aioge.ops.round(x, decimals=2)
    """
    attrs = {"decimals": int(decimals)} if decimals else None
    return _unary("Round", "round", x, FLOATS, attrs)


def sign(x: Any) -> Tensor:
    """-1, 0 or 1 by the sign of ``x``; NaN stays NaN (CANN ``Sign``).

    Example:
        >>> y = aioge.ops.sign(x)
    """
    return _unary("Sign", "sign", x, FLOATS | INTS)


def clip(x: Any, min: Any = None, max: Any = None) -> Tensor:
    """``numpy.clip(x, min, max)``: ``minimum(maximum(x, min), max)`` (CANN ``ClipByValue``).

    ``min``/``max`` are scalars or tensors broadcastable to ``x``; ``None``
    means unbounded on that side.

    Example:
        >>> y = aioge.ops.clip(x, 0.0, 6.0)
    """
    x = require_tensor(x)
    check_dtype("clip", x.dtype, FLOATS | INTS)
    if x.dtype in FLOATS:
        lo_default: Any = -np.inf
        hi_default: Any = np.inf
    else:
        info = np.iinfo(x.dtype)
        lo_default, hi_default = info.min, info.max
    lo = as_tensor_like(lo_default if min is None else min, x)
    hi = as_tensor_like(hi_default if max is None else max, x)
    for name, t in (("min", lo), ("max", hi)):
        if dtype_of(t) != x.dtype:
            raise TypeError(f"clip: {name} has dtype {dtype_of(t)}, x has {x.dtype}")
    out = broadcast_shape("clip", x.shape, shape_of(lo), shape_of(hi))
    return emit("ClipByValue", [x, lo, hi], [(out, x.dtype)])[0]


def cast(x: Any, dtype: dtypes.DTypeLike) -> Tensor:
    """Convert to ``dtype`` (CANN ``Cast`` with ``dst_type``).

    Float to integer truncates toward zero and saturates at the integer
    range (NaN becomes 0); integer to integer wraps like ``numpy.astype``.

    Example:
        >>> y = aioge.ops.cast(x, "float16")
    """
    x = require_tensor(x)
    dt = dtypes.normalize(dtype)
    check_dtype("cast", x.dtype, ALL | _WIDE_UINTS)
    check_dtype("cast", dt, ALL | _WIDE_UINTS, "the target dtype")
    return emit("Cast", [x], [(x.shape, dt)], {"dst_type": int(dtypes.to_acl(dt))})[0]
