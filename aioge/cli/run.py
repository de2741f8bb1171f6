"""``aioge run``: compile a model, run it once, summarise (and check) its outputs."""

from __future__ import annotations

import argparse
import asyncio
import json
import os
from typing import Any

import numpy as np

from ._common import add_compile_args, add_input_args, compile_model, load_model, make_feeds, ort_session, parse_shapes

__all__ = ("compare", "register", "summarize")


def register(sub: Any) -> None:
    p = sub.add_parser("run", help="run a model once on given or random inputs",
                       description="Compile MODEL.onnx, run it once (random inputs of the right shape and "
                                   "dtype unless given) and print each output's name, shape, dtype and a "
                                   "summary.")  # fmt: skip
    add_input_args(p)
    add_compile_args(p)
    p.add_argument("--output-dir", metavar="D", help="save every output as D/NAME.npy")
    p.add_argument("--compare-ort", action="store_true",
                   help="run onnxruntime on the same inputs and print the max abs/rel error of each output; "
                        "exit status 1 if one exceeds --atol + --rtol * |expected|")  # fmt: skip
    p.add_argument("--rtol", type=float, default=1e-3, help="relative tolerance for --compare-ort (default 1e-3)")
    p.add_argument("--atol", type=float, default=1e-4, help="absolute tolerance for --compare-ort (default 1e-4)")
    p.add_argument("--json", action="store_true", help="print one JSON object")
    p.set_defaults(func=run)


def summarize(name: str, a: np.ndarray) -> dict[str, Any]:
    out: dict[str, Any] = {"name": name, "shape": list(a.shape), "dtype": str(a.dtype)}
    if a.size and a.dtype.kind in "fiub":
        f = a.astype(np.float64)
        finite = np.isfinite(f)
        vals = f[finite] if finite.any() else f
        out.update(min=float(vals.min()), max=float(vals.max()), mean=float(vals.mean()), std=float(vals.std()),
                   nonfinite=int((~finite).sum()), head=[float(v) for v in f.ravel()[:5]])  # fmt: skip
    return out


def compare(got: dict[str, np.ndarray], want: dict[str, np.ndarray], rtol: float, atol: float) -> dict[str, Any]:
    """Per output: max abs error, max rel error (|d| / max(|want|, atol)), and whether within tolerance."""
    res: dict[str, Any] = {}
    for name, w in want.items():
        g = got[name]
        if g.shape != w.shape:
            res[name] = {"ok": False, "error": f"shape {g.shape} vs onnxruntime's {w.shape}"}
            continue
        gf, wf = g.astype(np.float64), np.asarray(w).astype(np.float64)
        d = np.abs(gf - wf)
        d[np.isnan(gf) & np.isnan(wf)] = 0.0
        ok = bool(np.all(d <= atol + rtol * np.abs(wf))) if d.size else True
        res[name] = {"max_abs_err": float(d.max()) if d.size else 0.0,
                     "max_rel_err": float((d / np.maximum(np.abs(wf), atol)).max()) if d.size else 0.0,
                     "ok": ok}  # fmt: skip
    return res


async def _execute(args: argparse.Namespace, loaded: Any) -> tuple[dict[str, np.ndarray], dict[str, Any], float]:
    import aioge

    async with aioge.open_device(args.device) as dev:
        model, compile_s = await compile_model(dev, loaded, args)
        async with model:
            feeds = make_feeds(model.inputs, args.input, args.seed)
            outs = await model.execute(feeds)
            info = {"mode": model.mode, "streams": model.plan.num_streams, "arena_bytes": model.plan.arena_bytes}
    return outs, {"feeds": feeds, **info}, compile_s


def run(args: argparse.Namespace) -> int:
    loaded = load_model(args.model, parse_shapes(args.shape), args.batch_size)
    outs, info, compile_s = asyncio.run(_execute(args, loaded))
    feeds = info.pop("feeds")
    report: dict[str, Any] = {"model": args.model, "backend": _backend(), "load_s": loaded.load_s,
                              "compile_s": compile_s, **info,
                              "inputs": [{"name": n, "shape": list(a.shape), "dtype": str(a.dtype)}
                                         for n, a in feeds.items()],
                              "outputs": [summarize(n, a) for n, a in outs.items()]}  # fmt: skip
    status = 0
    if args.compare_ort:
        sess = ort_session(loaded.proto)
        names = [o.name for o in sess.get_outputs()]
        want = dict(zip(names, sess.run(names, feeds)))
        report["compare_ort"] = compare(outs, want, args.rtol, args.atol)
        status = 0 if all(r["ok"] for r in report["compare_ort"].values()) else 1
    if args.output_dir:
        os.makedirs(args.output_dir, exist_ok=True)
        for name, a in outs.items():
            np.save(os.path.join(args.output_dir, _safe(name) + ".npy"), a)
        report["output_dir"] = args.output_dir
    if args.json:
        print(json.dumps(report, indent=2))
        return status
    print(f"{args.model}: {report['mode']}, {report['streams']} stream(s), compiled in {compile_s * 1e3:.1f} ms")
    for o in report["outputs"]:
        line = f"  {o['name']}: {o['dtype']}{o['shape']}"
        if "min" in o:
            line += (f"  min {o['min']:.6g}  max {o['max']:.6g}  mean {o['mean']:.6g}  std {o['std']:.6g}"
                     + (f"  ({o['nonfinite']} non-finite)" if o["nonfinite"] else ""))  # fmt: skip
        print(line)
    if args.compare_ort:
        for name, r in report["compare_ort"].items():
            if "error" in r:
                print(f"  vs onnxruntime {name}: MISMATCH ({r['error']})")
            else:
                verdict = "ok" if r["ok"] else "MISMATCH"
                print(f"  vs onnxruntime {name}: max abs err {r['max_abs_err']:.3g}, "
                      f"max rel err {r['max_rel_err']:.3g}  {verdict}")  # fmt: skip
    if args.output_dir:
        print(f"  saved to {args.output_dir}/")
    return status


def _safe(name: str) -> str:
    return "".join(c if c.isalnum() or c in "-_." else "_" for c in name) or "output"


def _backend() -> str:
    from aioge import _native

    return _native.backend
