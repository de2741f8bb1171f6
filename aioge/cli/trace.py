"""``aioge trace``: a Chrome/Perfetto trace of a model's executions (and a timeline picture)."""

from __future__ import annotations

import argparse
import asyncio
import json
from typing import Any

from ._common import (
    add_compile_args,
    add_input_args,
    compile_model,
    load_model,
    make_feeds,
    non_negative_int,
    parse_shapes,
    positive_int,
)

__all__ = ("register",)


def register(sub: Any) -> None:
    p = sub.add_parser("trace", help="a Chrome/Perfetto trace of executions (--plot: a timeline PNG)",
                       description="Execute MODEL.onnx under aioge.profile() and write the trace (Trace Event "
                                   "Format: open it in Perfetto or chrome://tracing): one track per stream, graph "
                                   "nodes inside their segments, arrows for cross-stream waits.")  # fmt: skip
    add_input_args(p)
    add_compile_args(p)
    p.add_argument("-o", "--output", required=True, metavar="TRACE.json", help="where to write the trace")
    p.add_argument("--plot", metavar="TIMELINE.png", help="also draw a timeline, one lane per stream (matplotlib)")
    p.add_argument("--iterations", "-n", type=positive_int, default=10, metavar="N",
                   help="traced executions in all (default 10)")
    p.add_argument("--concurrency", "-c", type=positive_int, default=1, metavar="C",
                   help="clients executing at once, each on its own stream (default 1)")
    p.add_argument("--warmup", type=non_negative_int, default=3, metavar="N", help="untraced executions first (3)")
    p.add_argument("--no-node-times", action="store_true", help="do not time the nodes inside sunk segments")
    p.add_argument("--top", type=positive_int, default=15, metavar="K", help="rows of the per-op table (15)")
    p.add_argument("--json", action="store_true", help="print a JSON summary instead of the table")
    p.set_defaults(func=run)


async def _trace(args: argparse.Namespace, loaded: Any) -> tuple[Any, dict[str, Any]]:
    import aioge

    async with aioge.open_device(args.device) as dev:
        model, compile_s = await compile_model(dev, loaded, args)
        async with model:
            feeds = make_feeds(model.inputs, args.input, args.seed)
            streams = [dev.open_stream() for _ in range(args.concurrency)]
            try:
                for i in range(args.warmup):
                    await model.execute(feeds, stream=streams[i % len(streams)])
                c = len(streams)

                async def client(i: int) -> None:  # a fixed share each, so every client's stream shows
                    for _ in range(args.iterations // c + (1 if i < args.iterations % c else 0)):
                        await model.execute(feeds, stream=streams[i])

                async with aioge.profile(node_times=not args.no_node_times) as prof:
                    await asyncio.gather(*(client(i) for i in range(c)))
            finally:
                for s in streams:
                    await s.aclose()
            info = {"mode": model.mode, "streams": model.plan.num_streams, "compile_s": compile_s}
    return prof, info


def run(args: argparse.Namespace) -> int:
    from ._plot import need_matplotlib, plot_timeline

    if args.plot:
        need_matplotlib()
    loaded = load_model(args.model, parse_shapes(args.shape), args.batch_size)
    prof, info = asyncio.run(_trace(args, loaded))
    trace = prof.chrome_trace()
    try:
        with open(args.output, "w", encoding="utf-8") as f:
            json.dump(trace, f, separators=(",", ":"))
    except OSError as e:
        from ._common import CliError

        raise CliError(f"cannot write {args.output}: {e.strerror or e}") from None
    if args.plot:
        plot_timeline(trace, args.plot, title=f"{loaded.name}: {args.iterations} executions, concurrency "
                                              f"{args.concurrency} ({info['mode']}, {info['streams']} plan stream(s))")
    done = prof.completed()
    tracks = {(r.device, r.stream) for r in done}
    waits = sum(len(r.waits_for) for r in done)
    summary = {"trace": args.output, "plot": args.plot, "launches": len(done), "tracks": len(tracks),
               "executions": len(prof.executions), "cross_stream_waits": waits, **info,
               "key_averages": [{"name": r.name, "kind": r.kind, "calls": r.calls, "total_ms": r.total_ms,
                                 "avg_ms": r.avg_ms, "percent": r.percent} for r in prof.key_averages()]}  # fmt: skip
    if args.json:
        print(json.dumps(summary, indent=2))
        return 0
    print(prof.key_averages().table(row_limit=args.top))
    print(f"{args.output}: {len(done)} launches on {len(tracks)} stream(s), {len(prof.executions)} executions, "
          f"{waits} cross-stream waits" + (f"; timeline: {args.plot}" if args.plot else ""))  # fmt: skip
    return 0
