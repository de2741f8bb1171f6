"""Constant matrix-product operands packed once when a compiled model loads (kernels/gemm_small.c's
panels, graph.c's aiogeGraphPackWeights): MatMul, Gemm (transA, transB, alpha, beta, C broadcast)
and the fused product + bias + activation (computed in the packed product's store) against numpy
in float64 over ragged shapes (M = 1, K and N off the 16-column panels and the 256-row
K blocks), the packed bytes reported in ``model.plan``, and no packing after the load."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from aioge import _native
from aioge.graph import Graph
from tests.ops.opsutil import check, few

pytestmark = [
    pytest.mark.anyio,
    pytest.mark.skipif(not _native.has_host_hooks, reason="packed weights are the host runtime's"),
]


def _panels(k: int, n: int) -> int:
    """Bytes of op(B)[K, N] packed: K x 16 floats per 16-column panel."""
    return (n + 15) // 16 * 16 * k * 4


def layer(m: int, k: int, n: int, *, tb: bool, bias: bool, relu: bool, seed: int) -> tuple[Graph, dict, np.ndarray]:
    rng = np.random.default_rng(seed)
    g = Graph("layer")
    x = g.input("x", (m, k), "float32")
    w = rng.standard_normal((n, k) if tb else (k, n)).astype(np.float32)
    b = rng.standard_normal(n).astype(np.float32)
    wc = g.constant("w", w)
    if tb:  # Gemm's transB (and its C as the bias)
        y = g.add_node("Gemm", [x, wc, g.constant("b", b)] if bias else [x, wc], {"transB": 1})
    else:
        y = g.add_node("MatMul", [x, wc])
        if bias:
            y = g.add_node("Add", [y, g.constant("b", b)])
    if relu:
        y = g.add_node("Relu", [y])
    g.output(y)
    xv = rng.standard_normal((m, k)).astype(np.float32)
    ref = xv.astype(np.float64) @ (w.T if tb else w).astype(np.float64) + (b if bias else 0.0)
    return g, {"x": xv}, np.maximum(ref, 0) if relu else ref


@few(30)
@given(m=st.sampled_from([1, 2, 5, 6, 7, 8, 13, 16, 33, 64, 100, 130]), k=st.integers(1, 600),
       n=st.integers(1, 300), tb=st.booleans(), bias=st.booleans(), relu=st.booleans(),
       seed=st.integers(0, 2**16))  # fmt: skip
async def test_packed_layer_vs_numpy(compiled, m, k, n, tb, bias, relu, seed):
    g, feeds, ref = layer(m, k, n, tb=tb, bias=bias, relu=relu, seed=seed)
    model = await compiled(g)
    assert model.plan.packed_weight_bytes == _panels(k, n)
    assert model.plan.weight_bytes >= k * n * 4
    out = await model.execute(feeds)
    check(np.asarray(next(iter(out.values()))), ref, rtol=1e-4, atol=1e-3)


ACTS = {
    "none": ({}, lambda v: v),
    "Relu": ({}, lambda v: np.maximum(v, 0)),
    "Clip": ({"min": -0.5, "max": 0.75}, lambda v: np.clip(v, -0.5, 0.75)),
    "Sigmoid": ({}, lambda v: 1 / (1 + np.exp(-v))),
    "LeakyRelu": ({"alpha": 0.1}, lambda v: np.where(v < 0, 0.1 * v, v)),
    "Gelu": ({}, lambda v: 0.5 * v * (1 + np.vectorize(math.erf)(v / math.sqrt(2)))),
    "Tanh": ({}, np.tanh),
    "Swish": ({}, lambda v: v / (1 + np.exp(-v))),  # Sigmoid + Mul in the graph
    "HardSwish": ({}, lambda v: v * np.clip(v / 6 + 0.5, 0, 1)),
    # ONNX Gelu approximate="tanh": GPT-2's gelu_new
    "GeluTanh": (
        {"approximate": "tanh"},
        lambda v: 0.5 * v * (1 + np.tanh(math.sqrt(2 / math.pi) * (v + 0.044715 * v**3))),
    ),
}

#: Gemm's C: its shape as a function of (M, N), broadcast to [M, N]
C_SHAPES = {"none": None, "N": lambda m, n: (n,), "1N": lambda m, n: (1, n), "MN": lambda m, n: (m, n),
            "M1": lambda m, n: (m, 1), "scalar": lambda m, n: (), "11": lambda m, n: (1, 1)}  # fmt: skip


def gemm_layer(m: int, k: int, n: int, *, ta: bool, tb: bool, alpha: float, beta: float, c: str, act: str,
               seed: int) -> tuple[Graph, dict, np.ndarray]:  # fmt: skip
    """ONNX Gemm with a constant B (and C), then an activation; the float64 numpy reference."""
    rng = np.random.default_rng(seed)
    g = Graph("gemm")
    x = g.input("x", (k, m) if ta else (m, k), "float32")
    w = rng.standard_normal((n, k) if tb else (k, n)).astype(np.float32)
    ins = [x, g.constant("w", w)]
    shape = C_SHAPES[c]
    cv = None if shape is None else np.asarray(rng.standard_normal(shape(m, n)), np.float32)
    if cv is not None:
        ins.append(g.constant("c", cv))
    y = g.add_node("Gemm", ins, {"transA": int(ta), "transB": int(tb), "alpha": alpha, "beta": beta})
    attrs, ref_act = ACTS[act]
    if act == "Clip":
        lo, hi = g.constant("lo", np.float32(attrs["min"])), g.constant("hi", np.float32(attrs["max"]))
        y = g.add_node("Clip", [y, lo, hi])
    elif act == "Swish":
        y = g.add_node("Mul", [y, g.add_node("Sigmoid", [y])])
    elif act != "none":
        y = g.add_node("Gelu" if act == "GeluTanh" else act, [y], dict(attrs))
    g.output(y)
    xv = rng.standard_normal((k, m) if ta else (m, k)).astype(np.float32)
    a64, b64 = xv.astype(np.float64), w.astype(np.float64)
    ref = alpha * ((a64.T if ta else a64) @ (b64.T if tb else b64))
    if cv is not None:
        ref = ref + beta * cv.astype(np.float64)
    return g, {"x": xv}, ref_act(ref)


@few(40)
@given(m=st.sampled_from([1, 2, 5, 7, 8, 13, 33, 100]), k=st.integers(1, 600), n=st.integers(1, 300),
       ta=st.booleans(), tb=st.booleans(), alpha=st.sampled_from([1.0, 0.5, -2.0]),
       beta=st.sampled_from([1.0, 0.0, 3.0]), c=st.sampled_from(sorted(C_SHAPES)), act=st.sampled_from(sorted(ACTS)),
       seed=st.integers(0, 2**16))  # fmt: skip
async def test_packed_gemm_vs_numpy(compiled, m, k, n, ta, tb, alpha, beta, c, act, seed):
    # every Gemm form (transA, transB, alpha, beta, C broadcast) with its constant B packed at load,
    # alpha / C / the activation in the packed product's store where the fusion pass puts them there
    g, feeds, ref = gemm_layer(m, k, n, ta=ta, tb=tb, alpha=alpha, beta=beta, c=c, act=act, seed=seed)
    model = await compiled(g)
    assert model.plan.packed_weight_bytes == _panels(k, n)
    out = await model.execute(feeds)
    check(np.asarray(next(iter(out.values()))), ref, rtol=1e-4, atol=1e-3 * max(1.0, math.sqrt(k) / 8))


EPILOGUE_SHAPES = [(1, 300, 70), (6, 257, 16), (8, 513, 33), (97, 40, 17), (130, 1100, 1000)]


@pytest.mark.parametrize("act", sorted(ACTS))
@pytest.mark.parametrize(("m", "k", "n"), EPILOGUE_SHAPES)
async def test_packed_epilogue_shapes_vs_numpy(compiled, act, m, k, n):
    # GEMV (M = 1), several K blocks (K > 256), a ragged last panel, a row block past 96, and the
    # big shape that OpenBLAS computes from the unpacked B (its epilogue runs after the product)
    g, feeds, ref = gemm_layer(m, k, n, ta=m == 8, tb=n == 33, alpha=0.5, beta=2.0, c="N", act=act, seed=m + k + n)
    model = await compiled(g)
    assert model.plan.packed_weight_bytes == _panels(k, n)
    out = await model.execute(feeds)
    check(np.asarray(next(iter(out.values()))), ref, rtol=1e-4, atol=1e-3 * max(1.0, math.sqrt(k) / 8))


SHAPES = [(1, 784, 512, False), (1, 17, 3, True), (8, 768, 768, True), (64, 784, 512, False), (512, 300, 70, False),
          (3, 1, 1, False), (200, 1100, 1000, True),
          # 4 MiB and up: huge-page panels, packed and hashed in chunks over the pool; a partial last panel
          (3, 1100, 1030, False), (2, 2500, 1001, True)]  # fmt: skip


@pytest.mark.parametrize(("m", "k", "n", "tb"), SHAPES)
async def test_packed_shapes_vs_numpy(compiled, m, k, n, tb):
    g, feeds, ref = layer(m, k, n, tb=tb, bias=True, relu=False, seed=m + k + n)
    model = await compiled(g)
    out = await model.execute(feeds)
    check(np.asarray(next(iter(out.values()))), ref, rtol=1e-4, atol=1e-3)


async def test_weights_are_packed_once_at_load(compiled):
    rng = np.random.default_rng(0)
    g = Graph("mlp")
    h = g.input("x", (4, 40), "float32")
    for i, (a, b) in enumerate([(40, 50), (50, 30), (30, 10)]):
        h = g.add_node("MatMul", [h, g.constant(f"w{i}", rng.standard_normal((a, b)).astype(np.float32))])
        h = g.add_node("Relu", [h])
    g.output(h)
    before = _native.lib.aiogeHostPackedWeightCount()
    model = await compiled(g)
    assert _native.lib.aiogeHostPackedWeightCount() - before == 3
    assert model.plan.packed_weight_bytes == _panels(40, 50) + _panels(50, 30) + _panels(30, 10)
    x = rng.standard_normal((4, 40)).astype(np.float32)
    first = np.asarray(next(iter((await model.execute({"x": x})).values())))
    for _ in range(3):
        again = np.asarray(next(iter((await model.execute({"x": x})).values())))
        np.testing.assert_array_equal(again, first)
    assert _native.lib.aiogeHostPackedWeightCount() - before == 3  # executions pack nothing


async def test_a_model_over_a_megabyte_of_weights_packs_each_once(compiled):
    """Over a megabyte of weights the nodes are packed over the thread pool, largest first: each
    weight still packed once (one read by two nodes too: the second finds the first's panels), and
    the results are the product of the weights each node reads."""
    rng = np.random.default_rng(7)
    sizes = [(256, 384), (384, 256), (256, 256), (256, 512), (512, 256)]
    ws = [rng.standard_normal(s).astype(np.float32) / 16 for s in sizes]
    g = Graph("mlp")
    h = g.input("x", (6, 256), "float32")
    consts = [g.constant(f"w{i}", w) for i, w in enumerate(ws)]
    chain = [0, 1, 2, 3, 4, 2]  # w2 read by two nodes
    for i in chain:
        h = g.add_node("Relu", [g.add_node("MatMul", [h, consts[i]])])
    g.output(h)
    assert sum(w.nbytes for w in ws) >= 1 << 20
    before = _native.lib.aiogeHostPackedWeightCount()
    model = await compiled(g)
    assert _native.lib.aiogeHostPackedWeightCount() - before == len(ws)
    x = rng.standard_normal((6, 256)).astype(np.float32)
    ref = x.astype(np.float64)
    for i in chain:
        ref = np.maximum(ref @ ws[i].astype(np.float64), 0)
    (y,) = (await model.execute({"x": x})).values()
    check(np.asarray(y), ref, rtol=1e-4, atol=1e-4)


async def test_a_weight_that_is_also_an_output_is_not_changed(compiled):
    # the packed copy is the kernel's: the weight itself (here also read as an output) stays as it was
    rng = np.random.default_rng(1)
    w = rng.standard_normal((20, 24)).astype(np.float32)
    g = Graph("both")
    x = g.input("x", (3, 20), "float32")
    wc = g.constant("w", w)
    g.output(g.add_node("MatMul", [x, wc]))
    g.output(g.add_node("Identity", [wc]))
    model = await compiled(g)
    xv = rng.standard_normal((3, 20)).astype(np.float32)
    out = list((await model.execute({"x": xv})).values())
    check(np.asarray(out[0]), xv.astype(np.float64) @ w.astype(np.float64), rtol=1e-4, atol=1e-4)
    np.testing.assert_array_equal(np.asarray(out[1]), w)


@pytest.mark.parametrize("family", _native.kernel_families(supported=False) or ["generic"])
@pytest.mark.parametrize(("m", "k", "n", "tb"), [(1, 300, 70, False), (8, 129, 33, True), (64, 784, 512, False)])
async def test_every_kernel_family_vs_numpy(compiled, family, m, k, n, tb):
    # (tests/ops/test_kernel_families.py: every family over the row counts around its micro-tile)
    if family not in _native.kernel_families():
        pytest.skip(f"this CPU cannot run the {family} kernels")
    lib, ffi = _native.lib, _native.ffi
    g, feeds, ref = layer(m, k, n, tb=tb, bias=True, relu=True, seed=m * k + n)
    model = await compiled(g)
    assert lib.aiogeHostSetKernelFamily(family.encode()) == 0
    try:
        assert ffi.string(lib.aiogeHostKernelFamily()).decode() == family
        out = await model.execute(feeds)
    finally:
        lib.aiogeHostSetKernelFamily(ffi.NULL)
    check(np.asarray(next(iter(out.values()))), ref, rtol=1e-4, atol=1e-3)


def test_an_unknown_kernel_family_is_refused():
    lib, ffi = _native.lib, _native.ffi
    before = ffi.string(lib.aiogeHostKernelFamily())
    assert lib.aiogeHostSetKernelFamily(b"avx512-but-not-here-either") != 0
    assert ffi.string(lib.aiogeHostKernelFamily()) == before


def _shared_packs() -> tuple[int, int, int]:
    out = _native.ffi.new("int64_t[3]")
    _native.lib.aiogeHostSharedPackInfo(out)
    return int(out[0]), int(out[1]), int(out[2])


async def test_the_plans_of_a_dynamic_shape_model_share_one_packed_copy(dev):
    """A plan per sequence length, one packed copy of each weight for all of them: packed when the
    first plan loads, referenced by the others, freed when the model closes."""
    rng = np.random.default_rng(5)
    w1 = rng.standard_normal((48, 64)).astype(np.float32)
    w2 = rng.standard_normal((64, 24)).astype(np.float32)
    g = Graph("seq")
    x = g.input("x", ("B", "S", 48), "float32")
    h = g.add_node("Relu", [g.add_node("MatMul", [x, g.constant("w1", w1)])])
    g.output(g.add_node("MatMul", [h, g.constant("w2", w2)]))
    entries0, bytes0, _ = _shared_packs()
    packs0 = _native.lib.aiogeHostPackedWeightCount()
    model = await dev.compile(g)
    try:
        for b, s in ((1, 5), (2, 9), (3, 17), (1, 33)):
            xs = rng.standard_normal((b, s, 48)).astype(np.float32)
            (y,) = (await model.execute({"x": xs})).values()
            check(np.asarray(y), np.maximum(xs @ w1, 0) @ w2, rtol=1e-4, atol=1e-3)
        assert model.stats["plans"] == 4
        assert _native.lib.aiogeHostPackedWeightCount() - packs0 == 2  # each weight packed once, not once a plan
        entries, nbytes, saved = _shared_packs()
        assert entries - entries0 == 2 and nbytes - bytes0 == _panels(48, 64) + _panels(64, 24)
        assert saved >= 6  # three more plans found both weights packed
    finally:
        await model.aclose()
    assert _shared_packs()[:2] == (entries0, bytes0)  # the last plan's close freed them


async def test_equal_values_elsewhere_or_other_values_here_are_not_shared(compiled):
    """Sharing needs the same layout, the same weight and the same values: a copy of the values at
    another address packs its own panels, and so does a weight of the same shape with other values."""
    rng = np.random.default_rng(6)
    w = rng.standard_normal((32, 40)).astype(np.float32)

    def graph(weight: np.ndarray) -> Graph:
        g = Graph("one")
        g.output(g.add_node("MatMul", [g.input("x", (4, 32), "float32"), g.constant("w", weight)]))
        return g

    packs0 = _native.lib.aiogeHostPackedWeightCount()
    a = await compiled(graph(w))
    b = await compiled(graph(w.copy()))
    c = await compiled(graph(w + 1))
    assert _native.lib.aiogeHostPackedWeightCount() - packs0 == 3
    x = rng.standard_normal((4, 32)).astype(np.float32)
    for model, weight in ((a, w), (b, w), (c, w + 1)):
        (y,) = (await model.execute({"x": x})).values()
        check(np.asarray(y), x @ weight, rtol=1e-4, atol=1e-3)


@pytest.mark.parametrize("tb", [False, True])
async def test_a_weight_at_a_packed_address_is_compared_with_its_panels(compiled, tb):
    """A weight at the address, and with the layout, of a weight an open plan packed shares its panels
    when its values are those panels' (bit for bit) and packs its own when they are not: the values
    behind one address changed between two compiles."""
    rng = np.random.default_rng(7)
    k, n = 70, 37  # a partial last panel
    # tb: a pointwise Conv's OIHW filter, packed as op(B) = W^T; else a MatMul's B
    buf = rng.standard_normal((n, k, 1, 1) if tb else (k, n)).astype(np.float32)
    view = buf.view()
    view.setflags(write=False)

    def graph() -> Graph:
        g = Graph("at")
        g.set_constant("w", view)  # kept as it is (read-only): every graph's weight is ``buf``
        w = "w"
        if tb:
            g.output(g.add_node("Conv", [g.input("x", (1, k, 3, 2), "float32"), w]))
        else:
            g.output(g.add_node("MatMul", [g.input("x", (6, k), "float32"), w]))
        return g

    x = rng.standard_normal((1, k, 3, 2) if tb else (6, k)).astype(np.float32)

    def ref(weight: np.ndarray) -> np.ndarray:
        return np.einsum("nkhw,ok->nohw", x, weight[:, :, 0, 0]) if tb else x @ weight

    first = buf.copy()
    packs0 = _native.lib.aiogeHostPackedWeightCount()
    a = await compiled(graph())
    b = await compiled(graph())  # the same values at the same address: a's panels
    assert _native.lib.aiogeHostPackedWeightCount() - packs0 == 1
    buf[n // 2, k // 3] += 1.0  # one value behind the address changes
    c = await compiled(graph())
    assert _native.lib.aiogeHostPackedWeightCount() - packs0 == 2
    for model, weight in ((a, first), (b, first), (c, buf)):
        (y,) = (await model.execute({"x": x})).values()
        check(np.asarray(y), ref(weight), rtol=1e-4, atol=1e-3)
