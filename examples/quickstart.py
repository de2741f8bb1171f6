"""aioge quickstart: ops and awaits on the embedded host runtime.

Needs: aioge only (no extra).

    pip install . && python examples/quickstart.py
"""

from __future__ import annotations

import asyncio
import time

import numpy as np

import aioge


async def heartbeat(stop: asyncio.Event, lags: list[float]) -> None:
    """Proves the loop stays free while the device works."""
    while not stop.is_set():
        t0 = time.perf_counter()
        await asyncio.sleep(0.001)
        lags.append(time.perf_counter() - t0 - 0.001)


async def main() -> None:
    rng = np.random.default_rng(0)
    a = rng.standard_normal((512, 512)).astype(np.float32)
    b = rng.standard_normal((512, 512)).astype(np.float32)

    async with aioge.open_device(0) as dev:
        print(f"backend: {dev.backend}; BLAS: {aioge._native.blas_info()}")
        async with dev.open_stream() as s:
            x, w = s.upload(a), s.upload(b)

            # typed ops: enqueue now, await later
            y = aioge.ops.relu(aioge.ops.add(aioge.ops.matmul(x, w), 1.0))
            out = await y.numpy()
            ref = np.maximum(a @ b + 1.0, 0)
            print("matmul+add+relu max error vs numpy:", float(np.abs(out - ref).max()))

            # the generic single-op API: aclopCompileAndExecute one to one
            (z,) = aioge.op("Mul", [x, x], [aioge.TensorSpec(x.shape, "float32")], stream=s)
            await s.synchronize(timeout=5.0)
            print("Mul ok:", np.allclose(await z.numpy(), a * a))

            # errors are typed and the stream stays usable
            try:
                aioge.op("Add", [x, x], [aioge.TensorSpec((3, 3))], stream=s)
            except aioge.OpOutputMismatchError as e:
                print("refused:", e.name, e.code)

            # many launches in flight, the event loop stays responsive
            stop, lags = asyncio.Event(), []
            hb = asyncio.create_task(heartbeat(stop, lags))
            t0 = time.perf_counter()
            acc = x
            for _ in range(50):
                acc = aioge.ops.matmul(acc, w)
                acc = aioge.ops.div(acc, 32.0)
            await acc
            elapsed = time.perf_counter() - t0
            stop.set()
            await hb
            lags.sort()
            p99 = lags[int(len(lags) * 0.99) - 1] if lags else 0.0
            print(f"100 launches in {elapsed * 1e3:.1f} ms; loop lag p99 {p99 * 1e3:.2f} ms over {len(lags)} beats")


if __name__ == "__main__":
    asyncio.run(main())
