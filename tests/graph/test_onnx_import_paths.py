"""load_onnx's direct paths: the checker on a model read from bytes, tensors from their typed fields."""

from __future__ import annotations

from typing import Any

import numpy as np
import onnx
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from onnx import TensorProto, helper, numpy_helper

from aioge.graph import MalformedModelError, load_onnx
from tests.graph.onnx_util import make_model, one_op, rand


def _shapeless_relu() -> onnx.ModelProto:
    m = one_op("Relu", {"x": rand(2, 3)})
    m.graph.input[0].type.tensor_type.ClearField("shape")
    m.graph.output[0].type.tensor_type.ClearField("shape")
    return m


@pytest.mark.parametrize("form", ["proto", "bytes"])
def test_the_checker_runs_on_a_model_with_shapeless_inputs_and_outputs(form: str) -> None:
    m = _shapeless_relu()
    m.metadata_props.add(key="k", value="1")
    m.metadata_props.add(key="k", value="2")  # accepted by the importer's own checks, not by onnx.checker
    with pytest.raises(MalformedModelError, match=r"onnx.checker: .*metadata_props"):
        load_onnx(m if form == "proto" else m.SerializeToString(), input_shapes={"x": (2, 3)})


def test_loading_leaves_the_callers_model_as_it_was() -> None:
    m = _shapeless_relu()
    data = m.SerializeToString()
    for src in (m, data):
        g = load_onnx(src, input_shapes={"x": (2, 3)})
        assert g.values["y0"].shape == (2, 3)
    assert m.SerializeToString() == data
    assert not m.graph.output[0].type.tensor_type.HasField("shape")


def test_a_bad_initializer_is_refused_with_a_shapeless_output() -> None:
    w = numpy_helper.from_array(rand(2), "w")
    w.ClearField("raw_data")
    w.float_data.extend([1.0, 2.0, 3.0])  # three values for dims [2]
    m = one_op("Add", {"x": rand(2)}, initializers={"w": rand(2)})
    m.graph.initializer[0].CopyFrom(w)
    assert not m.graph.output[0].type.tensor_type.HasField("shape")
    with pytest.raises(MalformedModelError, match=r"initializer 'w': cannot decode tensor data"):
        load_onnx(m.SerializeToString())


_TYPED = {
    TensorProto.FLOAT: (np.float32, "float_data"),
    TensorProto.DOUBLE: (np.float64, "double_data"),
    TensorProto.INT32: (np.int32, "int32_data"),
    TensorProto.INT64: (np.int64, "int64_data"),
}


def _typed_tensor(name: str, data_type: int, dims: list[int], values: list[Any]) -> onnx.TensorProto:
    t = onnx.TensorProto(name=name, data_type=data_type, dims=dims)
    getattr(t, _TYPED[data_type][1]).extend(values)
    return t


@settings(max_examples=60, deadline=None)
@given(
    data_type=st.sampled_from(sorted(_TYPED)),
    dims=st.lists(st.integers(0, 3), min_size=0, max_size=3),
    seed=st.integers(0, 2**16),
    extra=st.sampled_from([0, 0, 0, -1, 1]),
)
def test_typed_field_tensors_decode_as_onnx_does(data_type: int, dims: list[int], seed: int, extra: int) -> None:
    """Initializers and Constant values stored in float_data/double_data/int32_data/int64_data: the
    arrays onnx.numpy_helper.to_array gives; a value count that does not fit the dims is malformed."""
    dt = np.dtype(_TYPED[data_type][0])
    n = int(np.prod(dims)) + extra
    if n < 0:
        return
    rng = np.random.default_rng(seed)
    vals = rng.uniform(-1e6, 1e6, n).astype(dt) if dt.kind == "f" else rng.integers(-(2**31), 2**31 - 1, n).astype(dt)
    init = _typed_tensor("w", data_type, dims, vals.tolist())
    const = _typed_tensor("", data_type, dims, vals.tolist())
    nodes = [
        helper.make_node("Constant", [], ["c"], value=const),
        helper.make_node("Identity", ["w"], ["a"]),
        helper.make_node("Identity", ["c"], ["b"]),
    ]
    m = make_model(nodes, {}, {"a": dt, "b": dt}, initializers={})
    m.graph.initializer.append(init)
    if extra:
        with pytest.raises(MalformedModelError, match=r"cannot decode tensor data: cannot reshape"):
            load_onnx(m.SerializeToString())
        return
    want = numpy_helper.to_array(init)
    g = load_onnx(m.SerializeToString())
    for arr in (g.constants["w"], g.constants["c"]):
        assert arr.dtype == dt and arr.shape == tuple(dims)
        np.testing.assert_array_equal(arr, want)


def test_an_attribute_of_a_later_opset_is_named_before_a_mistyped_one() -> None:
    """Every attribute is first checked against the declared opset's schema, then for its type."""
    node = helper.make_node("Split", ["x"], ["a", "b"], axis=0, num_outputs=2, name="split_qkv")
    node.attribute[0].type = onnx.AttributeProto.FLOAT  # axis: mistyped
    m = make_model([node], {"x": rand(6, 2)}, ["a", "b"], opset=17)
    with pytest.raises(MalformedModelError, match=r"attribute 'num_outputs' .* opset 17; it exists from opset 18"):
        load_onnx(m)
    del node.attribute[1]
    m = make_model([node], {"x": rand(6, 2)}, ["a", "b"], opset=17)
    with pytest.raises(MalformedModelError, match=r"'split_qkv' \(Split\): attribute 'axis' has type FLOAT"):
        load_onnx(m)
    for name in ("bogus", "num_outputs"):  # unknown to the opset: the opset check names it, whatever its place
        n2 = helper.make_node("Split", ["x"], ["a", "b"], axis=0, name="s")
        n2.attribute.add(name=name, type=onnx.AttributeProto.INT, i=2)
        n2.attribute.add(name="split", type=onnx.AttributeProto.INTS, ints=[3, 3])
        with pytest.raises(MalformedModelError, match=rf"attribute '{name}' is not defined for Split"):
            load_onnx(make_model([n2], {"x": rand(6, 2)}, ["a", "b"], opset=17))
