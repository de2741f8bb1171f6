"""Weights read where they lie in the model's bytes, at any address.

load_onnx views every weight in the caller's buffer (onnx_wire.py), whatever its alignment: each
reader must be correct on a weight not aligned to its element size -- numpy (the folding and fusion
passes), const descs and the upload (byte copies), and the kernels' weight packing at compile
(packcache.c: an aligned copy for the pack hook alone, keyed by the weight's own address).  A model
whose initializers lie at offsets % 4 != 0 (int64 ones % 8 != 0) gives the outputs of the same
model with aligned initializers bit for bit, and onnxruntime's within float tolerance."""

from __future__ import annotations

from typing import Any

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

import aioge
from aioge import _native
from aioge.graph import Graph
from aioge.graph.onnx_wire import MIN_CUT_BYTES, MIN_SPLIT_MODEL_BYTES

pytestmark = pytest.mark.anyio

_RNG = np.random.default_rng(11)
#: initializers cut out of the message (>= MIN_CUT_BYTES): viewed in the model's bytes
_BIG = {
    "w1": _RNG.standard_normal((16, 8, 3, 3)).astype(np.float32),  # 3x3 conv, BatchNormalization folded into it
    "w2": _RNG.standard_normal((80, 16, 1, 1)).astype(np.float32),  # pointwise conv
    "w3": _RNG.standard_normal((40, 80)).astype(np.float32),  # Gemm transB
    "w4": _RNG.standard_normal((32, 40)).astype(np.float32),  # Transpose folded, then MatMul
    "idx": _RNG.integers(-32, 32, 700).astype(np.int64),  # Gather indices (8-byte elements)
    "w5": _RNG.standard_normal((700, 400)).astype(np.float32),  # MatMul; the model over MIN_SPLIT_MODEL_BYTES
}
_SMALL = {
    "b1": _RNG.standard_normal(16).astype(np.float32),
    "scale": _RNG.uniform(0.5, 2, 16).astype(np.float32),
    "beta": _RNG.standard_normal(16).astype(np.float32),
    "mean": _RNG.standard_normal(16).astype(np.float32),
    "var": _RNG.uniform(0.5, 2, 16).astype(np.float32),
    "b3": _RNG.standard_normal(40).astype(np.float32),
}
_X = _RNG.standard_normal((2, 8, 12, 12)).astype(np.float32)


def _model() -> onnx.ModelProto:
    nodes = [
        helper.make_node("Conv", ["x", "w1", "b1"], ["c1"], pads=[1, 1, 1, 1]),
        helper.make_node("BatchNormalization", ["c1", "scale", "beta", "mean", "var"], ["bn"]),
        helper.make_node("Relu", ["bn"], ["r1"]),
        helper.make_node("Conv", ["r1", "w2"], ["c2"]),
        helper.make_node("GlobalAveragePool", ["c2"], ["gap"]),
        helper.make_node("Flatten", ["gap"], ["f"]),
        helper.make_node("Gemm", ["f", "w3", "b3"], ["g"], transB=1),
        helper.make_node("Relu", ["g"], ["r2"]),
        helper.make_node("Transpose", ["w4"], ["w4t"], perm=[1, 0]),
        helper.make_node("MatMul", ["r2", "w4t"], ["m"]),
        helper.make_node("Gather", ["m", "idx"], ["gat"], axis=1),
        helper.make_node("MatMul", ["gat", "w5"], ["y"]),
    ]
    inits = [numpy_helper.from_array(v, k) for k, v in {**_BIG, **_SMALL}.items()]
    graph = helper.make_graph(
        nodes,
        "unaligned",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, list(_X.shape))],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 400])],
        inits,
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def _serialized(residue: dict[str, int]) -> bytes:
    """The model's bytes with each big initializer's raw data at an offset % 16 == residue[name]
    (each tensor's doc_string, serialized after its raw_data, moves the ones after it)."""
    m = _model()
    for _ in range(400):
        data = m.SerializeToString()
        wrong = [k for k in _BIG if data.find(_BIG[k].tobytes()) % 16 != residue[k]]
        if not wrong:
            return data
        t = _before(m, wrong[0])
        t.doc_string = "p" * ((len(t.doc_string) + 1) % 16)
    raise AssertionError("offsets not reached")


def _before(m: onnx.ModelProto, name: str) -> Any:
    """What is serialized just before initializer ``name`` and has a doc_string that moves it: the
    initializer before it, or the first node (the graph's nodes precede its initializers)."""
    names = [t.name for t in m.graph.initializer]
    i = names.index(name)
    return m.graph.initializer[i - 1] if i else m.graph.node[0]


async def _outputs(dev, data: bytes, mode: str) -> tuple[np.ndarray, dict[str, np.ndarray], int]:
    g = aioge.load_onnx(data)
    model = await dev.compile(g, mode=mode)
    try:
        y = np.asarray((await model.execute({"x": _X}))["y"])
        return y, g.constants, model.plan.packed_weight_bytes
    finally:
        await model.aclose()


@pytest.mark.parametrize("mode", ["auto", "per_op"])
async def test_weights_at_odd_offsets_are_viewed_in_place_and_give_the_aligned_models_outputs(dev, mode):
    assert all(v.nbytes >= MIN_CUT_BYTES for v in _BIG.values())
    odd = _serialized({"w1": 1, "w2": 3, "w3": 6, "w4": 9, "idx": 13, "w5": 5})
    aligned = _serialized({"w1": 0, "w2": 0, "w3": 0, "w4": 0, "idx": 0, "w5": 0})
    assert len(odd) >= MIN_SPLIT_MODEL_BYTES  # its weights are cut out of the message
    y_odd, consts, packed_odd = await _outputs(dev, odd, mode)
    y_al, consts_al, packed_al = await _outputs(dev, aligned, mode)
    base = np.frombuffer(odd, np.uint8).ctypes.data
    for k, v in _BIG.items():
        a = consts[k]
        # a view of the model's bytes, where the file has it, not aligned to its element size
        assert base <= a.ctypes.data < base + len(odd) and a.ctypes.data == base + odd.find(v.tobytes())
        assert not a.flags.aligned and not a.flags.writeable
        np.testing.assert_array_equal(a, v)
        assert consts_al[k].flags.aligned
    # the same weights packed, from their unaligned bytes (per_op: each op's kernel reads the uploaded copy)
    assert packed_odd == packed_al and (packed_odd > 0) == (mode == "auto" and _native.has_host_hooks)
    np.testing.assert_array_equal(y_odd, y_al)  # bit for bit
    ort = pytest.importorskip("onnxruntime")
    sess = ort.InferenceSession(odd, providers=["CPUExecutionProvider"])
    (ref,) = sess.run(None, {"x": _X})
    np.testing.assert_allclose(y_odd, ref, rtol=1e-4, atol=1e-5 * float(np.abs(ref).max()))


def _unaligned(a: np.ndarray, shift: int) -> np.ndarray:
    """A read-only view of ``a``'s values ``shift`` bytes past an aligned address."""
    buf = np.zeros(a.nbytes + 64, np.uint8)
    start = -buf.ctypes.data % 64 + shift
    buf[start : start + a.nbytes] = np.frombuffer(a.tobytes(), np.uint8)
    v = np.frombuffer(buf.data.toreadonly(), a.dtype, a.size, start).reshape(a.shape)
    assert (v.ctypes.data % a.itemsize != 0) == (shift % a.itemsize != 0)
    return v


def _shared_packs() -> tuple[int, int, int]:
    out = _native.ffi.new("int64_t[3]")
    _native.lib.aiogeHostSharedPackInfo(out)
    return int(out[0]), int(out[1]), int(out[2])


@pytest.mark.skipif(not _native.has_host_hooks, reason="packed weights are the host runtime's")
@pytest.mark.parametrize("shift", [1, 2, 3])
async def test_unaligned_weights_pack_once_for_every_plan_as_aligned_ones_do(dev, shift):
    """The plans of a dynamic-shape model share one packed copy of an unaligned weight: the entry
    packed from its aligned scratch copy is keyed by the weight's own address, found by every plan."""
    rng = np.random.default_rng(5)
    w1 = rng.standard_normal((48, 64)).astype(np.float32)
    w2 = rng.standard_normal((64, 24)).astype(np.float32)
    outs = {}
    for name, (u1, u2) in {"aligned": (w1, w2), "unaligned": (_unaligned(w1, shift), _unaligned(w2, shift))}.items():
        g = Graph("seq")
        x = g.input("x", ("B", "S", 48), "float32")
        h = g.add_node("Relu", [g.add_node("MatMul", [x, g.constant("w1", w1)])])
        g.output(g.add_node("MatMul", [h, g.constant("w2", w2)]))
        g.set_constant("w1", u1)  # kept as it is (read-only): Graph.constant copies
        g.set_constant("w2", u2)
        entries0, bytes0, saved0 = _shared_packs()
        packs0 = _native.lib.aiogeHostPackedWeightCount()
        assert g.constants["w1"].flags.aligned == (name == "aligned")  # kept as it is, not copied
        model = await dev.compile(g)
        try:
            ys = []
            for b, s in ((1, 5), (2, 9), (3, 17), (1, 33)):
                xs = np.random.default_rng(b * s).standard_normal((b, s, 48)).astype(np.float32)
                ys.append(np.asarray(next(iter((await model.execute({"x": xs})).values()))))
            outs[name] = ys
            assert model.stats["plans"] == 4
            assert _native.lib.aiogeHostPackedWeightCount() - packs0 == 2  # each weight packed once
            entries, nbytes, saved = _shared_packs()
            assert entries - entries0 == 2 and saved - saved0 >= 6  # the other three plans found them
            assert nbytes - bytes0 == (64 * 48 + 32 * 64) * 4  # op(B) in 16-column panels: K x 16 floats each
        finally:
            await model.aclose()
        assert _shared_packs()[:2] == (entries0, bytes0)
    for a, u in zip(outs["aligned"], outs["unaligned"], strict=True):
        np.testing.assert_array_equal(a, u)
