"""Graph benchmark: aioge (sunk graphs on the host runtime) against onnxruntime CPU, one run.

    python benchmarks/bench_graph.py [--quick] [--models own|light|all|NAME,...] [--ort-spin on|off|both]

Models: our own (tests/graph/models.py: mlp, residual_cnn, inception,
attention), the ``light`` models inside the onnx wheel
(onnx/backend/test/data/light: alexnet, densenet121, inception_v1/v2,
resnet50, shufflenet, squeezenet, vgg19, zfnet512; their final Softmax is
dropped as in tests/graph/onnx_backend.py) and ``tv``: torchvision's
resnet18, resnet50, mobilenet_v2, mobilenet_v3_small, efficientnet_b0,
squeezenet1_1, googlenet, densenet121 and convnext_tiny with random weights
(batch norms calibrated as tests/frontends/zoo.py does), exported with
``torch.onnx.export`` as bench_frontends.py does, batch 1, ``--image-size`` pixels
square (default 224; the exports are cached in the temp dir).  ``--models
light``, ``tv`` or a list such as ``--models squeezenet,tv_resnet18`` picks a
subset; each group's geometric mean is printed too.

For each model: the max difference of the outputs, latency aioge /
onnxruntime (target <= 1.0x geomean, none above 1.3x), compile (load +
optimise + plan + load) vs onnxruntime session creation (target <= 1.0x
geomean), throughput of 8 concurrent clients vs onnxruntime called from a
thread pool in the same asyncio program, and arena peak vs the max-live
lower bound (target <= 1.1x).  onnxruntime is measured with its pool
threads spinning (its default) and without (``session.intra_op.allow_spinning
= 0``); ``--ort-spin both`` (the default) reports both ratios, the
BENCH_ORT_NO_SPIN environment variable alone selects ``off``.

    python benchmarks/bench_graph.py --matmul [--quick] [--cpu] [--ms 1,8,32,64,128,512] [--kn 784x512,3072x768]

A single MatMul with a constant B and the MLP 784-512-512-10 at batch 1 and 64: aioge time /
onnxruntime time (default options, spinning) in one process, alternating blocks; each model is
compiled twice, with its weights packed once at load (the default) and without (the kernels pack B
on every call), so the table also shows what packing gains; in braces the host runtime's product
alone (below) on the same threads, and the share of the packed runs' pool chunks that the pool's
helper threads ran (near 0 with two threads: the caller did the product alone, the helper was not
on a core in time).  ``--cpu``: one thread each (AIOGE_HOST_THREADS=1,
onnxruntime intra_op 1), process CPU time per call, best of alternating blocks -- the kernels
compared where wall clock on a loaded machine mostly measures which thread got a core. In brackets, the
host runtime's product alone (hrt_sgemm_packed called directly on the packed B, no graph around
it) against the same onnxruntime time: the gap between the two ratios is the graph's per-call cost.
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
from onnx_backend import light_cases

import aioge

#: torchvision models of the ``tv`` group: name -> constructor keywords
TV = {"resnet18": {}, "resnet50": {}, "mobilenet_v2": {}, "mobilenet_v3_small": {}, "efficientnet_b0": {},
      "squeezenet1_1": {}, "googlenet": {"aux_logits": False, "init_weights": True}, "densenet121": {},
      "convnext_tiny": {}}  # fmt: skip


def tv_models(size: int) -> dict[str, tuple[object, dict[str, np.ndarray]]]:
    """``tv_<name>`` -> (model, feeds) for the torchvision exports (made once, cached in the temp dir)."""
    import tempfile

    import onnx

    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "tests", "frontends"))
    out = {}
    x = np.random.default_rng(1).standard_normal((1, 3, size, size)).astype(np.float32)
    for name, kw in TV.items():
        path = os.path.join(tempfile.gettempdir(), f"aioge_bench_graph_{name}_{size}.onnx")
        if not os.path.exists(path):
            import zoo
            from bench_frontends import export_onnx

            m, args = zoo._tv(name, size, **kw)()
            with open(path + ".tmp", "wb") as f:
                f.write(export_onnx(m, args))
            os.replace(path + ".tmp", path)
        out[f"tv_{name}"] = (onnx.load(path), {"in0": x})
    return out


def ort_session(model_bytes: bytes, spin: bool) -> ort.InferenceSession:
    so = ort.SessionOptions()
    so.intra_op_num_threads = os.cpu_count() or 1
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    if not spin:
        so.add_session_config_entry("session.intra_op.allow_spinning", "0")
    return ort.InferenceSession(model_bytes, so, providers=["CPUExecutionProvider"])


def light_models() -> dict[str, tuple[object, dict[str, np.ndarray]]]:
    """name -> (model, feeds) for the onnx wheel's light models (final Softmax dropped)."""
    out = {}
    for case in light_cases():
        inits = {t.name for t in case.model.graph.initializer}
        names = [vi.name for vi in case.model.graph.input if vi.name not in inits]
        out[case.name.removeprefix("light_").removeprefix("bvlc_")] = (case.model, dict(zip(names, case.inputs)))
    return out


async def bench_model(dev, name: str, proto, feeds, reps: int, clients: int, per_client: int,
                      spins: tuple[bool, ...], budget_s: float) -> dict[str, float]:  # fmt: skip
    data = proto.SerializeToString()

    sessions, t_ort_create = {}, {}
    for spin in spins:
        t0 = time.perf_counter()
        sessions[spin] = ort_session(data, spin)
        t_ort_create[spin] = time.perf_counter() - t0
    sess = sessions[spins[0]]
    t0 = time.perf_counter()
    graph = aioge.load_onnx(data)
    model = await dev.compile(graph)
    t_compile = time.perf_counter() - t0

    ref = sess.run(None, feeds)
    out = await model.execute(feeds)
    diff = max(float(np.max(np.abs(np.asarray(out[n]) - r))) for n, r in zip(model.outputs, ref))

    t0 = time.perf_counter()
    for s in sessions.values():  # warm up all
        s.run(None, feeds)
    await model.execute(feeds)
    one = (time.perf_counter() - t0) / (len(sessions) + 1)
    # the big models (vgg19: ~20 GFLOP) get fewer repetitions: ~budget_s per side
    blocks = 6  # this VM's speed drifts over seconds: many short alternating blocks share the drift
    per_block = max(1, min(reps // blocks, int(budget_s / blocks / max(one, 1e-6))))
    t_ort: dict[bool, list[float]] = {spin: [] for spin in sessions}
    t_aioge: list[float] = []
    # alternate blocks (not single runs): onnxruntime's pool threads spin for a
    # while after each run and would slow whatever runs right after them
    for _ in range(blocks):
        for spin, s in sessions.items():
            for _ in range(per_block):
                t0 = time.perf_counter()
                s.run(None, feeds)
                t_ort[spin].append(time.perf_counter() - t0)
            await asyncio.sleep(0.05)
        for _ in range(per_block):
            t0 = time.perf_counter()
            await model.execute(feeds)
            t_aioge.append(time.perf_counter() - t0)
        await asyncio.sleep(0.05)
    lat_ort_all = {spin: statistics.median(v) for spin, v in t_ort.items()}
    lat_ort, lat_aioge = lat_ort_all[spins[0]], statistics.median(t_aioge)

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
        "spin_ratios": {spin: lat_aioge / v for spin, v in lat_ort_all.items()},
        "lat_ort_spin_ms": {spin: v * 1e3 for spin, v in lat_ort_all.items()},
        "compile_ratio": t_compile / t_ort_create[spins[0]],
        "diff": diff,
        "lat_aioge_ms": lat_aioge * 1e3,
        "lat_ort_ms": lat_ort * 1e3,
        "lat_ratio": lat_aioge / lat_ort,
        "compile_s": t_compile,
        "ort_create_s": t_ort_create[spins[0]],
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


def geomean(xs: list[float]) -> float:
    return math.exp(sum(math.log(x) for x in xs) / len(xs)) if xs else float("nan")


def _matmul_model(m: int, k: int, n: int) -> tuple[object, dict[str, np.ndarray]]:
    from onnx import TensorProto, helper, numpy_helper

    rng = np.random.default_rng(0)
    w = numpy_helper.from_array((rng.standard_normal((k, n)) / np.sqrt(k)).astype(np.float32), "w")
    g = helper.make_graph([helper.make_node("MatMul", ["x", "w"], ["y"])], "matmul",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, [m, k])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [m, n])], [w])  # fmt: skip
    proto = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    return proto, {"x": rng.standard_normal((m, k)).astype(np.float32)}


def _pool_stats() -> tuple[int, int, int, int] | None:
    """The host runtime's pool counters (hrt_pool_stats: jobs, chunks, chunks run by the helpers,
    jobs that woke a sleeping helper), or None on another backend."""
    import ctypes

    from aioge import _native

    if _native.backend != "host":
        return None
    out = (ctypes.c_int64 * 4)()
    ctypes.CDLL(_native.library_path).hrt_pool_stats(out)
    return out[0], out[1], out[2], out[3]


async def bench_packed(dev, proto, feeds, budget_s: float, alone=None) -> tuple[float, float, float, float, float]:
    """Median seconds of (aioge with weights packed at load, aioge packing per call, onnxruntime,
    ``alone``: a fourth callable such as the product without the graph, nan without one), and the
    share of the packed runs' pool chunks that the pool's helper threads ran (nan: not known)."""
    from aioge.runtime.graphs import executable as ex

    sess = ort_session(proto.SerializeToString(), True)
    models = []
    for pack in (True, False):
        ex._PACK_WEIGHTS = pack
        try:
            models.append(await dev.compile(aioge.load_onnx(proto.SerializeToString())))
        finally:
            ex._PACK_WEIGHTS = True
    ref = sess.run(None, feeds)[0]
    for md in models:
        out = np.asarray(next(iter((await md.execute(feeds)).values())))
        assert np.allclose(out, ref, rtol=1e-3, atol=1e-3), float(np.max(np.abs(out - ref)))
    t0 = time.perf_counter()
    sess.run(None, feeds)
    await models[0].execute(feeds)
    one = (time.perf_counter() - t0) / 2
    blocks = 9
    sides = 4 if alone else 3
    per_block = max(10, int(budget_s / sides / blocks / max(one, 1e-6)))
    times: list[list[float]] = [[], [], [], []]
    chunks = helped = 0
    for blk in range(blocks):
        # the order rotates: whichever side runs right after onnxruntime meets its pool threads still
        # spinning, so each side takes that place equally often
        for side in [(blk + i) % sides for i in range(sides)]:
            before = _pool_stats() if side == 0 else None
            for _ in range(per_block):
                t0 = time.perf_counter()
                if side == 2:
                    sess.run(None, feeds)
                elif side == 3:
                    alone()
                else:
                    await models[side].execute(feeds)
                times[side].append(time.perf_counter() - t0)
            after = _pool_stats() if side == 0 else None
            if before and after:
                chunks += after[1] - before[1]
                helped += after[2] - before[2]
            await asyncio.sleep(0.02)
    for md in models:
        await md.aclose()
    share = helped / chunks if chunks else math.nan
    med = [statistics.median(t) if t else math.nan for t in times]
    return med[0], med[1], med[2], med[3], share


def _product_alone(m: int, k: int, n: int, proto) -> tuple[object, object] | None:
    """The host runtime's packed product (hrt_sgemm_packed: the packed kernels, or OpenBLAS for the
    shapes it routes there) called directly through ctypes on the single MatMul's B, without the
    graph around it: (run, free), or None on another backend."""
    import ctypes

    from onnx import numpy_helper

    from aioge import _native

    if _native.backend != "host":
        return None
    so = ctypes.CDLL(_native.library_path)
    p, i64 = ctypes.c_void_p, ctypes.c_int64
    so.hrt_sgemm_pack_b.restype = p
    so.hrt_sgemm_pack_b.argtypes = [ctypes.c_bool, i64, i64, p, i64]
    so.hrt_sgemm_pb_free.restype = None
    so.hrt_sgemm_pb_free.argtypes = [p]
    so.hrt_sgemm_packed.restype = ctypes.c_int
    so.hrt_sgemm_packed.argtypes = [i64, ctypes.c_bool, p, i64, p, ctypes.c_bool, p, i64, p, p, i64]
    b = np.ascontiguousarray(numpy_helper.to_array(proto.graph.initializer[0]), np.float32)
    a = np.random.default_rng(1).standard_normal((m, k)).astype(np.float32)
    c = np.empty((m, n), np.float32)
    pb = so.hrt_sgemm_pack_b(False, n, k, b.ctypes.data, n)
    assert pb

    def run() -> None:
        assert so.hrt_sgemm_packed(m, False, a.ctypes.data, k, pb, False, b.ctypes.data, n, None, c.ctypes.data, n) == 0

    run()
    np.testing.assert_allclose(c, a @ b, rtol=1e-3, atol=1e-3)
    return run, lambda: so.hrt_sgemm_pb_free(pb)


async def bench_cpu(dev, proto, feeds, budget_s: float, alone=None) -> tuple[float, float, float]:
    """Process CPU seconds per call (best of alternating blocks) of (aioge, onnxruntime, ``alone``:
    a third callable, e.g. the product without the graph; nan without one), one thread each: the
    kernels compared without the scheduler (wall clock on a loaded machine mostly measures who got
    a core)."""
    so = ort.SessionOptions()
    so.intra_op_num_threads = 1
    sess = ort.InferenceSession(proto.SerializeToString(), so, providers=["CPUExecutionProvider"])
    md = await dev.compile(aioge.load_onnx(proto.SerializeToString()))
    ref = sess.run(None, feeds)[0]
    out = np.asarray(next(iter((await md.execute(feeds)).values())))
    assert np.allclose(out, ref, rtol=1e-3, atol=1e-3), float(np.max(np.abs(out - ref)))
    t0 = time.process_time()
    sess.run(None, feeds)
    await md.execute(feeds)
    one = (time.process_time() - t0) / 2
    blocks = 8
    reps = max(3, int(budget_s / 2 / blocks / max(one, 1e-6)))
    sides = 3 if alone else 2
    best = [math.inf, math.inf, math.nan if alone is None else math.inf]
    for _ in range(blocks):
        for side in range(sides):
            t0 = time.process_time()
            for _ in range(reps):
                if side == 1:
                    sess.run(None, feeds)
                elif side == 2:
                    alone()
                else:
                    await md.execute(feeds)
            best[side] = min(best[side], (time.process_time() - t0) / reps)
    await md.aclose()
    return best[0], best[1], best[2]


async def matmul_table_cpu(ms: list[int], kns: list[tuple[int, int]], budget_s: float) -> None:
    print(f"load: {os.getloadavg()[0]:.2f} {os.getloadavg()[1]:.2f}")
    print("single MatMul, constant B, one thread each: aioge / onnxruntime process CPU time per call;")
    print("in brackets: the host runtime's packed product alone (no graph around it) / onnxruntime")
    print("M \\ (K, N)".rjust(10) + " " + " ".join(f"({k}, {n})".rjust(24) for k, n in kns))
    async with aioge.open_device(0) as dev:
        for m in ms:
            cells = []
            for k, n in kns:
                proto, feeds = _matmul_model(m, k, n)
                alone = _product_alone(m, k, n, proto)
                ta, to, tk = await bench_cpu(dev, proto, feeds, budget_s, alone[0] if alone else None)
                if alone:
                    alone[1]()
                cells.append(f"{ta / to:5.2f}x [{tk / to:5.2f}x] {to * 1e6:7.0f}us")
            print(f"{m:>10d} " + " ".join(f"{c:>24s}" for c in cells), flush=True)
        for batch in (1, 64):
            proto = M.mlp(batch=batch, sizes=(784, 512, 512, 10))
            ta, to, _ = await bench_cpu(dev, proto, M.sample_inputs(proto), budget_s)
            print(
                f"mlp 784-512-512-10 batch {batch:3d}: {ta * 1e3:.3f} ms ({ta / to:.2f}x), "
                f"onnxruntime {to * 1e3:.3f} ms"
            )
    print(f"load: {os.getloadavg()[0]:.2f} {os.getloadavg()[1]:.2f}")


async def matmul_table(ms: list[int], kns: list[tuple[int, int]], budget_s: float) -> None:
    print(f"load: {os.getloadavg()[0]:.2f} {os.getloadavg()[1]:.2f}")
    print("single MatMul, constant B: aioge / onnxruntime wall clock, packed at load; [per-call packing];")
    print("{the host runtime's packed product alone, no graph around it}; h: share of the packed runs' pool")
    print("chunks run by the pool's helper threads (0% with 2 threads: one core did the product); then")
    print("onnxruntime's time")
    print("M \\ (K, N)".rjust(10) + " " + " ".join(f"({k}, {n})".rjust(36) for k, n in kns))
    async with aioge.open_device(0) as dev:
        for m in ms:
            cells = []
            for k, n in kns:
                proto, feeds = _matmul_model(m, k, n)
                alone = _product_alone(m, k, n, proto)
                tp, tu, to, ta, share = await bench_packed(dev, proto, feeds, budget_s, alone[0] if alone else None)
                if alone:
                    alone[1]()
                cells.append(
                    f"{tp / to:5.2f}x [{tu / to:5.2f}x] {{{ta / to:5.2f}x}} h{share * 100:3.0f}% {to * 1e6:6.0f}us"
                )
            print(f"{m:>10d} " + " ".join(f"{c:>36s}" for c in cells), flush=True)
        for batch in (1, 64):
            proto = M.mlp(batch=batch, sizes=(784, 512, 512, 10))
            tp, tu, to, _, share = await bench_packed(dev, proto, M.sample_inputs(proto), budget_s)
            print(
                f"mlp 784-512-512-10 batch {batch:3d}: {tp * 1e3:.3f} ms packed ({tp / to:.2f}x, h{share * 100:.0f}%), "
                f"{tu * 1e3:.3f} ms per-call packing ({tu / to:.2f}x), onnxruntime {to * 1e3:.3f} ms",
                flush=True,
            )
    print(f"load: {os.getloadavg()[0]:.2f} {os.getloadavg()[1]:.2f}")


OWN = {"mlp": M.mlp, "residual_cnn": M.residual_cnn, "inception": M.inception, "attention": M.attention}


async def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true", help="few repetitions, one client round")
    ap.add_argument("--models", default="all", help="own, light, tv, all, or a comma list of model names")
    ap.add_argument("--image-size", type=int, default=224, help="the tv models' input height and width")
    ap.add_argument("--ort-spin", choices=("on", "off", "both"),
                    default="off" if os.environ.get("BENCH_ORT_NO_SPIN") else "both")  # fmt: skip
    ap.add_argument("--budget", type=float, default=None, help="seconds of timed runs per side per model")
    ap.add_argument("--matmul", action="store_true", help="the single-MatMul ratio table and the MLP, packed and not")
    ap.add_argument("--ms", default="1,8,32,64,128,512", help="--matmul: rows M")
    ap.add_argument("--kn", default="784x512,768x768,768x3072,3072x768", help="--matmul: KxN of the constant B")
    ap.add_argument("--cpu", action="store_true", help="--matmul: one thread each, process CPU time per call")
    args = ap.parse_args()
    if args.matmul:
        kns = [tuple(int(v) for v in kn.split("x")) for kn in args.kn.split(",")]
        ms = [int(v) for v in args.ms.split(",")]
        if args.cpu:
            os.environ["AIOGE_HOST_THREADS"] = "1"  # read when the runtime starts, below
            await matmul_table_cpu(ms, kns, 1.0 if args.quick else 3.0)  # type: ignore[arg-type]
        else:
            await matmul_table(ms, kns, 1.0 if args.quick else 3.0)  # type: ignore[arg-type]
        return
    reps, per_client = (6, 1) if args.quick else (60, 6)
    budget = args.budget if args.budget is not None else (1.5 if args.quick else 6.0)
    spins = {"on": (True,), "off": (False,), "both": (True, False)}[args.ort_spin]
    asked = [n.strip() for n in args.models.split(",") if n.strip()]
    want_tv = any(n in ("tv", "all") or n.startswith("tv_") for n in asked)
    light = light_models() if any(n not in (*OWN, "own", "tv") and not n.startswith("tv_") for n in asked) else {}
    tv = tv_models(args.image_size) if want_tv else {}
    catalog: dict[str, tuple[object, dict[str, np.ndarray]]] = {}
    for n, b in OWN.items():
        p = b()
        catalog[n] = (p, M.sample_inputs(p))
    catalog.update(light)
    catalog.update(tv)
    groups = {"own": list(OWN), "light": list(light), "tv": list(tv), "all": list(catalog)}
    names = list(dict.fromkeys(m for n in asked for m in groups.get(n, [n])))
    ratios: dict[bool, list[float]] = {spin: [] for spin in spins}
    compile_ratios: list[float] = []
    rows = []
    async with aioge.open_device(0) as dev:
        for name in names:
            proto, feeds = catalog[name]
            r = await bench_model(dev, name, proto, feeds, reps, 8, per_client, spins, budget)
            for spin in spins:
                ratios[spin].append(r["spin_ratios"][spin])
            compile_ratios.append(r["compile_ratio"])
            spin_txt = " ".join(
                f"{'spin' if spin else 'nospin'} {r['lat_ort_spin_ms'][spin]:.2f} ms={r['spin_ratios'][spin]:.2f}x"
                for spin in spins
            )
            rows.append((name, r["lat_aioge_ms"], r["spin_ratios"], r["compile_ratio"]))
            print(f"{name:13s} latency aioge {r['lat_aioge_ms']:8.2f} ms / onnxruntime [{spin_txt}] [<=1.0] | compile "
                  f"{r['compile_s'] * 1e3:7.1f} ms vs ort session {r['ort_create_s'] * 1e3:7.1f} ms = "
                  f"{r['compile_ratio']:.2f}x | 8 clients {r['thr_aioge']:7.1f}/s vs ort pool "
                  f"{r['thr_ort']:7.1f}/s = {r['thr_ratio']:.2f}x (a stream per client {r['thr_streams']:7.1f}/s = "
                  f"{r['thr_streams_ratio']:.2f}x) | arena {r['arena'] / 1e6:.2f} MB / max-live "
                  f"{r['max_live'] / 1e6:.2f} MB = {r['arena_ratio']:.3f}x [<=1.1] (no reuse "
                  f"{r['no_reuse'] / 1e6:.2f} MB) | {r['nodes']} kernels, {r['segments']} segments on "
                  f"{r['streams']} streams | max |diff| {r['diff']:.2e}", flush=True)  # fmt: skip
    print()
    print(f"{'model':13s} {'aioge ms':>9s} " + " ".join(f"{'/ort ' + ('spin' if s else 'nospin'):>12s}" for s in spins)
          + f" {'compile/ort':>12s}")  # fmt: skip
    for name, ms, sr, cr in rows:
        print(f"{name:13s} {ms:9.2f} " + " ".join(f"{sr[s]:11.2f}x" for s in spins) + f" {cr:11.2f}x")
    for spin in spins:
        worst = max(ratios[spin]) if ratios[spin] else float("nan")
        print(f"geometric mean latency ratio aioge/onnxruntime ({'spinning' if spin else 'no spin'}): "
              f"{geomean(ratios[spin]):.2f}x [target <= 1.0x], worst {worst:.2f}x [<= 1.3x]")  # fmt: skip
        for group in ("own", "light", "tv"):
            rs = [r[2][spin] for r in rows if r[0] in groups[group]]
            if rs and len(rs) < len(rows):
                print(f"  {group}: geometric mean {geomean(rs):.2f}x, worst {max(rs):.2f}x over {len(rs)} models")
    print(f"geometric mean compile ratio aioge/onnxruntime session creation: {geomean(compile_ratios):.2f}x "
          "[target <= 1.0x]")  # fmt: skip


if __name__ == "__main__":
    asyncio.run(main())
