"""The blocked layout NCHWc8 (nchwc.c, nchwc_conv.c): a float32 [N, C, H, W] tensor stored as
[N, C/8, H, W, 8].  The reorders round trip; _NchwcConv2D (groups 1, depthwise, grouped; kernels 1x1 to
7x7, strides, dilations, pads, odd planes, bias, a blocked residual z, activations) and _NchwcPool2D (max,
avg with and without the pads in the divisor, global, ceil-mode-style extra padding) against float64
numpy references on the NCHW tensors, reordered; bad shapes and attrs are typed errors."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import aioge
from aioge import Const, TensorSpec, _native
from aioge.errors import OpAttrMismatchError, OpInputMismatchError, OpOutputMismatchError
from tests.ops.opsutil import F32, check, few, up

pytestmark = pytest.mark.anyio

# The NCHWc8 kernels come in families (nchwc.h: avx512, avx2, generic), chosen by the runtime's one
# kernel family switch: every test of this file and test_nchwc_dw.py runs under each one this CPU
# runs (avx2-w16 is left out: its NCHWc8 kernels are avx2's).
NCHWC_FAMILIES = [f for f in _native.kernel_families() if f != "avx2-w16"] or [""]


@pytest.fixture(autouse=True, params=NCHWC_FAMILIES)
def nchwc_family(request):
    """The kernel family the test's kernels run (\"\": a backend without the host runtime's families)."""
    family = request.param
    if not family:
        yield family
        return
    lib, ffi = _native.lib, _native.ffi
    _native.check(lib.aiogeHostSetKernelFamily(family.encode()), "aiogeHostSetKernelFamily")
    try:
        yield family
    finally:
        lib.aiogeHostSetKernelFamily(ffi.NULL)


@pytest.mark.skipif(not _native.has_host_hooks, reason="kernel families are the host runtime's")
def test_the_family_report_names_the_nchwc_family_in_use(nchwc_family):
    lib, ffi = _native.lib, _native.ffi
    assert ffi.string(lib.aiogeHostKernelFamily()).decode() == nchwc_family
    assert ffi.string(lib.aiogeHostNchwcKernelFamily()).decode() == nchwc_family
    if "avx2-w16" in _native.kernel_families():  # the 16-lane GEMM source at AVX2: the avx2 NCHWc8 kernels
        _native.check(lib.aiogeHostSetKernelFamily(b"avx2-w16"), "aiogeHostSetKernelFamily")
        assert ffi.string(lib.aiogeHostNchwcKernelFamily()).decode() == "avx2"


def to_blocked(x: np.ndarray) -> np.ndarray:
    """[N, C, H, W] -> [N, C/8, H, W, 8]"""
    n, c, h, w = x.shape
    return np.ascontiguousarray(x.reshape(n, c // 8, 8, h, w).transpose(0, 1, 3, 4, 2))


def from_blocked(x: np.ndarray) -> np.ndarray:
    """[N, C/8, H, W, 8] -> [N, C, H, W]"""
    n, cb, h, w, _ = x.shape
    return np.ascontiguousarray(x.transpose(0, 1, 4, 2, 3).reshape(n, cb * 8, h, w))


def conv_ref(x, w, b, s, d, p, groups):
    """float64 NCHW conv, OIHW filter, pads (top, bottom, left, right)."""
    x = np.pad(x.astype(np.float64), ((0, 0), (0, 0), (p[0], p[1]), (p[2], p[3])))
    w = w.astype(np.float64)
    n, _, hp, wp = x.shape
    co, cig, kh, kw = w.shape
    ho = (hp - d[0] * (kh - 1) - 1) // s[0] + 1
    wo = (wp - d[1] * (kw - 1) - 1) // s[1] + 1
    y = np.zeros((n, co, ho, wo))
    cog = co // groups
    for g in range(groups):
        xg = x[:, g * cig : (g + 1) * cig]
        wg = w[g * cog : (g + 1) * cog]
        for ky in range(kh):
            for kx in range(kw):
                patch = xg[:, :, ky * d[0] : ky * d[0] + s[0] * (ho - 1) + 1 : s[0],
                           kx * d[1] : kx * d[1] + s[1] * (wo - 1) + 1 : s[1]]  # fmt: skip
                y[:, g * cog : (g + 1) * cog] += np.einsum("nchw,oc->nohw", patch, wg[:, :, ky, kx])
    if b is not None:
        y += b.astype(np.float64)[None, :, None, None]
    return y


ACTS = {
    "none": (lambda v: v, {}),
    "Relu": (lambda v: np.maximum(v, 0), {}),
    "Clip": (lambda v: np.clip(v, 0, 6), {"min": 0.0, "max": 6.0}),
    "LeakyRelu": (lambda v: np.where(v < 0, 0.1 * v, v), {"alpha": 0.1}),
    "Sigmoid": (lambda v: 1 / (1 + np.exp(-v)), {}),
    "Swish": (lambda v: v / (1 + np.exp(-v)), {}),
    "HardSwish": (lambda v: v * np.clip(v / 6 + 0.5, 0, 1), {}),
}


def conv_attrs(s, d, p, groups, act="none"):
    attrs = {"strides": [1, 1, *s], "pads": list(p), "dilations": [1, 1, *d], "groups": groups, "activation": act}
    return attrs | ACTS[act][1]


async def run_conv(stream, x, w, b, z, s, d, p, groups, act="none", const_w=False):
    ho = (x.shape[2] + p[0] + p[1] - d[0] * (w.shape[2] - 1) - 1) // s[0] + 1
    wo = (x.shape[3] + p[2] + p[3] - d[1] * (w.shape[3] - 1) - 1) // s[1] + 1
    ins = [up(stream, to_blocked(x)), Const(w) if const_w else up(stream, w), up(stream, b) if b is not None else None]
    if z is not None:
        ins.append(up(stream, to_blocked(z)))
    out = TensorSpec((x.shape[0], w.shape[0] // 8, ho, wo, 8), F32)
    (y,) = aioge.op("_NchwcConv2D", ins, [out], conv_attrs(s, d, p, groups, act))
    return from_blocked(await y.numpy())


@st.composite
def conv_case(draw):
    kind = draw(st.sampled_from(["dense", "depthwise", "grouped"]))
    k = draw(st.sampled_from([1, 3, 5, 7]))
    kh, kw = (k, k) if draw(st.booleans()) else (draw(st.integers(1, 4)), draw(st.integers(1, 4)))
    s = (draw(st.integers(1, 2)), draw(st.integers(1, 2)))
    d = (draw(st.integers(1, 2)), draw(st.integers(1, 2)))
    p = tuple(draw(st.integers(0, 3)) for _ in range(4))
    hw = (draw(st.integers(1, 15)), draw(st.integers(1, 23)))
    if kind == "dense":
        groups, ci, co = 1, 8 * draw(st.integers(1, 3)), 8 * draw(st.integers(1, 5))
    elif kind == "depthwise":
        ci = co = groups = 8 * draw(st.integers(1, 3))
    else:
        groups = draw(st.integers(2, 3))
        ci, co = groups * 8 * draw(st.integers(1, 2)), groups * 8 * draw(st.integers(1, 2))
    n = draw(st.integers(1, 2))
    return n, ci, co, groups, (kh, kw), s, d, p, hw


@few(80)
@given(case=conv_case(), bias=st.booleans(), res=st.booleans(), act=st.sampled_from(sorted(ACTS)),
       seed=st.integers(0, 2**16))  # fmt: skip
async def test_conv_vs_numpy(stream, case, bias, res, act, seed):
    await check_conv_case(stream, case, bias, res, act, seed)


async def check_conv_case(stream, case, bias, res, act, seed):
    """One drawn conv (n, ci, co, groups, k, s, d, p, hw) with random data against conv_ref (float64)."""
    n, ci, co, groups, k, s, d, p, hw = case
    if hw[0] + p[0] + p[1] < d[0] * (k[0] - 1) + 1 or hw[1] + p[2] + p[3] < d[1] * (k[1] - 1) + 1:
        return
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((n, ci, *hw)).astype(np.float32)
    w = rng.standard_normal((co, ci // groups, *k)).astype(np.float32)
    b = rng.standard_normal(co).astype(np.float32) if bias else None
    ref = conv_ref(x, w, b, s, d, p, groups)
    z = rng.standard_normal(ref.shape).astype(np.float32) if res else None
    if z is not None:
        ref = ref + z
    got = await run_conv(stream, x, w, b, z, s, d, p, groups, act)
    check(got, ACTS[act][0](ref), rtol=1e-4, atol=1e-4)


# (Cin, H=W, Cout, k, stride, pad, groups): ResNet-18 and MobileNet-v2 layers, planes a strip of pixels
# does not divide, 1x1 convolutions over whole planes and at stride 2
NETS = [
    (64, 56, 64, 3, 1, 1, 1),
    (64, 56, 128, 3, 2, 1, 1),
    (128, 28, 128, 3, 1, 1, 1),
    (64, 56, 128, 1, 2, 0, 1),
    (96, 14, 576, 1, 1, 0, 1),
    (320, 7, 1280, 1, 1, 0, 1),
    (32, 112, 32, 3, 1, 1, 32),
    (96, 112, 96, 3, 2, 1, 96),
    (576, 14, 576, 3, 1, 1, 576),
    (960, 7, 960, 3, 1, 1, 960),
    (128, 14, 128, 3, 2, 1, 8),
    (256, 7, 256, 3, 1, 1, 1),
    (48, 14, 40, 5, 1, 2, 1),
    (672, 14, 672, 5, 1, 2, 672),
    (96, 7, 96, 5, 1, 2, 96),
]


@pytest.mark.parametrize(("ci", "hw", "co", "k", "s", "pad", "groups"), NETS)
async def test_network_layers_vs_numpy(stream, ci, hw, co, k, s, pad, groups):
    rng = np.random.default_rng(ci + co + hw)
    x = rng.standard_normal((1, ci, hw, hw)).astype(np.float32)
    w = (rng.standard_normal((co, ci // groups, k, k)) / np.sqrt(ci // groups * k * k)).astype(np.float32)
    b = rng.standard_normal(co).astype(np.float32)
    ref = conv_ref(x, w, b, (s, s), (1, 1), (pad,) * 4, groups)
    z = rng.standard_normal(ref.shape).astype(np.float32)
    got = await run_conv(stream, x, w, b, z, (s, s), (1, 1), (pad,) * 4, groups, "Relu", const_w=True)
    check(got, np.maximum(ref + z, 0), rtol=1e-4, atol=1e-4)


# strided convs on small planes (output rows of up to 32 pixels): the padded copy split into phase
# planes, one per (row, column) residue of the stride, so that every tile is full (odd planes, asymmetric
# pads, strides (2, 2), (3, 2), (1, 2), a dilation with a stride, grouped, batch 2, 32 output pixels a row)
STRIDED = [
    (1, 32, 57, 57, 64, (3, 3), (2, 2), (1, 1), (1, 1, 1, 1), "Relu"),
    (2, 16, 15, 13, 24, (5, 5), (2, 2), (1, 1), (2, 1, 0, 2), "Sigmoid"),
    (1, 24, 11, 17, 16, (3, 3), (3, 2), (1, 1), (1, 1, 1, 1), "Clip"),
    (1, 16, 9, 20, 8, (3, 3), (1, 2), (1, 1), (0, 1, 1, 0), "none"),
    (1, 16, 19, 19, 16, (3, 3), (2, 2), (2, 2), (2, 2, 2, 2), "LeakyRelu"),
    (1, 256, 14, 14, 512, (3, 3), (2, 2), (1, 1), (1, 1, 1, 1), "Relu"),
    (1, 8, 64, 63, 8, (2, 2), (2, 2), (1, 1), (0, 0, 0, 0), "none"),
]


@pytest.mark.parametrize(("n", "ci", "h", "w", "co", "k", "s", "d", "pads", "act"), STRIDED)
@pytest.mark.parametrize("res", [False, True])
async def test_strided_phase_planes_vs_numpy(stream, n, ci, h, w, co, k, s, d, pads, act, res):
    rng = np.random.default_rng(ci + h + w + co)
    x = rng.standard_normal((n, ci, h, w)).astype(np.float32)
    wv = (rng.standard_normal((co, ci, *k)) / np.sqrt(ci * k[0] * k[1])).astype(np.float32)
    b = rng.standard_normal(co).astype(np.float32)
    ref = conv_ref(x, wv, b, s, d, pads, 1)
    z = rng.standard_normal(ref.shape).astype(np.float32) if res else None
    got = await run_conv(stream, x, wv, b, z, s, d, pads, 1, act, const_w=res)
    check(got, ACTS[act][0](ref + (z if res else 0)), rtol=1e-4, atol=1e-4)


# 1x1 unpadded convs with the input channels in passes of up to 16 blocks accumulated into the output
# (17 blocks: 9 + 8, 33: 11 x 3, grouped with 136 channels a group): the bias starts only the first pass,
# the residual and the activation (Relu would clip a partial sum, Sigmoid is applied on the stored
# floats) end only the last; whole planes; strided (the pixels gathered first): 2, (2, 1), (1, 2), (3, 2)
# on odd planes, batch 2, ResNet-50's 512-channel downsampling at 14x14; long rows (575 and 840 pixels)
POINTWISE = [
    (1, 136, 9, 9, 24, (1, 1), 1, "Relu"),
    (2, 264, 7, 11, 16, (1, 1), 1, "Sigmoid"),
    (1, 136, 13, 11, 40, (2, 2), 1, "Clip"),
    (2, 272, 5, 7, 32, (2, 1), 2, "LeakyRelu"),
    (1, 128, 6, 6, 8, (1, 1), 1, "none"),
    (1, 1280, 3, 3, 16, (1, 1), 1, "Relu"),
    (2, 136, 9, 13, 24, (2, 2), 1, "Relu"),
    (1, 16, 8, 10, 8, (3, 2), 1, "none"),
    (1, 24, 7, 9, 16, (1, 2), 1, "Clip"),
    (1, 512, 14, 14, 64, (2, 2), 1, "Sigmoid"),
    (1, 136, 25, 23, 24, (1, 1), 1, "Relu"),
    (2, 16, 41, 40, 40, (2, 1), 1, "Sigmoid"),
]


@pytest.mark.parametrize(("n", "ci", "h", "w", "co", "s", "groups", "act"), POINTWISE)
@pytest.mark.parametrize("res", [False, True])
async def test_pointwise_input_channel_passes_vs_numpy(stream, n, ci, h, w, co, s, groups, act, res):
    rng = np.random.default_rng(ci + h + w + co)
    x = rng.standard_normal((n, ci, h, w)).astype(np.float32)
    wv = (rng.standard_normal((co, ci // groups, 1, 1)) / np.sqrt(ci // groups)).astype(np.float32)
    b = (rng.standard_normal(co) + 2).astype(np.float32)
    ref = conv_ref(x, wv, b, s, (1, 1), (0, 0, 0, 0), groups)
    z = rng.standard_normal(ref.shape).astype(np.float32) if res else None
    got = await run_conv(stream, x, wv, b, z, s, (1, 1), (0, 0, 0, 0), groups, act, const_w=res)
    check(got, ACTS[act][0](ref + (z if res else 0)), rtol=1e-4, atol=1e-4)


# 3x3 stride-1 convs on planes of 128+ 2x2 tiles with 32+ input channels: Winograd F(2x2, 3x3) between
# reorders (odd planes, asymmetric pads, batch 2, the filter repacked each run or held const)
WINO = [
    (1, 32, 23, 25, 16, (1, 1, 1, 1), "Relu", True),
    (2, 40, 17, 31, 24, (0, 2, 1, 0), "Sigmoid", False),
    (1, 64, 28, 28, 64, (1, 1, 1, 1), "Clip", True),
    (1, 32, 30, 18, 40, (2, 0, 0, 2), "none", False),
]


@pytest.mark.parametrize(("n", "ci", "h", "w", "co", "pads", "act", "const_w"), WINO)
@pytest.mark.parametrize("res", [False, True])
async def test_winograd_route_vs_numpy(stream, n, ci, h, w, co, pads, act, const_w, res):
    rng = np.random.default_rng(ci + h + w)
    x = rng.standard_normal((n, ci, h, w)).astype(np.float32)
    wv = (rng.standard_normal((co, ci, 3, 3)) / np.sqrt(ci * 9)).astype(np.float32)
    b = rng.standard_normal(co).astype(np.float32)
    ref = conv_ref(x, wv, b, (1, 1), (1, 1), pads, 1)
    z = rng.standard_normal(ref.shape).astype(np.float32) if res else None
    got = await run_conv(stream, x, wv, b, z, (1, 1), (1, 1), pads, 1, act, const_w=const_w)
    check(got, ACTS[act][0](ref + (z if res else 0)), rtol=1e-4, atol=1e-4)


def _u_bytes(c: int, co: int) -> int:
    """Winograd F(2x2, 3x3)'s U: 16 positions x Cout rounded up to 6-row panels x Cin floats."""
    return 16 * ((co + 5) // 6 * 6) * c * 4


# (Cin, H, W, Cout, k, stride, groups, bias, residual): the filter of a compiled model packed once at load
# (the blocked filter; the last: Winograd's U)
PACKED = [
    (16, 9, 11, 24, 3, 1, 1, True, True),
    (32, 7, 7, 64, 1, 1, 1, False, True),
    (24, 10, 13, 24, 3, 2, 24, True, False),
    (32, 6, 5, 16, 3, 1, 2, True, True),
    (32, 24, 23, 16, 3, 1, 1, True, True),
]


@pytest.mark.skipif(not _native.has_host_hooks, reason="packed filters are the host runtime's")
@pytest.mark.parametrize(("ci", "h", "w", "co", "k", "s", "groups", "bias", "res"), PACKED)
async def test_filter_packed_at_load_vs_numpy(compiled, ci, h, w, co, k, s, groups, bias, res):
    from aioge.graph import Graph

    rng = np.random.default_rng(ci * co + h)
    xv = rng.standard_normal((1, ci, h, w)).astype(np.float32)
    wv = rng.standard_normal((co, ci // groups, k, k)).astype(np.float32)
    bv = rng.standard_normal(co).astype(np.float32)
    pads = (k // 2,) * 4
    ref = conv_ref(xv, wv, bv if bias else None, (s, s), (1, 1), pads, groups)
    zv = rng.standard_normal(ref.shape).astype(np.float32)
    g = Graph("nchwc")
    ins = [g.input("x", (1, ci // 8, h, w, 8), "float32"), g.constant("w", wv)]
    ins.append(g.constant("b", bv) if bias else None)
    if res:
        ins.append(g.input("z", (1, co // 8, *ref.shape[2:], 8), "float32"))
    attrs = conv_attrs((s, s), (1, 1), pads, groups, "Relu")
    g.output(g.add_node("_NchwcConv2D", ins, attrs))
    before = _native.lib.aiogeHostPackedWeightCount()
    model = await compiled(g)
    wino = k == 3 and s == 1 and groups == 1 and ci >= 32 and (h + 1) // 2 * ((w + 1) // 2) >= 128
    assert model.plan.packed_weight_bytes == (_u_bytes(ci, co) if wino else wv.size * 4)
    feeds = {"x": to_blocked(xv)} | ({"z": to_blocked(zv)} if res else {})
    for _ in range(2):
        got = from_blocked(np.asarray(next(iter((await model.execute(feeds)).values()))))
        check(got, np.maximum(ref + (zv if res else 0), 0), rtol=1e-4, atol=1e-4)
    assert _native.lib.aiogeHostPackedWeightCount() - before == 1  # executions pack nothing


@few(30)
@given(shape=st.tuples(st.integers(1, 2), st.integers(1, 3), st.integers(1, 9), st.integers(1, 19)),
       seed=st.integers(0, 2**16))  # fmt: skip
async def test_reorders_round_trip(stream, shape, seed):
    n, cb, h, w = shape
    x = np.random.default_rng(seed).standard_normal((n, cb * 8, h, w)).astype(np.float32)
    (b,) = aioge.op("_ReorderToNchwc", [up(stream, x)], [TensorSpec((n, cb, h, w, 8), F32)])
    np.testing.assert_array_equal(await b.numpy(), to_blocked(x))
    (y,) = aioge.op("_ReorderFromNchwc", [b], [TensorSpec(x.shape, F32)])
    np.testing.assert_array_equal(await y.numpy(), x)


def pool_ref(x, mode, k, s, p, d, include_pad, out_hw):
    """float64 NCHW pool with pads (t, b, l, r) and the output plane out_hw."""
    n, c, h, w = x.shape
    y = np.zeros((n, c, *out_hw))
    for oy in range(out_hw[0]):
        for ox in range(out_hw[1]):
            iys = [oy * s[0] - p[0] + ky * d[0] for ky in range(k[0])]
            ixs = [ox * s[1] - p[2] + kx * d[1] for kx in range(k[1])]
            vy = [i for i in iys if 0 <= i < h]
            vx = [i for i in ixs if 0 <= i < w]
            win = x[:, :, vy][:, :, :, vx].astype(np.float64)
            if mode == "max":
                y[:, :, oy, ox] = win.max(axis=(2, 3)) if vy and vx else -np.inf
            else:
                if include_pad:
                    cnt = sum(-p[0] <= i < h + p[1] for i in iys) * sum(-p[2] <= i < w + p[3] for i in ixs)
                else:
                    cnt = len(vy) * len(vx)
                y[:, :, oy, ox] = win.sum(axis=(2, 3)) / cnt if cnt else 0
    return y


@st.composite
def pool_case(draw):
    k = (draw(st.integers(1, 4)), draw(st.integers(1, 4)))
    s = (draw(st.integers(1, 3)), draw(st.integers(1, 3)))
    d = (draw(st.integers(1, 2)), draw(st.integers(1, 2)))
    p = [draw(st.integers(0, k[0] - 1)), 0, draw(st.integers(0, k[1] - 1)), 0]
    p[1], p[3] = draw(st.integers(0, k[0] - 1)), draw(st.integers(0, k[1] - 1))
    hw = (draw(st.integers(1, 12)), draw(st.integers(1, 17)))
    return k, s, d, p, hw, draw(st.booleans())


@few(60)
@given(case=pool_case(), mode=st.sampled_from(["max", "avg"]), include_pad=st.booleans(),
       cb=st.integers(1, 2), seed=st.integers(0, 2**16))  # fmt: skip
async def test_pool_vs_numpy(stream, case, mode, include_pad, cb, seed):
    k, s, d, p, hw, ceil = case
    eh, ew = d[0] * (k[0] - 1) + 1, d[1] * (k[1] - 1) + 1
    if hw[0] + p[0] + p[1] < eh or hw[1] + p[2] + p[3] < ew:
        return
    ho = (hw[0] + p[0] + p[1] - eh) // s[0] + 1
    wo = (hw[1] + p[2] + p[3] - ew) // s[1] + 1
    pads = list(p)
    if ceil:  # ceil mode as the graph pass lowers it: one more window where it starts inside input + top pad
        if (ho * s[0] - p[0]) < hw[0]:
            pads[1] += ho * s[0] + eh - (hw[0] + p[0] + p[1])
            ho += 1
        if (wo * s[1] - p[2]) < hw[1]:
            pads[3] += wo * s[1] + ew - (hw[1] + p[2] + p[3])
            wo += 1
    x = np.random.default_rng(seed).standard_normal((2, cb * 8, *hw)).astype(np.float32)
    attrs = {"mode": mode, "kernel": list(k), "strides": list(s), "pads": pads, "dilations": list(d),
             "count_include_pad": int(include_pad)}  # fmt: skip
    (y,) = aioge.op("_NchwcPool2D", [up(stream, to_blocked(x))], [TensorSpec((2, cb, ho, wo, 8), F32)], attrs)
    ref = pool_ref(x, mode, k, s, pads, d, include_pad, (ho, wo))
    check(from_blocked(await y.numpy()), ref, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("mode", ["max", "avg"])
@pytest.mark.parametrize("hw", [(1, 1), (7, 7), (3, 11)])
async def test_global_pool_vs_numpy(stream, mode, hw):
    x = np.random.default_rng(3).standard_normal((2, 16, *hw)).astype(np.float32)
    x[1, 3, 0, 0] = np.nan  # a NaN propagates through either
    (y,) = aioge.op("_NchwcPool2D", [up(stream, to_blocked(x))], [TensorSpec((2, 2, 1, 1, 8), F32)],
                    {"mode": mode, "global": 1})  # fmt: skip
    want = x.astype(np.float64).max(axis=(2, 3)) if mode == "max" else x.astype(np.float64).mean(axis=(2, 3))
    check(from_blocked(await y.numpy()), want[:, :, None, None], rtol=1e-5, atol=1e-6)


async def test_max_pool_propagates_nan(stream):
    x = np.zeros((1, 8, 4, 4), np.float32)
    x[0, 2, 1, 1] = np.nan
    attrs = {"mode": "max", "kernel": [2, 2], "strides": [2, 2], "pads": [0, 0, 0, 0]}
    (y,) = aioge.op("_NchwcPool2D", [up(stream, to_blocked(x))], [TensorSpec((1, 1, 2, 2, 8), F32)], attrs)
    got = from_blocked(await y.numpy())
    assert np.isnan(got[0, 2, 0, 0]) and np.isnan(got).sum() == 1


def _spec(shape):
    return TensorSpec(shape, F32)


async def test_conv_refuses_bad_shapes_and_attrs(stream):
    x = up(stream, np.zeros((1, 2, 5, 5, 8), np.float32))
    w = up(stream, np.zeros((16, 16, 3, 3), np.float32))
    good = conv_attrs((1, 1), (1, 1), (1, 1, 1, 1), 1)
    (y,) = aioge.op("_NchwcConv2D", [x, w], [_spec((1, 2, 5, 5, 8))], good)
    await y.numpy()
    bad_x = [np.zeros((1, 16, 5, 5), np.float32), np.zeros((1, 2, 5, 5, 4), np.float32)]
    for xv in bad_x:  # not blocked
        with pytest.raises(OpInputMismatchError, match="_NchwcConv2D"):
            aioge.op("_NchwcConv2D", [up(stream, xv), w], [_spec((1, 2, 5, 5, 8))], good)
    with pytest.raises(OpInputMismatchError, match="multiples of 8"):  # 12 output channels
        aioge.op("_NchwcConv2D", [x, up(stream, np.zeros((12, 16, 3, 3), np.float32))], [_spec((1, 2, 5, 5, 8))], good)
    with pytest.raises(OpInputMismatchError, match="multiples of 8"):  # 4 input channels a group
        aioge.op("_NchwcConv2D", [x, up(stream, np.zeros((16, 4, 3, 3), np.float32))], [_spec((1, 2, 5, 5, 8))],
                 good | {"groups": 4})  # fmt: skip
    with pytest.raises(OpInputMismatchError, match="groups"):
        aioge.op("_NchwcConv2D", [x, up(stream, np.zeros((16, 8, 3, 3), np.float32))], [_spec((1, 2, 5, 5, 8))], good)
    with pytest.raises(OpOutputMismatchError):
        aioge.op("_NchwcConv2D", [x, w], [_spec((1, 2, 4, 4, 8))], good)
    with pytest.raises(OpInputMismatchError, match="bias"):
        aioge.op("_NchwcConv2D", [x, w, up(stream, np.zeros(8, np.float32))], [_spec((1, 2, 5, 5, 8))], good)
    with pytest.raises(OpInputMismatchError, match="residual"):
        z = up(stream, np.zeros((1, 2, 5, 4, 8), np.float32))
        aioge.op("_NchwcConv2D", [x, w, None, z], [_spec((1, 2, 5, 5, 8))], good)
    for attrs in (good | {"strides": [1, 1, 0, 1]}, good | {"pads": [1, 1, -1, 1]}, good | {"activation": "Nope"},
                  good | {"groups": 0}):  # fmt: skip
        with pytest.raises(OpAttrMismatchError):
            aioge.op("_NchwcConv2D", [x, w], [_spec((1, 2, 5, 5, 8))], attrs)


async def test_reorders_and_pool_refuse_bad_shapes_and_attrs(stream):
    with pytest.raises(OpInputMismatchError, match="multiple of 8"):
        aioge.op("_ReorderToNchwc", [up(stream, np.zeros((1, 12, 3, 3), np.float32))], [_spec((1, 1, 3, 3, 8))])
    with pytest.raises(OpOutputMismatchError, match="_ReorderToNchwc"):
        aioge.op("_ReorderToNchwc", [up(stream, np.zeros((1, 16, 3, 3), np.float32))], [_spec((1, 2, 3, 4, 8))])
    with pytest.raises(OpInputMismatchError, match="_ReorderFromNchwc"):
        aioge.op("_ReorderFromNchwc", [up(stream, np.zeros((1, 2, 3, 3, 8), np.float32))], [_spec((1, 24, 3, 3))])
    with pytest.raises(OpOutputMismatchError, match="multiple of 8"):
        aioge.op("_ReorderFromNchwc", [up(stream, np.zeros((1, 2, 3, 3, 8), np.float32))], [_spec((1, 2, 3, 3, 8))])
    x = up(stream, np.zeros((1, 2, 6, 6, 8), np.float32))
    good = {"mode": "max", "kernel": [3, 3], "strides": [2, 2], "pads": [0, 0, 0, 0]}
    (y,) = aioge.op("_NchwcPool2D", [x], [_spec((1, 2, 2, 2, 8))], good)
    await y.numpy()
    with pytest.raises(OpOutputMismatchError, match="window"):  # a third window would end past the input
        aioge.op("_NchwcPool2D", [x], [_spec((1, 2, 3, 3, 8))], good)
    with pytest.raises(OpInputMismatchError):
        aioge.op("_NchwcPool2D", [up(stream, np.zeros((1, 16, 6, 6), np.float32))], [_spec((1, 2, 2, 2, 8))], good)
    for attrs in (good | {"mode": "min"}, good | {"kernel": [0, 3]}, good | {"strides": [1]}, good | {"global": 2},
                  {"mode": "avg"}):  # fmt: skip
        with pytest.raises(OpAttrMismatchError):
            aioge.op("_NchwcPool2D", [x], [_spec((1, 2, 2, 2, 8))], attrs)
    with pytest.raises(OpOutputMismatchError):
        aioge.op("_NchwcPool2D", [x], [_spec((1, 2, 2, 2, 8))], {"mode": "avg", "global": 1})
