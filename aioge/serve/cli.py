"""``aioge serve MODEL.onnx [MODEL2.onnx | REPOSITORY/ ...]``: the v2 inference server under uvicorn.

The ``aioge`` command registers this sub-command with :func:`register`;
``python -m aioge.serve`` runs it alone.  Importing this module imports
neither Starlette nor uvicorn (only :func:`run` does).

Start-up loads every model (all buckets compiled) before the socket
accepts connections, then prints ``aioge serve: listening on
http://HOST:PORT`` on stdout (``--port 0`` picks a free port, printed
there), with ``grpc HOST:PORT`` in parentheses when the gRPC service runs
(``--grpc-port``, default 8001, 0: off; off with a one-line note when grpcio or
tritonclient[grpc] is missing).  SIGTERM or SIGINT: readiness turns 503, connections stop being
accepted, queued requests are sent at once, every accepted request is
answered, then the models and the device close and the command exits 0.
Exit codes: 0 after a clean shutdown, 1 a runtime failure (a model that
does not load, a port in use), 2 a usage error.
"""

from __future__ import annotations

import argparse
import signal
import socket
import sys
from typing import Any

__all__ = ("register", "run", "add_arguments", "uvicorn_config", "listening_socket", "loop_name")


def _sizes(text: str) -> tuple[int, ...]:
    try:
        sizes = tuple(int(t) for t in text.split(",") if t.strip())
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected comma-separated batch sizes, got {text!r}") from None
    if not sizes or min(sizes) < 1:
        raise argparse.ArgumentTypeError(f"batch sizes must be positive integers, got {text!r}")
    return sizes


def _positive(text: str) -> int:
    try:
        n = int(text)
    except ValueError:
        n = 0
    if n < 1:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text!r}")
    return n


def add_arguments(p: argparse.ArgumentParser) -> None:
    """The ``serve`` options (shared by ``aioge serve`` and ``python -m aioge.serve``)."""
    p.add_argument("models", nargs="+", metavar="MODEL",
                   help="ONNX files (model NAME from NAME.onnx) or model-repository directories of them; "
                        "a NAME.json beside NAME.onnx overrides its options")  # fmt: skip
    p.add_argument("--host", default="127.0.0.1", help="address to bind (default 127.0.0.1)")
    p.add_argument("--port", type=int, default=8000, help="port (default 8000; 0 picks a free one)")
    p.add_argument("--grpc-port", type=int, default=8001,
                   help="port of the gRPC service (Triton's GRPCInferenceService; default 8001, 0: off)")  # fmt: skip
    p.add_argument("--max-batch-size", type=int, default=None,
                   help="rows per batch (default 32, or the largest --batch-sizes; 0: no batching)")  # fmt: skip
    p.add_argument("--batch-sizes", type=_sizes, default=None, metavar="N,N,...",
                   help="batch sizes to compile (default: powers of two up to --max-batch-size)")  # fmt: skip
    p.add_argument("--max-queue-delay-us", type=float, default=500.0,
                   help="microseconds a batch may wait to fill (default 500)")  # fmt: skip
    p.add_argument("--max-queue-size", type=int, default=1024, help="queued requests before 503 (default 1024)")
    p.add_argument("--max-inflight", type=int, default=2, help="batches executing at once per model (default 2)")
    p.add_argument("--timeout-ms", type=float, default=None, help="default request deadline (default: none)")
    p.add_argument("--lazy", action="store_true", help="compile batch sizes on first use, not at start-up")
    p.add_argument("--max-plans", type=_positive, default=None, metavar="N",
                   help="plans (one per concrete input shape) a model with symbolic dims besides the batch keeps "
                        "(default: twice the batch sizes, at least 8)")  # fmt: skip
    p.add_argument("--device", type=int, default=0, help="device id (default 0)")
    p.add_argument("--max-body-mb", type=float, default=64.0, help="largest request body in MiB (default 64)")
    p.add_argument("--graceful-timeout", type=float, default=None,
                   help="seconds to finish accepted requests at shutdown (default: as long as they take)")  # fmt: skip
    p.add_argument("--runtime-metrics", action="store_true",
                   help="also expose the runtime's counters at /metrics (aioge.metrics; "
                        "costs a little per launch)")  # fmt: skip
    p.add_argument("--loop", default="auto", choices=["auto", "uvloop", "asyncio"],
                   help="event loop (default auto: uvloop when installed, the serve extra has it)")  # fmt: skip
    p.add_argument("--log-level", default="warning", choices=["critical", "error", "warning", "info", "debug"])


def register(subparsers: argparse._SubParsersAction[Any]) -> None:
    """Add the ``serve`` sub-command (``set_defaults(func=run)``)."""
    p = subparsers.add_parser("serve", help="serve ONNX models over HTTP (Open Inference Protocol / KServe v2)",
                              description="Serve ONNX models over HTTP with the Open Inference Protocol (KServe v2) "
                                          "and dynamic batching, under uvicorn.")  # fmt: skip
    add_arguments(p)
    p.set_defaults(func=run)


def uvicorn_config(app: Any, *, log_level: str = "warning", graceful_timeout: float | None = None) -> Any:
    """The ``uvicorn.Config`` ``aioge serve`` runs ``app`` with (``benchmarks/bench_serve.py``'s
    baseline servers use it too, so both sides of a comparison run the same server settings).

    httptools' parser (the ``serve`` extra has it) rather than h11's, no access log (a log line per
    request), no lifespan (the command enters the models itself, before listening); the event loop
    is whatever runs ``Server.serve`` (the command's ``--loop``: uvloop unless told otherwise).
    """
    import uvicorn

    try:
        import httptools  # noqa: F401

        http = "httptools"
    except ImportError:  # pragma: no cover - the serve extra installs it
        http = "h11"
    grace: Any = graceful_timeout  # uvicorn annotates an int, and waits a float of seconds as well
    return uvicorn.Config(app, http=http, lifespan="off", log_level=log_level, access_log=False,
                          timeout_graceful_shutdown=grace)  # fmt: skip


def listening_socket(family: int) -> socket.socket:
    """A TCP listening socket (not yet bound) whose accepted connections have ``TCP_NODELAY``.

    Made with ``IPPROTO_TCP`` so that ``accept()``'s sockets carry that protocol and asyncio's
    transports set ``TCP_NODELAY`` on them (with protocol 0 they do not, and every response
    uvicorn writes in two sends waits out the client's delayed ACK: ~40 ms per request on a
    kept-alive connection); the option is set on the listening socket too (Linux's accepted
    sockets inherit it), whatever the loop.
    """
    sock = socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    except OSError:
        sock.close()
        raise
    return sock


def loop_name(choice: str = "auto") -> str:
    """The event loop ``--loop choice`` runs on: ``"uvloop"`` or ``"asyncio"`` (auto: uvloop when installed)."""
    if choice == "asyncio":
        return "asyncio"
    try:
        import uvloop  # noqa: F401
    except ImportError:
        if choice == "uvloop":
            raise
        return "asyncio"
    return "uvloop"


def _usage(msg: str) -> int:
    print(f"aioge serve: {msg}", file=sys.stderr)
    return 2


def run(args: argparse.Namespace) -> int:
    """Run the server until SIGTERM/SIGINT; the exit code."""
    from pathlib import Path

    for m in args.models:
        if not Path(m).exists():
            return _usage(f"{m}: no such file or directory")
    if args.max_batch_size is None:
        args.max_batch_size = max(args.batch_sizes) if args.batch_sizes else 32
    elif args.batch_sizes and args.max_batch_size and max(args.batch_sizes) > args.max_batch_size:
        return _usage(f"--batch-sizes {list(args.batch_sizes)} exceed --max-batch-size {args.max_batch_size}")
    if args.max_batch_size < 0 or args.max_queue_size < 1 or args.max_inflight < 1 or args.max_queue_delay_us < 0:
        return _usage("--max-batch-size must be >= 0, --max-queue-size and --max-inflight >= 1, "
                      "--max-queue-delay-us >= 0")  # fmt: skip
    if not 0 <= args.port <= 65535:
        return _usage(f"--port {args.port} is not a port number")
    if not 0 <= args.grpc_port <= 65535:
        return _usage(f"--grpc-port {args.grpc_port} is not a port number")
    try:
        import uvicorn  # noqa: F401

        from .asgi import build_app  # noqa: F401  (starlette)
    except ImportError as e:
        print(f"aioge serve: {e}; install the serve extra: pip install 'aioge[serve]'", file=sys.stderr)
        return 1
    if args.grpc_port:
        try:
            from . import grpc_service  # noqa: F401  (grpcio, tritonclient[grpc])
        except ImportError as e:
            print(f"aioge serve: gRPC is off ({e}; the serve extra has it: pip install 'aioge[serve]'), "
                  "serving HTTP only", file=sys.stderr)  # fmt: skip
            args.grpc_port = 0
    try:
        args.loop = loop_name(args.loop)
    except ImportError:
        return _usage("--loop uvloop: uvloop is not installed (pip install 'aioge[serve]')")
    from .errors import ModelLoadError
    from .server import InferenceServer

    defaults: dict[str, Any] = {
        "max_batch_size": args.max_batch_size,
        "batch_sizes": args.batch_sizes,
        "max_queue_delay": args.max_queue_delay_us / 1e6,
        "max_queue_size": args.max_queue_size,
        "max_inflight": args.max_inflight,
        "timeout": None if args.timeout_ms is None else args.timeout_ms / 1e3,
        "lazy": args.lazy,
        "max_plans": args.max_plans,
    }
    try:
        from .metrics import ServeMetrics

        metrics = ServeMetrics()
        if args.runtime_metrics:
            from .. import metrics as runtime

            runtime.register(metrics.registry)
        server = InferenceServer(args.models, device_id=args.device, max_body_bytes=int(args.max_body_mb * 2**20),
                                 metrics=metrics, **defaults)  # fmt: skip
    except (ModelLoadError, ValueError) as e:
        return _usage(str(e))
    return _serve(server, args)


def _serve(server: Any, args: argparse.Namespace) -> int:
    import asyncio

    import uvicorn

    from .asgi import build_app

    try:
        family = socket.AF_INET6 if ":" in args.host else socket.AF_INET
        sock = listening_socket(family)
        sock.bind((args.host, args.port))
        sock.listen(2048)
        sock.setblocking(False)
    except OSError as e:
        print(f"aioge serve: cannot listen on {args.host}:{args.port}: {e}", file=sys.stderr)
        return 1
    host, port = sock.getsockname()[:2]
    grpc: Any = None  # the gRPC service, bound in main()
    grpc_where = ""

    class _Server(uvicorn.Server):
        loop: asyncio.AbstractEventLoop | None = None

        async def startup(self, sockets: list[socket.socket] | None = None) -> None:
            self.loop = asyncio.get_running_loop()
            await super().startup(sockets)
            if self.started:
                where = f"[{host}]" if family == socket.AF_INET6 else host
                print(f"aioge serve: listening on http://{where}:{port} ({grpc_where}models: "
                      f"{', '.join(server.models)}; loop: {args.loop})", flush=True)  # fmt: skip

        def handle_exit(self, sig: int, frame: Any) -> None:
            if self.loop is not None:  # readiness 503 and flush the queues, on the loop's thread
                self.loop.call_soon_threadsafe(server.begin_shutdown)
                if grpc is not None:  # streams end once what they read is answered
                    self.loop.call_soon_threadsafe(grpc.begin_shutdown)
            super().handle_exit(sig, frame)

    stop: list[int] = []

    async def main() -> int:
        nonlocal grpc, grpc_where
        from .errors import ModelLoadError

        if args.grpc_port:  # bound before the models load: a port in use fails at once
            from .grpc_service import GrpcService

            grpc = GrpcService(server)
            try:
                gport = grpc.bind(args.host, args.grpc_port)
            except OSError as e:
                print(f"aioge serve: {e}", file=sys.stderr)
                return 1
            grpc_where = f"grpc {'[' + host + ']' if family == socket.AF_INET6 else host}:{gport}; "
        try:
            await server.__aenter__()
        except (ModelLoadError, ValueError, OSError) as e:
            print(f"aioge serve: {e}", file=sys.stderr)
            if grpc is not None:
                await grpc.stop(0)
            return 1
        try:
            if stop:  # a signal came while the models were loading
                return 0
            if grpc is not None:
                await grpc.start()
            config = uvicorn_config(build_app(server, own_lifespan=False), log_level=args.log_level,
                                    graceful_timeout=args.graceful_timeout)  # fmt: skip
            await _Server(config).serve(sockets=[sock])
        finally:
            if grpc is not None:  # HTTP has drained; the gRPC calls still running finish
                await grpc.stop(args.graceful_timeout)
            await server.__aexit__(None, None, None)
        return 0

    # uvicorn re-raises the signal it caught once it has restored the previous handlers:
    # these ones make a clean shutdown exit 0 instead of dying of that signal (and note
    # a signal that comes while the models load)
    previous = {s: signal.signal(s, lambda sig, _f: stop.append(sig)) for s in (signal.SIGTERM, signal.SIGINT)}
    try:
        if args.loop == "uvloop":
            import uvloop

            return uvloop.run(main())
        return asyncio.run(main())
    except Exception as e:
        print(f"aioge serve: {type(e).__name__}: {e}", file=sys.stderr)
        return 1
    finally:
        sock.close()
        for s, h in previous.items():
            signal.signal(s, h)
