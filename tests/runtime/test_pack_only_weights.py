"""Weights read only through their packed copies are not uploaded.

At compile the host runtime packs the weights of matrix products and convolutions once
(aiogeGraphPackWeights); aiogeGraphPackOnlyWeights then names those that every reader runs from its
pack alone, and the model does not upload them: no device copy for the life of the model.  A
weight also read as it is (by a node that does not pack it, as a graph output, or by a product
that may hand it to BLAS unpacked) is uploaded as before.  The outputs are bit for bit those of
the same model with every weight uploaded, and match numpy.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import anyio
import numpy as np
import pytest

import aioge
from aioge import _native
from aioge._native import acl

pytestmark = pytest.mark.skipif(_native.backend != "host", reason="the host runtime packs weights")

_RNG = np.random.default_rng(5)


def _w(*shape: int) -> np.ndarray:
    return (_RNG.standard_normal(shape) / np.sqrt(shape[-1])).astype(np.float32)


W = _w(64, 48)
W2 = _w(48, 32)
F3 = _w(32, 32, 3, 3)  # a 3x3 convolution's filter (32 channels: packed)
F1 = _w(64, 32, 1, 1)  # a pointwise convolution's filter
WBIG = _w(1024, 1280)  # 5 MiB: its panels are large enough that big products may go to BLAS unpacked


def _mlp() -> aioge.graph.Graph:
    """Two products: each weight read by one packing node."""
    g = aioge.graph.Graph("mlp")
    x = g.input("x", (8, 64))
    h = g.add_node("Relu", [g.add_node("MatMul", [x, g.constant("w", W)])])
    g.output(g.add_node("MatMul", [h, g.constant("w2", W2)], name="y"))
    return g


def _shared() -> aioge.graph.Graph:
    """One weight read by two products (the second finds the first's packed copy)."""
    g = aioge.graph.Graph("shared")
    x = g.input("x", (8, 64))
    w = g.constant("w", W)
    a = g.add_node("MatMul", [x, w])
    b = g.add_node("MatMul", [g.add_node("Relu", [x]), w])
    g.output(g.add_node("Add", [a, b], name="y"))
    return g


def _also_raw() -> aioge.graph.Graph:
    """A weight read by a product and by an elementwise node (which reads it as it is)."""
    g = aioge.graph.Graph("also_raw")
    x = g.input("x", (8, 64))
    s = g.input("s", (64, 48))
    w = g.constant("w", W)
    g.output(g.add_node("MatMul", [x, w], name="y"), g.add_node("Mul", [s, w], name="z"))
    return g


def _also_output() -> aioge.graph.Graph:
    """A weight read by a product and also a graph output."""
    g = aioge.graph.Graph("also_output")
    x = g.input("x", (8, 64))
    w = g.constant("w", W)
    g.output(g.add_node("MatMul", [x, w], name="y"), w)
    return g


def _convs() -> aioge.graph.Graph:
    g = aioge.graph.Graph("convs")
    x = g.input("x", (1, 32, 12, 12))
    c = g.add_node("Conv", [x, g.constant("f3", F3)], {"pads": [1, 1, 1, 1]})
    g.output(g.add_node("Conv", [g.add_node("Relu", [c]), g.constant("f1", F1)], name="y"))
    return g


def _big() -> aioge.graph.Graph:
    g = aioge.graph.Graph("big")
    x = g.input("x", (4, 1024))
    g.output(g.add_node("MatMul", [x, g.constant("w", WBIG)], name="y"))
    return g


def _conv_ref(x: np.ndarray, f: np.ndarray, pad: int) -> np.ndarray:
    co, _, kh, kw = f.shape
    xp = np.pad(x.astype(np.float64), ((0, 0), (0, 0), (pad, pad), (pad, pad)))
    n, _, h, w = x.shape
    ho, wo = h + 2 * pad - kh + 1, w + 2 * pad - kw + 1
    y = np.zeros((n, co, ho, wo))
    for i in range(kh):
        for j in range(kw):
            y += np.einsum("nchw,oc->nohw", xp[:, :, i : i + ho, j : j + wo], f[:, :, i, j].astype(np.float64))
    return y


def _feeds(g: aioge.graph.Graph) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(9)
    return {n: rng.standard_normal(g.values[n].shape).astype(np.float32) for n in g.inputs}


def _reference(name: str, f: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    x = f["x"].astype(np.float64)
    if name == "mlp":
        return {"y": np.maximum(x @ W, 0) @ W2}
    if name == "shared":
        return {"y": x @ W + np.maximum(x, 0) @ W}
    if name == "also_raw":
        return {"y": x @ W, "z": f["s"] * W}
    if name == "also_output":
        return {"y": x @ W, "w": W}
    if name == "convs":
        return {"y": _conv_ref(np.maximum(_conv_ref(f["x"], F3, 1), 0), F1, 0)}
    assert name == "big"
    return {"y": x @ WBIG}


def _run(make: Callable[[], aioge.graph.Graph], keep_all: bool) -> dict[str, Any]:
    """Compile (keep_all: every weight uploaded, as before) and run once: outputs and what it holds."""
    g = make()
    feeds = _feeds(g)

    async def main() -> dict[str, Any]:
        async with aioge.open_device(0) as dev:
            base = _native.counters()["device_bytes"]
            model = await dev.compile(g)
            try:
                held = _native.counters()["device_bytes"] - base
                outs = [await model.execute(feeds) for _ in range(2)]  # the synchronous path, then the queued one
                y = await model.execute({n: dev.default_stream.upload(a) for n, a in feeds.items()})  # in place
                return {"outs": [*outs, y], "held": held, "uploaded": model.weight_device_bytes,
                        "weights": model.plan.weight_bytes, "packed": model.plan.packed_weight_bytes}  # fmt: skip
            finally:
                await model.aclose()

    if not keep_all:
        return {**anyio.run(main), "feeds": feeds}
    real = acl.graph_pack_only_weights
    acl.graph_pack_only_weights = lambda g, first, count: [False] * count  # type: ignore[assignment]
    try:
        return {**anyio.run(main), "feeds": feeds}
    finally:
        acl.graph_pack_only_weights = real  # type: ignore[assignment]


#: model -> bytes of its weights read only through packed copies
CASES = {
    "mlp": (_mlp, W.nbytes + W2.nbytes),
    "shared": (_shared, W.nbytes),
    "also_raw": (_also_raw, 0),
    "also_output": (_also_output, 0),
    "convs": (_convs, F3.nbytes + F1.nbytes),
    "big": (_big, 0),
}


@pytest.mark.parametrize("name", list(CASES))
def test_pack_only_weights_are_not_uploaded_and_outputs_are_unchanged(name: str) -> None:
    make, pack_only = CASES[name]
    new, old = _run(make, keep_all=False), _run(make, keep_all=True)
    assert new["packed"] > 0 and new["packed"] == old["packed"]
    assert old["uploaded"] == new["weights"]  # before: every weight on the device
    assert new["uploaded"] == new["weights"] - pack_only
    # the device memory the model holds after compile drops by those weights' bytes (each block
    # rounded up to the runtime's alignment)
    drop = old["held"] - new["held"]
    assert pack_only <= drop <= pack_only + 256 if pack_only else drop == 0, (drop, pack_only)
    ref = _reference(name, new["feeds"])
    for a, b in zip(new["outs"], old["outs"], strict=True):
        assert list(a) == list(b) == list(ref)
        for k in ref:
            y, y_old = np.asarray(a[k]), np.asarray(b[k])
            assert y.tobytes() == y_old.tobytes(), k  # bit for bit
            np.testing.assert_allclose(y, ref[k], rtol=1e-4, atol=1e-4)


def test_a_dropped_weight_cannot_be_passed_to_an_execution() -> None:
    """The graph refuses a pointer for a weight it holds only as packed copies (it never reads one)."""
    g = _mlp()
    x = np.ones((8, 64), np.float32)

    async def main() -> None:
        async with aioge.open_device(0) as dev:
            model = await dev.compile(g)
            try:
                assert model.weight_device_bytes == 0
                s = dev.default_stream
                xs, ys, junk = s.upload(x), s.empty((8, 32)), s.empty((64, 48))
                await s.synchronize()
                arena = model._arena(model._flight.admit())
                ptrs = [xs._memory().ptr, *model._weight_ptrs()]
                assert ptrs[1:] == [acl.NULL, acl.NULL]
                outs = acl.pointer_list([ys._memory().ptr])
                ok = _native.lib.aiogeGraphExecuteAsync(model._handle, 0, arena.ptr, 3, acl.pointer_list(ptrs), 1,
                                                        outs, s._handle)  # fmt: skip
                assert ok == 0
                await s.synchronize()
                ptrs[1] = junk._memory().ptr
                rc = _native.lib.aiogeGraphExecuteAsync(model._handle, 0, arena.ptr, 3, acl.pointer_list(ptrs), 1,
                                                        outs, s._handle)  # fmt: skip
                assert rc == 100000
                assert "only as packed copies" in _native.recent_error()
                np.testing.assert_allclose(await ys.numpy(), np.maximum(x @ W, 0) @ W2, rtol=1e-4, atol=1e-4)
            finally:
                await model.aclose()

    anyio.run(main)


@pytest.mark.parametrize("also_raw", [False, True])
def test_dynamic_shapes_keep_working(also_raw: bool) -> None:
    """A dynamic-shape model's plans: a pack-only weight has no device copy in any plan; one also read
    as it is has one, shared by every plan."""
    g = aioge.graph.Graph("dyn")
    x = g.input("x", ("B", 64))
    w = g.constant("w", W)
    if also_raw:
        idx = g.input("idx", ("B",), "int64")
        g.output(g.add_node("MatMul", [x, w], name="y"), g.add_node("Gather", [w, idx], name="z"))
    else:
        g.output(g.add_node("MatMul", [x, w], name="y"))
    rng = np.random.default_rng(3)

    async def main() -> int:
        async with aioge.open_device(0) as dev:
            model = await dev.compile(g)
            try:
                for b in (1, 5, 130, 5, 17):
                    feeds = {"x": rng.standard_normal((b, 64)).astype(np.float32)}
                    if also_raw:
                        feeds["idx"] = rng.integers(0, 64, b).astype(np.int64)
                    out = await model.execute(feeds)
                    np.testing.assert_allclose(out["y"], feeds["x"] @ W, rtol=1e-4, atol=1e-4)
                    if also_raw:
                        assert out["z"].tobytes() == W[feeds["idx"]].tobytes()
                return int(model._weights.nbytes)
            finally:
                await model.aclose()

    shared = anyio.run(main)
    assert shared == (W.nbytes if also_raw else 0)
