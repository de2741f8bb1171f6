"""Memory of a dynamic-shape model over many distinct shapes: RSS, the op cache, device memory.

Compiles ``Relu(x[B, S, K] @ W)`` with B and S symbolic and W a constant of ``K x N`` float32
(``--k 1024 --n 1024``: 4 MiB), executes it over ``--shapes`` distinct (B, S) in random order
(B in 1..8), twice each, and
prints every ``--every`` shapes: RSS (``/proc/self/statm``), the op cache
(``aioge.op_cache_info()``) and the runtime's device counters (``device_bytes``,
``device_allocations``, ``graphs``); then the same after ``model.aclose()`` and after the
device closes.

    python tools/dynamic_memory.py --shapes 1500 --k 64 --n 64
    python tools/dynamic_memory.py --shapes 1000 --k 1024 --n 1024
"""

from __future__ import annotations

import argparse
import os

import anyio
import numpy as np

import aioge
from aioge import _native
from aioge.graph import Graph

_PAGE = os.sysconf("SC_PAGE_SIZE")


def rss_mb() -> float:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * _PAGE / 1e6


def model(k: int, n: int) -> tuple[Graph, np.ndarray]:
    w = (np.random.default_rng(0).standard_normal((k, n), dtype=np.float32) / np.float32(np.sqrt(k))).astype(np.float32)
    g = Graph("dyn_matmul")
    x = g.input("x", ("B", "S", k), "float32")
    g.output(g.add_node("Relu", [g.add_node("MatMul", [x, g.constant("w", w)])], name="y"))
    return g, w


def shapes(count: int, max_b: int = 8, seed: int = 2) -> list[tuple[int, int]]:
    """``count`` distinct (B, S), B in 1..max_b and S in 1..ceil(count / max_b), in random order
    (the sizes a warmed-up server sees: no trend, so memory should stay flat)."""
    grid = [(1 + i % max_b, 1 + i // max_b) for i in range(count)]
    order = np.random.default_rng(seed).permutation(count)
    return [grid[i] for i in order]


def report(label: str) -> str:
    c = _native.counters()
    info = aioge.op_cache_info()
    ops = f"ops {info.currsize} ({info.nbytes / 1e6:.2f} MB)" if info is not None else "ops n/a"
    return (f"{label:>14}: rss {rss_mb():7.1f} MB  {ops}  device {c['device_bytes'] / 1e6:8.2f} MB "
            f"in {c['device_allocations']} allocations  graphs {c['graphs']}")  # fmt: skip


async def run(args: argparse.Namespace) -> None:
    print(report("start"))
    g, w = model(args.k, args.n)
    rng = np.random.default_rng(1)
    async with aioge.open_device(0) as dev:
        print(report("device open"))
        m = await dev.compile(g)
        for i, (b, s) in enumerate(shapes(args.shapes, args.max_b), start=1):
            x = rng.standard_normal((b, s, args.k), dtype=np.float32)
            for _ in range(2):
                y = (await m.execute({"x": x}))["y"]
            if args.check:
                np.testing.assert_allclose(y, np.maximum(x @ w, 0), rtol=1e-4, atol=1e-4)
            if i % args.every == 0:
                print(report(f"{i} shapes"), m.stats["plans"], "plans")
        await m.aclose()
        print(report("model closed"))
    print(report("device closed"))


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--shapes", type=int, default=1500, help="distinct input shapes (each executed twice)")
    p.add_argument("--k", type=int, default=64, help="input width (W's rows)")
    p.add_argument("--n", type=int, default=64, help="output width (W's columns)")
    p.add_argument("--max-b", type=int, default=8, help="batch sizes 1..max_b (S spans the rest)")
    p.add_argument("--every", type=int, default=100, help="report every this many shapes")
    p.add_argument("--check", action="store_true", help="check every output against numpy")
    anyio.run(run, p.parse_args())


if __name__ == "__main__":
    main()
