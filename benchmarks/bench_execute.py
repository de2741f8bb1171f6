"""execute() overhead and concurrency against onnxruntime, one run, ratios only.

    python benchmarks/bench_execute.py [--quick]

1. tiny model (``x + 1`` on 16 floats): ``await model.execute()`` one at a time
   vs onnxruntime ``InferenceSession.run()``                        (target <= 1.5x)
2. 8 concurrent clients, a stream per client, on a small CNN and an MLP:
   aioge throughput vs onnxruntime ``run()`` in an 8-thread pool     (target >= 1.0x)

Each figure alternates the two sides (A B A B ...) and keeps the median of the
rounds, because the speed of this shared machine drifts; ORT runs with its
default session options (``BENCH_ORT_NO_SPIN=1`` turns its spinning off).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
import time
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import onnx
import onnxruntime as ort
from onnx import TensorProto, helper

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "tests", "serve"))
import serve_models as M

import aioge


def tiny() -> onnx.ModelProto:
    g = helper.make_graph([helper.make_node("Add", ["x", "one"], ["y"])], "tiny",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, [16])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [16])],
                          [helper.make_tensor("one", TensorProto.FLOAT, [1], [1.0])])  # fmt: skip
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])


def session(model: onnx.ModelProto) -> ort.InferenceSession:
    so = ort.SessionOptions()
    if os.environ.get("BENCH_ORT_NO_SPIN"):
        so.add_session_config_entry("session.intra_op.allow_spinning", "0")
    return ort.InferenceSession(model.SerializeToString(), so, providers=["CPUExecutionProvider"])


async def tiny_ratio(dev: aioge.Device, n: int, rounds: int) -> tuple[float, float]:
    m = tiny()
    model = await dev.compile(aioge.load_onnx(m.SerializeToString()))
    sess = session(m)
    x = np.ones(16, np.float32)
    for _ in range(100):  # warm-up
        await model.execute({"x": x})
        sess.run(None, {"x": x})
    a, b = [], []
    for _ in range(rounds):
        t = time.perf_counter()
        for _ in range(n):
            await model.execute({"x": x})
        a.append((time.perf_counter() - t) / n)
        t = time.perf_counter()
        for _ in range(n):
            sess.run(None, {"x": x})
        b.append((time.perf_counter() - t) / n)
    np.testing.assert_array_equal((await model.execute({"x": x}))["y"], sess.run(None, {"x": x})[0])
    await model.aclose()
    return statistics.median(a), statistics.median(b)


async def concurrent_ratio(dev: aioge.Device, proto: onnx.ModelProto, shape: tuple[int, ...], clients: int,
                           per_client: int, rounds: int) -> tuple[float, float]:  # fmt: skip
    model = await dev.compile(aioge.load_onnx(proto.SerializeToString(), input_shapes={"x": shape}))
    sess = session(proto)
    x = np.random.default_rng(0).standard_normal(shape).astype(np.float32)
    (out,) = (await model.execute({"x": x})).values()
    np.testing.assert_allclose(out, sess.run(None, {"x": x})[0], rtol=1e-4, atol=1e-4)
    streams = [dev.open_stream() for _ in range(clients)]
    pool = ThreadPoolExecutor(clients)
    loop = asyncio.get_running_loop()

    async def aioge_client(s: aioge.Stream) -> None:
        for _ in range(per_client):
            await model.execute({"x": x}, stream=s)

    async def ort_client() -> None:
        for _ in range(per_client):
            await loop.run_in_executor(pool, sess.run, None, {"x": x})

    await asyncio.gather(*(aioge_client(s) for s in streams), *(ort_client() for _ in range(clients)))  # warm-up
    a, b = [], []
    total = clients * per_client
    for _ in range(rounds):
        t = time.perf_counter()
        await asyncio.gather(*(aioge_client(s) for s in streams))
        a.append(total / (time.perf_counter() - t))
        t = time.perf_counter()
        await asyncio.gather(*(ort_client() for _ in range(clients)))
        b.append(total / (time.perf_counter() - t))
    pool.shutdown()
    for s in streams:
        await s.aclose()
    await model.aclose()
    return statistics.median(a), statistics.median(b)


async def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true", help="fewer iterations and rounds")
    args = ap.parse_args()
    n, rounds, per_client = (500, 3, 10) if args.quick else (3000, 7, 40)
    spin = "off" if os.environ.get("BENCH_ORT_NO_SPIN") else "on"
    print(f"onnxruntime {ort.__version__}, intra-op spinning {spin}; medians of {rounds} alternating rounds\n")
    async with aioge.open_device(0) as dev:
        a, b = await tiny_ratio(dev, n, rounds)
        print(f"[tiny x + 1, 16 floats] aioge execute {a * 1e6:7.1f} us   ORT run {b * 1e6:7.1f} us   "
              f"ratio {a / b:.2f}x [target <= 1.5x]")  # fmt: skip
        for name, proto, shape in (("cnn 3x32x32", M.cnn(3, 32), (1, 3, 32, 32)),
                                   ("mlp 256-512-256, batch 8", M.mlp((256, 512, 256)), (8, 256))):  # fmt: skip
            ra, rb = await concurrent_ratio(dev, proto, shape, 8, per_client, rounds)
            print(f"[8 clients, {name}] aioge {ra:8.0f}/s   ORT pool {rb:8.0f}/s   ratio {ra / rb:.2f}x "
                  "[target >= 1.0x]")  # fmt: skip


if __name__ == "__main__":
    asyncio.run(main())
