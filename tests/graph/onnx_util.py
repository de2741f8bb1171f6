"""Helpers: build one-op / small ONNX models and compare aioge against onnxruntime."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import onnx
import onnxruntime as ort
from onnx import TensorProto, helper, numpy_helper

from aioge.graph import load_onnx, optimize
from aioge.graph.reference import run_reference

RTOL, ATOL = 1e-4, 1e-5

_NP_TO_ONNX = {
    np.dtype(k): v
    for k, v in {
        np.float32: TensorProto.FLOAT,
        np.float16: TensorProto.FLOAT16,
        np.float64: TensorProto.DOUBLE,
        np.int64: TensorProto.INT64,
        np.int32: TensorProto.INT32,
        np.int8: TensorProto.INT8,
        np.uint8: TensorProto.UINT8,
        np.bool_: TensorProto.BOOL,
        np.int16: TensorProto.INT16,
    }.items()
}


def onnx_type(dtype: Any) -> int:
    return _NP_TO_ONNX[np.dtype(dtype)]


def vinfo(name: str, dtype: Any, shape: Sequence[Any] | None) -> onnx.ValueInfoProto:
    return helper.make_tensor_value_info(name, onnx_type(dtype), shape)


def make_model(
    nodes: Sequence[onnx.NodeProto],
    inputs: Mapping[str, np.ndarray],
    outputs: Sequence[str] | Mapping[str, Any],
    initializers: Mapping[str, np.ndarray] | None = None,
    opset: int = 17,
    *,
    out_dtype: Any = np.float32,
    input_dims: Mapping[str, Sequence[Any]] | None = None,
) -> onnx.ModelProto:
    """A model whose inputs are typed like the samples ``inputs``; outputs ``out_dtype`` (or per name)."""
    ins = [vinfo(k, v.dtype, (input_dims or {}).get(k, v.shape)) for k, v in inputs.items()]
    if isinstance(outputs, Mapping):
        outs = [helper.make_tensor_value_info(k, onnx_type(dt), None) for k, dt in outputs.items()]
    else:
        outs = [helper.make_tensor_value_info(k, onnx_type(out_dtype), None) for k in outputs]
    inits = [numpy_helper.from_array(np.asarray(v), k) for k, v in (initializers or {}).items()]
    graph = helper.make_graph(list(nodes), "test", ins, outs, inits)
    ir = (
        10
        if opset >= 21
        else 8
        if opset >= 15
        else 7
        if opset >= 13
        else 6
        if opset >= 12
        else 5
        if opset >= 11
        else 4
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)], ir_version=ir)


def run_ort(model: onnx.ModelProto, feeds: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
    so = ort.SessionOptions()
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    so.intra_op_num_threads = 1
    so.log_severity_level = 3
    sess = ort.InferenceSession(model.SerializeToString(), so, providers=["CPUExecutionProvider"])
    names = [o.name for o in sess.get_outputs()]
    return dict(zip(names, sess.run(names, dict(feeds)), strict=False))


def assert_close(
    got: Mapping[str, np.ndarray],
    want: Mapping[str, np.ndarray],
    rtol: float = RTOL,
    atol: float = ATOL,
    what: str = "",
) -> None:
    assert set(got) == set(want), (set(got), set(want))
    for k in want:
        g, w = np.asarray(got[k]), np.asarray(want[k])
        assert g.shape == w.shape, f"{what}{k}: shape {g.shape} != {w.shape}"
        assert g.dtype == w.dtype, f"{what}{k}: dtype {g.dtype} != {w.dtype}"
        if w.dtype.kind in "f":
            np.testing.assert_allclose(g, w, rtol=rtol, atol=atol, err_msg=f"{what}{k}")
        else:
            np.testing.assert_array_equal(g, w, err_msg=f"{what}{k}")


def check_against_ort(
    model: onnx.ModelProto,
    feeds: Mapping[str, np.ndarray],
    *,
    levels: Sequence[int] = (0, 2),
    rtol: float = RTOL,
    atol: float = ATOL,
    input_shapes: Mapping[str, Any] | None = None,
) -> dict[str, np.ndarray]:
    """load_onnx -> optimize(level) -> run_reference == onnxruntime, for each level."""
    want = run_ort(model, feeds)
    g = load_onnx(model, input_shapes=input_shapes)
    for level in levels:
        og = optimize(g, level=level)
        got = run_reference(og, feeds)
        assert_close(got, want, rtol, atol, what=f"level {level}: ")
        # inferred output shapes agree with what was computed
        for k, v in got.items():
            assert og.values[k].shape == v.shape, (k, og.values[k].shape, v.shape)
            assert og.values[k].dtype == v.dtype, (k, og.values[k].dtype, v.dtype)
    return want


def one_op(
    op: str,
    inputs: Mapping[str, np.ndarray],
    attrs: Mapping[str, Any] | None = None,
    *,
    initializers: Mapping[str, np.ndarray] | None = None,
    n_out: int = 1,
    opset: int = 17,
    out_dtype: Any = np.float32,
    input_order: Sequence[str] | None = None,
) -> onnx.ModelProto:
    """One node ``op`` reading the inputs, then the initializers (or ``input_order``; "" = absent)."""
    names = list(input_order) if input_order is not None else [*inputs, *(initializers or {})]
    outs = [f"y{i}" for i in range(n_out)]
    node = helper.make_node(op, names, outs, name="the_node", **dict(attrs or {}))
    return make_model([node], inputs, outs, initializers, opset, out_dtype=out_dtype)


def rand(
    *shape: int, seed: int = 0, dtype: Any = np.float32, low: float = -2.0, high: float = 2.0
) -> np.ndarray:
    return np.random.default_rng(seed).uniform(low, high, shape).astype(dtype)
