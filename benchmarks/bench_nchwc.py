"""The NCHWc8 layout pass on the host runtime: each model compiled with the pass off and on, in one process.

    python benchmarks/bench_nchwc.py [--models resnet18,mobilenet_v2,...] [--image-size 224] [--rounds 6]
                                     [--per-conv]

For each torchvision model (random weights, batch norms calibrated and exported as bench_frontends.py
does, batch 1): the
latency with the pass on / the latency with it off, as process CPU time per call and as wall time,
best of ``--rounds`` alternating blocks of 5 calls (run with ``AIOGE_HOST_THREADS=1`` to compare the
kernels rather than which thread got a core on a loaded machine).  ``--per-conv``: the runtime's
per-node times (the profiler's sunk-graph node times) of each convolution, summed by geometry
(channels in -> out, kernel, stride, groups, input size) with the pass off and on, slowest first:
where the blocked kernels win and lose.  The outputs of both compiles are compared first.
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import dataclasses
import math
import os
import sys
import time
from typing import Any

import numpy as np

sys.path.insert(0, os.path.dirname(__file__))
import bench_frontends

import aioge
from aioge.graph import Graph, optimize
from aioge.graph.target import HOST
from aioge.runtime.graphs.compile import compile_graph

OFF = dataclasses.replace(HOST, layouts=HOST.layouts - {"NCHWc8"})
ON = dataclasses.replace(HOST, layouts=HOST.layouts | {"NCHWc8"})


def export(name: str, size: int) -> Graph:
    import torch
    import torchvision

    torch.manual_seed(0)
    args = (torch.randn(1, 3, size, size, generator=torch.Generator().manual_seed(1)),)
    m = bench_frontends.zoo.calibrate(getattr(torchvision.models, name)(weights=None), args)
    return aioge.load_onnx(bench_frontends.export_onnx(m, args))


def conv_geometry(g: Graph) -> dict[str, str]:
    """Node name -> "cin->cout kK sS gG hwH" of each convolution of an optimized graph."""
    out = {}
    for n in g.nodes:
        if n.op_type not in ("Conv", "_FusedConv", "_NchwcConv2D"):
            continue
        w, x = g.values[n.inputs[1]].shape or (), g.values[n.inputs[0]].shape or ()
        groups = int(n.attrs.get("groups", n.attrs.get("group", 1)))
        stride = list(n.attrs.get("strides") or [1])[-1]
        out[n.name] = f"{w[1] * groups}->{w[0]} k{w[2]} s{stride} g{groups} hw{x[2]}"
    return out


async def node_times(model: Any, x: dict[str, np.ndarray], reps: int = 5) -> dict[str, float]:
    """Node name -> the best of ``reps`` runtime-measured times (ms)."""
    acc: dict[str, list[float]] = collections.defaultdict(list)
    for _ in range(reps):
        async with aioge.profile() as prof:
            await model.execute(x)
        for r in prof.completed():
            for nd in r.nodes or ():
                acc[nd.name].append(nd.device_ms)
    return {k: min(v) for k, v in acc.items()}


async def bench(dev: Any, name: str, size: int, rounds: int, per_conv: bool) -> float:
    g = export(name, size)
    x = {g.inputs[0]: np.random.default_rng(1).standard_normal((1, 3, size, size)).astype(np.float32)}
    models = {k: compile_graph(dev, g, target=t) for k, t in (("off", OFF), ("on", ON))}
    try:
        outs = {k: await m.execute(x) for k, m in models.items()}
        diff = max(float(np.abs(outs["on"][k] - outs["off"][k]).max()) for k in outs["off"])
        best = {k: [math.inf, math.inf] for k in models}
        for _ in range(rounds):
            for k, m in models.items():
                c0, w0 = time.process_time(), time.perf_counter()
                for _ in range(5):
                    await m.execute(x)
                cpu, wall = (time.process_time() - c0) / 5, (time.perf_counter() - w0) / 5
                best[k] = [min(best[k][0], cpu), min(best[k][1], wall)]
        a, b = best["off"], best["on"]
        blocked = optimize(g, target=ON).op_counts().get("_NchwcConv2D", 0)
        print(f"{name}@{size}: {blocked} blocked convs | cpu/call off {a[0] * 1e3:.2f} ms, on {b[0] * 1e3:.2f} ms = "
              f"{b[0] / a[0]:.2f}x | wall off {a[1] * 1e3:.2f} ms, on {b[1] * 1e3:.2f} ms = {b[1] / a[1]:.2f}x | "
              f"max |diff| {diff:.2e}", flush=True)  # fmt: skip
        if per_conv:
            geo = {**conv_geometry(optimize(g, target=OFF)), **conv_geometry(optimize(g, target=ON))}
            t = {k: await node_times(m, x) for k, m in models.items()}
            agg: dict[str, list[float]] = collections.defaultdict(lambda: [0.0, 0.0, 0])
            for n, desc in geo.items():
                if n in t["off"] and n in t["on"]:
                    row = agg[desc]
                    row[0] += t["off"][n]
                    row[1] += t["on"][n]
                    row[2] += 1
            for desc, (off, on, cnt) in sorted(agg.items(), key=lambda kv: -kv[1][1]):
                print(f"  {desc:32s} x{int(cnt):<3d} off {off:8.3f} ms  on {on:8.3f} ms  {on / off:5.2f}x")
        return b[0] / a[0]
    finally:
        for m in models.values():
            await m.aclose()


async def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--models", default="resnet18,mobilenet_v2,squeezenet1_1,densenet121")
    ap.add_argument("--image-size", type=int, default=224)
    ap.add_argument("--rounds", type=int, default=6)
    ap.add_argument("--per-conv", action="store_true", help="per-convolution node times, off and on")
    args = ap.parse_args()
    print(f"load average {os.getloadavg()[0]:.2f}; AIOGE_HOST_THREADS={os.environ.get('AIOGE_HOST_THREADS', '')}")
    ratios = []
    async with aioge.open_device(0) as dev:
        for name in args.models.split(","):
            ratios.append(await bench(dev, name, args.image_size, args.rounds, args.per_conv))
    gm = float(np.exp(np.mean(np.log(ratios))))
    print(f"geometric mean CPU time per call, pass on / off: {gm:.2f}x; load average {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    asyncio.run(main())
