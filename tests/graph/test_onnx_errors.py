"""Malformed, unsupported and hostile ONNX models each raise a typed error."""

from __future__ import annotations

import os
import sys

import numpy as np
import onnx
import pytest
from onnx import TensorProto, external_data_helper, helper, numpy_helper

from aioge.errors import AioGeError
from aioge.graph import (
    DynamicShapeError,
    ExternalDataError,
    GraphError,
    MalformedModelError,
    OnnxImportError,
    UnsupportedOpError,
    UnsupportedOpsetError,
    load_onnx,
)
from aioge.graph.reference import run_reference
from tests.graph.onnx_util import check_against_ort, make_model, rand, run_ort


def small_model() -> onnx.ModelProto:
    nodes = [
        helper.make_node("MatMul", ["x", "w"], ["h"], name="mm"),
        helper.make_node("Relu", ["h"], ["y"], name="act"),
    ]
    return make_model(nodes, {"x": rand(2, 3)}, ["y"], {"w": rand(3, 4, seed=1)})


def test_valid_model_from_path_bytes_and_proto(tmp_path: os.PathLike) -> None:
    m = small_model()
    path = os.path.join(tmp_path, "m.onnx")
    onnx.save_model(m, path)
    feeds = {"x": rand(2, 3)}
    want = run_ort(m, feeds)["y"]
    for src in (path, m.SerializeToString(), bytearray(m.SerializeToString()), m):
        np.testing.assert_allclose(run_reference(load_onnx(src), feeds)["y"], want, rtol=1e-5)
    with pytest.raises(TypeError):
        load_onnx(12345)  # type: ignore[arg-type]


def test_every_truncation_is_a_typed_error() -> None:
    data = small_model().SerializeToString()
    for cut in range(0, len(data) - 1):
        with pytest.raises(OnnxImportError) as e:
            load_onnx(data[:cut])
        assert isinstance(e.value, AioGeError)


def test_garbage_bytes() -> None:
    with pytest.raises(MalformedModelError, match=r"decode|no graph"):
        load_onnx(b"\xff\xfe not a protobuf \x00\x01" * 7)


def test_wrong_attribute_type_names_node() -> None:
    node = helper.make_node("Conv", ["x", "w"], ["y"], name="conv1", strides=[1.0, 1.0])
    m = make_model([node], {"x": rand(1, 1, 4, 4)}, ["y"], {"w": rand(1, 1, 3, 3)})
    with pytest.raises(MalformedModelError, match=r"conv1.*strides.*FLOATS.*expected INTS"):
        load_onnx(m)


def test_unknown_attribute() -> None:
    node = helper.make_node("Relu", ["x"], ["y"], name="r", alpha=1.0)
    with pytest.raises(MalformedModelError, match=r"'r'.*attribute 'alpha' is not defined for Relu"):
        load_onnx(make_model([node], {"x": rand(2)}, ["y"]))


def test_missing_initializer_names_node() -> None:
    node = helper.make_node("MatMul", ["x", "w_missing"], ["y"], name="mm")
    with pytest.raises(MalformedModelError, match=r"mm.*w_missing.*not produced") as e:
        load_onnx(make_model([node], {"x": rand(2, 3)}, ["y"]))
    assert isinstance(e.value.__cause__, GraphError)


def test_cycle() -> None:
    nodes = [
        helper.make_node("Add", ["x", "b"], ["a"], name="first"),
        helper.make_node("Relu", ["a"], ["b"], name="second"),
        helper.make_node("Identity", ["a"], ["y"], name="out"),
    ]
    with pytest.raises(MalformedModelError, match=r"cycle.*(first|second)"):
        load_onnx(make_model(nodes, {"x": rand(2)}, ["y"]))


def test_wrong_input_types_and_shapes() -> None:
    node = helper.make_node("Add", ["x", "i"], ["y"], name="mixed")
    m = make_model([node], {"x": rand(2)}, ["y"], {"i": np.array([1, 2], np.int64)})
    with pytest.raises(MalformedModelError, match=r"mixed.*int64"):
        load_onnx(m)
    node = helper.make_node("MatMul", ["x", "w"], ["y"], name="bad_mm")
    m = make_model([node], {"x": rand(2, 3)}, ["y"], {"w": rand(4, 5)})
    with pytest.raises(MalformedModelError, match=r"bad_mm.*inner dimensions"):
        load_onnx(m)
    node = helper.make_node("Reshape", ["x", "s"], ["y"], name="float_shape")
    m = make_model([node], {"x": rand(2, 3)}, ["y"], {"s": np.array([3, 2], np.float32)})
    with pytest.raises(MalformedModelError, match=r"float_shape"):
        load_onnx(m)


def test_initializer_payload_size_mismatch() -> None:
    m = small_model()
    t = m.graph.initializer[0]
    t.raw_data = t.raw_data[:-4]
    with pytest.raises(MalformedModelError, match=r"initializer 'w'"):
        load_onnx(m)


def test_duplicate_and_missing_outputs() -> None:
    nodes = [
        helper.make_node("Relu", ["x"], ["y"], name="a"),
        helper.make_node("Neg", ["x"], ["y"], name="b"),
    ]
    with pytest.raises(MalformedModelError, match=r"already defined"):
        load_onnx(make_model(nodes, {"x": rand(2)}, ["y"]))
    nodes = [helper.make_node("Relu", ["x"], ["h"], name="a")]
    with pytest.raises(MalformedModelError, match=r"graph output 'y'"):
        load_onnx(make_model(nodes, {"x": rand(2)}, ["y"]))


def test_unsupported_ops_are_all_listed() -> None:
    nodes = [
        helper.make_node("Relu", ["x"], ["a"], name="ok"),
        helper.make_node("Unique", ["a"], ["b"], name="unique_1"),
        helper.make_node("Det", ["b"], ["c"], name="det"),
        helper.make_node("Unique", ["a"], ["d"], name="unique_2"),
        helper.make_node("FusedGemm", ["a", "a"], ["e"], name="ms", domain="com.microsoft"),
        helper.make_node("Add", ["b", "d"], ["y"], name="join"),
    ]
    m = make_model(nodes, {"x": rand(1, 1, 2, 2)}, ["y"])
    m.opset_import.append(helper.make_opsetid("com.microsoft", 1))
    with pytest.raises(UnsupportedOpError) as e:
        load_onnx(m)
    names = {name for _, name, _ in e.value.unsupported}
    assert names == {"unique_1", "det", "unique_2", "ms"}
    assert e.value.op_types == ["Det", "Unique", "com.microsoft.FusedGemm"]
    for s in ("unique_1", "unique_2", "det", "ms", "Unique", "Det"):
        assert s in str(e.value)


def test_unsupported_features_of_supported_ops() -> None:
    nodes = [
        helper.make_node("Cast", ["x"], ["s"], to=TensorProto.STRING, name="to_string"),
        helper.make_node("Gelu", ["x"], ["g"], name="gelu_too_early"),
    ]
    m = make_model(nodes, {"x": rand(1, 1, 4, 4)}, {"s": np.float32, "g": np.float32})
    m.graph.output[0].type.tensor_type.elem_type = TensorProto.STRING
    with pytest.raises(UnsupportedOpError, match=r"to_string.*Cast target") as e:
        load_onnx(m)
    assert {n for _, n, _ in e.value.unsupported} == {"to_string", "gelu_too_early"}
    assert "not defined in opset 17" in str(e.value)
    outs = ["y", "mean", "var", "saved_mean", "saved_var"]
    bn = helper.make_node("BatchNormalization", ["x", "s", "b", "m", "v"], outs, name="bn")
    c = np.ones(1, np.float32)
    m = make_model([bn], {"x": rand(1, 1, 2, 2)}, outs, {"s": c, "b": c, "m": c, "v": c}, opset=12)
    with pytest.raises(UnsupportedOpError, match=r"bn.*training mode before opset 14"):
        load_onnx(m)


@pytest.mark.parametrize("opset", [0, 22, 25])
def test_unsupported_opset(opset: int) -> None:
    m = small_model()
    m.opset_import[0].version = opset
    with pytest.raises(UnsupportedOpsetError, match=rf"opset {opset}"):
        load_onnx(m)
    del m.opset_import[:]
    with pytest.raises(MalformedModelError, match=r"opset"):
        load_onnx(m)


def test_symbolic_dims_are_kept_or_pinned_by_input_shapes() -> None:
    nodes = [helper.make_node("Relu", ["x"], ["r"]), helper.make_node("Reshape", ["r", "s"], ["y"])]
    x = rand(2, 3, 4)
    m = make_model(
        nodes, {"x": x}, ["y"], {"s": np.array([0, -1], np.int64)}, input_dims={"x": ["batch", 3, "width"]}
    )
    dyn = load_onnx(m)  # a dynamic graph (see test_dynamic.py)
    assert dyn.symbolic == {"x": ("batch", 3, "width")} and dyn.values["x"].shape is None
    g = load_onnx(m, input_shapes={"x": (2, 3, 4)})
    assert g.values["y"].shape == (2, 12)
    check_against_ort(m, {"x": x}, input_shapes={"x": (2, 3, 4)})
    with pytest.raises(OnnxImportError, match=r"contradicts"):
        load_onnx(m, input_shapes={"x": (2, 5, 4)})
    with pytest.raises(OnnxImportError, match=r"\['z'\], which are not inputs of the model; its inputs are \['x'\]"):
        load_onnx(m, input_shapes={"x": (2, 3, 4), "z": (1,)})
    with pytest.raises(OnnxImportError, match=r"\['s'\].*not inputs"):  # an initializer is not an input here
        load_onnx(m, input_shapes={"s": (2,)})
    m2 = make_model(nodes, {"x": x}, ["y"], {"s": np.array([0, -1], np.int64)}, input_dims={"x": None})
    with pytest.raises(DynamicShapeError, match=r"no shape"):
        load_onnx(m2)


def test_missing_onnx_package_mentions_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "onnx", None)
    with pytest.raises(ImportError, match=r"aioge\[onnx\]"):
        load_onnx(b"")


# ---------------------------------------------------------------- external data
def _external_model(
    tmp: str,
    location: str,
    *,
    offset: int = 0,
    length: int | None = None,
    write: bytes | None = None,
    write_to: str | None = None,
) -> onnx.ModelProto:
    w = rand(3, 4, seed=1)
    t = numpy_helper.from_array(w, "w")
    external_data_helper.set_external_data(t, location, offset=offset or None, length=length)
    t.ClearField("raw_data")
    t.data_location = TensorProto.EXTERNAL
    payload = w.tobytes() if write is None else write
    target = write_to or os.path.join(tmp, location)
    if not os.path.isabs(location) or write_to:
        os.makedirs(os.path.dirname(os.path.abspath(target)), exist_ok=True)
        with open(target, "wb") as f:
            f.write(b"\0" * offset + payload)
    nodes = [helper.make_node("MatMul", ["x", "w"], ["y"], name="mm")]
    graph = helper.make_graph(
        nodes,
        "ext",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
        [t],
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)


def _save(m: onnx.ModelProto, path: str) -> str:
    with open(path, "wb") as f:
        f.write(m.SerializeToString())
    return path


def test_external_data_inside_the_directory_loads(tmp_path: os.PathLike) -> None:
    tmp = str(tmp_path)
    m = _external_model(tmp, "data/weights.bin", offset=16, length=48)
    path = _save(m, os.path.join(tmp, "model.onnx"))
    g = load_onnx(path)
    x = rand(2, 3)
    np.testing.assert_allclose(run_reference(g, {"x": x})["y"], x @ rand(3, 4, seed=1), rtol=1e-6)
    g2 = load_onnx(m.SerializeToString(), base_dir=tmp)
    assert np.array_equal(g2.constants["w"], g.constants["w"])
    with pytest.raises(ExternalDataError, match=r"base_dir"):
        load_onnx(m)


def test_external_data_written_by_onnx_loads(tmp_path: os.PathLike) -> None:
    m = small_model()
    feeds = {"x": rand(2, 3)}
    want = run_ort(m, feeds)["y"]
    path = os.path.join(str(tmp_path), "m.onnx")
    onnx.save_model(
        m, path, save_as_external_data=True, all_tensors_to_one_file=True, location="w.data", size_threshold=0
    )
    assert os.path.exists(os.path.join(str(tmp_path), "w.data"))
    np.testing.assert_allclose(run_reference(load_onnx(path), feeds)["y"], want, rtol=1e-5)


def test_external_data_escaping_paths_are_refused(tmp_path: os.PathLike) -> None:
    root = os.path.join(str(tmp_path), "model_dir")
    os.makedirs(root)
    m = _external_model(root, "../outside.bin")
    with pytest.raises(ExternalDataError, match=r"escapes"):
        load_onnx(_save(m, os.path.join(root, "a.onnx")))
    outside = os.path.join(str(tmp_path), "secret.bin")
    m = _external_model(root, outside, write_to=outside)
    with pytest.raises(ExternalDataError, match=r"absolute"):
        load_onnx(_save(m, os.path.join(root, "b.onnx")))
    os.symlink(outside, os.path.join(root, "link.bin"))
    m = _external_model(root, "link.bin", write_to=outside)
    with pytest.raises(ExternalDataError, match=r"escapes"):
        load_onnx(_save(m, os.path.join(root, "c.onnx")))
    m = _external_model(root, "sub/../../outside2.bin", write_to=os.path.join(str(tmp_path), "outside2.bin"))
    with pytest.raises(ExternalDataError, match=r"escapes"):
        load_onnx(_save(m, os.path.join(root, "d.onnx")))


def test_external_data_missing_and_size_mismatch(tmp_path: os.PathLike) -> None:
    tmp = str(tmp_path)
    m = _external_model(tmp, "w.bin")
    os.remove(os.path.join(tmp, "w.bin"))
    with pytest.raises(ExternalDataError, match=r"does not exist"):
        load_onnx(_save(m, os.path.join(tmp, "a.onnx")))
    m = _external_model(tmp, "w2.bin", length=40)
    with pytest.raises(ExternalDataError, match=r"length 40 does not match"):
        load_onnx(_save(m, os.path.join(tmp, "b.onnx")))
    m = _external_model(tmp, "w3.bin", write=b"\0" * 20)
    with pytest.raises(ExternalDataError, match=r"has 20 bytes.*needs 48"):
        load_onnx(_save(m, os.path.join(tmp, "c.onnx")))
    m = _external_model(tmp, "w4.bin", offset=8, write=b"\0" * 44)
    with pytest.raises(ExternalDataError, match=r"at offset 8"):
        load_onnx(_save(m, os.path.join(tmp, "d.onnx")))


# ---------------------------------------------------------------- hostile sizes ------------------------
def _expand_model(target: list[int]) -> onnx.ModelProto:
    node = helper.make_node("Expand", ["x", "s"], ["y"], name="expand_it")
    return make_model([node], {"x": rand(1, 1)}, ["y"], {"s": np.array(target, np.int64)})


@pytest.mark.parametrize(
    ("build", "node", "what"),
    [
        (lambda: _expand_model([-7, 3]), "expand_it", "negative dimension"),
        (lambda: _expand_model([2**62, 2**62]), "expand_it", "more than 2\\^62"),
        (lambda: make_model([helper.make_node("ConstantOfShape", ["s"], ["y"], name="cos_big")], {}, ["y"],
                            {"s": np.array([2**62, 2**62], np.int64)}), "cos_big", "more than 2\\^62"),
        (lambda: make_model([helper.make_node("Tile", ["x", "r"], ["y"], name="tile_big")], {"x": rand(2, 3)}, ["y"],
                            {"r": np.array([2**62, 1], np.int64)}), "tile_big", "more than 2\\^62"),
        (lambda: make_model([helper.make_node("ConstantOfShape", ["s"], ["y"], name="cos_2d")], {}, ["y"],
                            {"s": np.array([[2, 3]], np.int64)}), "cos_2d", "1-D"),
    ],
    ids=["expand-negative", "expand-huge", "constantofshape-huge", "tile-huge", "constantofshape-2d"],
)
def test_hostile_sizes_are_malformed_at_load_naming_the_node(build, node: str, what: str) -> None:
    with pytest.raises(MalformedModelError, match=rf"'{node}'.*{what}"):
        load_onnx(build())


def test_a_huge_graph_input_is_malformed_at_load() -> None:
    nodes = [helper.make_node("Relu", ["x"], ["y"], name="r")]
    m = make_model(nodes, {"x": rand(2, 2)}, ["y"], input_dims={"x": [2**40, 2**40]})
    with pytest.raises(MalformedModelError, match=r"graph input 'x'.*more than 2\^62"):
        load_onnx(m)


def test_a_nul_byte_in_an_external_data_location(tmp_path: os.PathLike) -> None:
    m = _external_model(str(tmp_path), "w.bin")
    m.graph.initializer[0].external_data[0].value = "w\x00.bin"
    with pytest.raises(ExternalDataError, match=r"NUL byte"):
        load_onnx(m.SerializeToString(), base_dir=str(tmp_path))


def _named_model() -> bytes:
    w = numpy_helper.from_array(np.ones((4, 4), np.float32), "QQw")
    nodes = [helper.make_node("MatMul", ["QQx", "QQw"], ["QQh"], name="QQn1"),
             helper.make_node("Relu", ["QQh"], ["QQy"], name="QQn2")]  # fmt: skip
    g = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("QQx", TensorProto.FLOAT, [2, 4])],
                          [helper.make_tensor_value_info("QQy", TensorProto.FLOAT, [2, 4])], [w])  # fmt: skip
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]).SerializeToString()


@pytest.mark.parametrize("every", [False, True], ids=["first", "every"])
@pytest.mark.parametrize("field", [b"QQx", b"QQw", b"QQh", b"QQy", b"QQn1", b"QQn2", b"Relu", b"MatMul"])
def test_a_name_or_op_type_that_is_not_utf8_is_a_malformed_model(field, every):
    """protobuf hands a proto2 string field that is not UTF-8 over as ``bytes``: a name, value or op type
    like that is a MalformedModelError (never a TypeError from comparing it, never a graph of bytes names)."""
    blob = _named_model()
    bad = b"\x80" + field[1:]
    blob = blob.replace(field, bad) if every else blob.replace(field, bad, 1)
    with pytest.raises(MalformedModelError, match=r"UTF-8|is not produced"):
        load_onnx(blob)
