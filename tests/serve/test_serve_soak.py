"""A served sequence model's memory stays bounded over hundreds of lengths and is given back on unload.

``aioge serve`` compiles a plan per (bucket, length) of a model with a symbolic sequence dim and
keeps at most ``--max-plans`` of them.  The model here carries a 2 MiB weight (and its packed
copy), so a server that kept a copy per length, or an arena per evicted plan, would grow by
megabytes per request; one that kept the model's memory after an unload would not shrink.  The
bounds are generous for a shared machine: the server's RSS also moves with Python's and the C
allocator's caches.  Measured: +8 MB from the warm-up to the end, +11 MB after the unload.
"""

from __future__ import annotations

import json
import sys

import httpx
import numpy as np
import pytest
from onnx import numpy_helper

from tests.serve import serve_models as M
from tests.serve.conftest import ServerProcess

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")

WIDTH, OUT = 256, 2048  # the weight: 256 x 2048 float32 = 2 MiB
MB = 1 << 20
LENGTHS = 360  # distinct sequence lengths, each a plan (at most MAX_PLANS kept)
WARM = 90  # lengths served before the RSS reference is taken
MAX_PLANS = 4
#: RSS growth from the end of the warm-up to the end of the soak.  A copy of the weight per
#: length would be ~2-4 MiB per length, hundreds of MB over the soak.
RSS_GROWTH_BOUND = 64 * MB
#: RSS after the unload above the RSS before the load (the op cache keeps its small kernels,
#: Python and malloc their free lists)
RSS_AFTER_UNLOAD_BOUND = 64 * MB


def _rss(pid: int) -> int:
    with open(f"/proc/{pid}/statm") as f:
        return int(f.read().split()[1]) * 4096


def _infer(c: httpx.Client, x: np.ndarray) -> np.ndarray:
    head = json.dumps({"inputs": [{"name": "x", "shape": list(x.shape), "datatype": "FP32",
                                   "parameters": {"binary_data_size": x.nbytes}}],
                       "parameters": {"binary_data_output": True}}).encode()  # fmt: skip
    r = c.post("/v2/models/seq/infer", content=head + x.tobytes(),
               headers={"Inference-Header-Content-Length": str(len(head))})  # fmt: skip
    assert r.status_code == 200, r.text
    n = int(r.headers["Inference-Header-Content-Length"])
    (out,) = json.loads(r.content[:n])["outputs"]
    assert out["shape"] == [x.shape[0], x.shape[1], OUT]
    return np.frombuffer(r.content[n:], np.float32).reshape(out["shape"])


def test_hundreds_of_lengths_keep_the_server_flat_and_unload_gives_memory_back(tmp_path):
    proto = M.sequence(WIDTH, OUT, seed=3)
    (w,) = (numpy_helper.to_array(t) for t in proto.graph.initializer if t.name == "w")
    M.save(M.identity(), tmp_path / "ident.onnx")  # the server needs one model to start with
    s = ServerProcess(str(tmp_path), "--max-plans", str(MAX_PLANS), "--batch-sizes", "1")
    try:
        pid = s.proc.pid
        with httpx.Client(base_url=s.url, timeout=120) as c:
            M.save(proto, tmp_path / "seq.onnx")
            base = _rss(pid)
            assert c.post("/v2/repository/models/seq/load").status_code == 200
            rng = np.random.default_rng(4)
            lengths = rng.permutation(np.arange(1, LENGTHS + 1))
            warm = peak = 0
            for i, length in enumerate(lengths):
                x = rng.standard_normal((1, int(length), WIDTH)).astype(np.float32)
                y = _infer(c, x)
                if i % 37 == 0:  # numerics hold along the way
                    np.testing.assert_allclose(y, np.maximum(x @ w, 0), rtol=1e-4, atol=1e-4)
                if i + 1 == WARM:
                    warm = _rss(pid)
                elif i + 1 > WARM and i % 10 == 0:
                    peak = max(peak, _rss(pid))
            peak = max(peak, _rss(pid))
            plans = c.get("/v2/models/seq/stats").json()["model_stats"][0]["aioge_plans"]
            assert plans["plans"] <= MAX_PLANS and plans["max_plans"] == MAX_PLANS, plans
            assert plans["compiles"] >= LENGTHS and plans["evictions"] >= LENGTHS - MAX_PLANS, plans
            assert c.post("/v2/repository/models/seq/unload").status_code == 200
            assert c.get("/v2/models/seq/ready").status_code != 200
            after = _rss(pid)
        growth, kept = peak - warm, after - base
        assert growth <= RSS_GROWTH_BOUND, f"RSS grew {growth / MB:.1f} MB over {LENGTHS - WARM} new lengths"
        assert kept <= RSS_AFTER_UNLOAD_BOUND, f"RSS {kept / MB:.1f} MB above the baseline after the unload"
    finally:
        assert s.stop() == 0, "".join(s.stderr)[-3000:]
