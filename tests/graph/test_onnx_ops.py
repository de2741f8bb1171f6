"""Every supported ONNX op: load_onnx -> (optimize) -> run_reference against onnxruntime,
and the CANN lowering (emulated) against the reference."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import mutually_broadcastable_shapes
from onnx import TensorProto, helper, numpy_helper

from aioge.graph import load_onnx, optimize
from aioge.graph.reference import run_reference
from tests.graph.cann_emulator import run_lowered
from tests.graph.onnx_util import assert_close, check_against_ort, make_model, one_op, rand

HYP = settings(
    max_examples=30,
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)


_DEVICE: list[Any] = []


@pytest.fixture(scope="module", autouse=True)
def _device() -> Any:
    """The host runtime, so every op also runs through the real kernels."""
    import aioge

    dev = aioge.open_device(0)
    _DEVICE.append(dev)
    yield dev
    _DEVICE.clear()
    dev.close()


def run_on_device(g: Any, feeds: dict[str, np.ndarray], *, optimize_level: int, mode: str) -> dict[str, np.ndarray]:
    import asyncio

    from aioge.runtime.graphs.compile import compile_graph

    model = compile_graph(_DEVICE[0], g, optimize=optimize_level, mode=mode)
    try:
        return asyncio.run(model.execute({n: feeds[n] for n in model.inputs}))
    finally:
        model.close()


def check(model: Any, feeds: dict[str, np.ndarray], **kw: Any) -> None:
    check_against_ort(model, feeds, **kw)
    g = load_onnx(model)
    for level in (0, 2):
        og = optimize(g, level=level)
        ref = run_reference(og, feeds)
        assert_close(run_lowered(og, feeds), ref, what=f"lowered level {level}: ")
        # and on the host runtime's real kernels, sunk at level 2, per op at level 0
        got = run_on_device(g, feeds, optimize_level=level, mode="sunk" if level else "per_op")
        assert_close(got, ref, what=f"device level {level}: ")


X = rand(2, 3, 4, 5)
POS = rand(2, 3, 4, 5, low=0.1, high=3.0)
B = rand(1, 3, 1, 5, seed=1)
I64 = np.array([[3, -1, 0], [2, 5, -4]], np.int64)

F32 = np.float32
UNARY_CASES = [
    ("Sqrt", POS, {}),
    ("Exp", X, {}),
    ("Log", POS, {}),
    ("Abs", X, {}),
    ("Neg", X, {}),
    ("Erf", X, {}),
    ("Reciprocal", POS, {}),
    ("Relu", X, {}),
    ("LeakyRelu", X, {"alpha": 0.2}),
    ("Elu", X, {"alpha": 0.7}),
    ("Selu", X, {}),
    ("Selu", X, {"alpha": 1.5, "gamma": 0.5}),
    ("Sigmoid", X, {}),
    ("Tanh", X, {}),
    ("Softplus", rand(2, 50, low=-30, high=30), {}),
    ("Sign", np.array([-2, 0, 3.5], F32), {}),
    ("Shrink", X, {"bias": 0.3, "lambd": 0.8}),
    ("Shrink", X, {}),
    ("Identity", X, {}),
    ("Softmax", X, {"axis": 1}),
    ("LogSoftmax", X, {"axis": -1}),
    ("Softmax", X, {}),
    ("GlobalAveragePool", X, {}),
    ("GlobalMaxPool", X, {}),
    ("LRN", X, {"size": 3}),
    ("LRN", X, {"size": 5, "alpha": 0.01, "beta": 0.5, "bias": 2.0}),
    ("Flatten", X, {"axis": 2}),
    ("Flatten", X, {"axis": 0}),
    ("Flatten", X, {"axis": -1}),
    ("Transpose", X, {"perm": [0, 2, 3, 1]}),
    ("Transpose", X, {}),
]


@pytest.mark.parametrize(("op", "x", "attrs"), UNARY_CASES, ids=[c[0] for c in UNARY_CASES])
def test_unary(op: str, x: np.ndarray, attrs: dict) -> None:
    check(one_op(op, {"x": x}, attrs), {"x": x})


@pytest.mark.parametrize("approximate", ["none", "tanh"])
def test_gelu_opset20(approximate: str) -> None:
    x = rand(3, 40, low=-6, high=6)
    check(one_op("Gelu", {"x": x}, {"approximate": approximate}, opset=20), {"x": x})


BINARY = ["Add", "Sub", "Mul", "Div", "Pow", "Max", "Min", "Sum", "Mean", "PRelu"]


@pytest.mark.parametrize("op", BINARY)
def test_binary_broadcast(op: str) -> None:
    a = POS if op == "Pow" else X
    b = rand(3, 1, 5, seed=2, low=0.5, high=1.5) if op in ("Pow", "Div") else rand(3, 1, 5, seed=2)
    if op == "PRelu":
        b = rand(3, 1, 1, seed=2)
    check(one_op(op, {"a": a, "b": b}), {"a": a, "b": b})


@given(
    shapes=mutually_broadcastable_shapes(num_shapes=2, min_dims=0, max_dims=4, max_side=4),
    op=st.sampled_from(["Add", "Sub", "Mul", "Div", "Max", "Min"]),
)
@HYP
def test_binary_broadcast_hypothesis(shapes: Any, op: str) -> None:
    a = rand(*shapes.input_shapes[0], seed=3)
    b = rand(*shapes.input_shapes[1], seed=4, low=0.5, high=2.0)
    check_against_ort(one_op(op, {"a": a, "b": b}), {"a": a, "b": b}, levels=(0,))


def test_variadic_three_inputs() -> None:
    a, b, c = rand(3, 1, seed=1), rand(1, 4, seed=2), rand(4, seed=3)
    for op in ("Max", "Min", "Sum", "Mean"):
        check(one_op(op, {"a": a, "b": b, "c": c}), {"a": a, "b": b, "c": c})


def test_integer_arithmetic_and_comparisons() -> None:
    a = np.array([[7, -7, 3], [-9, 8, 1]], np.int64)
    b = np.array([2, 2, -2], np.int64)
    for op in ("Add", "Sub", "Mul", "Div"):
        check_against_ort(one_op(op, {"a": a, "b": b}, out_dtype=np.int64), {"a": a, "b": b})
    for op in ("Equal", "Less", "Greater"):
        check(one_op(op, {"a": a, "b": b}, out_dtype=np.bool_), {"a": a, "b": b})
    fa, fb = X, np.round(X * 2) / 2
    for op in ("Less", "Greater", "Equal"):
        check(one_op(op, {"a": fa, "b": fb}, out_dtype=np.bool_), {"a": fa, "b": fb})


def test_not_where_cast() -> None:
    m = X > 0
    check(one_op("Not", {"m": m}, out_dtype=np.bool_), {"m": m})
    c, y = X > 0, rand(3, 1, 1, seed=5)
    check(one_op("Where", {"c": c, "x": X, "y": y}), {"c": c, "x": X, "y": y})
    check(one_op("Cast", {"x": X * 10}, {"to": TensorProto.INT32}, out_dtype=np.int32), {"x": X * 10})
    check(one_op("Cast", {"i": I64}, {"to": TensorProto.FLOAT}), {"i": I64})
    check(one_op("Cast", {"x": X}, {"to": TensorProto.BOOL}, out_dtype=np.bool_), {"x": X})
    check(one_op("Cast", {"x": X}, {"to": TensorProto.FLOAT16}, out_dtype=np.float16), {"x": X})


@pytest.mark.parametrize("opset", [11, 13, 17])
def test_clip(opset: int) -> None:
    lo, hi = np.array(-0.5, F32), np.array(0.7, F32)
    check(one_op("Clip", {"x": X}, initializers={"lo": lo, "hi": hi}, opset=opset), {"x": X})
    check(one_op("Clip", {"x": X}, initializers={"lo": lo}, opset=opset), {"x": X})
    check(
        one_op("Clip", {"x": X}, initializers={"hi": hi}, input_order=["x", "", "hi"], opset=opset), {"x": X}
    )


@pytest.mark.parametrize(
    ("a", "b"),
    [
        ((4, 5), (5, 3)),
        ((2, 3, 4, 5), (5, 6)),
        ((3, 1, 4, 5), (2, 5, 2)),
        ((5,), (2, 5, 3)),
        ((2, 3, 4), (4,)),
    ],
)
def test_matmul(a: tuple, b: tuple) -> None:
    x, w = rand(*a, seed=1), rand(*b, seed=2)
    check(one_op("MatMul", {"x": x, "w": w}), {"x": x, "w": w})


@pytest.mark.parametrize(
    ("attrs", "c_shape"),
    [
        ({}, (3,)),
        ({"transA": 1}, (4, 3)),
        ({"transB": 1, "alpha": 0.5, "beta": 2.0}, (1, 3)),
        ({"transA": 1, "transB": 1}, None),
        ({"alpha": 2.0}, ()),
        ({"beta": 0.0}, (3,)),
    ],
)
def test_gemm(attrs: dict, c_shape: tuple | None) -> None:
    a = rand(5, 4, seed=1) if attrs.get("transA") else rand(4, 5, seed=1)
    b = rand(3, 5, seed=2) if attrs.get("transB") else rand(5, 3, seed=2)
    inits = {"b": b}
    if c_shape is not None:
        inits["c"] = rand(*c_shape, seed=3)
    check(one_op("Gemm", {"a": a}, attrs, initializers=inits), {"a": a})


@given(
    n=st.integers(1, 2),
    cin_g=st.integers(1, 3),
    cout_g=st.integers(1, 3),
    group=st.integers(1, 2),
    k=st.tuples(st.integers(1, 3), st.integers(1, 3)),
    s=st.tuples(st.integers(1, 2), st.integers(1, 2)),
    d=st.tuples(st.integers(1, 2), st.integers(1, 2)),
    p=st.tuples(*[st.integers(0, 2)] * 4),
    hw=st.tuples(st.integers(5, 9), st.integers(5, 9)),
    bias=st.booleans(),
    auto_pad=st.sampled_from(["NOTSET", "NOTSET", "SAME_UPPER", "SAME_LOWER", "VALID"]),
)
@HYP
def test_conv_hypothesis(
    n: int,
    cin_g: int,
    cout_g: int,
    group: int,
    k: tuple,
    s: tuple,
    d: tuple,
    p: tuple,
    hw: tuple,
    bias: bool,
    auto_pad: str,
) -> None:
    if auto_pad.startswith("SAME"):
        d = (1, 1)  # onnxruntime rejects dilation with SAME_*
    x = rand(n, cin_g * group, *hw, seed=1)
    inits = {"w": rand(cout_g * group, cin_g, *k, seed=2)}
    if bias:
        inits["b"] = rand(cout_g * group, seed=3)
    attrs: dict[str, Any] = {"strides": list(s), "dilations": list(d), "group": group, "auto_pad": auto_pad}
    if auto_pad == "NOTSET":
        attrs["pads"] = list(p)
    check(one_op("Conv", {"x": x}, attrs, initializers=inits), {"x": x})


def test_conv_1d() -> None:
    x = rand(2, 3, 11)
    check(
        one_op(
            "Conv",
            {"x": x},
            {"strides": [2], "pads": [1, 2], "dilations": [2]},
            initializers={"w": rand(4, 3, 3, seed=2), "b": rand(4, seed=3)},
        ),
        {"x": x},
    )


@given(
    cin_g=st.integers(1, 3),
    cout_g=st.integers(1, 3),
    group=st.integers(1, 2),
    k=st.tuples(st.integers(1, 3), st.integers(1, 3)),
    s=st.tuples(st.integers(1, 3), st.integers(1, 3)),
    d=st.tuples(st.integers(1, 2), st.integers(1, 2)),
    p=st.tuples(*[st.integers(0, 1)] * 4),
    hw=st.tuples(st.integers(2, 5), st.integers(2, 5)),
    bias=st.booleans(),
    mode=st.sampled_from(["pads", "output_padding", "output_shape", "SAME_UPPER", "SAME_LOWER"]),
)
@HYP
def test_conv_transpose_hypothesis(
    cin_g: int,
    cout_g: int,
    group: int,
    k: tuple,
    s: tuple,
    d: tuple,
    p: tuple,
    hw: tuple,
    bias: bool,
    mode: str,
) -> None:
    x = rand(1, cin_g * group, *hw, seed=1)
    inits = {"w": rand(cin_g * group, cout_g, *k, seed=2)}
    if bias:
        inits["b"] = rand(cout_g * group, seed=3)
    attrs: dict[str, Any] = {"strides": list(s), "dilations": list(d), "group": group}
    if mode == "pads":
        attrs["pads"] = list(p)
    elif mode == "output_padding":
        attrs["output_padding"] = [s[0] - 1, s[1] - 1]
    elif mode == "output_shape":
        attrs["output_shape"] = [(hw[i] - 1) * s[i] + (k[i] - 1) * d[i] + 1 - p[i] for i in range(2)]
    else:
        attrs["auto_pad"] = mode
    check(one_op("ConvTranspose", {"x": x}, attrs, initializers=inits), {"x": x})


def test_batch_and_instance_norm() -> None:
    c = 3
    stats = {
        "s": rand(c, seed=1, low=0.5, high=2),
        "b": rand(c, seed=2),
        "m": rand(c, seed=3),
        "v": rand(c, seed=4, low=0.5, high=2),
    }
    for x in (X, rand(4, 3, seed=6), rand(2, 3, 7, seed=7)):
        check(one_op("BatchNormalization", {"x": x}, {"epsilon": 1e-3}, initializers=stats), {"x": x})
    for opset in (9, 14):
        check(one_op("BatchNormalization", {"x": X}, initializers=stats, opset=opset), {"x": X})
    check(
        one_op(
            "InstanceNormalization",
            {"x": X},
            {"epsilon": 1e-4},
            initializers={"s": stats["s"], "b": stats["b"]},
        ),
        {"x": X},
    )


@pytest.mark.parametrize(
    ("axis", "bias", "n_out"), [(-1, True, 1), (1, True, 1), (2, False, 1), (-1, True, 3)]
)
def test_layer_norm(axis: int, bias: bool, n_out: int) -> None:
    norm = X.shape[axis:]
    inits = {"g": rand(*norm, seed=1, low=0.5, high=1.5)}
    if bias:
        inits["b"] = rand(*norm, seed=2)
    outs = {"y0": np.float32, "y1": np.float32, "y2": np.float32}
    m = one_op(
        "LayerNormalization", {"x": X}, {"axis": axis, "epsilon": 1e-4}, initializers=inits, n_out=n_out
    )
    if n_out == 3:
        m = make_model(list(m.graph.node), {"x": X}, outs, inits)
    check(m, {"x": X})


@given(
    k=st.tuples(st.integers(1, 3), st.integers(1, 3)),
    s=st.tuples(st.integers(1, 3), st.integers(1, 3)),
    p=st.tuples(*[st.integers(0, 2)] * 4),
    ceil=st.integers(0, 1),
    cip=st.integers(0, 1),
    kind=st.sampled_from(["MaxPool", "AveragePool"]),
    auto_pad=st.sampled_from(["NOTSET", "NOTSET", "NOTSET", "SAME_UPPER", "SAME_LOWER", "VALID"]),
)
@HYP
def test_pool_hypothesis(k: tuple, s: tuple, p: tuple, ceil: int, cip: int, kind: str, auto_pad: str) -> None:
    p = tuple(min(v, k[i % 2] - 1) for i, v in enumerate(p))  # onnxruntime needs pad < kernel
    # onnxruntime computes negative SAME pads (an error) when the stride exceeds the kernel
    assume(not auto_pad.startswith("SAME") or all(a >= b for a, b in zip(k, s, strict=False)))
    x = rand(2, 3, 7, 8)
    attrs: dict[str, Any] = {"kernel_shape": list(k), "strides": list(s), "auto_pad": auto_pad}
    if auto_pad == "NOTSET":
        attrs["pads"] = list(p)
        attrs["ceil_mode"] = ceil
    if kind == "AveragePool":
        attrs["count_include_pad"] = cip
    check(one_op(kind, {"x": x}, attrs), {"x": x})


def test_pool_1d_and_dilated_maxpool() -> None:
    x = rand(2, 3, 10)
    check(one_op("MaxPool", {"x": x}, {"kernel_shape": [3], "strides": [2], "pads": [1, 1]}), {"x": x})
    check(
        one_op("AveragePool", {"x": x}, {"kernel_shape": [2], "count_include_pad": 1, "pads": [1, 0]}),
        {"x": x},
    )
    check_against_ort(one_op("MaxPool", {"x": X}, {"kernel_shape": [2, 2], "dilations": [2, 1]}), {"x": X})


@pytest.mark.parametrize(
    "attrs",
    [
        {"kernel_shape": [3, 3], "strides": [2, 2], "pads": [1, 1, 1, 1]},
        {"kernel_shape": [2, 3], "strides": [1, 2], "dilations": [2, 1], "ceil_mode": 1},
        {"kernel_shape": [2, 2], "strides": [2, 2], "storage_order": 1},
        {"kernel_shape": [2, 2, 2], "strides": [1, 2, 2]},
    ],
)
def test_maxpool_indices(attrs: dict[str, Any]) -> None:
    """The Indices output: flat input positions (row- or column-major) of each window's first max."""
    x = rand(2, 3, *(7, 8, 6)[: len(attrs["kernel_shape"])])
    m = make_model([helper.make_node("MaxPool", ["x"], ["y", "i"], **attrs)], {"x": x}, {"y": F32, "i": np.int64})
    check(m, {"x": x})


@pytest.mark.parametrize("shape", [(4, 3), (2, 3, 5), (2, 3, 2, 2, 2)])
def test_batchnorm_training_mode(shape: tuple[int, ...]) -> None:
    """Batch statistics over every axis but 1 and the running mean/variance update (onnxruntime
    CPU builds refuse training mode: against numpy, the ONNX reference's formula)."""
    x, s, b = rand(*shape), rand(3, seed=1), rand(3, seed=2)
    mean, var = rand(3, seed=3), rand(3, low=0.5, high=2.0, seed=4)
    outs = {"y": F32, "rm": F32, "rv": F32}
    bn = helper.make_node("BatchNormalization", ["x", "s", "b", "m", "v"], list(outs), training_mode=1,
                          momentum=0.8, epsilon=1e-3)  # fmt: skip
    m = make_model([bn], {"x": x}, outs, {"s": s, "b": b, "m": mean, "v": var}, opset=15)
    axes = tuple(i for i in range(len(shape)) if i != 1)
    col = (1, 3, *[1] * (len(shape) - 2))
    bm, bv = x.mean(axis=axes), x.var(axis=axes)
    want = {"y": (x - bm.reshape(col)) / np.sqrt(bv.reshape(col) + 1e-3) * s.reshape(col) + b.reshape(col),
            "rm": mean * 0.8 + bm * 0.2, "rv": var * 0.8 + bv * 0.2}  # fmt: skip
    want = {k: v.astype(np.float32) for k, v in want.items()}
    g = load_onnx(m)
    assert_close(run_reference(optimize(g), {"x": x}), want)
    assert_close(run_on_device(g, {"x": x}, optimize_level=2, mode="sunk"), want)


@pytest.mark.parametrize("opset", [12, 13])
def test_dropout_inference(opset: int) -> None:
    m = make_model(
        [helper.make_node("Dropout", ["x"], ["y", "mask"])],
        {"x": X},
        {"y": np.float32, "mask": np.bool_},
        opset=opset,
    )
    check(m, {"x": X})
    check(one_op("Dropout", {"x": X}, initializers={"r": np.array(0.3, F32)}, opset=opset), {"x": X})


def test_reshape_squeeze_unsqueeze_concat() -> None:
    check(one_op("Reshape", {"x": X}, initializers={"s": np.array([0, -1, 5], np.int64)}), {"x": X})
    x1 = rand(2, 1, 4, 1)
    check(one_op("Squeeze", {"x": x1}, initializers={"a": np.array([1, -1], np.int64)}), {"x": x1})
    check(one_op("Squeeze", {"x": x1}), {"x": x1})
    check(one_op("Unsqueeze", {"x": X}, initializers={"a": np.array([0, -1], np.int64)}), {"x": X})
    a, b, c = rand(2, 1, 4), rand(2, 3, 4), rand(2, 2, 4)
    check(one_op("Concat", {"a": a, "b": b, "c": c}, {"axis": 1}), {"a": a, "b": b, "c": c})


@pytest.mark.parametrize(
    ("opset", "split", "n"), [(13, [1, 3, 1], 3), (13, None, 2), (18, None, 3), (11, [2, 3], 2)]
)
def test_split(opset: int, split: list | None, n: int) -> None:
    x = rand(2, 5, 3)
    inputs = ["x"]
    inits = {}
    attrs: dict[str, Any] = {"axis": 1}
    if split is not None and opset >= 13:
        inits["s"] = np.array(split, np.int64)
        inputs.append("s")
    elif split is not None:
        attrs["split"] = split
    if opset >= 18 and split is None:
        attrs["num_outputs"] = n
    if split is None and opset < 18:
        x = rand(2, 6, 3)
    outs = [f"y{i}" for i in range(n)]
    m = make_model([helper.make_node("Split", inputs, outs, **attrs)], {"x": x}, outs, inits, opset)
    check(m, {"x": x})


@given(data=st.data())
@HYP
def test_slice_hypothesis(data: st.DataObject) -> None:
    shape = data.draw(st.lists(st.integers(1, 6), min_size=1, max_size=3))
    axes = data.draw(
        st.lists(
            st.integers(-len(shape), len(shape) - 1),
            min_size=1,
            max_size=len(shape),
            unique_by=lambda a: a % len(shape),
        )
    )
    starts = [data.draw(st.integers(-8, 8)) for _ in axes]
    ends = [data.draw(st.integers(-8, 8)) for _ in axes]
    steps = [data.draw(st.sampled_from([1, 2, -1, -2, 3])) for _ in axes]
    x = rand(*shape)
    inits = {
        "s": np.array(starts, np.int64),
        "e": np.array(ends, np.int64),
        "a": np.array(axes, np.int64),
        "st": np.array(steps, np.int64),
    }
    check(one_op("Slice", {"x": x}, initializers=inits), {"x": x})


def test_slice_extreme_bounds() -> None:
    big = np.iinfo(np.int64)
    inits = {
        "s": np.array([big.max, 0], np.int64),
        "e": np.array([big.min, big.max], np.int64),
        "a": np.array([0, 1], np.int64),
        "st": np.array([-1, 2], np.int64),
    }
    check(one_op("Slice", {"x": rand(4, 5)}, initializers=inits), {"x": rand(4, 5)})


@pytest.mark.parametrize("axis", [0, 1, -1])
def test_gather(axis: int) -> None:
    x = rand(4, 6, 5)
    check(
        one_op("Gather", {"x": x}, {"axis": axis}, initializers={"i": np.array([[1, -1], [0, 2]], np.int64)}),
        {"x": x},
    )
    idx = np.array([3, 0, -2], np.int64)
    check(one_op("Gather", {"x": x, "i": idx}, {"axis": axis}), {"x": x, "i": idx})


def test_expand_tile_shape_constant_of_shape() -> None:
    x = rand(3, 1)
    check(one_op("Expand", {"x": x}, initializers={"s": np.array([2, 1, 4], np.int64)}), {"x": x})
    check(one_op("Tile", {"x": x}, initializers={"r": np.array([2, 3], np.int64)}), {"x": x})
    check(one_op("Shape", {"x": X}, out_dtype=np.int64), {"x": X})
    check(one_op("Shape", {"x": X}, {"start": 1, "end": -1}, opset=15, out_dtype=np.int64), {"x": X})
    nodes = [
        helper.make_node(
            "ConstantOfShape", ["s"], ["c"], value=numpy_helper.from_array(np.array([1.5], F32))
        ),
        helper.make_node("Add", ["x", "c"], ["y0"]),
    ]
    check(make_model(nodes, {"x": x}, ["y0"], {"s": np.array([2, 3, 4], np.int64)}), {"x": x})
    nodes = [helper.make_node("Shape", ["x"], ["s"]), helper.make_node("ConstantOfShape", ["s"], ["y0"])]
    check(make_model(nodes, {"x": x}, ["y0"]), {"x": x})


def test_constant_node_variants() -> None:
    nodes = [
        helper.make_node("Constant", [], ["c1"], value=numpy_helper.from_array(rand(3, 1, seed=9))),
        helper.make_node("Constant", [], ["c2"], value_float=2.0),
        helper.make_node("Constant", [], ["c3"], value_floats=[1.0, 2.0, 3.0]),
        helper.make_node("Add", ["x", "c1"], ["t1"]),
        helper.make_node("Mul", ["t1", "c2"], ["t2"]),
        helper.make_node("Sub", ["t2", "c3"], ["y0"]),
    ]
    x = rand(3, 3)
    check(make_model(nodes, {"x": x}, ["y0"]), {"x": x})
    nodes = [
        helper.make_node("Constant", [], ["c"], value_ints=[3, 1]),
        helper.make_node("Reshape", ["x", "c"], ["y0"]),
    ]
    check(make_model(nodes, {"x": x[:1]}, ["y0"]), {"x": x[:1]})


@given(data=st.data())
@HYP
def test_pad_hypothesis(data: st.DataObject) -> None:
    shape = data.draw(st.lists(st.integers(2, 5), min_size=1, max_size=3))
    mode = data.draw(st.sampled_from(["constant", "reflect", "edge"]))
    lo = -1 if mode == "constant" else 0
    pads = [data.draw(st.integers(lo, min(d - 1, 3))) for d in shape * 2]
    x = rand(*shape)
    inits = {"p": np.array(pads, np.int64)}
    if mode == "constant":
        inits["v"] = np.array(1.25, F32)
    check(one_op("Pad", {"x": x}, {"mode": mode}, initializers=inits), {"x": x})


def test_pad_axes_opset18() -> None:
    x = rand(2, 3, 4)
    inits = {"p": np.array([1, 2, 0, 1], np.int64), "v": np.array(0.5, F32), "a": np.array([0, -1], np.int64)}
    check(one_op("Pad", {"x": x}, initializers=inits, opset=18), {"x": x})


@given(data=st.data())
@HYP
def test_reduce_hypothesis(data: st.DataObject) -> None:
    op = data.draw(st.sampled_from(["ReduceSum", "ReduceMean", "ReduceMax", "ReduceMin"]))
    shape = data.draw(st.lists(st.integers(1, 5), min_size=1, max_size=4))
    axes = data.draw(
        st.none()
        | st.lists(st.integers(-len(shape), len(shape) - 1), min_size=1, unique_by=lambda a: a % len(shape))
    )
    keep = data.draw(st.integers(0, 1))
    x = rand(*shape)
    inits = {"a": np.array(axes, np.int64)} if axes is not None else {}
    check(one_op(op, {"x": x}, {"keepdims": keep}, initializers=inits, opset=18), {"x": x})


def test_reduce_noop_with_empty_axes() -> None:
    check(one_op("ReduceSum", {"x": X}, {"noop_with_empty_axes": 1}, opset=13), {"x": X})
    check(one_op("ReduceMean", {"x": X}, {"noop_with_empty_axes": 1}, opset=18), {"x": X})


@given(perm=st.permutations(range(4)))
@HYP
def test_transpose_hypothesis(perm: list[int]) -> None:
    check(one_op("Transpose", {"x": X}, {"perm": list(perm)}), {"x": X})
