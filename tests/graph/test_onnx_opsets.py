"""Opset-version differences the importer rewrites into the IR's canonical form."""

from __future__ import annotations

from typing import Any

import numpy as np
import onnx
import onnx.version_converter
import pytest
from onnx import helper

from aioge.graph import MalformedModelError, load_onnx
from tests.graph.onnx_util import check_against_ort, make_model, one_op, rand, run_ort

X = rand(2, 1, 3, 1)


@pytest.mark.parametrize("opset", [9, 11, 12, 13, 17, 21])
def test_squeeze_unsqueeze(opset: int) -> None:
    if opset < 13:
        sq = helper.make_node("Squeeze", ["x"], ["s"], axes=[1, 3])
        un = helper.make_node("Unsqueeze", ["s"], ["y0"], axes=[0])
        inits = {}
    else:
        sq = helper.make_node("Squeeze", ["x", "a"], ["s"])
        un = helper.make_node("Unsqueeze", ["s", "b"], ["y0"])
        inits = {"a": np.array([1, 3], np.int64), "b": np.array([0], np.int64)}
    m = make_model([sq, un], {"x": X}, ["y0"], inits, opset)
    check_against_ort(m, {"x": X})
    g = load_onnx(m)
    assert g.values["y0"].shape == (1, 2, 3)
    squeeze = next(n for n in g.nodes if n.op_type == "Squeeze")
    assert len(squeeze.inputs) == 2 and squeeze.inputs[1] in g.constants  # axes became an input


@pytest.mark.parametrize("opset", [11, 13])
def test_reduce_sum_axes(opset: int) -> None:
    x = rand(2, 3, 4)
    if opset < 13:
        node = helper.make_node("ReduceSum", ["x"], ["y0"], axes=[0, 2], keepdims=0)
        inits = {}
    else:
        node = helper.make_node("ReduceSum", ["x", "a"], ["y0"], keepdims=0)
        inits = {"a": np.array([0, 2], np.int64)}
    check_against_ort(make_model([node], {"x": x}, ["y0"], inits, opset), {"x": x})


@pytest.mark.parametrize("op", ["ReduceMean", "ReduceMax", "ReduceMin"])
@pytest.mark.parametrize("opset", [13, 18])
def test_reduce_axes_attr_before_18(op: str, opset: int) -> None:
    x = rand(2, 3, 4)
    if opset < 18:
        node = helper.make_node(op, ["x"], ["y0"], axes=[-1])
        inits = {}
    else:
        node = helper.make_node(op, ["x", "a"], ["y0"])
        inits = {"a": np.array([-1], np.int64)}
    check_against_ort(make_model([node], {"x": x}, ["y0"], inits, opset), {"x": x})


@pytest.mark.parametrize("opset", [9, 10, 11, 12, 13])
def test_clip_attrs_then_inputs(opset: int) -> None:
    x = rand(3, 4)
    if opset < 11:
        m = one_op("Clip", {"x": x}, {"min": -0.5, "max": 0.25}, opset=opset)
        m2 = one_op("Clip", {"x": x}, {"max": 0.25}, opset=opset)
    else:
        m = one_op(
            "Clip",
            {"x": x},
            initializers={"lo": np.array(-0.5, np.float32), "hi": np.array(0.25, np.float32)},
            opset=opset,
        )
        m2 = one_op(
            "Clip",
            {"x": x},
            initializers={"hi": np.array(0.25, np.float32)},
            input_order=["x", "", "hi"],
            opset=opset,
        )
    check_against_ort(m, {"x": x})
    check_against_ort(m2, {"x": x})


@pytest.mark.parametrize("opset", [9, 11, 18])
def test_pad_attrs_then_inputs(opset: int) -> None:
    x = rand(2, 3)
    if opset < 11:
        m = one_op("Pad", {"x": x}, {"pads": [1, 0, 0, 2], "value": 1.5}, opset=opset)
    else:
        m = one_op(
            "Pad",
            {"x": x},
            initializers={"p": np.array([1, 0, 0, 2], np.int64), "v": np.array(1.5, np.float32)},
            opset=opset,
        )
    check_against_ort(m, {"x": x})
    if opset < 11:
        check_against_ort(
            one_op("Pad", {"x": x}, {"pads": [1, 1, 1, 1], "mode": "edge"}, opset=opset), {"x": x}
        )


@pytest.mark.parametrize("opset", [9, 10, 13])
def test_slice_attrs_then_inputs(opset: int) -> None:
    x = rand(5, 6)
    if opset < 10:
        m = one_op("Slice", {"x": x}, {"starts": [1, -4], "ends": [4, 100], "axes": [0, 1]}, opset=opset)
    else:
        m = one_op(
            "Slice",
            {"x": x},
            initializers={"s": np.array([1, -4], np.int64), "e": np.array([4, 100], np.int64)},
            opset=opset,
        )
    check_against_ort(m, {"x": x})


@pytest.mark.parametrize(("opset", "n"), [(11, 3), (13, 3), (18, 3)])
def test_split_versions(opset: int, n: int) -> None:
    x = rand(6, 2)
    outs = [f"y{i}" for i in range(n)]
    if opset < 13:
        node = helper.make_node("Split", ["x"], outs, axis=0, split=[1, 2, 3])
        inits = {}
    else:
        node = helper.make_node("Split", ["x", "s"], outs, axis=0)
        inits = {"s": np.array([1, 2, 3], np.int64)}
    check_against_ort(make_model([node], {"x": x}, outs, inits, opset), {"x": x})


@pytest.mark.parametrize("op", ["Softmax", "LogSoftmax"])
@pytest.mark.parametrize(
    ("opset", "axis"), [(11, None), (11, 1), (11, 2), (11, 0), (12, -1), (13, 1), (13, None)]
)
def test_softmax_semantics_change_at_13(op: str, opset: int, axis: int | None) -> None:
    x = rand(2, 3, 4)
    attrs = {} if axis is None else {"axis": axis}
    check_against_ort(one_op(op, {"x": x}, attrs, opset=opset), {"x": x}, levels=(0, 1, 2))


def test_softmax_legacy_simplifies_to_one_node_when_axis_is_last() -> None:
    from aioge.graph import optimize

    x = rand(4, 5)
    g = optimize(load_onnx(one_op("Softmax", {"x": x}, opset=11)), level=1)
    assert g.op_counts() == {"Softmax": 1}


@pytest.mark.parametrize("opset", [9, 10, 12, 13])
def test_dropout_versions(opset: int) -> None:
    x = rand(3, 4)
    attrs = {"ratio": 0.3} if opset < 12 else {}
    check_against_ort(one_op("Dropout", {"x": x}, attrs, opset=opset), {"x": x})


@pytest.mark.parametrize("opset", [9, 13, 17, 21])
def test_mixed_model_across_opsets(opset: int) -> None:
    x = rand(2, 3, 4, 4)
    nodes = [
        helper.make_node("Conv", ["x", "w"], ["c"], pads=[1, 1, 1, 1]),
        helper.make_node("Relu", ["c"], ["r"]),
        helper.make_node("MaxPool", ["r"], ["p"], kernel_shape=[2, 2], strides=[2, 2]),
        helper.make_node("Flatten", ["p"], ["f"]),
        helper.make_node("Gemm", ["f", "fw", "fb"], ["g"], transB=1),
        helper.make_node("Softmax", ["g"], ["y0"]),
    ]
    inits = {"w": rand(4, 3, 3, 3, seed=1), "fw": rand(5, 16, seed=2), "fb": rand(5, seed=3)}
    check_against_ort(make_model(nodes, {"x": x}, ["y0"], inits, opset), {"x": x}, levels=(0, 1, 2))


def _old_cnn(opset: int) -> tuple[onnx.ModelProto, dict[str, np.ndarray]]:
    """A small CNN in the form exporters of the opset 6..8 era wrote (Add/Gemm ``broadcast``, BN ``spatial``)."""
    x = rand(2, 3, 6, 6)
    bn = {f"bn_{k}": rand(4, seed=i, low=0.5, high=1.5) for i, k in enumerate(("s", "b", "m", "v"))}
    bn_attrs = {"epsilon": 1e-5, "spatial": 1} if opset < 9 else {"epsilon": 1e-5}
    if opset == 6:
        bn_attrs["is_test"] = 1
    nodes = [
        helper.make_node("Conv", ["x", "w"], ["c"], pads=[1, 1, 1, 1], name="conv"),
        helper.make_node("BatchNormalization", ["c", *bn], ["b"], name="bn", **bn_attrs),
        helper.make_node("Relu", ["b"], ["r"]),
        helper.make_node("MaxPool", ["r"], ["p"], kernel_shape=[2, 2], strides=[2, 2]),
        helper.make_node("Flatten", ["p"], ["f"]),
        helper.make_node("Gemm", ["f", "fw", "fb"], ["g"], transB=1, **({"broadcast": 1} if opset < 7 else {})),
        helper.make_node("Add", ["g", "ab"], ["a"], **({"broadcast": 1} if opset < 7 else {})),
        helper.make_node("Softmax", ["a"], ["y0"]),
    ]
    inits = {"w": rand(4, 3, 3, 3, seed=1), **bn, "fw": rand(5, 36, seed=2), "fb": rand(5, seed=3),
             "ab": rand(5, seed=4)}  # fmt: skip
    m = make_model(nodes, {"x": x}, ["y0"], inits, opset)
    m.ir_version = 3
    if opset < 9:  # IR 3: initializers are also graph inputs
        m.graph.input.extend(helper.make_tensor_value_info(k, onnx.TensorProto.FLOAT, v.shape)
                             for k, v in inits.items())  # fmt: skip
    return m, {"x": x}


@pytest.mark.parametrize("opset", [6, 7, 8])
def test_old_opsets_are_upgraded_with_the_version_converter(opset: int) -> None:
    m, feeds = _old_cnn(opset)
    g = load_onnx(m)
    assert g.values["y0"].shape == (2, 5)
    # onnxruntime runs opset 7+; opset 6 is compared through onnx's own conversion of it
    ref = m if opset >= 7 else onnx.version_converter.convert_version(m, 9)
    check_against_ort(ref, feeds, levels=(0, 2))
    from aioge.graph.reference import run_reference

    np.testing.assert_allclose(run_reference(g, feeds)["y0"], run_ort(ref, feeds)["y0"], rtol=1e-4, atol=1e-5)


def test_an_attribute_of_a_later_opset_is_malformed_naming_the_node() -> None:
    x = rand(6, 2)
    node = helper.make_node("Split", ["x"], ["a", "b"], axis=0, num_outputs=2, name="split_qkv")
    m = make_model([node], {"x": x}, ["a", "b"], opset=17)
    with pytest.raises(MalformedModelError, match=r"'split_qkv' \(Split\): attribute 'num_outputs' .* opset 17; "
                                                  r"it exists from opset 18"):  # fmt: skip
        load_onnx(m)
    with pytest.raises(onnx.checker.ValidationError):  # onnx agrees
        onnx.checker.check_model(m)
    m18 = make_model([node], {"x": x}, ["a", "b"], opset=18)
    assert [v.shape for v in (load_onnx(m18).values[o] for o in ("a", "b"))] == [(3, 2), (3, 2)]


def test_the_onnx_checker_runs_on_load() -> None:
    m = one_op("Relu", {"x": rand(2)})
    m.ir_version = 0  # accepted by the importer's own checks, not by onnx.checker
    with pytest.raises(MalformedModelError, match=r"onnx.checker: .*ir_version"):
        load_onnx(m)


@pytest.mark.parametrize("form", ["proto", "bytes", "path"])
def test_the_onnx_checker_runs_on_load_from_every_form(form: str, tmp_path: Any) -> None:
    m = one_op("Add", {"x": rand(2)}, initializers={"w": rand(2)})
    m.metadata_props.add(key="k", value="1")
    m.metadata_props.add(key="k", value="2")  # accepted by the importer's own checks, not by onnx.checker
    src: Any = m
    if form != "proto":
        src = m.SerializeToString()
    if form == "path":
        (tmp_path / "m.onnx").write_bytes(src)
        src = str(tmp_path / "m.onnx")
    with pytest.raises(MalformedModelError, match=r"onnx.checker: .*metadata_props"):
        load_onnx(src)


@pytest.mark.parametrize("form", ["proto", "bytes"])
def test_an_input_without_a_shape_passes_the_checker_from_every_form(form: str) -> None:
    x = rand(2, 3)
    m = one_op("Relu", {"x": x})
    m.graph.input[0].type.tensor_type.ClearField("shape")
    m.graph.output[0].type.tensor_type.ClearField("shape")
    with pytest.raises(onnx.checker.ValidationError):  # onnx.checker alone refuses it
        onnx.checker.check_model(m.SerializeToString())
    g = load_onnx(m if form == "proto" else m.SerializeToString(), input_shapes={"x": (2, 3)})
    assert g.values["y0"].shape == (2, 3)
