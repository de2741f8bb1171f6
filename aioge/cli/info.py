"""``aioge info``: the backend and what it runs on."""

from __future__ import annotations

import argparse
import asyncio
import ctypes
import importlib.metadata
import json
import os
import platform
import sys
from typing import Any

__all__ = ("collect", "register")

_ENV_EXTRA = ("ASCEND_HOME_PATH", "ASCEND_TOOLKIT_HOME", "OPENBLAS_NUM_THREADS", "OPENBLAS_CORETYPE",
              "OPENBLAS_L2_SIZE", "OMP_NUM_THREADS")  # fmt: skip


def register(sub: Any) -> None:
    p = sub.add_parser("info", help="backend, devices, BLAS, threads, op count, versions, environment",
                       description="Show the backend and its library, the devices and their memory, the BLAS in "
                                   "use and its threads, intra-op threads, the registered op count, versions and "
                                   "the environment variables in effect.")  # fmt: skip
    p.add_argument("--json", action="store_true", help="print one JSON object")
    p.set_defaults(func=run)


def _version(dist: str) -> str | None:
    try:
        return importlib.metadata.version(dist)
    except importlib.metadata.PackageNotFoundError:
        return None


def _blas_threads(info: str) -> int | None:
    """OpenBLAS's thread count, asked of the library the runtime loaded (None if unknown)."""
    path = info.partition(" from ")[2].strip()
    if not path or not os.path.exists(path):
        return None
    try:
        blas = ctypes.CDLL(path)
    except OSError:
        return None
    for sym in ("scipy_openblas_get_num_threads", "openblas_get_num_threads", "scipy_openblas_get_num_threads64_"):
        fn = getattr(blas, sym, None)
        if fn is not None:
            fn.restype = ctypes.c_int
            return int(fn())
    return None


async def _devices() -> list[dict[str, Any]]:
    import aioge

    out = []
    for i in range(aioge.device_count()):
        async with aioge.open_device(i) as dev:
            free, total = dev.memory_info()
            out.append({"id": i, "backend": dev.backend, "memory_free": free, "memory_total": total})
    return out


def collect() -> dict[str, Any]:
    """Everything ``aioge info`` shows, as plain data."""
    import numpy as np

    import aioge
    from aioge import _native

    blas = _native.blas_info()
    threads = int(_native.lib.aiogeHostGetNumThreads()) if _native.has_host_hooks else None
    ops = _native.op_types() if _native.has_host_hooks else None
    cache = aioge.op_cache_info()
    env = {k: v for k, v in sorted(os.environ.items()) if k.startswith("AIOGE_") or k in _ENV_EXTRA}
    versions: dict[str, str | None] = {"aioge": aioge.__version__, "python": platform.python_version(),
                                       "numpy": np.__version__}  # fmt: skip
    for dist in ("onnx", "onnxruntime", "ml_dtypes", "cffi", "anyio", "prometheus-client", "tqdm", "matplotlib"):
        versions[dist] = _version(dist)
    return {
        "backend": _native.backend,
        "library": str(_native.library_path),
        "graph_api": _native.has_graph_api,
        "host_hooks": _native.has_host_hooks,
        "devices": asyncio.run(_devices()),
        "blas": blas or None,
        "blas_threads": _blas_threads(blas) if blas else None,
        "kernel_family": _native.kernel_family() or None,
        "nchwc_kernel_family": _native.nchwc_kernel_family() or None,
        "intra_op_threads": threads,
        "op_count": len(ops) if ops is not None else None,
        "op_cache": cache._asdict() if cache is not None else None,
        "platform": f"{platform.system()} {platform.machine()}, {os.cpu_count()} CPUs",
        "versions": versions,
        "env": env,
    }


def _bytes(n: int) -> str:
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if n < 1024 or unit == "TiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024  # type: ignore[assignment]
    return str(n)


def run(args: argparse.Namespace) -> int:
    info = collect()
    if args.json:
        print(json.dumps(info, indent=2))
        return 0
    rows: list[tuple[str, str]] = [
        ("backend", f"{info['backend']}  ({info['library']})"),
        ("graph API", "yes (sunk graphs)" if info["graph_api"] else "no (graphs run per op)"),
    ]
    for d in info["devices"]:
        rows.append((f"device {d['id']}", f"{_bytes(d['memory_free'])} free of {_bytes(d['memory_total'])}"))
    if info["blas"]:
        t = info["blas_threads"]
        rows.append(("BLAS", info["blas"] + (f", {t} thread{'s' if t != 1 else ''}" if t is not None else "")))
    if info.get("kernel_family"):
        rows.append(("matrix kernels", str(info["kernel_family"])))
    if info.get("nchwc_kernel_family"):
        rows.append(("conv kernels (NCHWc8)", str(info["nchwc_kernel_family"])))
    if info["intra_op_threads"] is not None:
        rows.append(("intra-op threads", str(info["intra_op_threads"])))
    if info["op_count"] is not None:
        rows.append(("registered ops", f"{info['op_count']} (aioge ops)"))
    rows.append(("platform", info["platform"]))
    rows.append(("versions", ", ".join(f"{k} {v}" for k, v in info["versions"].items() if v)))
    env = info["env"]
    rows.append(("environment", ", ".join(f"{k}={v}" for k, v in env.items()) if env else "(no AIOGE_* set)"))
    width = max(len(k) for k, _ in rows)
    for k, v in rows:
        print(f"{k.ljust(width)}  {v}")
    sys.stdout.flush()
    return 0
