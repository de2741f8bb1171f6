"""Graph benchmark: aioge (sunk graphs on the host runtime) against onnxruntime CPU, one run.

    python benchmarks/bench_graph.py [--quick] [--models mlp,residual_cnn,inception,attention]

For each model (built by tests/graph/models.py): the max difference of the
outputs, latency aioge / onnxruntime (target <= 1.0x, geometric mean
reported), compile time vs onnxruntime session creation, throughput of 8
concurrent clients vs onnxruntime called from a thread pool in the same
asyncio program, and arena peak vs the max-live lower bound (target <= 1.1x).
"""

from __future__ import annotations

import argparse
import asyncio
import math
import os
import statistics
import sys
import time
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import onnxruntime as ort

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "tests", "graph"))
import models as M

import aioge


def ort_session(model_bytes: bytes) -> ort.InferenceSession:
    so = ort.SessionOptions()
    so.intra_op_num_threads = os.cpu_count() or 1
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    if os.environ.get("BENCH_ORT_NO_SPIN"):
        so.add_session_config_entry("session.intra_op.allow_spinning", "0")
    return ort.InferenceSession(model_bytes, so, providers=["CPUExecutionProvider"])


async def bench_model(dev, name: str, proto, reps: int, clients: int, per_client: int) -> dict[str, float]:
    data = proto.SerializeToString()
    feeds = M.sample_inputs(proto)

    t0 = time.perf_counter()
    sess = ort_session(data)
    t_ort_create = time.perf_counter() - t0
    t0 = time.perf_counter()
    graph = aioge.load_onnx(data)
    model = await dev.compile(graph)
    t_compile = time.perf_counter() - t0

    ref = sess.run(None, feeds)
    out = await model.execute(feeds)
    diff = max(float(np.max(np.abs(np.asarray(out[n]) - r))) for n, r in zip(model.outputs, ref))

    for _ in range(3):  # warm up both
        sess.run(None, feeds)
        await model.execute(feeds)
    t_ort, t_aioge = [], []
    # alternate blocks (not single runs): onnxruntime's pool threads spin for a
    # while after each run and would slow whatever runs right after them
    blocks = 6  # this VM's speed drifts over seconds: many short alternating blocks share the drift
    for _ in range(blocks):
        for _ in range(reps // blocks):
            t0 = time.perf_counter()
            sess.run(None, feeds)
            t_ort.append(time.perf_counter() - t0)
        await asyncio.sleep(0.05)
        for _ in range(reps // blocks):
            t0 = time.perf_counter()
            await model.execute(feeds)
            t_aioge.append(time.perf_counter() - t0)
        await asyncio.sleep(0.05)
    lat_ort, lat_aioge = statistics.median(t_ort), statistics.median(t_aioge)

    # throughput: clients x per_client requests
    loop = asyncio.get_running_loop()
    pool = ThreadPoolExecutor(max_workers=clients)

    async def ort_client() -> None:
        for _ in range(per_client):
            await loop.run_in_executor(pool, sess.run, None, feeds)

    async def aioge_client(stream: aioge.Stream | None) -> None:
        for _ in range(per_client):
            await model.execute(feeds, stream=stream)

    t0 = time.perf_counter()
    await asyncio.gather(*(ort_client() for _ in range(clients)))
    thr_ort = clients * per_client / (time.perf_counter() - t0)
    await asyncio.sleep(0.05)
    # the clients share the default stream (their executions queue in order) ...
    t0 = time.perf_counter()
    await asyncio.gather(*(aioge_client(None) for _ in range(clients)))
    thr_aioge = clients * per_client / (time.perf_counter() - t0)
    await asyncio.sleep(0.05)
    # ... or each has a stream of its own, as the thread pool gives each ORT call a thread
    streams = [dev.open_stream() for _ in range(clients)]
    t0 = time.perf_counter()
    await asyncio.gather(*(aioge_client(st) for st in streams))
    thr_streams = clients * per_client / (time.perf_counter() - t0)
    for st in streams:
        await st.aclose()
    pool.shutdown()

    p = model.plan
    res = {
        "diff": diff,
        "lat_aioge_ms": lat_aioge * 1e3,
        "lat_ort_ms": lat_ort * 1e3,
        "lat_ratio": lat_aioge / lat_ort,
        "compile_s": t_compile,
        "ort_create_s": t_ort_create,
        "thr_aioge": thr_aioge,
        "thr_ort": thr_ort,
        "thr_ratio": thr_aioge / thr_ort,
        "thr_streams": thr_streams,
        "thr_streams_ratio": thr_streams / thr_ort,
        "arena": p.arena_bytes,
        "max_live": p.max_live_bytes,
        "no_reuse": p.no_reuse_bytes,
        "arena_ratio": p.arena_bytes / max(p.max_live_bytes, 1),
        "nodes": len(model._build.ops),
        "segments": len(model._build.segments),
        "streams": p.num_streams,
    }
    await model.aclose()
    return res


async def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--models", default="mlp,residual_cnn,inception,attention")
    args = ap.parse_args()
    reps, per_client = (6, 2) if args.quick else (60, 6)
    names = [n.strip() for n in args.models.split(",") if n.strip()]
    builders = {"mlp": M.mlp, "residual_cnn": M.residual_cnn, "inception": M.inception, "attention": M.attention}
    ratios = []
    async with aioge.open_device(0) as dev:
        for name in names:
            r = await bench_model(dev, name, builders[name](), reps, 8, per_client)
            ratios.append(r["lat_ratio"])
            print(f"{name:13s} latency aioge {r['lat_aioge_ms']:8.2f} ms / onnxruntime {r['lat_ort_ms']:8.2f} ms = "
                  f"{r['lat_ratio']:.2f}x [<=1.0] | compile {r['compile_s'] * 1e3:7.1f} ms vs ort session "
                  f"{r['ort_create_s'] * 1e3:7.1f} ms | 8 clients {r['thr_aioge']:7.1f}/s vs ort pool "
                  f"{r['thr_ort']:7.1f}/s = {r['thr_ratio']:.2f}x (a stream per client {r['thr_streams']:7.1f}/s = "
                  f"{r['thr_streams_ratio']:.2f}x) | arena {r['arena'] / 1e6:.2f} MB / max-live "
                  f"{r['max_live'] / 1e6:.2f} MB = {r['arena_ratio']:.3f}x [<=1.1] (no reuse "
                  f"{r['no_reuse'] / 1e6:.2f} MB) | {r['nodes']} kernels, {r['segments']} segments on "
                  f"{r['streams']} streams | max |diff| {r['diff']:.2e}")  # fmt: skip
    geo = math.exp(sum(math.log(x) for x in ratios) / len(ratios))
    print(f"geometric mean latency ratio aioge/onnxruntime: {geo:.2f}x  [target <= 1.0x]")


if __name__ == "__main__":
    asyncio.run(main())
