"""Operator-library benchmark: every figure is a ratio against a baseline measured in the same run.

    python benchmarks/bench_ops.py [--quick] [--conv] [--nchwc]

1. GEMM 1024x1024 f32, GFLOP/s                      vs numpy matmul (OpenBLAS)        target >= 0.95x
2. add of 16M f32, GB/s (2 reads + 1 write)         vs numpy: into a preallocated output (np.add out=)
                                                    and allocating the result (a + b)  target >= 1.0x
3. 3x3 conv, N=1, 64->64 ch, 56x56, pad 1           vs onnxruntime single-node Conv   target >= 0.8x
   depthwise 3x3 convs (MobileNet v1/v2 shapes) and small-channel convs (16->16 at 28x28, ...)
                                                    vs onnxruntime single-node Conv   target >= 1.0x
   the networks' pools (max/average, 3x3 at strides 1 and 2, a global average; aioge allocates its
   output on each call, onnxruntime from its arena)  vs onnxruntime single-node pool  target >= 1.0x
4. softmax over the last axis of (64, 1024) f32     vs numpy (max, exp, sum, divide)  target >= 1.0x
5. layernorm over the last axis of (64, 1024) f32   vs numpy (mean, var, affine)      target >= 1.0x
6. launch cost of a cached tiny op (Add of 16 floats), pipelined and awaited one by one
7. two streams running GEMMs at once vs one stream  (no collapse: >= 0.9x)
--nchwc: ResNet-18 / MobileNet-v2 convs in the blocked layout NCHWc8 (a one-node model of _NchwcConv2D)
                                                    vs onnxruntime single-node Conv (NCHW in and out: its
                                                    NCHWc pass reorders inside) and vs a one-node Conv model;
         the networks' pools the same way (_NchwcPool2D vs the pool node vs onnxruntime's)

aioge timings are pipelined: R launches back to back on one stream, then one await, so a figure is
the per-op cost a caller sees in steady state (Python launch included).  Each variant runs in
interleaved rounds and the best round counts, which keeps the shared machine's noise out of the
ratios.
"""

from __future__ import annotations

import os

# Both OpenBLAS copies in this process (numpy's and the one aioge loads) sleep right after a call instead
# of busy-waiting ~0.1 s, so neither steals the cores from the other's measurement rounds.  aioge sets
# this for its own copy anyway; it has to be set before numpy is imported to reach numpy's.
os.environ.setdefault("OPENBLAS_THREAD_TIMEOUT", "10")

import argparse
import asyncio
import platform
import time
from collections.abc import Callable
from typing import Any

import numpy as np

import aioge
from aioge import _native, ops


def _np_time(fn: Callable[[], Any], reps: int) -> float:
    fn()
    t = time.perf_counter()
    for _ in range(reps):
        fn()
    return (time.perf_counter() - t) / reps


async def _aio_time(launch: Callable[[], Any], reps: int) -> float:
    await launch()
    t = time.perf_counter()
    y = None
    for _ in range(reps):
        y = launch()
    await y
    return (time.perf_counter() - t) / reps


async def compare(aio: Callable[[], Any], ref: Callable[[], Any], reps: int, rounds: int) -> tuple[float, float]:
    """Best-of-rounds seconds per op for aioge and the reference, interleaved."""
    best_a = best_r = float("inf")
    for _ in range(rounds):
        best_r = min(best_r, _np_time(ref, reps))
        best_a = min(best_a, await _aio_time(aio, reps))
    return best_a, best_r


def line(name: str, value: str, ratio: float, target: str) -> None:
    print(f"  {name:<46} {value:<44} ratio {ratio:5.2f}x  (target {target})")


def ort_conv_session(
    w: np.ndarray,
    spin: bool = False,
    x_shape: tuple[int, ...] = (1, 64, 56, 56),
    stride: int = 1,
    pad: int = 1,
    group: int = 1,
    threads: int = 0,
) -> Any:
    import onnxruntime as ort
    from onnx import TensorProto, helper, numpy_helper

    k = w.shape[2]
    node = helper.make_node("Conv", ["x", "w"], ["y"], kernel_shape=[k, k], pads=[pad] * 4, strides=[stride] * 2,
                            group=group)  # fmt: skip
    g = helper.make_graph(
        [node], "conv",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, list(x_shape))],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
        initializer=[numpy_helper.from_array(w, "w")],
    )  # fmt: skip
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)])
    m.ir_version = 8
    so = ort.SessionOptions()
    so.log_severity_level = 3
    so.intra_op_num_threads = threads  # 0: onnxruntime's default (every core)
    if not spin:  # idle ORT threads block instead of spinning into the next (aioge) measurement round
        so.add_session_config_entry("session.intra_op.allow_spinning", "0")
    return ort.InferenceSession(m.SerializeToString(), so, providers=["CPUExecutionProvider"])


async def main(quick: bool, conv_only: bool = False, nchwc: bool = False) -> None:
    rounds = 3 if quick else 5
    rng = np.random.default_rng(0)
    async with aioge.open_device(0) as dev, dev.open_stream() as s:
        print(f"aioge {aioge.__version__} on {platform.machine()}, {os.cpu_count()} CPUs, "
              f"{_native.lib.aiogeHostGetNumThreads()} intra-op threads; {_native.blas_info()}; "
              f"load {os.getloadavg()[0]:.2f}")  # fmt: skip
        print("figure                                          aioge vs baseline")
        if nchwc:
            for ncase in NCHWC_CASES:
                await nchwc_case(dev, rng, *ncase, quick=quick, rounds=rounds)
            for pcase in NCHWC_POOL_CASES:
                await nchwc_pool_case(dev, rng, *pcase, quick=quick, rounds=rounds)
            print(f"load {os.getloadavg()[0]:.2f}")
            return
        if conv_only:
            for case in CONV_CASES:
                await conv_case(s, rng, *case, quick=quick, rounds=rounds)
            for pcase in POOL_CASES:
                await pool_case(s, rng, *pcase, quick=quick, rounds=rounds)
            print(f"load {os.getloadavg()[0]:.2f}")
            return

        # 1. GEMM
        n = 1024
        a = rng.standard_normal((n, n)).astype(np.float32)
        b = rng.standard_normal((n, n)).astype(np.float32)
        c = np.empty((n, n), np.float32)
        ta, tb = s.upload(a), s.upload(b)
        t_a, t_r = await compare(lambda: ops.matmul(ta, tb), lambda: np.matmul(a, b, out=c), 3 if quick else 5, rounds)
        fl = 2 * n**3
        line(
            "GEMM 1024^2 f32 (GFLOP/s)", f"{fl / t_a / 1e9:7.1f} vs numpy {fl / t_r / 1e9:7.1f}", t_r / t_a, ">= 0.95x"
        )

        # 2. add of 16M: into a preallocated output (aioge.op with an output Tensor, numpy out=), and
        #    allocating the result (aioge.ops.add, numpy a + b)
        m = 16 * 1024 * 1024
        x = rng.standard_normal(m).astype(np.float32)
        y = rng.standard_normal(m).astype(np.float32)
        out = np.empty_like(x)
        tx, ty = s.upload(x), s.upload(y)
        tout = s.empty((m,), "float32")
        reps = 3 if quick else 6
        t_a, t_r = await compare(
            lambda: aioge.op("Add", [tx, ty], [tout])[0], lambda: np.add(x, y, out=out), reps, rounds
        )
        gb = 3 * x.nbytes / 1e9
        line("add 16M f32 (GB/s), preallocated output", f"{gb / t_a:7.2f} vs numpy out= {gb / t_r:6.2f}", t_r / t_a,
             ">= 1.0x")  # fmt: skip
        t_a, t_r = await compare(lambda: ops.add(tx, ty), lambda: x + y, reps, rounds)
        line("add 16M f32 (GB/s), allocating the result", f"{gb / t_a:7.2f} vs numpy a+b  {gb / t_r:6.2f}", t_r / t_a,
             ">= 1.0x")  # fmt: skip

        # 3. conv 3x3
        xc = rng.standard_normal((1, 64, 56, 56)).astype(np.float32)
        wc = (rng.standard_normal((64, 64, 3, 3)) * 0.05).astype(np.float32)
        sess = ort_conv_session(wc)
        txc, twc = s.upload(xc), s.upload(wc)
        ref = sess.run(None, {"x": xc})[0]
        got = await ops.conv2d(txc, twc, pads=1).numpy()
        assert np.allclose(got, ref, rtol=1e-3, atol=1e-3), "conv result differs from onnxruntime"
        t_a, t_r = await compare(lambda: ops.conv2d(txc, twc, pads=1), lambda: sess.run(None, {"x": xc}),
                                 10 if quick else 20, rounds)  # fmt: skip
        fl = 2 * 64 * 64 * 9 * 56 * 56
        line("conv 3x3 64ch 56x56 (ms, GFLOP/s)",
             f"{t_a * 1e3:6.2f} ms {fl / t_a / 1e9:5.1f} vs ORT {t_r * 1e3:6.2f} ms {fl / t_r / 1e9:5.1f}",
             t_r / t_a, ">= 0.8x")  # fmt: skip
        for case in CONV_CASES:
            await conv_case(s, rng, *case, quick=quick, rounds=rounds)
        for pcase in POOL_CASES:
            await pool_case(s, rng, *pcase, quick=quick, rounds=rounds)

        # 4. softmax / 5. layernorm
        xs = rng.standard_normal((64, 1024)).astype(np.float32)
        g = rng.standard_normal(1024).astype(np.float32)
        bb = rng.standard_normal(1024).astype(np.float32)
        txs, tg, tbb = s.upload(xs), s.upload(g), s.upload(bb)

        def np_softmax() -> np.ndarray:
            e = np.exp(xs - xs.max(axis=-1, keepdims=True))
            return e / e.sum(axis=-1, keepdims=True)

        def np_layernorm() -> np.ndarray:
            mu = xs.mean(axis=-1, keepdims=True)
            var = xs.var(axis=-1, keepdims=True)
            return (xs - mu) / np.sqrt(var + 1e-5) * g + bb

        reps = 200 if quick else 500
        t_a, t_r = await compare(lambda: ops.softmax(txs), np_softmax, reps, rounds)
        line("softmax (64, 1024) f32 (us)", f"{t_a * 1e6:7.1f} vs numpy {t_r * 1e6:7.1f}", t_r / t_a, ">= 1.0x")
        t_a, t_r = await compare(lambda: ops.layer_norm(txs, tg, tbb), np_layernorm, reps, rounds)
        line("layernorm (64, 1024) f32 (us)", f"{t_a * 1e6:7.1f} vs numpy {t_r * 1e6:7.1f}", t_r / t_a, ">= 1.0x")

        # 6. launch cost of a cached tiny op
        t16 = s.upload(np.ones(16, np.float32))
        reps = 2000 if quick else 10000
        best_p = best_w = float("inf")
        for _ in range(rounds):
            best_p = min(best_p, await _aio_time(lambda: ops.add(t16, t16), reps))
            t = time.perf_counter()
            for _ in range(reps // 10):
                await ops.add(t16, t16)
            best_w = min(best_w, (time.perf_counter() - t) / (reps // 10))
        raw = raw_launch_cost(s, t16, reps, rounds)
        line("tiny cached op, pipelined (us per launch)", f"{best_p * 1e6:7.2f} vs raw cffi {raw * 1e6:6.2f}",
             best_p / raw, "informational; lower is better")  # fmt: skip
        print(f"  {'tiny cached op, launch + await (us)':<46} {best_w * 1e6:7.2f}")

        # 7. two streams of GEMMs vs one
        a5 = rng.standard_normal((512, 512)).astype(np.float32)
        k = 8 if quick else 16
        async with dev.open_stream() as s2:
            u1, u2 = s.upload(a5), s2.upload(a5)
            await u1
            await u2

            async def one() -> float:
                t = time.perf_counter()
                ys = [ops.matmul(u1, u1) for _ in range(2 * k)]
                await ys[-1]
                return time.perf_counter() - t

            async def two() -> float:
                t = time.perf_counter()
                y1 = [ops.matmul(u1, u1) for _ in range(k)]
                y2 = [ops.matmul(u2, u2) for _ in range(k)]
                await y1[-1]
                await y2[-1]
                return time.perf_counter() - t

            t1 = min([await one() for _ in range(rounds)])
            t2 = min([await two() for _ in range(rounds)])
        line("2 streams x GEMM 512^2 vs 1 stream (GFLOP/s)",
             f"{2 * k * 2 * 512**3 / t2 / 1e9:7.1f} vs 1 stream {2 * k * 2 * 512**3 / t1 / 1e9:7.1f}",
             t1 / t2, ">= 0.9x, no collapse")  # fmt: skip
        c = _native.counters()
        print(f"op cache: {c['op_cache_entries']} entries, {c['op_cache_hits']} hits, {c['op_cache_misses']} misses")


# (label, C_in, H=W, C_out, kernel, stride, pad, groups): MobileNet v1/v2 depthwise layers, small convs and
# ResNeXt's grouped 3x3 convs
CONV_CASES = [
    ("dw 3x3 32ch 112x112", 32, 112, 32, 3, 1, 1, 32),
    ("dw 3x3 s2 96ch 112x112", 96, 112, 96, 3, 2, 1, 96),
    ("dw 3x3 144ch 56x56", 144, 56, 144, 3, 1, 1, 144),
    ("dw 3x3 s2 144ch 56x56", 144, 56, 144, 3, 2, 1, 144),
    ("dw 3x3 192ch 28x28", 192, 28, 192, 3, 1, 1, 192),
    ("dw 3x3 576ch 14x14", 576, 14, 576, 3, 1, 1, 576),
    ("dw 3x3 960ch 7x7", 960, 7, 960, 3, 1, 1, 960),
    ("conv 3x3 16->16 28x28", 16, 28, 16, 3, 1, 1, 1),
    ("conv 3x3 8->16 56x56", 8, 56, 16, 3, 1, 1, 1),
    ("conv 1x1 16->64 28x28", 16, 28, 64, 1, 1, 0, 1),
    ("conv 1x1 64->16 56x56", 64, 56, 16, 1, 1, 0, 1),
    ("grouped 3x3 64ch g4 28x28", 64, 28, 64, 3, 1, 1, 4),
    ("grouped 3x3 128ch g32 56x56", 128, 56, 128, 3, 1, 1, 32),
    ("grouped 3x3 256ch g32 s2 28x28", 256, 28, 256, 3, 2, 1, 32),
]


async def conv_case(s: Any, rng: np.random.Generator, label: str, ci: int, hw: int, co: int, k: int, stride: int,
                    pad: int, groups: int, *, quick: bool, rounds: int) -> None:  # fmt: skip
    x = rng.standard_normal((1, ci, hw, hw)).astype(np.float32)
    w = (rng.standard_normal((co, ci // groups, k, k)) * 0.1).astype(np.float32)
    sess = ort_conv_session(w, x_shape=x.shape, stride=stride, pad=pad, group=groups)
    tx, tw = s.upload(x), s.upload(w)
    ref = sess.run(None, {"x": x})[0]

    ho = (hw + 2 * pad - k) // stride + 1
    out = s.empty((1, co, ho, ho), "float32")
    attrs = {"strides": [1, 1, stride, stride], "pads": [pad] * 4, "dilations": [1, 1, 1, 1], "groups": groups,
             "data_format": "NCHW"}  # fmt: skip

    def launch() -> Any:  # into a preallocated output, as onnxruntime reuses its arena (and a compiled graph does)
        return aioge.op("Conv2D", [tx, tw, None, None], [out], attrs, formats=[0, 0, 2, 2, 0])[0]

    got = await launch().numpy()
    assert np.allclose(await ops.conv2d(tx, tw, strides=stride, pads=pad, groups=groups).numpy(), got)
    assert np.allclose(got, ref, rtol=1e-3, atol=1e-3), f"{label}: result differs from onnxruntime"
    fl = 2 * co * (ci // groups) * k * k * ref.shape[2] * ref.shape[3]
    t_r1 = _np_time(lambda: sess.run(None, {"x": x}), 3)
    reps = max(5, min(200, int((0.02 if quick else 0.06) / max(t_r1, 1e-6))))
    t_a, t_r = await compare(launch, lambda: sess.run(None, {"x": x}), reps, rounds)
    line(f"{label} (us, GFLOP/s)",
         f"{t_a * 1e6:7.1f} us {fl / t_a / 1e9:5.1f} vs ORT {t_r * 1e6:7.1f} us {fl / t_r / 1e9:5.1f}",
         t_r / t_a, ">= 1.0x")  # fmt: skip


# (label, C_in, H=W, C_out, kernel, stride, pad, groups): ResNet-18's 3x3 convs and downsampling 1x1,
# ResNet-50's bottleneck 1x1 / 3x3 and downsampling, MobileNet-v2's 1x1 expansions / projections and
# depthwise 3x3 convs
NCHWC_CASES = [
    ("3x3 64ch 56x56", 64, 56, 64, 3, 1, 1, 1),
    ("3x3 128ch 28x28", 128, 28, 128, 3, 1, 1, 1),
    ("3x3 256ch 14x14", 256, 14, 256, 3, 1, 1, 1),
    ("3x3 s2 64->128 56x56", 64, 56, 128, 3, 2, 1, 1),
    ("3x3 s2 128->256 28x28", 128, 28, 256, 3, 2, 1, 1),
    ("3x3 s2 256->256 28x28", 256, 28, 256, 3, 2, 1, 1),
    ("1x1 s2 64->128 56x56", 64, 56, 128, 1, 2, 0, 1),
    ("1x1 s2 256->512 56x56", 256, 56, 512, 1, 2, 0, 1),
    ("1x1 64->256 56x56", 64, 56, 256, 1, 1, 0, 1),
    ("1x1 256->64 56x56", 256, 56, 64, 1, 1, 0, 1),
    ("1x1 24->144 56x56", 24, 56, 144, 1, 1, 0, 1),
    ("1x1 192->32 28x28", 192, 28, 32, 1, 1, 0, 1),
    ("1x1 96->576 14x14", 96, 14, 576, 1, 1, 0, 1),
    ("1x1 576->96 14x14", 576, 14, 96, 1, 1, 0, 1),
    ("1x1 320->1280 7x7", 320, 7, 1280, 1, 1, 0, 1),
    ("dw 3x3 32ch 112x112", 32, 112, 32, 3, 1, 1, 32),
    ("dw 3x3 s2 96ch 112x112", 96, 112, 96, 3, 2, 1, 96),
    ("dw 3x3 144ch 56x56", 144, 56, 144, 3, 1, 1, 144),
    ("dw 3x3 s2 144ch 56x56", 144, 56, 144, 3, 2, 1, 144),
    ("dw 3x3 576ch 14x14", 576, 14, 576, 3, 1, 1, 576),
    ("dw 3x3 960ch 7x7", 960, 7, 960, 3, 1, 1, 960),
]


async def _blocked_plain_ort(blocked: Any, xb: np.ndarray, plain: Any, x: np.ndarray, sess: Any, quick: bool,
                             rounds: int) -> tuple[float, float, float]:  # fmt: skip
    """Seconds per call of the blocked model, the NCHW model and onnxruntime on input "x": rounds
    interleaved, the best round of each."""

    async def run(model: Any, feed: np.ndarray, reps: int) -> float:
        t = time.perf_counter()
        for _ in range(reps):
            await model.execute({"x": feed})
        return (time.perf_counter() - t) / reps

    t_r1 = _np_time(lambda: sess.run(None, {"x": x}), 3)
    reps = max(5, min(200, int((0.02 if quick else 0.06) / max(t_r1, 1e-6))))
    t_b = t_p = t_r = float("inf")
    for _ in range(rounds):
        t_r = min(t_r, _np_time(lambda: sess.run(None, {"x": x}), reps))
        t_b = min(t_b, await run(blocked, xb, reps))
        t_p = min(t_p, await run(plain, x, reps))
    return t_b, t_p, t_r


async def nchwc_case(dev: Any, rng: np.random.Generator, label: str, ci: int, hw: int, co: int, k: int, stride: int,
                     pad: int, groups: int, *, quick: bool, rounds: int) -> None:  # fmt: skip
    """One conv as a compiled one-node model each way (filters packed at load, inputs fed from numpy
    and outputs read back, as onnxruntime's session.run does)."""
    from aioge.graph import Graph

    x = rng.standard_normal((1, ci, hw, hw)).astype(np.float32)
    xb = np.ascontiguousarray(x.reshape(1, ci // 8, 8, hw, hw).transpose(0, 1, 3, 4, 2))
    w = (rng.standard_normal((co, ci // groups, k, k)) * 0.1).astype(np.float32)
    # onnxruntime on as many threads as aioge's pool (AIOGE_HOST_THREADS)
    threads = _native.lib.aiogeHostGetNumThreads()
    sess = ort_conv_session(w, x_shape=x.shape, stride=stride, pad=pad, group=groups, threads=threads)
    ref = sess.run(None, {"x": x})[0]
    gp = Graph("conv")
    conv = {"kernel_shape": [k, k], "pads": [pad] * 4, "strides": [stride] * 2, "group": groups}
    gp.output(gp.add_node("Conv", [gp.input("x", x.shape, "float32"), gp.constant("w", w)], conv))
    gb = Graph("nchwc")
    attrs = {"strides": [1, 1, stride, stride], "pads": [pad] * 4, "dilations": [1, 1, 1, 1], "groups": groups}
    gb.output(gb.add_node("_NchwcConv2D", [gb.input("x", xb.shape, "float32"), gb.constant("w", w)], attrs))
    plain, blocked = await dev.compile(gp), await dev.compile(gb)
    try:
        got = np.asarray(next(iter((await blocked.execute({"x": xb})).values())))
        got = got.transpose(0, 1, 4, 2, 3).reshape(ref.shape)
        assert np.allclose(got, ref, rtol=1e-3, atol=1e-3), f"{label}: result differs from onnxruntime"

        fl = 2 * co * (ci // groups) * k * k * ref.shape[2] * ref.shape[3]
        t_b, t_p, t_r = await _blocked_plain_ort(blocked, xb, plain, x, sess, quick, rounds)
    finally:
        await plain.aclose()
        await blocked.aclose()
    print(f"  {label:<24} NCHWc8 {t_b * 1e6:7.1f} us {fl / t_b / 1e9:5.1f} GFLOP/s | Conv {t_p * 1e6:7.1f} us "
          f"ratio {t_p / t_b:5.2f}x | ORT {t_r * 1e6:7.1f} us ratio {t_r / t_b:5.2f}x")  # fmt: skip


# (label, op, C, H=W, kernel, stride, pad): ResNet's stem max pool, a stride-1 3x3 max (Inception), 2x2 stride-2
# pools (VGG, DenseNet's transitions), a global average (every classifier head)
NCHWC_POOL_CASES = [
    ("maxpool 3x3 s2 p1 64ch 112x112", "MaxPool", 64, 112, 3, 2, 1),
    ("maxpool 3x3 s1 p1 192ch 28x28", "MaxPool", 192, 28, 3, 1, 1),
    ("maxpool 2x2 s2 128ch 56x56", "MaxPool", 128, 56, 2, 2, 0),
    ("avgpool 2x2 s2 128ch 56x56", "AveragePool", 128, 56, 2, 2, 0),
    ("global avgpool 1280ch 7x7", "GlobalAveragePool", 1280, 7, 7, 1, 0),
]


async def nchwc_pool_case(dev: Any, rng: np.random.Generator, label: str, op: str, c: int, hw: int, k: int,
                          stride: int, pad: int, *, quick: bool, rounds: int) -> None:  # fmt: skip
    """One pool as a compiled one-node model: _NchwcPool2D (blocked in and out) vs the NCHW pool node vs
    onnxruntime's pool (as many threads as aioge's pool)."""
    import onnxruntime as ort
    from onnx import TensorProto, helper

    from aioge.graph import Graph

    x = rng.standard_normal((1, c, hw, hw)).astype(np.float32)
    xb = np.ascontiguousarray(x.reshape(1, c // 8, 8, hw, hw).transpose(0, 1, 3, 4, 2))
    glob = op == "GlobalAveragePool"
    win = {} if glob else {"kernel_shape": [k, k], "strides": [stride] * 2, "pads": [pad] * 4}
    node = helper.make_node(op, ["x"], ["y"], **win)
    g = helper.make_graph([node], "pool", [helper.make_tensor_value_info("x", TensorProto.FLOAT, list(x.shape))],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)])  # fmt: skip
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)])
    m.ir_version = 8
    so = ort.SessionOptions()
    so.log_severity_level = 3
    so.intra_op_num_threads = _native.lib.aiogeHostGetNumThreads()
    so.add_session_config_entry("session.intra_op.allow_spinning", "0")
    sess = ort.InferenceSession(m.SerializeToString(), so, providers=["CPUExecutionProvider"])
    ref = sess.run(None, {"x": x})[0]
    gp = Graph("pool")
    gp.output(gp.add_node(op, [gp.input("x", x.shape, "float32")], win))
    gb = Graph("nchwc_pool")
    mode = "max" if op == "MaxPool" else "avg"
    attrs: dict[str, Any] = {"mode": mode, "global": 1} if glob else {
        "mode": mode, "kernel": [k, k], "strides": [stride] * 2, "pads": [pad] * 4}  # fmt: skip
    gb.output(gb.add_node("_NchwcPool2D", [gb.input("x", xb.shape, "float32")], attrs))
    plain, blocked = await dev.compile(gp), await dev.compile(gb)
    try:
        got = np.asarray(next(iter((await blocked.execute({"x": xb})).values())))
        got = got.transpose(0, 1, 4, 2, 3).reshape(ref.shape)
        assert np.allclose(got, ref, rtol=1e-5, atol=1e-5), f"{label}: result differs from onnxruntime"

        t_b, t_p, t_r = await _blocked_plain_ort(blocked, xb, plain, x, sess, quick, rounds)
    finally:
        await plain.aclose()
        await blocked.aclose()
    print(f"  {label:<30} NCHWc8 {t_b * 1e6:7.1f} us | {op} {t_p * 1e6:7.1f} us ratio {t_p / t_b:5.2f}x | "
          f"ORT {t_r * 1e6:7.1f} us ratio {t_r / t_b:5.2f}x")  # fmt: skip


# (label, op, C, H=W, kernel, stride, pad): the networks' pools (squeezenet's and resnet's stems, inception's
# stride-1 3x3 pools, shufflenet's stride-2 average, a global average)
POOL_CASES = [
    ("maxpool 3x3 s2 64ch 111x111", "MaxPool", 64, 111, 3, 2, 0),
    ("maxpool 3x3 s2 p1 64ch 112x112", "MaxPool", 64, 112, 3, 2, 1),
    ("maxpool 3x3 s1 p1 192ch 28x28", "MaxPool", 192, 28, 3, 1, 1),
    ("avgpool 3x3 s1 p1 576ch 14x14", "AveragePool", 576, 14, 3, 1, 1),
    ("avgpool 3x3 s2 p1 136ch 28x28", "AveragePool", 136, 28, 3, 2, 1),
    ("global avgpool 1024ch 7x7", "AveragePool", 1024, 7, 7, 1, 0),
]


async def pool_case(s: Any, rng: np.random.Generator, label: str, op: str, c: int, hw: int, k: int, stride: int,
                    pad: int, *, quick: bool, rounds: int) -> None:  # fmt: skip
    import onnxruntime as ort
    from onnx import TensorProto, helper

    x = rng.standard_normal((1, c, hw, hw)).astype(np.float32)
    node = helper.make_node(op, ["x"], ["y"], kernel_shape=[k, k], strides=[stride] * 2, pads=[pad] * 4)
    g = helper.make_graph([node], "pool", [helper.make_tensor_value_info("x", TensorProto.FLOAT, list(x.shape))],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)])  # fmt: skip
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)])
    m.ir_version = 8
    so = ort.SessionOptions()
    so.log_severity_level = 3
    so.add_session_config_entry("session.intra_op.allow_spinning", "0")
    sess = ort.InferenceSession(m.SerializeToString(), so, providers=["CPUExecutionProvider"])
    ref = sess.run(None, {"x": x})[0]
    tx = s.upload(x)
    pool = ops.max_pool2d if op == "MaxPool" else ops.avg_pool2d

    def launch() -> Any:
        return pool(tx, (k, k), (stride, stride), (pad,) * 4)

    assert np.allclose(await launch().numpy(), ref, rtol=1e-5, atol=1e-5), f"{label}: result differs from onnxruntime"
    t_r1 = _np_time(lambda: sess.run(None, {"x": x}), 3)
    reps = max(5, min(200, int((0.02 if quick else 0.06) / max(t_r1, 1e-6))))
    t_a, t_r = await compare(launch, lambda: sess.run(None, {"x": x}), reps, rounds)
    line(f"{label} (us)", f"{t_a * 1e6:7.1f} us vs ORT {t_r * 1e6:7.1f} us", t_r / t_a, ">= 1.0x")


def raw_launch_cost(s: Any, t16: Any, reps: int, rounds: int) -> float:
    """Per-launch cost of a bare cffi aclopCompileAndExecute loop on prebuilt descs (same op, cached)."""
    from aioge._native import ffi, lib

    d = lib.aclCreateTensorDesc(0, 1, ffi.new("int64_t[]", [16]), 2)
    out = s.empty((16,), "float32")
    bx, bo = t16._memory().buffer, out._memory().buffer
    ins = ffi.new("aclTensorDesc *[]", [d, d])
    inb = ffi.new("aclDataBuffer *[]", [bx, bx])
    outs = ffi.new("aclTensorDesc *[]", [d])
    outb = ffi.new("aclDataBuffer *[]", [bo])
    attr = lib.aclopCreateAttr()
    best = float("inf")
    try:
        for _ in range(rounds):
            t = time.perf_counter()
            for _ in range(reps):
                lib.aclopCompileAndExecute(b"Add", 2, ins, inb, 1, outs, outb, attr, 0, 0, ffi.NULL, s._handle)
            lib.aclrtSynchronizeStream(s._handle)
            best = min(best, (time.perf_counter() - t) / reps)
    finally:
        lib.aclDestroyTensorDesc(d)
        lib.aclopDestroyAttr(attr)
    return best


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="fewer repetitions")
    ap.add_argument("--conv", action="store_true", help="only the single convolutions")
    ap.add_argument("--nchwc", action="store_true", help="only the blocked-layout convolutions")
    args = ap.parse_args()
    asyncio.run(main(args.quick, args.conv, args.nchwc))
