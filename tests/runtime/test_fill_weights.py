"""A folded fill weight (one value repeated: a broadcast view) is packed from its value alone.

A product whose constant operand is a fill packs it from the value (aiogeGraphPackFillWeights): the
same panels, without materialising the weight on the host; a fill read only through those panels is
never materialised at all.  A fill that another kernel packs from its bytes, or that is read as it
is, is materialised as before.  Whatever the path, a model holding fills computes bit for bit what
the same model holding the materialised arrays does, packs and uploads the same bytes.
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


def _fill(value: float, *shape: int) -> np.ndarray:
    return np.broadcast_to(np.float32(value), shape)


def _graph(name: str, inputs: dict[str, tuple[int, ...]], fills: dict[str, np.ndarray],
           body: Callable[[aioge.graph.Graph, dict[str, Any], dict[str, Any]], None],
           materialise: bool) -> aioge.graph.Graph:  # fmt: skip
    g = aioge.graph.Graph(name)
    xs = {n: g.input(n, sh) for n, sh in inputs.items()}
    ws = {}
    for n, a in fills.items():
        ws[n] = g.constant(n, np.zeros(a.shape, a.dtype))
        # as constant folding leaves a fill: a broadcast view (or, for the reference, its copy)
        g.constants[n] = np.ascontiguousarray(a) if materialise else a
    body(g, xs, ws)
    return g


def _matmul(g: aioge.graph.Graph, x: dict[str, Any], w: dict[str, Any]) -> None:
    g.output(g.add_node("MatMul", [x["x"], w["w"]], name="y"))


def _gemm_t(g: aioge.graph.Graph, x: dict[str, Any], w: dict[str, Any]) -> None:
    g.output(g.add_node("Gemm", [x["x"], w["w"], w["b"]], {"transB": 1}, name="y"))


def _shared(g: aioge.graph.Graph, x: dict[str, Any], w: dict[str, Any]) -> None:
    a = g.add_node("MatMul", [x["x"], w["w"]])
    b = g.add_node("MatMul", [g.add_node("Relu", [x["x"]]), w["w"]])
    g.output(g.add_node("Add", [a, b], name="y"))


def _also_raw(g: aioge.graph.Graph, x: dict[str, Any], w: dict[str, Any]) -> None:
    g.output(g.add_node("MatMul", [x["x"], w["w"]], name="y"), g.add_node("Mul", [x["s"], w["w"]], name="z"))


def _conv(g: aioge.graph.Graph, x: dict[str, Any], w: dict[str, Any]) -> None:
    c = g.add_node("Conv", [x["x"], w["f"]], {"pads": [1, 1, 1, 1]})
    g.output(g.add_node("MatMul", [g.add_node("Flatten", [c]), w["w"]], name="y"))


#: name -> (inputs, fills, body)
CASES: dict[str, Any] = {
    "matmul": ({"x": (8, 64)}, {"w": _fill(0.02, 64, 48)}, _matmul),
    "gemm_transposed": ({"x": (4, 544)}, {"w": _fill(-1.5, 1000, 544), "b": _fill(0.25, 1000)}, _gemm_t),
    "shared": ({"x": (8, 64)}, {"w": _fill(0.5, 64, 40)}, _shared),
    "also_raw": ({"x": (8, 64), "s": (64, 48)}, {"w": _fill(3.0, 64, 48)}, _also_raw),
    "conv": ({"x": (1, 32, 6, 6)}, {"f": _fill(0.125, 32, 32, 3, 3), "w": _fill(0.01, 32 * 36, 10)}, _conv),
    "big": ({"x": (4, 1024)}, {"w": _fill(0.001, 1024, 1280)}, _matmul),
}


def _run(name: str, materialise: bool, fill_call: bool = True) -> dict[str, Any]:
    inputs, fills, body = CASES[name]
    g = _graph(name, inputs, fills, body, materialise)
    rng = np.random.default_rng(1)
    feeds = {n: rng.standard_normal(sh).astype(np.float32) for n, sh in inputs.items()}
    calls: list[Any] = []
    real = acl.graph_pack_fill_weights

    def spy(*a: Any) -> Any:
        r = real(*a) if fill_call else None
        calls.append(r)
        return r

    async def main() -> dict[str, Any]:
        async with aioge.open_device(0) as dev:
            model = await dev.compile(g)
            try:
                outs = [await model.execute(feeds) for _ in range(2)]
                return {"outs": outs, "uploaded": model.weight_device_bytes, "weights": model.plan.weight_bytes,
                        "packed": model.plan.packed_weight_bytes}  # fmt: skip
            finally:
                await model.aclose()

    acl.graph_pack_fill_weights = spy  # type: ignore[assignment]
    try:
        return {**anyio.run(main), "calls": calls}
    finally:
        acl.graph_pack_fill_weights = real  # type: ignore[assignment]


@pytest.mark.parametrize("name", list(CASES))
def test_fill_weights_pack_and_compute_as_their_materialised_arrays(name: str) -> None:
    ref = _run(name, materialise=True)
    assert ref["calls"] == []  # no fill: every weight packed from its bytes
    for new in (_run(name, materialise=False), _run(name, materialise=False, fill_call=False)):
        assert len(new["calls"]) == 1
        assert (new["packed"], new["uploaded"], new["weights"]) == (ref["packed"], ref["uploaded"], ref["weights"])
        for a, b in zip(new["outs"], ref["outs"], strict=True):
            assert list(a) == list(b)
            for k in a:
                assert np.asarray(a[k]).tobytes() == np.asarray(b[k]).tobytes(), k  # bit for bit
    assert ref["packed"] > 0


def test_a_product_packs_a_fill_from_its_value() -> None:
    """The products' fills are packed by the fill call; a convolution's is left to be materialised."""
    packed, nodes, need = _run("matmul", materialise=False)["calls"][0]
    assert packed > 0 and nodes == 1 and need == [False]
    packed, nodes, need = _run("shared", materialise=False)["calls"][0]
    assert packed > 0 and nodes == 2 and need == [False]
    _, nodes, need = _run("conv", materialise=False)["calls"][0]
    assert nodes == 1 and sorted(need) == [False, True]  # the filter: needed; the product's: packed


def test_the_fill_call_checks_its_range() -> None:
    async def main() -> None:
        async with aioge.open_device(0):
            g = acl.graph_create([4, 4], [4], 0, 1)
            try:
                with pytest.raises(aioge.AclError):
                    acl.graph_pack_fill_weights(g, 1, [None, None])
                assert acl.graph_pack_fill_weights(g, 0, [None, None]) == (0, 0, [False, False])
            finally:
                acl.graph_destroy(g)

    anyio.run(main)
