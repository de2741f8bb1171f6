"""``aioge bench``: throughput and latency of a model, like ``ais_bench`` / ``trtexec``.

``--concurrency C`` clients each execute the model in a loop on a stream of
their own until ``--iterations`` executions (shared among them) or
``--duration`` seconds are done, after ``--warmup`` untimed ones.  With
``--compare-ort`` onnxruntime runs the same inputs with C threads calling
``InferenceSession.run``, in blocks alternating with aioge's (this machine's
speed drifts), and the report gives both and their ratio.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import threading
import time
from collections.abc import Callable
from typing import Any

from ._common import (
    add_compile_args,
    add_input_args,
    compile_model,
    latency_stats,
    load_model,
    make_feeds,
    non_negative_int,
    ort_session,
    parse_shapes,
    positive_float,
    positive_int,
)
from ._progress import Bar

__all__ = ("register",)


def register(sub: Any) -> None:
    p = sub.add_parser("bench", help="throughput and latency percentiles (optionally vs onnxruntime)",
                       description="Benchmark MODEL.onnx: throughput, latency mean/p50/p90/p99/max, compile time "
                                   "and arena bytes; --compare-ort gives onnxruntime's figures from the same run "
                                   "and the ratios.")  # fmt: skip
    add_input_args(p)
    add_compile_args(p)
    g = p.add_mutually_exclusive_group()
    g.add_argument("--iterations", "-n", type=positive_int, default=None, metavar="N",
                   help="timed executions in all (default 100 unless --duration)")
    g.add_argument("--duration", "-t", type=positive_float, default=None, metavar="S", help="seconds to run for")
    p.add_argument("--warmup", type=non_negative_int, default=5, metavar="N", help="untimed executions first (5)")
    p.add_argument("--concurrency", "-c", type=positive_int, default=1, metavar="C",
                   help="clients executing at once, each on its own stream (default 1)")
    p.add_argument("--compare-ort", action="store_true", help="also run onnxruntime and report the ratios")
    p.add_argument("--blocks", type=positive_int, default=None, metavar="K",
                   help="with --compare-ort: alternate K blocks of each (default 3)")
    p.add_argument("--trace", metavar="FILE.json", default=None,
                   help="after the timed run, trace --trace-iterations more executions into a Chrome trace")
    p.add_argument("--trace-iterations", type=positive_int, default=20, metavar="N", help="(default 20)")
    p.add_argument("--progress", action=argparse.BooleanOptionalAction, default=None,
                   help="force the progress bar on or off (default: on when stdout is a terminal)")
    p.add_argument("--json", action="store_true", help="print one JSON object")
    p.set_defaults(func=run)


class _Budget:
    """Executions left to start (an iteration count) or a deadline; shared by the clients of a block."""

    def __init__(self, iterations: int | None, seconds: float | None, bar: Bar | _Ticker) -> None:
        self.left = iterations
        self.deadline = time.perf_counter() + seconds if seconds is not None else None
        self.bar = bar
        self.lock = threading.Lock()

    def take(self) -> bool:
        with self.lock:
            if self.left is not None:
                if self.left <= 0:
                    return False
                self.left -= 1
                return True
        assert self.deadline is not None
        return time.perf_counter() < self.deadline


def _blocks(args: argparse.Namespace) -> list[tuple[int | None, float | None]]:
    """The (iterations, seconds) of each block."""
    k = (args.blocks or 3) if args.compare_ort else 1
    if args.duration is not None:
        return [(None, args.duration / k)] * k
    n = args.iterations if args.iterations is not None else 100
    k = min(k, n)
    return [(n // k + (1 if i < n % k else 0), None) for i in range(k)]


async def _aioge_block(model: Any, streams: list[Any], feeds: dict[str, Any], budget: _Budget,
                       lat: list[float]) -> float:  # fmt: skip
    turns = len(streams) > 1

    async def client(stream: Any) -> None:
        while budget.take():
            t = time.perf_counter()
            await model.execute(feeds, stream=stream)
            lat.append(time.perf_counter() - t)
            budget.bar.update(1)
            if turns:  # an execution that completed without suspending must not starve the other clients
                await asyncio.sleep(0)

    t0 = time.perf_counter()
    await asyncio.gather(*(client(s) for s in streams))
    return time.perf_counter() - t0


def _ort_block(sess: Any, concurrency: int, feeds: dict[str, Any], budget: _Budget, lat: list[float]) -> float:
    names = [o.name for o in sess.get_outputs()]

    def client() -> None:
        while budget.take():
            t = time.perf_counter()
            sess.run(names, feeds)
            lat.append(time.perf_counter() - t)
            budget.bar.update(1)

    t0 = time.perf_counter()
    threads = [threading.Thread(target=client, name=f"aioge-bench-ort-{i}") for i in range(concurrency)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    return time.perf_counter() - t0


def _figures(lat: list[float], seconds: float, batch: int) -> dict[str, Any]:
    n = len(lat)
    return {"iterations": n, "seconds": seconds, "throughput": n / seconds if seconds else 0.0,
            "samples_per_s": n * batch / seconds if seconds else 0.0, "latency_ms": latency_stats(lat)}  # fmt: skip


async def _bench(args: argparse.Namespace, loaded: Any, sess: Any) -> dict[str, Any]:
    import aioge

    blocks = _blocks(args)
    total = sum(n or 0 for n, _ in blocks) if args.duration is None else None
    async with aioge.open_device(args.device) as dev:
        model, compile_s = await compile_model(dev, loaded, args, show=args.progress)
        async with model:
            feeds = make_feeds(model.inputs, args.input, args.seed)
            first = next(iter(model.inputs.values()), None)
            batch = int(first[0][0]) if first is not None and first[0] else 1
            streams = [dev.open_stream() for _ in range(args.concurrency)]
            try:
                for i in range(args.warmup):
                    await model.execute(feeds, stream=streams[i % len(streams)])
                if sess is not None:
                    warm = _Budget(args.warmup, None, Bar(None, "", show=False))
                    await asyncio.to_thread(_ort_block, sess, args.concurrency, feeds, warm, [])
                a_lat: list[float] = []
                o_lat: list[float] = []
                a_s = o_s = 0.0
                label = "bench" if sess is None else "bench (aioge | onnxruntime)"
                runs = 2 if sess is not None else 1
                span, unit = (total * runs, "it") if total else (args.duration * runs, "s")
                with Bar(span, label, unit=unit, show=args.progress) as bar:
                    timer = _Ticker(bar) if not total else None
                    for n, sec in blocks:
                        a_s += await _aioge_block(model, streams, feeds, _Budget(n, sec, timer or bar), a_lat)
                        if sess is not None:
                            budget = _Budget(n, sec, timer or bar)
                            o_s += await asyncio.to_thread(_ort_block, sess, args.concurrency, feeds, budget, o_lat)
                traced = None
                if args.trace:
                    traced = await _trace(model, streams, feeds, args.trace_iterations, args.trace)
            finally:
                for s in streams:
                    await s.aclose()
            stats = dict(model.stats)
            report: dict[str, Any] = {
                "model": args.model, "backend": dev.backend, "mode": model.mode,
                "streams": model.plan.num_streams, "batch_size": batch, "concurrency": args.concurrency,
                "warmup": args.warmup, "blocks": len(blocks),
                "requested": {"iterations": args.iterations if args.duration is None else None,
                              "duration_s": args.duration},
                "load_s": loaded.load_s, "compile_s": compile_s,
                "arena_bytes": model.plan.arena_bytes, "arena_total_bytes": model._build.total_arena,
                "max_live_bytes": model.plan.max_live_bytes, "arenas": stats["arenas"],
                "aioge": _figures(a_lat, a_s, batch),
            }  # fmt: skip
    if sess is not None:
        report["onnxruntime"] = _figures(o_lat, o_s, report["batch_size"])
        a, o = report["aioge"], report["onnxruntime"]
        report["ratio"] = {
            "throughput": a["throughput"] / o["throughput"] if o["throughput"] else None,
            "latency_p50": a["latency_ms"]["p50"] / o["latency_ms"]["p50"] if o["latency_ms"]["p50"] else None,
            "latency_p99": a["latency_ms"]["p99"] / o["latency_ms"]["p99"] if o["latency_ms"]["p99"] else None,
        }
    if traced is not None:
        report["trace"] = traced
    return report


class _Ticker:
    """Progress by elapsed time (--duration): the bar's unit is seconds."""

    def __init__(self, bar: Bar) -> None:
        self.bar = bar
        self.t0 = time.perf_counter()
        self.lock = threading.Lock()

    def update(self, n: float = 1) -> None:
        self.bar.set(time.perf_counter() - self.t0)


async def _trace(model: Any, streams: list[Any], feeds: dict[str, Any], n: int, path: str) -> dict[str, Any]:
    import aioge

    budget = _Budget(n, None, Bar(None, "", show=False))
    async with aioge.profile() as prof:
        await _aioge_block(model, streams, feeds, budget, [])
    prof.export_chrome_trace(path)
    return {"path": path, "launches": len(prof.completed()), "executions": len(prof.executions)}


def run(args: argparse.Namespace) -> int:
    loaded = load_model(args.model, parse_shapes(args.shape), args.batch_size)
    sess = ort_session(loaded.proto) if args.compare_ort else None
    report = asyncio.run(_bench(args, loaded, sess))
    if args.json:
        print(json.dumps(report, indent=2))
        return 0
    _print(report)
    return 0


def _row(name: str, f: dict[str, Any], unit: Callable[[float], str]) -> str:
    lat = f["latency_ms"]
    return (f"{name:<12} {f['throughput']:>10.1f}/s {unit(lat['mean']):>9} {unit(lat['p50']):>9} "
            f"{unit(lat['p90']):>9} {unit(lat['p99']):>9} {unit(lat['max']):>9}  ({f['iterations']} in "
            f"{f['seconds']:.2f} s)")  # fmt: skip


def _print(r: dict[str, Any]) -> None:
    def ms(x: float) -> str:
        return f"{x:.3f}ms" if x < 100 else f"{x:.1f}ms"

    print(f"{r['model']}: {r['backend']} backend, {r['mode']}, {r['streams']} stream(s), batch {r['batch_size']}, "
          f"concurrency {r['concurrency']}")  # fmt: skip
    print(f"compile {r['compile_s'] * 1e3:.1f} ms (ONNX import {r['load_s'] * 1e3:.1f} ms); arena "
          f"{r['arena_bytes']:,} B ({r['arena_total_bytes']:,} B with scratch, max live {r['max_live_bytes']:,} B), "
          f"{r['arenas']} arena(s) leased")  # fmt: skip
    print(f"{'':<12} {'throughput':>12} {'mean':>9} {'p50':>9} {'p90':>9} {'p99':>9} {'max':>9}")
    print(_row("aioge", r["aioge"], ms))
    if "onnxruntime" in r:
        print(_row("onnxruntime", r["onnxruntime"], ms))
        q = r["ratio"]
        print(f"ratio aioge/onnxruntime: throughput {q['throughput']:.2f}x, latency p50 {q['latency_p50']:.2f}x, "
              f"p99 {q['latency_p99']:.2f}x  ({r['blocks']} alternating blocks each)")  # fmt: skip
    if "trace" in r:
        t = r["trace"]
        print(f"trace: {t['path']} ({t['launches']} launches, {t['executions']} executions)")
