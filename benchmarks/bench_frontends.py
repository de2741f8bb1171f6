"""PyTorch front ends: aioge (``from_torch``) vs torch eager vs torch.compile (inductor) vs onnxruntime, one run.

    python benchmarks/bench_frontends.py [--models resnet18,bert,...] [--blocks 6] [--reps 5] [--no-inductor]

For each model of tests/frontends/zoo.py (random weights, small inputs): latency
of aioge on the ``from_torch`` graph (``await model.execute`` with torch tensors
in and out), torch eager CPU (``inference_mode``), ``torch.compile`` with the
default inductor backend, and onnxruntime on the legacy ``torch.onnx.export``
of the same module; then the time to get there: ``from_torch`` + ``dev.compile``
against ``torch.onnx.export`` + ORT session creation.  Latencies are medians
over ``--blocks`` alternating blocks of ``--reps`` runs of each engine (this
machine's speed drifts over seconds); aioge's workers run at nice 0 like the
other engines (``AIOGE_HOST_WORKER_NICE`` overrides); each block starts after a
short pause, so that the thread pools of the engine before (onnxruntime's and
OpenMP's spin-waiting workers) have gone to sleep instead of competing with it.
``aioge dev ms`` is the median device time of the sunk graph per execution (from
``aioge.profile``): the kernels' share of ``aioge ms``, the rest being the host
cost of ``execute()`` (feeds, launch, completion, copies out).  Targets: aioge
geomean <= 1.0x onnxruntime and <= 0.8x torch eager.
"""

from __future__ import annotations

import argparse
import asyncio
import io
import math
import os
import statistics
import sys
import time
import warnings
from collections.abc import Callable
from typing import Any

import onnxruntime as ort
import torch

# every engine at the same priority (aioge's workers default to nice 10 so that an event loop
# preempts them; on a machine shared with other load that would starve aioge alone)
os.environ.setdefault("AIOGE_HOST_WORKER_NICE", "0")
sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "tests", "frontends"))
import zoo

import aioge


class _Flat(torch.nn.Module):
    def __init__(self, m: torch.nn.Module) -> None:
        super().__init__()
        self.m = m

    def forward(self, *args: torch.Tensor) -> tuple[torch.Tensor, ...]:
        import torch.utils._pytree as pytree

        return tuple(t for t in pytree.tree_leaves(self.m(*args)) if isinstance(t, torch.Tensor))


def export_onnx(m: torch.nn.Module, args: tuple[Any, ...]) -> bytes:
    """``m`` exported with the legacy exporter at opset 17 (inputs ``in0``, ``in1``, ...), the dynamo
    exporter where the legacy one refuses."""
    buf = io.BytesIO()
    names = [f"in{i}" for i in range(len(args))]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            torch.onnx.export(_Flat(m).eval(), args, buf, dynamo=False, opset_version=17, input_names=names)
            return buf.getvalue()
        except torch.onnx.errors.UnsupportedOperatorError:  # GPT-2: the legacy exporter has no aten::diff
            proto = torch.onnx.export(_Flat(m).eval(), args, dynamo=True, input_names=names).model_proto
            return bytes(proto.SerializeToString())


def onnx_session(m: torch.nn.Module, args: tuple[Any, ...]) -> tuple[ort.InferenceSession, float]:
    t0 = time.perf_counter()
    data = export_onnx(m, args)
    so = ort.SessionOptions()
    so.intra_op_num_threads = os.cpu_count() or 1
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    sess = ort.InferenceSession(data, so, providers=["CPUExecutionProvider"])
    return sess, time.perf_counter() - t0


def _time(fn: Callable[[], Any], reps: int) -> list[float]:
    out = []
    for _ in range(reps):
        t0 = time.perf_counter()
        fn()
        out.append(time.perf_counter() - t0)
    return out


async def bench(dev: aioge.Device, name: str, blocks: int, reps: int, inductor: bool) -> dict[str, float]:
    m, args, refs = zoo.build(name)
    row: dict[str, float] = {}
    t0 = time.perf_counter()
    graph = aioge.from_torch(m, args)
    model = await dev.compile(graph)
    row["t_aioge"] = time.perf_counter() - t0
    feeds = dict(zip(graph.inputs, args))
    out = await model.execute(feeds, as_torch=True)
    row["diff"] = max(float((o - r).abs().max()) for o, r in zip(out.values(), refs))
    try:
        sess, row["t_ort"] = onnx_session(m, args)
        ort_feeds = {f"in{i}": a.numpy() for i, a in enumerate(args)}
    except Exception as e:  # e.g. GPT-2: the legacy exporter has no aten::diff
        print(f"  {name}: no ONNX export ({type(e).__name__}: {str(e)[:80]})", flush=True)
        sess = None
    compiled = None
    if inductor:
        torch._dynamo.reset()
        compiled = torch.compile(m)
        with torch.inference_mode():
            t1 = time.perf_counter()
            compiled(*args)
            row["t_inductor"] = time.perf_counter() - t1

    def eager() -> None:
        with torch.inference_mode():
            m(*args)

    def induct() -> None:
        with torch.inference_mode():
            compiled(*args)

    engines: dict[str, Callable[[], Any]] = {"eager": eager}
    if compiled is not None:
        engines["inductor"] = induct
    if sess is not None:
        engines["ort"] = lambda: sess.run(None, ort_feeds)
    times: dict[str, list[float]] = {k: [] for k in ["aioge", *engines]}
    for fn in engines.values():  # warm up
        fn()
    for _ in range(3):
        await model.execute(feeds, as_torch=True)
    for _ in range(blocks):
        await asyncio.sleep(_PAUSE)
        for _ in range(reps):
            t1 = time.perf_counter()
            await model.execute(feeds, as_torch=True)
            times["aioge"].append(time.perf_counter() - t1)
        for k, fn in engines.items():
            await asyncio.sleep(_PAUSE)
            times[k].extend(_time(fn, reps))
    for k, ts in times.items():
        row[k] = statistics.median(ts) * 1e3
    async with aioge.profile() as prof:
        for _ in range(reps):
            await model.execute(feeds, as_torch=True)
    dev_ms = [x.device_ms for x in prof.completed() if x.kind == "graph" and x.device_ms is not None]
    row["aioge_dev"] = statistics.median(dev_ms) if dev_ms else float("nan")
    await model.aclose()
    torch._dynamo.reset()
    return row


#: seconds between timing blocks (spin-waiting worker threads of the previous engine go idle)
_PAUSE = 0.05


def _geo(xs: list[float]) -> float:
    return math.exp(sum(math.log(x) for x in xs) / len(xs)) if xs else float("nan")


async def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--models", default=",".join(zoo.MODELS))
    ap.add_argument("--blocks", type=int, default=6)
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--no-inductor", action="store_true")
    a = ap.parse_args()
    names = [n for n in a.models.split(",") if n]
    print(f"torch {torch.__version__}, onnxruntime {ort.__version__}, {os.cpu_count()} cores, "
          f"torch threads {torch.get_num_threads()}, load average {os.getloadavg()[0]:.1f}", flush=True)  # fmt: skip
    rows: dict[str, dict[str, float]] = {}
    async with aioge.open_device(0) as dev:
        for n in names:
            rows[n] = await bench(dev, n, a.blocks, a.reps, not a.no_inductor)
            r = rows[n]
            print(f"  {n}: aioge {r['aioge']:.2f} ms, eager {r['eager']:.2f} ms, "
                  f"ort {r.get('ort', float('nan')):.2f} ms, max diff {r['diff']:.1e}", flush=True)  # fmt: skip

    def f(v: float | None, fmt: str = "{:.2f}") -> str:
        return "-" if v is None or (isinstance(v, float) and math.isnan(v)) else fmt.format(v)

    head = ("model", "aioge ms", "aioge dev ms", "eager ms", "inductor ms", "ORT ms", "/ORT", "/eager", "/inductor",
            "aioge conv+compile s", "export+ORT s", "inductor 1st call s")  # fmt: skip
    print("\n| " + " | ".join(head) + " |\n|" + "---|" * len(head))
    ratios: dict[str, list[float]] = {"ort": [], "eager": [], "inductor": []}
    for n, r in rows.items():
        cells = [n, f(r["aioge"]), f(r["aioge_dev"], "{:.3f}"), f(r["eager"]), f(r.get("inductor")), f(r.get("ort"))]
        for k in ("ort", "eager", "inductor"):
            if k in r:
                ratios[k].append(r["aioge"] / r[k])
            cells.append(f(r["aioge"] / r[k] if k in r else None, "{:.2f}x"))
        cells += [f(r["t_aioge"]), f(r.get("t_ort")), f(r.get("t_inductor"))]
        print("| " + " | ".join(cells) + " |")
    print(f"| **geomean** | | | | | | {_geo(ratios['ort']):.2f}x | {_geo(ratios['eager']):.2f}x | "
          f"{_geo(ratios['inductor']):.2f}x | | | |")  # fmt: skip
    print(f"\ntargets: aioge <= 1.0x onnxruntime ({'met' if _geo(ratios['ort']) <= 1.0 else 'NOT met'}), "
          f"<= 0.8x torch eager ({'met' if _geo(ratios['eager']) <= 0.8 else 'NOT met'})")  # fmt: skip


if __name__ == "__main__":
    asyncio.run(main())
