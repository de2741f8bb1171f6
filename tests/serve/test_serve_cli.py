"""``python -m aioge.serve``: graceful SIGTERM with requests in flight, exit codes, the sub-command's parser."""

from __future__ import annotations

import argparse
import json
import socket
import subprocess
import sys
import threading

import httpx
import numpy as np
import pytest

from tests.serve import serve_models as M
from tests.serve.conftest import ServerProcess, wait_for
from tests.serve.test_serve_http import metric, tensor
from tests.support.paths import ROOT


def test_sigterm_finishes_every_accepted_request(tmp_path):
    """20 requests sit in a 10 s batch window; SIGTERM sends them at once, answers all, exits 0."""
    M.save(M.mlp(), tmp_path / "slow.onnx")
    (tmp_path / "slow.json").write_text(json.dumps({"max_queue_delay_us": 10e6, "batch_sizes": [32]}))
    s = ServerProcess(str(tmp_path))
    xs = [np.random.default_rng(i).standard_normal((1, 16)).astype(np.float32) for i in range(20)]
    results: dict[int, httpx.Response | BaseException] = {}

    def call(i: int) -> None:
        try:
            with httpx.Client(base_url=s.url, timeout=60) as c:
                results[i] = c.post("/v2/models/slow/infer", json={"inputs": [tensor("x", xs[i])]})
        except BaseException as e:  # reported by the assertion below
            results[i] = e

    threads = [threading.Thread(target=call, args=(i,)) for i in range(20)]
    try:
        for t in threads:
            t.start()
        with httpx.Client(base_url=s.url, timeout=60) as c:
            wait_for(lambda: metric(c.get("/metrics").text, "aioge_serve_queue_depth", model="slow") == 20,
                     what="20 queued requests")  # fmt: skip
        s.terminate()
        for t in threads:
            t.join(60)
        code = s.wait()
    finally:
        s.stop()
    assert code == 0, "".join(s.stderr)[-3000:]
    import onnxruntime as ort

    sess = ort.InferenceSession(M.mlp().SerializeToString(), providers=["CPUExecutionProvider"])
    for i, x in enumerate(xs):
        r = results[i]
        assert isinstance(r, httpx.Response) and r.status_code == 200, r
        y = np.asarray(r.json()["outputs"][0]["data"], np.float32).reshape(1, 8)
        np.testing.assert_allclose(y, sess.run(None, {"x": x})[0], rtol=1e-4, atol=1e-5)
    with pytest.raises(httpx.ConnectError):  # no longer accepting
        httpx.get(f"{s.url}/v2/health/live", timeout=5)


def test_a_request_still_uploading_at_sigterm_gets_503_shutting_down(tmp_path):
    M.save(M.mlp(), tmp_path / "m.onnx")
    s = ServerProcess(str(tmp_path / "m.onnx"), "--batch-sizes", "1")
    try:
        body = json.dumps({"inputs": [tensor("x", np.ones((1, 16), np.float32))]}).encode()
        with socket.create_connection(("127.0.0.1", s.port), timeout=60) as c:
            c.sendall(b"POST /v2/models/m/infer HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                      b"Expect: 100-continue\r\nContent-Length: %d\r\n\r\n" % len(body))  # fmt: skip
            early = b""
            while b"\r\n\r\n" not in early:  # sent once the handler waits for the body: the request is in flight
                chunk = c.recv(65536)
                assert chunk, early
                early += chunk
            assert early.startswith(b"HTTP/1.1 100"), early
            c.sendall(body[:10])

            def refused() -> bool:
                try:
                    socket.create_connection(("127.0.0.1", s.port), timeout=5).close()
                except OSError:
                    return True
                return False

            s.terminate()
            wait_for(refused, what="the listening socket to close")
            c.sendall(body[10:])
            reply = b""
            while b"\r\n\r\n" not in reply or not reply.rstrip().endswith(b"}"):
                chunk = c.recv(65536)
                if not chunk:
                    break
                reply += chunk
        head, _, payload = reply.partition(b"\r\n\r\n")
        assert head.startswith(b"HTTP/1.1 503"), reply
        assert b"retry-after" in head.lower()
        assert "shutting down" in json.loads(payload)["error"]
        assert s.wait() == 0
    finally:
        s.stop()


def run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "aioge.serve", *args], capture_output=True, text=True, cwd=ROOT,
                          timeout=120)  # fmt: skip


def test_usage_and_runtime_errors_have_their_exit_codes(tmp_path):
    assert run("--help").returncode == 0
    r = run(str(tmp_path / "missing.onnx"))
    assert r.returncode == 2 and "no such file" in r.stderr
    r = run("--max-batch-size", "x", str(tmp_path))
    assert r.returncode == 2
    r = run("--max-batch-size", "4", "--batch-sizes", "1,8", str(tmp_path))
    assert r.returncode == 2 and "exceed --max-batch-size 4" in r.stderr
    (tmp_path / "empty").mkdir()
    r = run(str(tmp_path / "empty"))
    assert r.returncode == 2 and "no .onnx files" in r.stderr
    M.save(M.identity(4), tmp_path / "m.onnx")
    (tmp_path / "m.json").write_text(json.dumps({"max_batch_sise": 4}))
    r = run(str(tmp_path / "m.onnx"))
    assert r.returncode == 2 and "unknown key 'max_batch_sise'" in r.stderr
    for bad in ("0", "-2", "x"):
        r = run("--max-plans", bad, str(tmp_path / "m.onnx"))
        assert r.returncode == 2 and "--max-plans: expected a positive integer" in r.stderr, r.stderr
    (tmp_path / "m.json").write_text(json.dumps({"max_plans": 0}))
    r = run(str(tmp_path / "m.onnx"))
    assert r.returncode == 2 and "m.json: max_plans must be a positive integer" in r.stderr, r.stderr
    (tmp_path / "m.json").unlink()
    (tmp_path / "bad.onnx").write_bytes(b"not a model")
    r = run(str(tmp_path / "bad.onnx"))
    assert r.returncode == 1 and "bad.onnx" in r.stderr
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen(1)
        r = run(str(tmp_path / "m.onnx"), "--port", str(busy.getsockname()[1]))
    assert r.returncode == 1 and "cannot listen" in r.stderr


def test_register_adds_the_serve_subcommand_without_importing_the_web_stack():
    code = ("import sys, argparse, aioge.serve.cli as cli\n"
            "p = argparse.ArgumentParser(); cli.register(p.add_subparsers(dest='cmd'))\n"
            "a = p.parse_args(['serve', 'm.onnx', '--port', '9', '--batch-sizes', '1,4'])\n"
            "assert a.func is cli.run and a.port == 9 and a.batch_sizes == (1, 4), a\n"
            "assert not {'starlette', 'uvicorn', 'prometheus_client'} & set(sys.modules)\n")  # fmt: skip
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    from aioge.serve import cli

    p = argparse.ArgumentParser()
    cli.register(p.add_subparsers())
    with pytest.raises(SystemExit):
        p.parse_args(["serve", "m.onnx", "--batch-sizes", "0,2"])
