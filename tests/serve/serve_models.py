"""Small deterministic ONNX models with a symbolic batch dimension ``N``, for the serving tests and
``benchmarks/bench_serve.py``."""

from __future__ import annotations

import itertools

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

__all__ = ("mlp", "cnn", "identity", "two_inputs", "fixed", "sequence", "save")

_OPSET = [helper.make_opsetid("", 17)]


def _model(name: str, nodes, inputs, outputs, inits) -> onnx.ModelProto:
    g = helper.make_graph(nodes, name, inputs, outputs, inits)
    m = helper.make_model(g, opset_imports=_OPSET)
    m.ir_version = 8
    onnx.checker.check_model(m)
    return m


def mlp(dims=(16, 32, 8), seed: int = 0) -> onnx.ModelProto:
    """Gemm+Relu layers (no activation after the last): x[N, dims[0]] -> y[N, dims[-1]]."""
    rng = np.random.default_rng(seed)
    nodes, inits, x = [], [], "x"
    for i, (a, b) in enumerate(itertools.pairwise(dims)):
        w = (rng.standard_normal((a, b)) * np.sqrt(2.0 / a)).astype(np.float32)
        bias = (rng.standard_normal(b) * 0.1).astype(np.float32)
        inits += [numpy_helper.from_array(w, f"w{i}"), numpy_helper.from_array(bias, f"b{i}")]
        out = "y" if i == len(dims) - 2 else f"g{i}"
        nodes.append(helper.make_node("Gemm", [x, f"w{i}", f"b{i}"], [out], name=f"gemm{i}"))
        x = out
        if i < len(dims) - 2:
            nodes.append(helper.make_node("Relu", [x], [f"r{i}"], name=f"relu{i}"))
            x = f"r{i}"
    return _model("mlp", nodes, [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", dims[0]])],
                  [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", dims[-1]])], inits)  # fmt: skip


def cnn(channels: int = 3, size: int = 16, classes: int = 10, seed: int = 0) -> onnx.ModelProto:
    """Conv3x3-Relu-MaxPool-Conv3x3-Relu-GlobalAveragePool-Flatten-Gemm-Softmax: x[N,C,H,W] -> p[N, classes]."""
    rng = np.random.default_rng(seed)
    c1, c2 = 16, 32
    w1 = (rng.standard_normal((c1, channels, 3, 3)) * np.sqrt(2 / (channels * 9))).astype(np.float32)
    w2 = (rng.standard_normal((c2, c1, 3, 3)) * np.sqrt(2 / (c1 * 9))).astype(np.float32)
    wf = (rng.standard_normal((c2, classes)) * np.sqrt(1 / c2)).astype(np.float32)
    arrays = {"w1": w1, "b1": np.zeros(c1, np.float32), "w2": w2, "b2": np.zeros(c2, np.float32), "wf": wf,
              "bf": np.zeros(classes, np.float32)}
    inits = [numpy_helper.from_array(a, n) for n, a in arrays.items()]
    nodes = [
        helper.make_node("Conv", ["x", "w1", "b1"], ["c1"], pads=[1, 1, 1, 1], kernel_shape=[3, 3], name="conv1"),
        helper.make_node("Relu", ["c1"], ["r1"], name="relu1"),
        helper.make_node("MaxPool", ["r1"], ["p1"], kernel_shape=[2, 2], strides=[2, 2], name="pool1"),
        helper.make_node("Conv", ["p1", "w2", "b2"], ["c2"], pads=[1, 1, 1, 1], kernel_shape=[3, 3], name="conv2"),
        helper.make_node("Relu", ["c2"], ["r2"], name="relu2"),
        helper.make_node("GlobalAveragePool", ["r2"], ["gap"], name="gap"),
        helper.make_node("Flatten", ["gap"], ["flat"], axis=1, name="flatten"),
        helper.make_node("Gemm", ["flat", "wf", "bf"], ["logits"], name="fc"),
        helper.make_node("Softmax", ["logits"], ["p"], axis=1, name="softmax"),
    ]
    return _model("cnn", nodes, [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", channels, size, size])],
                  [helper.make_tensor_value_info("p", TensorProto.FLOAT, ["N", classes])], inits)  # fmt: skip


def identity(width: int = 16, elem=TensorProto.FLOAT) -> onnx.ModelProto:
    """y = x: the cost of everything around the model (the server's overhead)."""
    return _model("identity", [helper.make_node("Identity", ["x"], ["y"], name="id")],
                  [helper.make_tensor_value_info("x", elem, ["N", width])],
                  [helper.make_tensor_value_info("y", elem, ["N", width])], [])  # fmt: skip


def two_inputs(width: int = 4) -> onnx.ModelProto:
    """Two float inputs and an int32 one: s = a + b, p = a * b, k = c * 2 (three outputs)."""
    two = numpy_helper.from_array(np.array(2, np.int32), "two")
    nodes = [helper.make_node("Add", ["a", "b"], ["s"], name="add"),
             helper.make_node("Mul", ["a", "b"], ["p"], name="mul"),
             helper.make_node("Mul", ["c", "two"], ["k"], name="mul2")]  # fmt: skip
    f, i = TensorProto.FLOAT, TensorProto.INT32
    def vi(name, elem, dims):
        return helper.make_tensor_value_info(name, elem, dims)

    return _model("two_inputs", nodes, [vi("a", f, ["N", width]), vi("b", f, ["N", width]), vi("c", i, ["N", 2])],
                  [vi("s", f, ["N", width]), vi("p", f, ["N", width]), vi("k", i, ["N", 2])], [two])  # fmt: skip


def fixed(shape=(2, 3)) -> onnx.ModelProto:
    """A model without a batch dimension (static shapes): y = relu(x) + 1."""
    one = numpy_helper.from_array(np.ones((), np.float32), "one")
    return _model("fixed", [helper.make_node("Relu", ["x"], ["r"], name="relu"),
                            helper.make_node("Add", ["r", "one"], ["y"], name="add")],
                  [helper.make_tensor_value_info("x", TensorProto.FLOAT, list(shape))],
                  [helper.make_tensor_value_info("y", TensorProto.FLOAT, list(shape))], [one])  # fmt: skip


def sequence(width: int = 8, out: int = 4, seed: int = 0) -> onnx.ModelProto:
    """A sequence model: x[N, S, width] -> MatMul with a constant width x out, Relu -> y[N, S, out] (S symbolic)."""
    w = np.random.default_rng(seed).standard_normal((width, out)).astype(np.float32)
    nodes = [helper.make_node("MatMul", ["x", "w"], ["m"], name="matmul"),
             helper.make_node("Relu", ["m"], ["y"], name="relu")]  # fmt: skip
    return _model("sequence", nodes, [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", "S", width])],
                  [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", "S", out])],
                  [numpy_helper.from_array(w, "w")])  # fmt: skip


def save(model: onnx.ModelProto, path) -> str:
    onnx.save_model(model, str(path))
    return str(path)
