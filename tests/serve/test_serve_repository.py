"""The model repository extension in process, on asyncio and trio: an unload lets the requests it
accepted finish, a load brings the model back (its own task keeps it open, whichever task asked)."""

from __future__ import annotations

import json

import anyio
import numpy as np
import pytest

from aioge.serve.errors import ModelNotFoundError
from aioge.serve.server import InferenceServer, ModelSpec
from tests.serve.test_serve_fastpath import W, linear, rows

pytestmark = pytest.mark.anyio


async def test_unload_finishes_accepted_requests_then_load_brings_the_model_back(dev):
    spec = ModelSpec(linear, max_batch_size=4, batch_sizes=(4,), max_queue_delay=30.0)  # waits for 4 rows
    async with InferenceServer({"linear": spec}, device=dev) as server:
        results = []

        async def call(i: int) -> None:
            results.append(await server.models["linear"].batcher.infer({"x": rows(1, i)}))

        async with anyio.create_task_group() as tg:
            for i in range(2):
                tg.start_soon(call, i)
            with anyio.fail_after(60):
                while server.models["linear"].batcher.queue_depth < 2:
                    await anyio.sleep(0.01)
            reply = await server.unload("linear")  # the 2 queued requests leave at once and finish
        assert reply.status == 200
        assert sorted(float(r["y"][0, 0]) for r in results) == sorted(float((rows(1, i) @ W)[0, 0]) for i in range(2))
        with pytest.raises(ModelNotFoundError):
            server.model("linear")
        assert (await server.unload("linear")).status == 400
        index = json.loads(server.repository_index().body)
        assert index == [{"name": "linear", "version": "1", "state": "UNAVAILABLE", "reason": "unloaded"}]

        assert (await server.load("linear")).status == 200
        out = await server.models["linear"].batcher.infer({"x": rows(4, 1.0)})  # 4 rows: a full batch, at once
        np.testing.assert_allclose(out["y"], rows(4, 1.0) @ W, rtol=1e-5)
        assert (await server.load("nope")).status == 400
        server.begin_shutdown()
        reply = await server.load("linear")
        assert reply.status == 503 and "shutting down" in json.loads(reply.body)["error"]
    assert not server.models
