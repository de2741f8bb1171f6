"""The transport: ``TCP_NODELAY`` on accepted connections, whatever the loop; one kept-alive
connection answers request after request without waiting out the client's delayed ACK."""

from __future__ import annotations

import http.client
import json
import socket
import statistics
import time

import numpy as np
import pytest

from tests.serve import serve_models as M
from tests.serve.conftest import ServerProcess


def test_accepted_connections_have_tcp_nodelay():
    from aioge.serve.cli import listening_socket

    with listening_socket(socket.AF_INET) as lsock:
        lsock.bind(("127.0.0.1", 0))
        lsock.listen(1)
        with socket.create_connection(lsock.getsockname()[:2]) as c:
            conn, _ = lsock.accept()
            with conn:
                assert conn.proto == socket.IPPROTO_TCP  # asyncio's transports set TCP_NODELAY on these
                assert conn.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY)
            assert c is not None


def test_loop_choice():
    from aioge.serve.cli import loop_name

    assert loop_name("asyncio") == "asyncio"
    assert loop_name("auto") == "uvloop"  # the serve extra installs it: the fastest loop is the default
    assert loop_name("uvloop") == "uvloop"


@pytest.mark.parametrize("loop", ["asyncio", "uvloop"])
def test_keep_alive_requests_do_not_stall(tmp_path, loop):
    """50 requests on ONE kept-alive connection (http.client): the median is far below the
    ~40 ms a delayed ACK costs a response written in two sends without TCP_NODELAY."""
    M.save(M.mlp(), tmp_path / "mlp.onnx")
    s = ServerProcess(str(tmp_path / "mlp.onnx"), "--loop", loop, "--batch-sizes", "1,4")
    try:
        assert f"loop: {loop}" in s.banner
        body = json.dumps({"inputs": [{"name": "x", "shape": [1, 16], "datatype": "FP32",
                                       "data": np.ones(16, np.float32).tolist()}]})  # fmt: skip
        conn = http.client.HTTPConnection("127.0.0.1", s.port, timeout=30)
        times = []
        try:
            for _ in range(50):
                t0 = time.perf_counter()
                conn.request("POST", "/v2/models/mlp/infer", body, {"Content-Type": "application/json"})
                r = conn.getresponse()
                data = r.read()
                times.append(time.perf_counter() - t0)
                assert r.status == 200, data
                assert r.getheader("connection", "keep-alive").lower() != "close"
        finally:
            conn.close()
        median = statistics.median(times)
        assert median < 0.020, f"median {median * 1e3:.2f} ms per kept-alive request on {loop}"
    finally:
        assert s.stop() == 0, "".join(s.stderr)[-3000:]
