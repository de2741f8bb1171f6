"""A dynamic-shape model's memory stays bounded over many shapes and is given back when it closes.

The model: Relu(x[B, S, 512] @ W) with W a 2 MiB constant, run at 1,000+ distinct (B, S) in
random order.  Each shape compiles a plan (at most ``max_plans`` are kept).  When evicted plans
left their arenas (a size per shape) in the device's block pool, this soak ended with 173 MB of
device memory (31 MB now) and closing the model gave back none of it nor of the 220 MB RSS it
had grown by.  The bounds below are generous for a shared machine (other processes do not
count in this process's RSS, but the C allocator keeps some freed memory for reuse).
"""

from __future__ import annotations

import gc
import os

import anyio
import numpy as np

import aioge
from aioge import _native

K, N = 512, 1024  # W: 2 MiB of float32
MB = 1 << 20
#: RSS may grow this much from the end of the warm-up to the end of the soak (the old code grew
#: ~170 MB there; in the full suite the process's other allocations move RSS by tens of MB)
RSS_GROWTH_BOUND = 96 * MB
#: device memory at any report: W once, and per kept plan its arenas (x and y at the largest
#: shape are 0.37 + 0.74 MiB): far below one copy of W per shape
DEVICE_BOUND = 48 * MB
#: RSS after the model closed, above the RSS before it was compiled (the op cache keeps its
#: ~1 KB kernels, Python its caches; in the full suite, with a 1.3 GB process, malloc_trim gives
#: back less: +49 MB was seen there).  The old code stayed 222 MB above.
RSS_AFTER_CLOSE_BOUND = 128 * MB


def _rss() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def _shapes(limit: int = 190) -> list[tuple[int, int]]:
    """Every (B, S) with B * S <= limit (1,031 shapes, B * S 104 on average), in random order."""
    pairs = [(b, s) for b in range(1, limit + 1) for s in range(1, limit // b + 1)]
    order = np.random.default_rng(0).permutation(len(pairs))
    return [pairs[i] for i in order]


def _model() -> tuple[aioge.graph.Graph, np.ndarray]:
    w = (np.random.default_rng(1).standard_normal((K, N)) / np.sqrt(K)).astype(np.float32)
    g = aioge.graph.Graph("dyn_matmul")
    x = g.input("x", ("B", "S", K), "float32")
    g.output(g.add_node("Relu", [g.add_node("MatMul", [x, g.constant("w", w)])], name="y"))
    return g, w


def test_a_thousand_shapes_keep_memory_flat_and_closing_gives_it_back() -> None:
    shapes = _shapes()
    assert len(shapes) >= 1000
    warm = 200
    rng = np.random.default_rng(2)

    async def main() -> dict[str, int]:
        g, w = _model()
        async with aioge.open_device(0) as dev:
            gc.collect()
            base_rss, base_dev = _rss(), _native.counters()["device_bytes"]
            model = await dev.compile(g)
            peak_dev = warm_rss = peak_rss = 0
            for i, (b, s) in enumerate(shapes):
                x = rng.standard_normal((b, s, K), dtype=np.float32)
                y = (await model.execute({"x": x}))["y"]
                if i % 97 == 0:  # numerics hold along the way
                    np.testing.assert_allclose(y, np.maximum(x @ w, 0), rtol=1e-4, atol=1e-4)
                if i % 25 == 0 or i == len(shapes) - 1:
                    peak_dev = max(peak_dev, _native.counters()["device_bytes"] - base_dev)
                    if i >= warm:
                        warm_rss = warm_rss or _rss()
                        peak_rss = max(peak_rss, _rss())
            stats = model.stats
            shared = model._weights.nbytes
            await model.aclose()
            gc.collect()
            closed_rss, closed_dev = _rss(), _native.counters()["device_bytes"]
        return {"base_rss": base_rss, "base_dev": base_dev, "peak_dev": peak_dev, "warm_rss": warm_rss,
                "peak_rss": peak_rss, "closed_rss": closed_rss, "closed_dev": closed_dev,
                "plans": stats["plans"], "compiles": stats["compiles"], "shared": shared}  # fmt: skip

    r = anyio.run(main)
    assert r["compiles"] == len(shapes) and r["plans"] == 8
    assert r["shared"] == 0  # W is read only through its packed panels (shared too): no plan uploads it
    assert r["peak_dev"] <= DEVICE_BOUND, r
    assert r["peak_rss"] - r["warm_rss"] <= RSS_GROWTH_BOUND, r
    assert r["closed_dev"] == r["base_dev"], r  # every plan's arenas, W, the pooled blocks: all freed
    assert r["closed_rss"] - r["base_rss"] <= RSS_AFTER_CLOSE_BOUND, r
