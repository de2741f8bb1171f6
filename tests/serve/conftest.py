"""Serving tests: real servers (``python -m aioge.serve`` on 127.0.0.1, a free port) and real clients."""

from __future__ import annotations

import json
import os
import re
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from tests.serve import serve_models as M
from tests.support.paths import ROOT


def free_port() -> int:
    """A TCP port free on 127.0.0.1 just now (for ``--grpc-port``, whose 0 means off)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class ServerProcess:
    """``python -m aioge.serve ARGS --port 0`` in a subprocess; ``url`` once it listens.

    gRPC is off (``--grpc-port 0``) unless ``grpc=True`` (a free port, ``grpc_port``, retried once if
    taken meanwhile) or ARGS give ``--grpc-port``."""

    def __init__(self, *args: str, timeout: float = 120.0, grpc: bool = False) -> None:
        self.grpc_port: int | None = None
        if "--grpc-port" not in args:
            if grpc:
                self.grpc_port = free_port()
            args = (*args, "--grpc-port", str(self.grpc_port or 0))
        try:
            self._start(args, timeout)
        except RuntimeError as e:
            if not (grpc and "gRPC" in str(e)):
                raise
            self.grpc_port = free_port()  # taken between free_port() and the server's bind: once more
            self._start((*args[:-1], str(self.grpc_port)), timeout)

    def _start(self, args: tuple[str, ...], timeout: float) -> None:
        env = dict(os.environ, PYTHONUNBUFFERED="1")
        env.pop("PYTHONASYNCIODEBUG", None)  # the server runs like a user's, not in debug mode
        cmd = [sys.executable, "-m", "aioge.serve", *args, "--host", "127.0.0.1", "--port", "0"]
        self.proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=ROOT, env=env)
        self.stderr: list[str] = []
        self._err = threading.Thread(target=self._drain_stderr, daemon=True)
        self._err.start()
        line = self._wait_line(timeout)
        self.banner = line or ""
        m = re.search(r"listening on http://127\.0\.0\.1:(\d+)", line or "")
        if not m:
            self.stop()
            raise RuntimeError(f"the server did not start: {line!r}\n{''.join(self.stderr)[-3000:]}")
        self.port = int(m.group(1))
        self.url = f"http://127.0.0.1:{self.port}"

    def _drain_stderr(self) -> None:
        assert self.proc.stderr is not None
        for line in self.proc.stderr:
            self.stderr.append(line)

    def _wait_line(self, timeout: float) -> str | None:
        out: list[str] = []

        def read() -> None:
            assert self.proc.stdout is not None
            out.append(self.proc.stdout.readline())

        t = threading.Thread(target=read, daemon=True)
        t.start()
        t.join(timeout)
        return out[0] if out else None

    def terminate(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)

    def wait(self, timeout: float = 60.0) -> int:
        try:
            return self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(10)
            raise

    def stop(self) -> int:
        self.terminate()
        code = self.wait()
        self._err.join(5)
        for f in (self.proc.stdout, self.proc.stderr):
            if f is not None:
                f.close()
        return code


def write_repo(path: Path, configs: dict[str, dict] | None = None) -> Path:
    """A model repository: mlp, two (three inputs), fixed (no batch dim), cnn, and JSON sidecars."""
    path.mkdir(parents=True, exist_ok=True)
    M.save(M.mlp(), path / "mlp.onnx")
    M.save(M.two_inputs(), path / "two.onnx")
    M.save(M.fixed(), path / "fixed.onnx")
    M.save(M.cnn(), path / "cnn.onnx")
    for name, cfg in (configs or {}).items():
        (path / f"{name}.json").write_text(json.dumps(cfg))
    return path


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    """One server for the module: the repository plus two identity models that wait 10 s for 8 rows,
    ``held`` and ``narrow`` (which queues 2 requests at most)."""
    configs = {"mlp": {"batch_sizes": [1, 4, 8]}, "cnn": {"batch_sizes": [1, 2]}}
    repo = write_repo(tmp_path_factory.mktemp("repo"), configs)
    for name, queue in (("held", 64), ("narrow", 2)):
        M.save(M.identity(4), repo / f"{name}.onnx")
        (repo / f"{name}.json").write_text(json.dumps({"max_queue_delay_us": 10e6, "max_queue_size": queue,
                                                       "batch_sizes": [8]}))  # fmt: skip
    s = ServerProcess(str(repo), "--max-batch-size", "8", "--max-queue-delay-us", "2000")
    yield s
    code = s.stop()
    assert code == 0, "".join(s.stderr)[-3000:]


def wait_for(predicate, timeout: float = 30.0, what: str = "condition") -> None:
    """Poll ``predicate`` until true (a bound on the wait, not a timing assertion)."""
    end = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > end:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.02)
