"""Weights read in place from a serialized model (aioge.graph.onnx_wire): the same graph as a
normal parse, no copy for aligned weights, and a model the scanner does not handle (or bytes
that are not a model) parsed as they are, with the same errors."""

from __future__ import annotations

import copy

import numpy as np
import onnx
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from onnx import TensorProto, helper, numpy_helper

import aioge
from aioge.errors import AioGeError
from aioge.graph import MalformedModelError
from aioge.graph.onnx_wire import MIN_CUT_BYTES, split_weights

N = 512  # a 512 x 512 float32 weight: 1 MiB


def _model(opset: int = 17, extra_inits: list[TensorProto] | None = None) -> onnx.ModelProto:
    rng = np.random.default_rng(0)
    w1 = rng.standard_normal((N, N)).astype(np.float32)
    w2 = rng.standard_normal((N, N)).astype(np.float32)
    b = rng.standard_normal(N).astype(np.float32)  # 2 KB: stays in the message
    nodes = [helper.make_node("MatMul", ["x", "w1"], ["h"]), helper.make_node("Add", ["h", "b"], ["hb"]),
             helper.make_node("Relu", ["hb"], ["r"]), helper.make_node("MatMul", ["r", "w2"], ["y"])]  # fmt: skip
    inits = [numpy_helper.from_array(w1, "w1"), numpy_helper.from_array(w2, "w2"), numpy_helper.from_array(b, "b")]
    g = helper.make_graph(nodes, "wire", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [4, N])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [4, N])],
                          inits + (extra_inits or []))  # fmt: skip
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)], ir_version=8)


def test_the_cut_message_is_the_model_without_the_big_payloads():
    m = _model()
    data = m.SerializeToString()
    stripped, cut = split_weights(data)
    assert sorted(cut) == ["w1", "w2"]  # b is under MIN_CUT_BYTES
    assert len(stripped) < len(data) - 2 * N * N * 4 + 4096
    got = onnx.ModelProto()
    got.ParseFromString(stripped)
    want = copy.deepcopy(m)
    for t in want.graph.initializer:
        if t.name in cut:
            assert bytes(cut[t.name]) == t.raw_data
            t.ClearField("raw_data")
    assert got == want


def test_load_onnx_of_the_bytes_equals_load_onnx_of_the_proto_and_views_them():
    m = _model()
    data = m.SerializeToString()
    g_bytes, g_proto = aioge.load_onnx(data), aioge.load_onnx(m)
    assert sorted(g_bytes.constants) == sorted(g_proto.constants)
    for k, a in g_bytes.constants.items():
        np.testing.assert_array_equal(a, g_proto.constants[k])
        assert a.dtype == g_proto.constants[k].dtype and not a.flags.writeable
    # the weights are views of the caller's bytes where they lie, whatever their alignment: not copies
    base = np.frombuffer(data, np.uint8).ctypes.data
    for k in ("w1", "w2"):
        assert g_bytes.constants[k].ctypes.data == base + data.find(g_proto.constants[k].tobytes()[:64])


@pytest.mark.anyio
async def test_weights_at_every_offset_mod_16_are_viewed_in_place_and_give_the_same_outputs():
    # a weight is read where it lies, aligned or not (numpy, the upload and const descs do not care;
    # the kernels' packing copies an unaligned one aligned for the pack alone); outputs equal
    m = _model()
    x = np.random.default_rng(2).standard_normal((4, N)).astype(np.float32)
    seen, outs = set(), []
    async with aioge.open_device(0) as dev:
        for shift in range(16):  # the producer name moves every weight by one byte
            m.producer_name = "p" * shift
            data = m.SerializeToString()
            g = aioge.load_onnx(data)
            base = np.frombuffer(data, np.uint8).ctypes.data
            for k in ("w1", "w2"):
                a = g.constants[k]
                assert a.ctypes.data == base + data.find(a.tobytes()[:64]) and not a.flags.writeable
                seen.add(a.ctypes.data % 16)
            model = await dev.compile(g)
            outs.append((await model.execute({"x": x}))["y"])
            await model.aclose()
    assert seen == set(range(16))  # viewed at every alignment
    for y in outs[1:]:
        np.testing.assert_array_equal(y, outs[0])


@pytest.mark.anyio
async def test_a_model_loaded_from_its_bytes_runs_as_numpy_says():
    m = _model()
    x = np.random.default_rng(1).standard_normal((4, N)).astype(np.float32)
    w = {t.name: numpy_helper.to_array(t) for t in m.graph.initializer}
    async with aioge.open_device(0) as dev:
        model = await dev.compile(aioge.load_onnx(m.SerializeToString()))
        y = (await model.execute({"x": x}))["y"]
        await model.aclose()
    np.testing.assert_allclose(y, np.maximum(x @ w["w1"] + w["b"], 0) @ w["w2"], rtol=1e-4, atol=1e-3)


def test_what_the_scanner_does_not_cut_is_parsed_as_it_is(tmp_path):
    m = _model()
    small = numpy_helper.from_array(np.ones(4, np.float32), "small")
    assert split_weights(helper.make_model(helper.make_graph([], "g", [], [], [small])).SerializeToString()) is None
    dup = _model(extra_inits=[numpy_helper.from_array(np.zeros((N, N), np.float32), "w1")])
    assert split_weights(dup.SerializeToString()) is None
    with pytest.raises(MalformedModelError, match="defined twice"):
        aioge.load_onnx(dup.SerializeToString())
    # external data: the importer reads it from the model's directory
    onnx.save_model(copy.deepcopy(m), str(tmp_path / "m.onnx"), save_as_external_data=True, location="m.data",
                    size_threshold=1024)  # fmt: skip
    assert split_weights((tmp_path / "m.onnx").read_bytes()) is None
    g = aioge.load_onnx(str(tmp_path / "m.onnx"))
    np.testing.assert_array_equal(g.constants["w2"], numpy_helper.to_array(m.graph.initializer[1]))


def test_a_raw_payload_of_the_wrong_size_is_a_malformed_model():
    m = _model()
    m.graph.initializer[0].raw_data = m.graph.initializer[0].raw_data[:-4]  # one float short
    assert "w1" in split_weights(m.SerializeToString())[1]
    with pytest.raises(MalformedModelError, match="initializer 'w1'"):
        aioge.load_onnx(m.SerializeToString())


def test_an_old_opset_model_is_upgraded_from_its_full_message():
    m = _model(opset=8)
    assert split_weights(m.SerializeToString()) is not None
    g = aioge.load_onnx(m.SerializeToString())
    np.testing.assert_array_equal(g.constants["w1"], numpy_helper.to_array(m.graph.initializer[0]))


_DATA = _model().SerializeToString()


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data())
def test_mutated_bytes_give_a_typed_error_or_the_same_graph_as_protobuf(data):
    b = bytearray(_DATA)
    for _ in range(data.draw(st.integers(1, 3))):
        if len(b) < 2:
            break
        # in the first 4 KB: the structure (fields, keys and lengths), not the floats
        at = data.draw(st.integers(0, min(4096, len(b) - 1)))
        kind = data.draw(st.sampled_from(["flip", "truncate", "byte"]))
        if kind == "flip":
            b[at] ^= 1 << data.draw(st.integers(0, 7))
        elif kind == "truncate":
            del b[data.draw(st.integers(0, len(b) - 1)) :]
        else:
            b[at] = data.draw(st.integers(0, 255))
    blob = bytes(b)
    cut = split_weights(blob)  # never raises
    assert cut is None or all(len(v) >= MIN_CUT_BYTES for v in cut[1].values())
    try:
        g = aioge.load_onnx(blob)
    except AioGeError:
        return
    proto = onnx.ModelProto()
    proto.ParseFromString(blob)  # it loaded: protobuf reads the same bytes
    ref = aioge.load_onnx(proto)
    assert sorted(g.constants) == sorted(ref.constants)
    for k, a in g.constants.items():
        np.testing.assert_array_equal(a, ref.constants[k])
