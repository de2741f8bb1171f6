"""Giving the C heap's free pages back (memory.trim_host_heap): a model's close trims only when it held
at least TRIM_MIN_BYTES of arenas, weights and packed copies; below that, the pages given back are few
and the next loads would fault them back in."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

import aioge
from aioge.runtime import memory

pytestmark = pytest.mark.anyio


@pytest.fixture
def trims(monkeypatch):
    calls: list[int] = []
    monkeypatch.setattr(memory, "_malloc_trim", lambda: calls.append)
    return calls


def test_trim_below_the_bytes_freed_does_nothing(trims):
    assert memory.trim_host_heap(memory.TRIM_MIN_BYTES - 1) is False
    assert trims == []
    assert memory.trim_host_heap(memory.TRIM_MIN_BYTES) is True
    assert memory.trim_host_heap() is True  # no count: trims regardless
    assert trims == [0, 0]


def _add_model(n: int) -> onnx.ModelProto:
    """y = x + w, w a float32 const of n elements."""
    w = numpy_helper.from_array(np.arange(n, dtype=np.float32), "w")
    node = helper.make_node("Add", ["x", "w"], ["y"])
    graph = helper.make_graph([node], "add", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [n])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [n])], [w])  # fmt: skip
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


@pytest.mark.parametrize(("n", "trimmed"), [(16, False), (1 << 19, True)])
async def test_close_trims_after_a_large_model_only(dev, trims, n, trimmed):
    model = await dev.compile(aioge.load_onnx(_add_model(n).SerializeToString()))
    x = np.ones(n, np.float32)
    np.testing.assert_array_equal((await model.execute({"x": x}))["y"], x + np.arange(n, dtype=np.float32))
    held = model.weight_device_bytes + model.plan.packed_weight_bytes
    assert (held >= memory.TRIM_MIN_BYTES) == trimmed
    await model.aclose()
    assert trims == ([0] if trimmed else [])
