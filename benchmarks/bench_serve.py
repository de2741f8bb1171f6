"""Serving benchmark: dynamic batching in process and over HTTP, against onnxruntime, one run.

    python benchmarks/bench_serve.py [--quick] [--clients 64] [--models mlp,cnn]
                                     [--phases inproc,http,overhead,grpc] [--rounds N]

Loopback only, bounded in count and time (every phase stops after its
requests or its time cap, whichever comes first).  N concurrent clients
send batch-1 requests; for each model (the weight-bound MLP 1024->4096->
4096->1024, float32, 96 MB of weights, and a small CNN on 3x32x32):

1. in process: ``Batcher.infer`` from N coroutines vs onnxruntime through
   ``run_in_executor`` (the default executor) from N coroutines -- what a user
   writes today -- vs ``model.execute`` of a batch-1 model without batching;
2. over HTTP (v2 protocol, JSON bodies; binary too for the MLP): the aioge
   server (``python -m aioge.serve``, a subprocess) vs the same Starlette app
   and codec calling onnxruntime in a thread pool (a subprocess too), driven
   by a keep-alive asyncio HTTP/1.1 load generator in this process;
3. server overhead: an identity model through the aioge server (HTTP + JSON +
   batcher + device round trip) vs a bare Starlette echo endpoint (the body
   returned as is) and a JSON echo (parsed and re-serialised), 1 client and 16,
   both servers on the same uvicorn settings and loop (``aioge.serve.cli.
   uvicorn_config``; ``--loop``, default uvloop as ``aioge serve``'s); cost per
   request (1/throughput) overall and as the median of 8 short back-to-back rounds, and each server process's CPU time
   per request (every thread, from /proc), which drifts less with the load.
4. gRPC vs HTTP: the same identity model through the aioge server's gRPC
   service (``ModelInfer``, raw tensor bytes, a ``grpc.aio`` channel per
   client) and over HTTP (JSON), against a bare ``grpc.aio`` echo of
   ``ModelInfer`` (its inputs returned as outputs) and the Starlette echo, on
   the same loop in the baseline process; 1 client (the per-request overhead
   on one connection) and 16: cost per request, p50, server CPU per request.

Throughput (req/s), p50/p99 latency and the batch-size distribution for
every row; ratios are measured in the same run, the phases of each
comparison alternate (A B A B) because this machine's speed drifts.
Targets (MLP, 64 clients): in process >= 10x onnxruntime-in-a-pool, over
HTTP >= 3x, each at equal or better p99; overhead <= 1.5x the echo.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "tests", "serve"))
import serve_models as M

import aioge
import aioge.serve

ROOT = Path(__file__).resolve().parent.parent
BUCKETS = (1, 2, 4, 8, 16, 32, 64)


def models() -> dict[str, tuple[object, tuple[int, ...]]]:
    """name -> (ONNX model, the shape of one batch-1 request of its input ``x``)."""
    return {"mlp": (M.mlp((1024, 4096, 4096, 1024)), (1, 1024)), "cnn": (M.cnn(channels=3, size=32), (1, 3, 32, 32))}


class Run:
    """Latencies of one phase."""

    def __init__(self, label: str) -> None:
        self.label = label
        self.lat: list[float] = []
        self.wall = 0.0
        self.errors = 0
        self.first_error = ""
        self.batches: dict[int, int] = {}
        self.cpu: float | None = None  # CPU seconds of the serving process (every thread) during the phase

    def add(self, other: Run) -> None:
        self.lat += other.lat
        self.wall += other.wall
        if other.cpu is not None:
            self.cpu = (self.cpu or 0.0) + other.cpu
        self.errors += other.errors
        self.first_error = self.first_error or other.first_error
        for k, v in other.batches.items():
            self.batches[k] = self.batches.get(k, 0) + v

    @property
    def rps(self) -> float:
        return len(self.lat) / self.wall if self.wall else 0.0

    @property
    def cpu_per_request(self) -> float:
        """Server CPU seconds per request (all of the server's threads)."""
        return (self.cpu or 0.0) / max(len(self.lat), 1)

    def pct(self, q: float) -> float:
        s = sorted(self.lat)
        return s[min(len(s) - 1, int(q * len(s)))] * 1e3 if s else float("nan")

    def line(self) -> str:
        b = ""
        if self.batches:
            total = sum(self.batches.values())
            mean = sum(k * v for k, v in self.batches.items()) / max(total, 1)
            dist = " ".join(f"{k}:{v}" for k, v in sorted(self.batches.items()))
            b = f" | batches {total}, mean {mean:.1f} rows ({dist})"
        err = f" | {self.errors} errors, e.g. {self.first_error}" if self.errors else ""
        cpu = f"  server CPU {self.cpu_per_request * 1e6:6.1f} us/req" if self.cpu is not None else ""
        return (f"  {self.label:34s} {self.rps:8.1f} req/s  p50 {self.pct(0.5):8.2f} ms  p99 {self.pct(0.99):8.2f} ms"
                f"  ({len(self.lat)} requests){cpu}{err}{b}")  # fmt: skip


async def drive(label: str, clients: int, per_client: int, cap: float, call: Callable[[int], Awaitable[None]]) -> Run:
    """``clients`` coroutines, each ``per_client`` sequential calls or until ``cap`` seconds."""
    run = Run(label)
    deadline = time.perf_counter() + cap

    async def client(i: int) -> None:
        for _ in range(per_client):
            if time.perf_counter() > deadline:
                return
            t0 = time.perf_counter()
            try:
                await call(i)
            except Exception as e:
                run.errors += 1
                run.first_error = run.first_error or f"{type(e).__name__}: {str(e)[:160]}"
                continue
            run.lat.append(time.perf_counter() - t0)

    t0 = time.perf_counter()
    await asyncio.gather(*(client(i) for i in range(clients)))
    run.wall = time.perf_counter() - t0
    return run


def ort_session(data: bytes):  # type: ignore[no-untyped-def]
    import onnxruntime as ort

    so = ort.SessionOptions()
    so.intra_op_num_threads = os.cpu_count() or 1
    return ort.InferenceSession(data, so, providers=["CPUExecutionProvider"])


def bucket_counts(hist: dict[int, int]) -> dict[int, int]:
    return dict(sorted(hist.items()))


# ------------------------------------------------------------------ 1. in process
async def in_process(dev: aioge.Device, name: str, proto, shape, clients: int, per_client: int, cap: float,
                     rounds: int) -> dict[str, Run]:  # fmt: skip
    data = proto.SerializeToString()
    sess = ort_session(data)
    runner = await aioge.serve.load_model(dev, data, name=name, max_batch_size=BUCKETS[-1], batch_sizes=BUCKETS)
    single = await dev.compile(aioge.load_onnx(data, input_shapes={"x": shape}))
    rng = np.random.default_rng(0)
    xs = [rng.standard_normal(shape).astype(np.float32) for _ in range(clients)]
    ref = sess.run(None, {"x": xs[0]})[0]
    loop = asyncio.get_running_loop()
    totals = {k: Run(v) for k, v in (("batcher", "aioge Batcher.infer"), ("ort", "onnxruntime run_in_executor"),
                                     ("nobatch", "aioge model.execute, no batching"))}  # fmt: skip
    async with aioge.serve.Batcher(runner, max_queue_delay=500e-6, max_inflight=2) as batcher:
        out = (await batcher.infer({"x": xs[0]}))["y" if name == "mlp" else "p"]
        assert np.abs(out - ref).max() < 1e-3, "aioge and onnxruntime disagree"

        async def b_call(i: int) -> None:
            await batcher.infer({"x": xs[i]})

        async def o_call(i: int) -> None:
            await loop.run_in_executor(None, sess.run, None, {"x": xs[i]})

        async def n_call(i: int) -> None:
            await single.execute({"x": xs[i]})

        for call in (b_call, o_call, n_call):  # warm-up
            await drive("warm", clients, 1, cap, call)
        for _ in range(rounds):
            for key, call in (("batcher", b_call), ("ort", o_call), ("nobatch", n_call)):
                before = dict(batcher.stats["batch_sizes"])
                r = await drive(key, clients, per_client, cap, call)
                if key == "batcher":
                    after = batcher.stats["batch_sizes"]
                    r.batches = {k: v - before.get(k, 0) for k, v in after.items() if v - before.get(k, 0)}
                totals[key].add(r)
                await asyncio.sleep(0.2)  # onnxruntime's pool threads spin a while after their last run
    await single.aclose()
    await runner.aclose()
    return totals


# ------------------------------------------------------------------ 2./3. HTTP
class Http:
    """A keep-alive HTTP/1.1 connection sending one prepared request (the load generator)."""

    def __init__(self, port: int, path: str, body: bytes, headers: dict[str, str] | None = None) -> None:
        self.port = port
        head = "".join(f"{k}: {v}\r\n" for k, v in (headers or {}).items())
        self.request = (f"POST {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n{head}"
                        f"Content-Length: {len(body)}\r\n\r\n").encode() + body  # fmt: skip
        self.conn: tuple[asyncio.StreamReader, asyncio.StreamWriter] | None = None

    async def __call__(self) -> bytes:
        try:
            return await self._once()
        except (asyncio.IncompleteReadError, ConnectionError):  # uvicorn closes connections idle 5 s
            await self.close()
            return await self._once()

    async def _once(self) -> bytes:
        if self.conn is None:
            self.conn = await asyncio.open_connection("127.0.0.1", self.port, limit=1 << 22)
        reader, writer = self.conn
        writer.write(self.request)
        head = await reader.readuntil(b"\r\n\r\n")
        m = re.search(rb"(?i)\ncontent-length: *(\d+)", head)
        body = await reader.readexactly(int(m.group(1))) if m else b""
        if not head.startswith(b"HTTP/1.1 200"):
            raise RuntimeError(head[:40] + body[:200])
        return body

    async def close(self) -> None:
        if self.conn is not None:
            self.conn[1].close()
            self.conn = None


def process_cpu(pid: int) -> float:
    """CPU seconds (user + system, every thread) a process has used so far."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


class Proc:
    def __init__(self, cmd: list[str]) -> None:
        env = dict(os.environ)
        env.pop("PYTHONASYNCIODEBUG", None)
        self.p = subprocess.Popen(cmd, stdout=subprocess.PIPE, text=True, cwd=ROOT, env=env)
        assert self.p.stdout is not None
        line = self.p.stdout.readline()
        m = re.search(r"listening on http://127\.0\.0\.1:(\d+)", line)
        if not m:
            self.p.kill()
            raise SystemExit(f"server did not start: {line!r}")
        self.port = int(m.group(1))
        g = re.search(r"grpc 127\.0\.0\.1:(\d+)", line)
        self.grpc_port = int(g.group(1)) if g else None

    def stop(self) -> None:
        self.p.send_signal(signal.SIGTERM)
        self.p.wait(120)
        if self.p.stdout is not None:
            self.p.stdout.close()


def batch_hist(port: int, model: str) -> dict[int, int]:
    """The batch-size histogram of a model from the aioge server's /metrics (bucket upper bound -> batches)."""
    import urllib.request

    text = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics").read().decode()
    cum = []
    for m in re.finditer(r'aioge_serve_batch_size_bucket\{le="([^"]+)",model="' + model + r'"\} (\S+)', text):
        if m.group(1) != "+Inf":
            cum.append((int(float(m.group(1))), int(float(m.group(2)))))
    out, prev = {}, 0
    for le, c in cum:
        if c - prev:
            out[le] = c - prev
        prev = c
    return out


def v2_body(x: np.ndarray, binary: bool) -> tuple[bytes, dict[str, str]]:
    if not binary:
        return json.dumps({"inputs": [{"name": "x", "shape": list(x.shape), "datatype": "FP32",
                                       "data": x.reshape(-1).tolist()}]}).encode(), {}  # fmt: skip
    head = json.dumps({"inputs": [{"name": "x", "shape": list(x.shape), "datatype": "FP32",
                                   "parameters": {"binary_data_size": x.nbytes}}],
                       "parameters": {"binary_data_output": True}}).encode()  # fmt: skip
    return head + x.tobytes(), {"Inference-Header-Content-Length": str(len(head))}


async def over_http(aioge_port: int, ort_port: int, name: str, shape, clients: int, per_client: int, cap: float,
                    rounds: int, binary: bool) -> dict[str, Run]:  # fmt: skip
    rng = np.random.default_rng(1)
    kind = "binary" if binary else "JSON"
    totals = {"aioge": Run(f"aioge server ({kind})"), "ort": Run(f"Starlette + onnxruntime pool ({kind})")}
    conns = {}
    for key, port in (("aioge", aioge_port), ("ort", ort_port)):
        conns[key] = []
        for _ in range(clients):
            body, headers = v2_body(rng.standard_normal(shape).astype(np.float32), binary)
            conns[key].append(Http(port, f"/v2/models/{name}/infer", body, headers))
    for key in conns:  # connect and warm up
        await drive("warm", clients, 1, cap, lambda i, key=key: conns[key][i]())
    for _ in range(rounds):
        for key in ("aioge", "ort"):
            before = batch_hist(aioge_port, name)
            r = await drive(key, clients, per_client, cap, lambda i, key=key: conns[key][i]())
            if key == "aioge":
                after = batch_hist(aioge_port, name)
                r.batches = {k: v - before.get(k, 0) for k, v in after.items() if v - before.get(k, 0)}
            totals[key].add(r)
            await asyncio.sleep(0.2)
    for cs in conns.values():
        for c in cs:
            await c.close()
    return totals


async def overhead(aioge: Proc, ort: Proc, clients: int, per_client: int, cap: float,
                   rounds: int) -> tuple[dict[str, Run], list[tuple[float, float]]]:  # fmt: skip
    """Wall-clock rates and the serving process's CPU time per request, phases alternating; and per
    round, aioge / echo (cost per request, server CPU per request)."""
    body, _ = v2_body(np.arange(16, dtype=np.float32).reshape(1, 16), False)
    targets = {"aioge": (aioge, "/v2/models/identity/infer", f"aioge identity model, {clients} client(s)"),
               "echo": (ort, "/echo", f"Starlette echo (body as is), {clients} client(s)"),
               "echo_json": (ort, "/echo-json", f"Starlette JSON echo, {clients} client(s)")}  # fmt: skip
    totals = {k: Run(label) for k, (_, _, label) in targets.items()}
    conns = {k: [Http(srv.port, path, body) for _ in range(clients)] for k, (srv, path, _) in targets.items()}
    for k in conns:
        await drive("warm", clients, 5, cap, lambda i, k=k: conns[k][i]())
    per_round = []
    for _ in range(rounds):
        got = {}
        for k in conns:
            pid = targets[k][0].p.pid
            c0 = process_cpu(pid)
            r = got[k] = await drive(k, clients, per_client, cap, lambda i, k=k: conns[k][i]())
            r.cpu = process_cpu(pid) - c0
            totals[k].add(r)
        a, e = got["aioge"], got["echo"]
        per_round.append((e.rps / a.rps, a.cpu_per_request / max(e.cpu_per_request, 1e-9)))
    for cs in conns.values():
        for c in cs:
            await c.close()
    return totals, per_round


class Grpc:
    """A ``grpc.aio`` channel sending one prepared ``ModelInferRequest`` (raw tensor bytes)."""

    def __init__(self, port: int, model: str, x: np.ndarray) -> None:
        import grpc
        from tritonclient.grpc import service_pb2, service_pb2_grpc

        self.channel = grpc.aio.insecure_channel(f"127.0.0.1:{port}")
        self.stub = service_pb2_grpc.GRPCInferenceServiceStub(self.channel)
        self.request = service_pb2.ModelInferRequest(model_name=model)
        self.request.inputs.add(name="x", datatype="FP32", shape=list(x.shape))
        self.request.raw_input_contents.append(x.tobytes())

    async def __call__(self) -> Any:
        return await self.stub.ModelInfer(self.request)

    async def close(self) -> None:
        await self.channel.close()


def free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


async def grpc_vs_http(aioge: Proc, base: Proc, clients: int, per_client: int, cap: float,
                       rounds: int) -> tuple[dict[str, Run], list[dict[str, float]]]:  # fmt: skip
    """The identity model over gRPC and over HTTP, and both echoes, alternating; per round the cost ratios."""
    x = np.arange(16, dtype=np.float32).reshape(1, 16)
    body, _ = v2_body(x, False)
    assert aioge.grpc_port is not None and base.grpc_port is not None
    targets: dict[str, tuple[Proc, Callable[[], Any], str]] = {
        "grpc": (aioge, lambda: Grpc(aioge.grpc_port or 0, "identity", x), f"aioge gRPC (raw), {clients} client(s)"),
        "grpc_echo": (base, lambda: Grpc(base.grpc_port or 0, "identity", x), f"grpc.aio echo, {clients} client(s)"),
        "http": (aioge, lambda: Http(aioge.port, "/v2/models/identity/infer", body),
                 f"aioge HTTP (JSON), {clients} client(s)"),
        "http_echo": (base, lambda: Http(base.port, "/echo", body), f"Starlette echo, {clients} client(s)"),
    }  # fmt: skip
    totals = {k: Run(label) for k, (_, _, label) in targets.items()}
    conns = {k: [make() for _ in range(clients)] for k, (_, make, _) in targets.items()}
    first = await conns["grpc"][0]()
    assert np.frombuffer(first.raw_output_contents[0], np.float32).tolist() == x.ravel().tolist(), first
    for k in conns:
        await drive("warm", clients, 5, cap, lambda i, k=k: conns[k][i]())
    per_round = []
    for _ in range(rounds):
        got = {}
        for k in conns:
            pid = targets[k][0].p.pid
            c0 = process_cpu(pid)
            r = got[k] = await drive(k, clients, per_client, cap, lambda i, k=k: conns[k][i]())
            r.cpu = process_cpu(pid) - c0
            totals[k].add(r)
        per_round.append({"grpc/echo": got["grpc_echo"].rps / got["grpc"].rps,
                          "http/echo": got["http_echo"].rps / got["http"].rps,
                          "grpc/http": got["http"].rps / got["grpc"].rps})  # fmt: skip
    for cs in conns.values():
        for c in cs:
            await c.close()
    return totals, per_round


def median(xs: list[float]) -> float:
    s = sorted(xs)
    return (s[(len(s) - 1) // 2] + s[len(s) // 2]) / 2


async def identity_round_trip(n: int) -> float:
    """p50 ms of ``model.execute`` of the 1x16 identity model, awaited one at a time (the device's share)."""
    async with aioge.open_device(0) as dev:
        model = await dev.compile(aioge.load_onnx(M.identity(16).SerializeToString(), input_shapes={"x": (1, 16)}))
        x = np.ones((1, 16), np.float32)
        lat = []
        for i in range(n + 50):
            t0 = time.perf_counter()
            await model.execute({"x": x})
            if i >= 50:
                lat.append(time.perf_counter() - t0)
        await model.aclose()
    return sorted(lat)[len(lat) // 2] * 1e3


# ------------------------------------------------------------------ the onnxruntime server (subprocess)
def _loop_arg() -> str:
    """The event loop ``--loop`` names (``auto``: uvloop when installed, as ``aioge serve`` picks)."""
    from aioge.serve.cli import loop_name

    return loop_name(sys.argv[sys.argv.index("--loop") + 1] if "--loop" in sys.argv else "auto")


def _run(coro: Any) -> Any:
    if _loop_arg() == "uvloop":
        import uvloop

        return uvloop.run(coro)
    return asyncio.run(coro)


def ort_server(repo: str) -> None:
    """The baseline: Starlette, the same v2 codec, onnxruntime in the default thread pool; plus echo routes."""
    import uvicorn
    from starlette.applications import Starlette
    from starlette.requests import Request
    from starlette.responses import Response
    from starlette.routing import Route

    from aioge.serve.protocol import HEADER_LENGTH, decode_request, encode_response
    from aioge.serve.runner import TensorInfo
    from aioge.serve.server import error_reply

    sessions = {}
    for f in sorted(Path(repo).glob("*.onnx")):
        sess = ort_session(f.read_bytes())
        ins = {i.name: TensorInfo(i.name, np.dtype(np.float32), tuple(-1 if not isinstance(d, int) else d
                                                                      for d in i.shape)) for i in sess.get_inputs()}
        outs = {o.name: TensorInfo(o.name, np.dtype(np.float32), (-1,)) for o in sess.get_outputs()}
        sessions[f.stem] = (sess, ins, outs)

    async def infer(request: Request) -> Response:
        name = request.path_params["name"]
        sess, ins, outs = sessions[name]
        body = await request.body()
        try:
            req = decode_request(body, request.headers.get(HEADER_LENGTH), ins, outs, 64)
            loop = asyncio.get_running_loop()
            res = await loop.run_in_executor(None, sess.run, None, req.inputs)
            out, hl = encode_response(name, req, dict(zip(outs, res)), outs)
        except Exception as e:
            r = error_reply(e)
            return Response(r.body, r.status, media_type="application/json")
        headers = {} if hl is None else {"Inference-Header-Content-Length": str(hl)}
        return Response(out, 200, headers, media_type="application/json")

    async def echo(request: Request) -> Response:
        return Response(await request.body(), media_type="application/json")

    async def echo_json(request: Request) -> Response:
        return Response(json.dumps(json.loads(await request.body())).encode(), media_type="application/json")

    app = Starlette(routes=[Route("/v2/models/{name}/infer", infer, methods=["POST"]),
                            Route("/echo", echo, methods=["POST"]),
                            Route("/echo-json", echo_json, methods=["POST"])])  # fmt: skip

    class Server(uvicorn.Server):
        grpc: Any = None

        async def startup(self, sockets=None) -> None:  # type: ignore[no-untyped-def]
            await super().startup(sockets)
            port = self.servers[0].sockets[0].getsockname()[1]
            gport = await self.start_grpc()
            print(f"listening on http://127.0.0.1:{port} (grpc 127.0.0.1:{gport}; echo)", flush=True)

        async def start_grpc(self) -> int:
            """A bare grpc.aio ``ModelInfer`` that returns its inputs as outputs (the gRPC baseline)."""
            import grpc
            from tritonclient.grpc import service_pb2, service_pb2_grpc

            class Echo(service_pb2_grpc.GRPCInferenceServiceServicer):  # type: ignore[misc]
                async def ModelInfer(self, request: Any, context: Any) -> Any:
                    resp = service_pb2.ModelInferResponse(model_name=request.model_name, model_version="1",
                                                          id=request.id)  # fmt: skip
                    for t in request.inputs:
                        resp.outputs.add(name="y", datatype=t.datatype, shape=t.shape)
                    resp.raw_output_contents.extend(request.raw_input_contents)
                    return resp

            self.grpc = grpc.aio.server(options=[("grpc.so_reuseport", 0)])
            service_pb2_grpc.add_GRPCInferenceServiceServicer_to_server(Echo(), self.grpc)
            gport = self.grpc.add_insecure_port("127.0.0.1:0")
            await self.grpc.start()
            return int(gport)

        async def shutdown(self, sockets=None) -> None:  # type: ignore[no-untyped-def]
            if self.grpc is not None:
                await self.grpc.stop(1)
            await super().shutdown(sockets)

    from aioge.serve.cli import uvicorn_config

    config = uvicorn_config(app)  # the settings `aioge serve` runs with
    config.host, config.port = "127.0.0.1", 0
    _run(Server(config).serve())  # the loop `aioge serve` runs on


# ------------------------------------------------------------------ main
def report(title: str, rows: dict[str, Run], base: str, lead: str) -> tuple[float, float]:
    print(title)
    for r in rows.values():
        print(r.line())
    a, b = rows[lead], rows[base]
    thr, p99 = a.rps / b.rps, a.pct(0.99) / b.pct(0.99)
    print(f"  => {a.label} / {b.label}: throughput {thr:.2f}x, p99 {p99:.2f}x")
    return thr, p99


async def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true", help="fewer requests, one round")
    ap.add_argument("--clients", type=int, default=64)
    ap.add_argument("--models", default="mlp,cnn")
    ap.add_argument("--phases", default="inproc,http,overhead,grpc", help="which comparisons to run (default: all)")
    ap.add_argument("--rounds", type=int, default=None, help="alternating rounds per comparison (default 2, quick 1)")
    ap.add_argument("--loop", default="auto", choices=["auto", "uvloop", "asyncio"],
                    help="event loop of the servers and the load generator (default auto: uvloop when installed)")
    ap.add_argument("--ort-server", metavar="REPO", help=argparse.SUPPRESS)
    args = ap.parse_args()
    per_client, cap, rounds = (3, 4.0, 1) if args.quick else (8, 8.0, 2)
    rounds = args.rounds or rounds
    phases = {p for p in args.phases.split(",") if p}
    names = [n for n in args.models.split(",") if n]
    all_models = models()
    summary = []
    loop = _loop_arg()
    print(f"event loop: {loop} (both servers and the load generator); TCP_NODELAY on every connection")
    print(f"{args.clients} concurrent clients, batch-1 requests; buckets {list(BUCKETS)}, max_queue_delay 500 us, "
          f"2 batches in flight; {per_client} requests per client per phase (cap {cap:.0f} s), {rounds} round(s) "
          "alternating\n")  # fmt: skip
    async with aioge.open_device(0) as dev:
        for name in names if "inproc" in phases else ():
            proto, shape = all_models[name]
            rows = await in_process(dev, name, proto, shape, args.clients, per_client, cap, rounds)
            thr, p99 = report(f"[in process] {name}", rows, "ort", "batcher")
            summary.append((f"in process {name}", thr, p99, 10.0 if name == "mlp" else None))
            print(f"  => batching vs no batching: {rows['batcher'].rps / rows['nobatch'].rps:.2f}x throughput\n")

    with tempfile.TemporaryDirectory() as repo:
        for name in names:
            M.save(all_models[name][0], Path(repo) / f"{name}.onnx")
        M.save(M.identity(16), Path(repo) / "identity.onnx")
        (Path(repo) / "identity.json").write_text(json.dumps({"max_queue_delay_us": 0, "batch_sizes": list(BUCKETS)}))
        aioge_srv = Proc([sys.executable, "-m", "aioge.serve", repo, "--port", "0", "--max-batch-size", "64",
                          "--batch-sizes", ",".join(map(str, BUCKETS)), "--max-queue-delay-us", "500",
                          "--loop", loop, "--grpc-port", str(free_port())])  # fmt: skip
        ort_srv = Proc([sys.executable, __file__, "--ort-server", repo, "--loop", loop])
        try:
            for name in names if "http" in phases else ():
                shape = all_models[name][1]
                for binary in ((False, True) if name == "mlp" else (False,)):
                    rows = await over_http(aioge_srv.port, ort_srv.port, name, shape, args.clients, per_client, cap,
                                           rounds, binary)  # fmt: skip
                    kind = "binary" if binary else "JSON"
                    thr, p99 = report(f"[over HTTP, {kind}] {name}", rows, "ort", "aioge")
                    summary.append((f"HTTP {kind} {name}", thr, p99, 3.0 if name == "mlp" else None))
                    print()
            device_ms = await identity_round_trip(per_client * 20) if "overhead" in phases else 0.0
            for n in (1, 16) if "overhead" in phases else ():
                n_rounds = 2 if args.quick else 8  # many short alternating rounds: this machine's load drifts
                rows, per_round = await overhead(aioge_srv, ort_srv, n, 400 if n == 1 else 40, cap, n_rounds)
                print(f"[server overhead, identity model, {n} client(s)]")
                for r in rows.values():
                    print(r.line())
                a, e, j = rows["aioge"], rows["echo"], rows["echo_json"]
                print(f"  => cost per request (1/throughput): aioge / echo {e.rps / a.rps:.2f}x, aioge / JSON echo "
                      f"{j.rps / a.rps:.2f}x [<= 1.5x]; p50 aioge / echo {a.pct(0.5) / e.pct(0.5):.2f}x")  # fmt: skip
                cpu = a.cpu_per_request / e.cpu_per_request
                print(f"  => server CPU per request: aioge / echo {cpu:.2f}x, aioge / JSON echo "
                      f"{a.cpu_per_request / j.cpu_per_request:.2f}x")  # fmt: skip
                cost_r, cpu_r = [c for c, _ in per_round], [c for _, c in per_round]
                print(f"  => per round (aioge, echo back to back), median [range]: cost {median(cost_r):.2f}x "
                      f"[{min(cost_r):.2f}-{max(cost_r):.2f}], server CPU {median(cpu_r):.2f}x "
                      f"[{min(cpu_r):.2f}-{max(cpu_r):.2f}]")  # fmt: skip
                summary.append((f"overhead {n} client(s) vs echo (server CPU)", cpu, None, None))
                summary.append((f"overhead {n} client(s) vs echo, median round (cost)", median(cost_r), None, None))
                if n == 1:  # what of the 1-client latency is the device round trip, measured in this process
                    rest = a.pct(0.5) - device_ms
                    print(f"  => of aioge's p50 {a.pct(0.5):.3f} ms, {device_ms:.3f} ms is the identity model's "
                          f"model.execute round trip (in process); the rest, HTTP + JSON + batcher, {rest:.3f} ms = "
                          f"{rest / e.pct(0.5):.2f}x the echo's p50")  # fmt: skip
                    summary.append(("overhead 1 client, p50 less the device round trip", rest / e.pct(0.5), None,
                                    None))  # fmt: skip
                print()
                summary.append((f"overhead {n} client(s) vs echo (cost ratio)", e.rps / a.rps, None, None))
            for n in (1, 16) if "grpc" in phases else ():
                n_rounds = 2 if args.quick else 6
                rows, rounds_r = await grpc_vs_http(aioge_srv, ort_srv, n, 400 if n == 1 else 40, cap, n_rounds)
                print(f"[gRPC vs HTTP, identity model, {n} client(s){', one connection' if n == 1 else ''}]")
                for r in rows.values():
                    print(r.line())
                g, ge, h, he = rows["grpc"], rows["grpc_echo"], rows["http"], rows["http_echo"]
                med = {k: median([r[k] for r in rounds_r]) for k in rounds_r[0]}
                print(f"  => cost per request, median round: aioge gRPC / gRPC echo {med['grpc/echo']:.2f}x, "
                      f"aioge HTTP / HTTP echo {med['http/echo']:.2f}x [<= 1.5x]; aioge gRPC / aioge HTTP "
                      f"{med['grpc/http']:.2f}x")  # fmt: skip
                print(f"  => p50: gRPC {g.pct(0.5):.3f} ms (echo {ge.pct(0.5):.3f}), HTTP {h.pct(0.5):.3f} ms "
                      f"(echo {he.pct(0.5):.3f}); server CPU per request: gRPC {g.cpu_per_request * 1e6:.0f} us "
                      f"(echo {ge.cpu_per_request * 1e6:.0f}), HTTP {h.cpu_per_request * 1e6:.0f} us "
                      f"(echo {he.cpu_per_request * 1e6:.0f})\n")  # fmt: skip
                summary.append((f"gRPC {n} client(s) vs gRPC echo, median round (cost)", med["grpc/echo"], None, None))
                summary.append((f"gRPC {n} client(s): throughput vs HTTP", g.rps / h.rps, None, None))
        finally:
            aioge_srv.stop()
            ort_srv.stop()
    print("summary (aioge / baseline):")
    for what, thr, p99, target in summary:
        t = f" [target >= {target:g}x at p99 <= 1x]" if target else ""
        p = f", p99 {p99:.2f}x" if p99 is not None else ""
        print(f"  {what:44s} {thr:6.2f}x{p}{t}")


if __name__ == "__main__":
    if "--ort-server" in sys.argv:
        ort_server(sys.argv[sys.argv.index("--ort-server") + 1])
    else:
        _run(main())
