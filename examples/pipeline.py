"""Copy-in / compute / copy-out overlapped on three streams.

    pip install . && python examples/pipeline.py

Each batch is uploaded on the copy-in stream, multiplied on the compute
stream and downloaded on the copy-out stream.  aioge orders the streams by
itself: a tensor produced on one stream and used on another makes the second
wait for it on the device (aclrtStreamWaitEvent), never on the host; the
event loop only awaits the results.  A serial run on one stream is timed for
comparison.
"""

from __future__ import annotations

import asyncio
import time

import numpy as np

import aioge

N, BATCHES = 512, 24


async def run(dev: aioge.Device, w_host: np.ndarray, xs: list[np.ndarray], streams: tuple[aioge.Stream, ...]) -> float:
    copy_in, compute, copy_out = streams
    w = compute.upload(w_host)
    t0 = time.perf_counter()
    pending = []
    for x in xs:
        xd = copy_in.upload(x)  # stream 1: H2D
        (y,) = aioge.op("MatMul", [xd, w, None], [aioge.TensorSpec((N, N))], stream=compute)  # stream 2
        y = aioge.op("Relu", [y], [aioge.TensorSpec((N, N))], stream=compute)[0]
        pending.append(asyncio.ensure_future(y.numpy(stream=copy_out)))  # stream 3: D2H
        await copy_in.drain()  # backpressure: never more than high_water launches in flight
    outs = await asyncio.gather(*pending)
    dt = time.perf_counter() - t0
    assert len(outs) == len(xs)
    for i, (x, out) in enumerate(zip(xs, outs)):  # every batch, in order
        np.testing.assert_allclose(out, np.maximum(x @ w_host, 0), rtol=1e-4, atol=1e-4, err_msg=f"batch {i}")
    return dt


async def main() -> None:
    rng = np.random.default_rng(0)
    w = (rng.standard_normal((N, N)) / np.sqrt(N)).astype(np.float32)
    xs = [rng.standard_normal((N, N)).astype(np.float32) for _ in range(BATCHES)]
    async with aioge.open_device(0) as dev:
        async with dev.open_stream() as a, dev.open_stream() as b, dev.open_stream() as c:
            t3 = await run(dev, w, xs, (a, b, c))
        async with dev.open_stream() as s:
            t1 = await run(dev, w, xs, (s, s, s))
    print(f"{BATCHES} batches of {N}x{N}: three streams {t3 * 1e3:.1f} ms, one stream {t1 * 1e3:.1f} ms "
          f"({t1 / t3:.2f}x)")  # fmt: skip


if __name__ == "__main__":
    asyncio.run(main())
