"""Constant convolution filters packed once when a compiled model loads (graph.c's
aiogeGraphPackWeights, conv.c's pack hooks): 3x3 stride-1 convolutions with 32+ input channels keep
Winograd's transformed filter U from the load on, so executions transform nothing.  Every conv variant
against a float64 numpy reference (stride, dilation, padding, groups, depthwise, 1x1, channel counts
off the 6-row and 16-lane blocks, bias, fused Relu / Clip), what ``model.plan`` reports packed, and
no packing after the load."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from aioge import _native
from aioge.graph import Graph
from tests.ops.opsutil import check, few

pytestmark = [
    pytest.mark.anyio,
    pytest.mark.skipif(not _native.has_host_hooks, reason="packed filters are the host runtime's"),
]


def conv_ref(
    x: np.ndarray, w: np.ndarray, b: np.ndarray | None, stride: int, pad: int, dil: int, groups: int
) -> np.ndarray:
    """float64 NCHW convolution, OIHW filter."""
    x = x.astype(np.float64)
    w = w.astype(np.float64)
    n, _, h, wd = x.shape
    co, cig, kh, kw = w.shape
    xp = np.pad(x, ((0, 0), (0, 0), (pad, pad), (pad, pad)))
    ho = (h + 2 * pad - dil * (kh - 1) - 1) // stride + 1
    wo = (wd + 2 * pad - dil * (kw - 1) - 1) // stride + 1
    y = np.zeros((n, co, ho, wo))
    cog = co // groups
    for g in range(groups):
        xg = xp[:, g * cig : (g + 1) * cig]
        wg = w[g * cog : (g + 1) * cog]
        for ky in range(kh):
            for kx in range(kw):
                patch = xg[:, :, ky * dil: ky * dil + stride * (ho - 1) + 1: stride,
                           kx * dil: kx * dil + stride * (wo - 1) + 1: stride]  # fmt: skip
                y[:, g * cog : (g + 1) * cog] += np.einsum("nchw,oc->nohw", patch, wg[:, :, ky, kx])
    if b is not None:
        y += b.astype(np.float64)[None, :, None, None]
    return y


def conv_graph(n: int, c: int, h: int, w: int, co: int, *, k: int = 3, stride: int = 1, pad: int = 1,
               dil: int = 1, groups: int = 1, bias: bool = True, act: str = "",
               seed: int = 0) -> tuple[Graph, dict, np.ndarray]:  # fmt: skip
    rng = np.random.default_rng(seed)
    wv = (rng.standard_normal((co, c // groups, k, k)) / np.sqrt(c // groups * k * k)).astype(np.float32)
    bv = rng.standard_normal(co).astype(np.float32)
    g = Graph("conv")
    x = g.input("x", (n, c, h, w), "float32")
    ins = [x, g.constant("w", wv)] + ([g.constant("b", bv)] if bias else [])
    attrs = {
        "kernel_shape": [k, k],
        "pads": [pad] * 4,
        "strides": [stride] * 2,
        "dilations": [dil] * 2,
        "group": groups,
    }
    y = g.add_node("Conv", ins, attrs)
    if act == "relu":
        y = g.add_node("Relu", [y])
    elif act == "clip":
        y = g.add_node("Clip", [y, g.constant("lo", np.float32(0.0)), g.constant("hi", np.float32(1.0))])
    g.output(y)
    xv = rng.standard_normal((n, c, h, w)).astype(np.float32)
    ref = conv_ref(xv, wv, bv if bias else None, stride, pad, dil, groups)
    if act == "relu":
        ref = np.maximum(ref, 0)
    elif act == "clip":
        ref = np.clip(ref, 0, 1)
    return g, {"x": xv}, ref


def _u_bytes(c: int, co: int) -> int:
    """Winograd F(2x2, 3x3)'s U: 16 positions x Cout rounded up to 6-row panels x Cin floats."""
    return 16 * ((co + 5) // 6 * 6) * c * 4


# (N, C, H, W, Cout, bias, act): Winograd (>= 128 2x2 tiles) with U packed at load -- spatial sizes odd
# and tiny (a single 2x2 tile per image, ragged tile rows), channel counts off the 6-row panels and lanes
WINOGRAD = [
    (1, 32, 23, 23, 16, True, "relu"),
    (4, 33, 13, 11, 17, False, ""),
    (1, 64, 29, 17, 50, True, "clip"),
    (9, 40, 5, 9, 33, True, ""),
    (130, 48, 2, 2, 22, True, "relu"),
    (64, 35, 1, 3, 19, False, "relu"),
    (1, 128, 28, 28, 64, True, "relu"),
]


@pytest.mark.parametrize(("n", "c", "h", "w", "co", "bias", "act"), WINOGRAD)
async def test_winograd_filter_packed_at_load_vs_numpy(compiled, n, c, h, w, co, bias, act):
    g, feeds, ref = conv_graph(n, c, h, w, co, bias=bias, act=act, seed=c * h + co)
    model = await compiled(g)
    assert model.plan.packed_weight_bytes == _u_bytes(c, co)
    out = await model.execute(feeds)
    check(np.asarray(next(iter(out.values()))), ref, rtol=1e-4, atol=1e-4)


# convolutions whose kernels read the OIHW filter in place: nothing packed, results unchanged
OTHERS = [
    dict(n=1, c=16, h=28, w=28, co=16),  # 3x3 below 32 input channels: the direct kernel
    dict(n=1, c=64, h=14, w=14, co=64, act="relu"),  # 3x3 with < 128 tiles: the direct kernel
    dict(n=1, c=8, h=9, w=11, co=13, act="relu"),
    dict(n=1, c=32, h=15, w=15, co=24, stride=2),
    dict(n=2, c=32, h=12, w=10, co=20, dil=2, pad=2, act="clip"),
    dict(n=1, c=64, h=14, w=14, co=64, groups=4),
    dict(n=1, c=36, h=10, w=10, co=36, groups=36, act="relu"),  # depthwise
    dict(n=1, c=40, h=13, w=13, co=40, groups=40, stride=2, bias=False),
    dict(n=2, c=24, h=7, w=7, co=48, groups=24, act="clip"),  # depthwise, multiplier 2, small planes
    dict(n=1, c=20, h=5, w=3, co=20, groups=20, act="relu"),
    # depthwise with 8 channels in a vector's lanes (rows < 16 or strided): blocks of 8 across images
    dict(n=2, c=37, h=4, w=4, co=37, groups=37, stride=2, act="relu"),
    dict(n=1, c=960, h=2, w=2, co=960, groups=960, act="clip"),
    dict(n=3, c=19, h=9, w=7, co=19, groups=19, k=5, pad=2, dil=2, bias=False),
    dict(n=1, c=12, h=6, w=6, co=24, groups=12, act="relu"),  # multiplier 2
    dict(n=1, c=9, h=33, w=30, co=9, groups=9, stride=2),
    dict(n=1, c=34, h=9, w=9, co=18, k=1, pad=0),  # 1x1 on 81 pixels: W x X (OpenBLAS)
    dict(n=1, c=130, h=9, w=10, co=50, k=1, pad=0, act="relu"),
    dict(n=2, c=256, h=9, w=9, co=64, k=1, pad=0, groups=2),
    dict(n=1, c=33, h=11, w=11, co=21, k=5, pad=2, act="relu"),
]


@pytest.mark.parametrize("spec", OTHERS, ids=lambda s: ",".join(f"{k}={v}" for k, v in s.items()))
async def test_other_convolutions_vs_numpy(compiled, spec):
    spec = dict(spec)
    n, c, h, w, co = (spec.pop(k) for k in ("n", "c", "h", "w", "co"))
    g, feeds, ref = conv_graph(n, c, h, w, co, seed=c + co, **spec)
    model = await compiled(g)
    assert model.plan.packed_weight_bytes == 0
    out = await model.execute(feeds)
    check(np.asarray(next(iter(out.values()))), ref, rtol=1e-4, atol=1e-4)


async def test_filters_are_packed_once_at_load(compiled):
    rng = np.random.default_rng(3)
    g = Graph("chain")
    h = g.input("x", (1, 32, 24, 24), "float32")
    for i in range(3):
        w = (rng.standard_normal((32, 32, 3, 3)) * 0.05).astype(np.float32)
        b = g.constant(f"b{i}", rng.standard_normal(32).astype(np.float32))
        h = g.add_node("Conv", [h, g.constant(f"w{i}", w), b], {"kernel_shape": [3, 3], "pads": [1, 1, 1, 1]})
        h = g.add_node("Relu", [h])
    g.output(h)
    before = _native.lib.aiogeHostPackedWeightCount()
    model = await compiled(g)
    assert _native.lib.aiogeHostPackedWeightCount() - before == 3
    assert model.plan.packed_weight_bytes == 3 * _u_bytes(32, 32)
    x = rng.standard_normal((1, 32, 24, 24)).astype(np.float32)
    first = np.asarray(next(iter((await model.execute({"x": x})).values())))
    for _ in range(3):
        again = np.asarray(next(iter((await model.execute({"x": x})).values())))
        np.testing.assert_array_equal(again, first)
    assert _native.lib.aiogeHostPackedWeightCount() - before == 3  # executions pack nothing


async def test_a_filter_fed_at_run_time_is_not_packed(compiled):
    rng = np.random.default_rng(4)
    g = Graph("fed")
    x = g.input("x", (1, 32, 8, 8), "float32")
    w = g.input("w", (16, 32, 3, 3), "float32")
    g.output(g.add_node("Conv", [x, w], {"kernel_shape": [3, 3], "pads": [1, 1, 1, 1]}))
    model = await compiled(g)
    assert model.plan.packed_weight_bytes == 0
    for seed in range(2):  # a new filter each run is read as it is
        xv = np.random.default_rng(seed).standard_normal((1, 32, 8, 8)).astype(np.float32)
        wv = (rng.standard_normal((16, 32, 3, 3)) * 0.1).astype(np.float32)
        out = await model.execute({"x": xv, "w": wv})
        check(np.asarray(next(iter(out.values()))), conv_ref(xv, wv, None, 1, 1, 1, 1), rtol=1e-4, atol=1e-4)


# 1x1 convolutions (groups 1) on planes of up to 64 pixels a batch: W^T packed at load for the packed
# product (16-column panels), bias and activation in its epilogue, pixels gathered (strides, pads)
POINTWISE_ACTS = {
    "": lambda v: v,
    "Relu": lambda v: np.maximum(v, 0),
    "Clip": lambda v: np.clip(v, 0, 1),
    "Sigmoid": lambda v: 1 / (1 + np.exp(-v)),
    "LeakyRelu": lambda v: np.where(v < 0, 0.01 * v, v),
    "Swish": lambda v: v / (1 + np.exp(-v)),  # Sigmoid + Mul in the graph
    "HardSwish": lambda v: v * np.clip(v / 6 + 0.5, 0, 1),
}


def pointwise_graph(n, c, h, w, co, stride, pads, bias, act, seed):
    rng = np.random.default_rng(seed)
    wv = (rng.standard_normal((co, c, 1, 1)) / np.sqrt(c)).astype(np.float32)
    bv = rng.standard_normal(co).astype(np.float32)
    g = Graph("pointwise")
    x = g.input("x", (n, c, h, w), "float32")
    ins = [x, g.constant("w", wv)] + ([g.constant("b", bv)] if bias else [])
    y = g.add_node("Conv", ins, {"kernel_shape": [1, 1], "pads": list(pads), "strides": [stride[0], stride[1]]})
    if act == "Clip":
        y = g.add_node("Clip", [y, g.constant("lo", np.float32(0.0)), g.constant("hi", np.float32(1.0))])
    elif act == "Swish":
        y = g.add_node("Mul", [y, g.add_node("Sigmoid", [y])])
    elif act:
        y = g.add_node(act, [y])
    g.output(y)
    xv = rng.standard_normal((n, c, h, w)).astype(np.float32)
    t, lf, b, r = pads  # ONNX order: begins (t, l), ends (b, r)
    xp = np.pad(xv.astype(np.float64), ((0, 0), (0, 0), (t, b), (lf, r)))[:, :, :: stride[0], :: stride[1]]
    ref = np.einsum("nchw,oc->nohw", xp, wv[:, :, 0, 0].astype(np.float64))
    if bias:
        ref += bv.astype(np.float64)[None, :, None, None]
    return g, {"x": xv}, POINTWISE_ACTS[act](ref)


@few(40)
@given(n=st.integers(1, 3), c=st.integers(1, 70), co=st.integers(1, 70), h=st.integers(1, 9), w=st.integers(1, 9),
       stride=st.tuples(st.integers(1, 3), st.integers(1, 3)), pads=st.tuples(*[st.integers(0, 2)] * 4),
       bias=st.booleans(), act=st.sampled_from(sorted(POINTWISE_ACTS)), seed=st.integers(0, 2**16))  # fmt: skip
async def test_pointwise_filter_packed_at_load_vs_numpy(compiled, n, c, co, h, w, stride, pads, bias, act, seed):
    g, feeds, ref = pointwise_graph(n, c, h, w, co, stride, pads, bias, act, seed)
    model = await compiled(g)
    pixels = n * ref.shape[2] * ref.shape[3]
    assert model.plan.packed_weight_bytes == ((co + 15) // 16 * 16 * c * 4 if pixels <= 64 else 0)
    out = await model.execute(feeds)
    check(np.asarray(next(iter(out.values()))), ref, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize(("c", "hw", "co"), [(160, 2, 960), (960, 2, 160), (96, 4, 576), (17, 8, 33)])
async def test_pointwise_mobilenet_shapes_vs_numpy(compiled, c, hw, co):
    g, feeds, ref = pointwise_graph(1, c, hw, hw, co, (1, 1), (0, 0, 0, 0), True, "Clip", c + co)
    model = await compiled(g)
    assert model.plan.packed_weight_bytes == (co + 15) // 16 * 16 * c * 4
    out = await model.execute(feeds)
    check(np.asarray(next(iter(out.values()))), ref, rtol=1e-4, atol=1e-4)


@few(20)
@given(n=st.integers(1, 2), c=st.integers(128, 200), co=st.integers(1, 96), h=st.integers(9, 14), w=st.integers(8, 14),
       bias=st.booleans(), act=st.sampled_from(sorted(POINTWISE_ACTS)), seed=st.integers(0, 2**16))  # fmt: skip
async def test_pointwise_above_64_pixels_vs_numpy(compiled, n, c, co, h, w, bias, act, seed):
    """1x1 on more than 64 pixels: nothing packed, W x X"""
    g, feeds, ref = pointwise_graph(n, c, h, w, co, (1, 1), (0, 0, 0, 0), bias, act, seed)
    model = await compiled(g)
    assert model.plan.packed_weight_bytes == 0
    out = await model.execute(feeds)
    check(np.asarray(next(iter(out.values()))), ref, rtol=1e-4, atol=1e-4)
