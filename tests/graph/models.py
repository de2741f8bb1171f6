"""Deterministic ONNX model builders shared by tests and ``benchmarks/bench_graph.py``.

Every builder takes a ``seed`` and returns an ``onnx.ModelProto``; the
defaults are realistic sizes, ``small=True`` variants are for tests.  Feed a
model with :func:`sample_inputs`.

* :func:`mlp` — Gemm/MatMul+Add layers with Relu, softmax head;
* :func:`residual_cnn` — ResNet-style stem (Conv7x7/BN/Relu/MaxPool), basic
  blocks with identity and projection shortcuts, GlobalAveragePool, Gemm;
* :func:`inception` — inception modules: 1x1, 1x1->3x3, 1x1->3x3->3x3 and
  pool->1x1 branches joined by Concat;
* :func:`attention` — a transformer encoder block: LayerNormalization,
  multi-head self-attention (Reshape/Transpose/MatMul/Softmax, shape computed
  with Shape/Gather/Concat like exporters do), erf-Gelu MLP, residuals.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable
from typing import Any

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

__all__ = ("mlp", "residual_cnn", "inception", "attention", "sample_inputs", "MODELS", "SMALL")


class _Builder:
    def __init__(self, name: str, seed: int) -> None:
        self.name = name
        self.rng = np.random.default_rng(seed)
        self.nodes: list[onnx.NodeProto] = []
        self.inits: list[onnx.TensorProto] = []
        self.n = 0

    def uid(self, prefix: str) -> str:
        self.n += 1
        return f"{prefix}{self.n}"

    def init(self, prefix: str, arr: np.ndarray) -> str:
        name = self.uid(prefix)
        self.inits.append(numpy_helper.from_array(np.asarray(arr), name))
        return name

    def weight(self, prefix: str, shape: tuple[int, ...], fan_in: int) -> str:
        return self.init(prefix, (self.rng.standard_normal(shape) * np.sqrt(2.0 / fan_in)).astype(np.float32))

    def op(self, op: str, inputs: list[str], n_out: int = 1, **attrs: Any) -> Any:
        base = self.uid(op.lower())
        outs = [base] if n_out == 1 else [f"{base}_{i}" for i in range(n_out)]
        self.nodes.append(helper.make_node(op, inputs, outs, name=base, **attrs))
        return outs[0] if n_out == 1 else outs

    def conv_bn(self, x: str, cin: int, cout: int, k: int, stride: int = 1, relu: bool = True) -> str:
        w = self.weight("w", (cout, cin, k, k), cin * k * k)
        y = self.op("Conv", [x, w], kernel_shape=[k, k], strides=[stride, stride], pads=[k // 2] * 4)
        r = self.rng
        bn = [
            self.init("bn_s", r.uniform(0.5, 1.5, cout).astype(np.float32)),
            self.init("bn_b", r.uniform(-0.2, 0.2, cout).astype(np.float32)),
            self.init("bn_m", r.uniform(-0.2, 0.2, cout).astype(np.float32)),
            self.init("bn_v", r.uniform(0.5, 1.5, cout).astype(np.float32)),
        ]
        y = self.op("BatchNormalization", [y, *bn], epsilon=1e-5)
        return self.op("Relu", [y]) if relu else y

    def model(self, inputs: list[onnx.ValueInfoProto], outputs: list[str], opset: int) -> onnx.ModelProto:
        outs = [helper.make_tensor_value_info(o, TensorProto.FLOAT, None) for o in outputs]
        g = helper.make_graph(self.nodes, self.name, inputs, outs, self.inits)
        ir = 8 if opset <= 18 else 9 if opset <= 20 else 10
        return helper.make_model(
            g, opset_imports=[helper.make_opsetid("", opset)], ir_version=ir, producer_name="aioge-tests"
        )


def _input(name: str, shape: tuple[int, ...]) -> onnx.ValueInfoProto:
    return helper.make_tensor_value_info(name, TensorProto.FLOAT, list(shape))


def mlp(
    *,
    batch: int = 64,
    sizes: tuple[int, ...] = (784, 1024, 1024, 10),
    seed: int = 0,
    opset: int = 17,
    small: bool = False,
) -> onnx.ModelProto:
    """MLP: alternating Gemm(transB) and MatMul+Add layers with Relu, then Softmax."""
    if small:
        batch, sizes = 4, (16, 32, 24, 5)
    b = _Builder("mlp", seed)
    x = "x"
    for i, (cin, cout) in enumerate(itertools.pairwise(sizes)):
        if i % 2 == 0:
            w = b.weight("w", (cout, cin), cin)
            bias = b.init("b", (b.rng.standard_normal(cout) * 0.1).astype(np.float32))
            x = b.op("Gemm", [x, w, bias], transB=1)
        else:
            w = b.weight("w", (cin, cout), cin)
            bias = b.init("b", (b.rng.standard_normal(cout) * 0.1).astype(np.float32))
            x = b.op("Add", [b.op("MatMul", [x, w]), bias])
        if i < len(sizes) - 2:
            x = b.op("Relu", [x])
    y = b.op("Softmax", [x], axis=-1)
    return b.model([_input("x", (batch, sizes[0]))], [y], opset)


def residual_cnn(
    *,
    batch: int = 1,
    channels: int = 64,
    size: int = 56,
    blocks: int = 2,
    classes: int = 1000,
    seed: int = 0,
    opset: int = 17,
    small: bool = False,
) -> onnx.ModelProto:
    """ResNet-ish: stem to ``channels`` x ``size`` x ``size``, ``blocks`` basic blocks, a strided
    projection block, GlobalAveragePool and a Gemm classifier.  Input is 4*size square."""
    if small:
        batch, channels, size, blocks, classes = 2, 8, 8, 1, 10
    b = _Builder("residual_cnn", seed)
    x = b.conv_bn("x", 3, channels, 7, stride=2)
    x = b.op("MaxPool", [x], kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1])
    c = channels
    for _ in range(blocks):
        y = b.conv_bn(x, c, c, 3)
        y = b.conv_bn(y, c, c, 3, relu=False)
        x = b.op("Relu", [b.op("Add", [y, x])])
    # projection block: stride 2, 2c channels, 1x1 conv + BN shortcut (a parallel branch)
    y = b.conv_bn(x, c, 2 * c, 3, stride=2)
    y = b.conv_bn(y, 2 * c, 2 * c, 3, relu=False)
    sc = b.conv_bn(x, c, 2 * c, 1, stride=2, relu=False)
    x = b.op("Relu", [b.op("Add", [y, sc])])
    x = b.op("GlobalAveragePool", [x])
    x = b.op("Flatten", [x], axis=1)
    w = b.weight("fc_w", (classes, 2 * c), 2 * c)
    fc_b = b.init("fc_b", np.zeros(classes, np.float32))
    y = b.op("Gemm", [x, w, fc_b], transB=1)
    return b.model([_input("x", (batch, 3, 4 * size, 4 * size))], [y], opset)


def inception(
    *,
    batch: int = 1,
    channels: int = 64,
    size: int = 28,
    modules: int = 2,
    classes: int = 100,
    seed: int = 0,
    opset: int = 17,
    small: bool = False,
) -> onnx.ModelProto:
    """Inception-style branching: each module has 4 branches concatenated on channels."""
    if small:
        batch, channels, size, modules, classes = 1, 8, 8, 2, 10
    b = _Builder("inception", seed)
    x = b.conv_bn("x", 3, channels, 3)
    c = channels
    for _ in range(modules):
        q = max(c // 4, 2)
        b1 = b.conv_bn(x, c, q, 1)
        b2 = b.conv_bn(b.conv_bn(x, c, q, 1), q, q, 3)
        b3 = b.conv_bn(b.conv_bn(b.conv_bn(x, c, q // 2, 1), q // 2, q, 3), q, q, 3)
        p = b.op("MaxPool", [x], kernel_shape=[3, 3], strides=[1, 1], pads=[1, 1, 1, 1])
        b4 = b.conv_bn(p, c, q, 1)
        x = b.op("Concat", [b1, b2, b3, b4], axis=1)
        c = 4 * q
    x = b.op("AveragePool", [x], kernel_shape=[2, 2], strides=[2, 2])
    x = b.op("GlobalAveragePool", [x])
    x = b.op("Flatten", [x])
    w = b.weight("fc_w", (classes, c), c)
    y = b.op("Gemm", [x, w, b.init("fc_b", np.zeros(classes, np.float32))], transB=1)
    return b.model([_input("x", (batch, 3, size, size))], [y], opset)


def attention(
    *,
    batch: int = 1,
    seq: int = 128,
    d_model: int = 256,
    heads: int = 4,
    ffn: int = 1024,
    seed: int = 0,
    opset: int = 17,
    small: bool = False,
) -> onnx.ModelProto:
    """Pre-LN transformer encoder block (self-attention + erf-Gelu MLP), exporter-style shape logic."""
    if small:
        batch, seq, d_model, heads, ffn = 2, 8, 16, 2, 32
    dh = d_model // heads
    b = _Builder("attention", seed)

    def ln(x: str) -> str:
        g = b.init("ln_g", b.rng.uniform(0.8, 1.2, d_model).astype(np.float32))
        beta = b.init("ln_b", b.rng.uniform(-0.1, 0.1, d_model).astype(np.float32))
        return b.op("LayerNormalization", [x, g, beta], axis=-1, epsilon=1e-5)

    def linear(x: str, cin: int, cout: int) -> str:
        w = b.weight("w", (cin, cout), cin)
        return b.op(
            "Add",
            [b.op("MatMul", [x, w]), b.init("b", (b.rng.standard_normal(cout) * 0.02).astype(np.float32))],
        )

    i64 = lambda *v: b.init("c", np.array(v, np.int64))  # noqa: E731
    h = ln("x")
    # batch and seq come from Shape/Gather like torch exports (folded at compile time)
    shp = b.op("Shape", ["x"])
    bsz = b.op("Unsqueeze", [b.op("Gather", [shp, b.init("i0", np.array(0, np.int64))], axis=0), i64(0)])
    slen = b.op("Unsqueeze", [b.op("Gather", [shp, b.init("i1", np.array(1, np.int64))], axis=0), i64(0)])
    split_shape = b.op("Concat", [bsz, slen, i64(heads), i64(dh)], axis=0)

    def heads_of(t: str, perm: list[int]) -> str:
        return b.op("Transpose", [b.op("Reshape", [t, split_shape])], perm=perm)

    q = heads_of(linear(h, d_model, d_model), [0, 2, 1, 3])
    k = heads_of(linear(h, d_model, d_model), [0, 2, 3, 1])
    v = heads_of(linear(h, d_model, d_model), [0, 2, 1, 3])
    scores = b.op("Div", [b.op("MatMul", [q, k]), b.init("sqrt_dh", np.array(np.sqrt(dh), np.float32))])
    probs = b.op("Softmax", [scores], axis=-1)
    ctx = b.op("Transpose", [b.op("MatMul", [probs, v])], perm=[0, 2, 1, 3])
    ctx = b.op("Reshape", [ctx, b.op("Concat", [bsz, slen, i64(d_model)], axis=0)])
    x1 = b.op("Add", ["x", linear(ctx, d_model, d_model)])
    f = linear(ln(x1), d_model, ffn)
    # erf Gelu as exported by torch: x * 0.5 * (1 + erf(x / sqrt(2)))
    e = b.op("Erf", [b.op("Div", [f, b.init("sqrt2", np.array(np.sqrt(2.0), np.float32))])])
    gl = b.op(
        "Mul",
        [
            b.op("Mul", [f, b.op("Add", [e, b.init("one", np.array(1.0, np.float32))])]),
            b.init("half", np.array(0.5, np.float32)),
        ],
    )
    y = b.op("Add", [x1, linear(gl, ffn, d_model)])
    return b.model([_input("x", (batch, seq, d_model))], [y], opset)


def sample_inputs(model: onnx.ModelProto, seed: int = 0) -> dict[str, np.ndarray]:
    """Random float32 feeds for every (non-initializer) graph input."""
    rng = np.random.default_rng(seed)
    inits = {t.name for t in model.graph.initializer}
    feeds = {}
    for vi in model.graph.input:
        if vi.name in inits:
            continue
        shape = [d.dim_value for d in vi.type.tensor_type.shape.dim]
        feeds[vi.name] = rng.standard_normal(shape).astype(np.float32)
    return feeds


MODELS: dict[str, Callable[..., onnx.ModelProto]] = {
    "mlp": mlp,
    "residual_cnn": residual_cnn,
    "inception": inception,
    "attention": attention,
}
#: builder kwargs of the small test variants
SMALL: dict[str, dict[str, Any]] = {name: {"small": True} for name in MODELS}
