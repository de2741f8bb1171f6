"""Model load + compile time: ``aioge.load_onnx`` + ``dev.compile`` against onnxruntime session creation.

    python benchmarks/bench_load.py [--models own|light|zoo|all|NAME,...] [--reps 5] [--profile NAME]

Models: bench_graph.py's (our own from tests/graph/models.py and the onnx
wheel's ``light`` models) and bench_frontends.py's zoo (tests/frontends/zoo.py,
random weights) exported with ``torch.onnx.export`` as bench_frontends.py does
(legacy exporter at opset 17, the dynamo exporter where the legacy one refuses).
The exports are cached under ``--cache`` (default: the temp dir) so that a rerun
times only what it measures.

For each model, ``--reps`` alternating rounds of: onnxruntime ``InferenceSession``
creation from the serialized model (default options; the session destroyed after its
clock stops), then ``load_onnx`` of the same bytes and ``dev.compile`` of the graph
(each timed, the compiled model closed after its clock stops). Printed: the medians, the
ratios (aioge / onnxruntime) of load + compile, load alone and compile alone, their
geometric means and the worst, and the load average before and after. Also the ratio of
process CPU time (every thread: onnxruntime's session creation against load + compile),
which a busy machine disturbs less than the wall clock. Target: load + compile <= 1.0x
geomean, none above 2.0x. ``--profile NAME`` prints cProfile's top functions of one load
+ compile of that model instead.
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import math
import os
import pstats
import statistics
import sys
import tempfile
import time
from typing import Any

import onnxruntime as ort

import aioge

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "..", "tests", "graph"))
sys.path.insert(0, os.path.join(HERE, "..", "tests", "frontends"))

OWN = ("mlp", "residual_cnn", "inception", "attention")
ZOO = ("bert", "gpt2", "vit_hf", "t5_encoder", "lstm", "gru", "unet", "resnet18", "mobilenet_v2",
       "mobilenet_v3_small", "efficientnet_b0", "squeezenet1_1", "shufflenet_v2_x1_0", "googlenet",
       "densenet121", "regnet_y_400mf", "convnext_tiny", "vit_b_16")  # fmt: skip


def own_models() -> dict[str, bytes]:
    import models as M

    return {n: getattr(M, n)().SerializeToString() for n in OWN}


def light_models() -> dict[str, bytes]:
    from bench_graph import light_models as lm

    return {n: proto.SerializeToString() for n, (proto, _) in lm().items()}


def zoo_model(name: str, cache: str) -> bytes:
    """bench_frontends.py's ONNX export of zoo model ``name`` (cached in ``cache``)."""
    path = os.path.join(cache, f"aioge_bench_load_{name}.onnx")
    if os.path.exists(path):
        with open(path, "rb") as f:
            return f.read()
    import zoo
    from bench_frontends import export_onnx

    m, args, _ = zoo.build(name)
    data = export_onnx(m, args)
    with open(path + ".tmp", "wb") as f:
        f.write(data)
    os.replace(path + ".tmp", path)
    return data


def ort_create(data: bytes) -> tuple[float, float]:
    """Wall and process CPU seconds of an onnxruntime session's creation.

    The session is destroyed after the clock stops (as aioge's model is closed after its clock
    stops): a session discarded inside the timed statement would add its teardown (joining its
    thread pool, ~0.1 ms on the small models, ~10% of their creation) to onnxruntime's side."""
    c0, t0 = time.process_time(), time.perf_counter()
    session = ort.InferenceSession(data, providers=["CPUExecutionProvider"])
    t1, c1 = time.perf_counter(), time.process_time()
    del session
    return t1 - t0, c1 - c0


async def aioge_create(dev: aioge.Device, data: bytes) -> tuple[float, float, float]:
    """Wall seconds of load_onnx and of dev.compile, and process CPU seconds of both."""
    c0, t0 = time.process_time(), time.perf_counter()
    graph = aioge.load_onnx(data)
    t1 = time.perf_counter()
    model = await dev.compile(graph)
    t2, c2 = time.perf_counter(), time.process_time()
    await model.aclose()
    return t1 - t0, t2 - t1, c2 - c0


def geomean(xs: list[float]) -> float:
    return math.exp(sum(math.log(x) for x in xs) / len(xs)) if xs else float("nan")


def load_avg() -> str:
    a = os.getloadavg()
    return f"{a[0]:.2f} {a[1]:.2f} {a[2]:.2f}"


async def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--models", default="all", help="own, light, zoo, all, or a comma list of model names")
    ap.add_argument("--reps", type=int, default=5, help="alternating rounds per model (median)")
    ap.add_argument("--cache", default=tempfile.gettempdir(), help="directory of the cached zoo exports")
    ap.add_argument("--profile", default=None, help="cProfile one load + compile of this model")
    a = ap.parse_args()
    want = [n.strip() for n in (a.profile or a.models).split(",") if n.strip()]
    light = light_models() if any(n not in OWN + ZOO + ("own", "zoo") for n in want) else {}
    groups = {"own": list(OWN), "light": list(light), "zoo": list(ZOO), "all": [*OWN, *light, *ZOO]}
    names = list(dict.fromkeys(m for n in want for m in groups.get(n, [n])))
    own = own_models() if any(n in OWN for n in names) else {}

    def data_of(n: str) -> bytes:
        return own[n] if n in own else light[n] if n in light else zoo_model(n, a.cache)

    catalog = {n: data_of(n) for n in names}
    print(f"onnxruntime {ort.__version__}, {os.cpu_count()} cores, load average {load_avg()}", flush=True)
    rows = []
    async with aioge.open_device(0) as dev:
        if a.profile:
            data = catalog[a.profile]
            await aioge_create(dev, data)  # warm: imports, kernel caches
            from aioge.runtime.graphs.compile import compile_graph

            pr = cProfile.Profile()  # compile_graph here: dev.compile runs it on a thread cProfile does not see
            pr.enable()
            graph = aioge.load_onnx(data)
            model = compile_graph(dev, graph)
            pr.disable()
            await model.aclose()
            pstats.Stats(pr).sort_stats("cumulative").print_stats(45)
            pstats.Stats(pr).sort_stats("tottime").print_stats(30)
            return
        for n, data in catalog.items():
            ort_create(data)  # warm up both sides (first-use imports and caches)
            await aioge_create(dev, data)
            t_ort, t_load, t_comp, c_ort, c_aioge = [], [], [], [], []
            for _ in range(a.reps):
                to, cpu_o = ort_create(data)
                t_ort.append(to)
                c_ort.append(cpu_o)
                tl, tc, cpu_a = await aioge_create(dev, data)
                t_load.append(tl)
                t_comp.append(tc)
                c_aioge.append(cpu_a)
            o = statistics.median(t_ort)
            lo, co = statistics.median(t_load), statistics.median(t_comp)
            tot = statistics.median([x + y for x, y in zip(t_load, t_comp)])
            cpu = statistics.median(c_aioge) / statistics.median(c_ort)
            rows.append((n, len(data), o, lo, co, tot, cpu))
            print(f"{n:20s} {len(data) / 1e6:7.2f} MB | ort {o * 1e3:8.1f} ms | load {lo * 1e3:8.1f} ms "
                  f"compile {co * 1e3:8.1f} ms total {tot * 1e3:8.1f} ms = {tot / o:5.2f}x "
                  f"(load {lo / o:.2f}x, compile {co / o:.2f}x; CPU {cpu:.2f}x)", flush=True)  # fmt: skip
    print()
    print(f"| {'model':20s} | MB | ort ms | load ms | compile ms | load+compile / ort | load / ort | compile / ort "
          f"| CPU / ort CPU |")  # fmt: skip
    print("|---|---|---|---|---|---|---|---|---|")
    for n, size, o, lo, co, tot, cpu in rows:
        print(f"| {n:20s} | {size / 1e6:.2f} | {o * 1e3:.1f} | {lo * 1e3:.1f} | {co * 1e3:.1f} | "
              f"{tot / o:.2f}x | {lo / o:.2f}x | {co / o:.2f}x | {cpu:.2f}x |")  # fmt: skip
    tots = [r[5] / r[2] for r in rows]
    worst = max(rows, key=lambda r: r[5] / r[2]) if rows else None
    print(f"\ngeomean load+compile / ort session creation: {geomean(tots):.2f}x [target <= 1.0x], "
          f"load {geomean([r[3] / r[2] for r in rows]):.2f}x, compile {geomean([r[4] / r[2] for r in rows]):.2f}x; "
          f"worst {worst[0] if worst else '-'} {max(tots, default=float('nan')):.2f}x [<= 2.0x]; "
          f"process CPU {geomean([r[6] for r in rows]):.2f}x")  # fmt: skip
    print(f"load average after: {load_avg()}")


def _run() -> Any:
    return asyncio.run(main())


if __name__ == "__main__":
    _run()
