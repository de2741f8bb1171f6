"""THE door from Python to C: the only module that loads a backend.

Backends (``AIOGE_BACKEND``):

* ``host`` (default): the embedded host runtime ``aioge._native._hostrt``,
  compiled from ``cffi_build/`` by ``pip install``.
* ``ascend``: the same declarations in ABI mode, ``ffi.dlopen`` of
  ``libascendcl.so`` -- from ``AIOGE_ACL_LIBRARY`` (several paths joined
  with ``:`` are searched in order, e.g. ``libascendcl.so:libacl_op_compiler.so``)
  or from the CANN install under ``ASCEND_HOME_PATH``.

Everything else in aioge uses ``ffi``, ``lib`` and :func:`check` from here.
This layer is thin and synchronous: no asyncio, no objects with lifecycles.
"""

from __future__ import annotations

import logging
import os
import pathlib
import threading
from typing import Any

from ..errors import BackendError, error_class

__all__ = (
    "ffi",
    "lib",
    "backend",
    "library_path",
    "has_graph_api",
    "has_host_hooks",
    "check",
    "recent_error",
    "bind_context",
    "forget_context",
    "counters",
    "op_types",
    "blas_info",
    "kernel_families",
    "kernel_family",
    "nchwc_kernel_family",
    "contiguous",
    "host_ptr",
    "env_number",
    "HOST_RUNTIME_VERSION",
)

#: must equal HRT_VERSION in cffi_build/hostrt/hrt.h
HOST_RUNTIME_VERSION = 2


class _Libs:
    """Several dlopen'ed libraries seen as one ``lib`` (ABI mode).

    A name none of them defines is an ``AttributeError``, so optional entry
    points (the aiogeHost* hooks, absent from a real libascendcl.so) can be
    probed with ``hasattr``.
    """

    def __init__(self, libs: list[Any], missing: type[Exception]) -> None:
        self._libs = libs
        # cffi raises ffi.error, not AttributeError, for a symbol the library lacks
        self._missing = (AttributeError, missing)

    def __getattr__(self, name: str) -> Any:
        for lib in self._libs:
            try:
                value = getattr(lib, name)
            except self._missing:
                continue
            setattr(self, name, value)  # cache: later lookups skip __getattr__
            return value
        raise AttributeError(f"no ACL library defines {name!r}")


def _ascend_paths() -> list[str]:
    explicit = os.environ.get("AIOGE_ACL_LIBRARY", "")
    if explicit:
        return [p for p in explicit.split(os.pathsep) if p]
    home = os.environ.get("ASCEND_HOME_PATH") or os.environ.get("ASCEND_TOOLKIT_HOME")
    if not home:
        raise BackendError(
            "AIOGE_BACKEND=ascend needs AIOGE_ACL_LIBRARY (path to libascendcl.so) or ASCEND_HOME_PATH"
        )
    found = []
    for sub in ("lib64", "runtime/lib64", "aarch64-linux/lib64", "x86_64-linux/lib64"):
        for name in ("libascendcl.so", "libacl_op_compiler.so"):
            p = pathlib.Path(home, sub, name)
            if p.exists() and str(p) not in found:
                found.append(str(p))
    if not found:
        raise BackendError(f"no libascendcl.so under ASCEND_HOME_PATH={home}")
    return found


#: entry points every ACL library must define (the op compiler's too: aclopCompileAndExecute
#: lives in libacl_op_compiler.so on a CANN install)
_REQUIRED = ("aclInit", "aclrtSetDevice", "aclrtCreateContext", "aclrtCreateStream", "aclrtMalloc",
             "aclrtMemcpyAsync", "aclrtRecordEvent", "aclrtSynchronizeEventWithTimeout", "aclGetRecentErrMsg",
             "aclopCompileAndExecute")  # fmt: skip


def env_number(name: str, default: float, *, minimum: float | None = None, integer: bool = False) -> float:
    """A numeric environment setting; a value that is not one is a :class:`~aioge.BackendError`
    naming the variable (never silently ignored)."""
    text = os.environ.get(name, "").strip()
    if not text:
        return default
    try:
        value = int(text) if integer else float(text)
    except ValueError:
        kind = "an integer" if integer else "a number"
        raise BackendError(f"{name}={text!r} is not {kind}") from None
    if minimum is not None and value < minimum:
        raise BackendError(f"{name}={text!r} must be at least {minimum:g}")
    return value


def _source_tree() -> pathlib.Path | None:
    """The checkout this package is imported from, when it is one (not an installed copy)."""
    root = pathlib.Path(__file__).resolve().parent.parent.parent
    return root if (root / "pyproject.toml").exists() and (root / "cffi_build").is_dir() else None


def _load() -> tuple[Any, Any, str, str]:
    name = os.environ.get("AIOGE_BACKEND", "host").strip().lower() or "host"
    if name == "host":
        try:
            from . import _hostrt  # type: ignore[attr-defined]  # the built extension: no stub
        except ImportError as e:
            tree = _source_tree()
            if tree is not None:  # the checkout shadows an installed aioge (e.g. run from its root)
                raise BackendError(
                    f"you are importing aioge from the source tree at {tree}, where the host runtime is not "
                    "built: run from another directory, or install with `pip install -e .`"
                ) from e
            raise BackendError(f"the embedded host runtime is not built ({e}); reinstall with `pip install .`") from e
        return _hostrt.ffi, _hostrt.lib, "host", _hostrt.__file__
    if name == "ascend":
        from ._acl_abi import ffi as abi_ffi

        paths = _ascend_paths()
        libs = []
        # RTLD_NODELETE: the runtime's own threads run library code until the
        # process exits; cffi would dlclose the library when `lib` is
        # collected at interpreter shutdown and unmap code still executing
        flags = abi_ffi.RTLD_NOW | getattr(abi_ffi, "RTLD_NODELETE", 0)
        for p in paths:
            try:
                libs.append(abi_ffi.dlopen(p, flags))
            except OSError as e:
                raise BackendError(f"cannot dlopen {p}: {e}") from e
        joined = _Libs(libs, abi_ffi.error)
        missing = [n for n in _REQUIRED if not _defines(joined, n)]
        if missing:
            what = "is not an ACL library" if len(missing) == len(_REQUIRED) else "lacks ACL entry points"
            hint = " (add libacl_op_compiler.so, joined with ':')" if missing == ["aclopCompileAndExecute"] else ""
            raise BackendError(f"AIOGE_ACL_LIBRARY={':'.join(paths)} {what}: missing {', '.join(missing)}{hint}")
        return abi_ffi, joined, "ascend", paths[0]
    raise BackendError(f"unknown AIOGE_BACKEND={name!r} (use 'host' or 'ascend')")


def _defines(lib: Any, name: str) -> bool:
    try:
        getattr(lib, name)
    except AttributeError:
        return False
    return True


ffi, lib, backend, library_path = _load()


def _has(name: str) -> bool:
    return _defines(lib, name)


#: the aiogeHost* test hooks and counters exist (the host runtime, in either binding mode)
has_host_hooks = _has("aiogeHostVersion")
#: the aiogeGraph* API (cffi_build/aioge_graph.h) exists: compiled graphs can run sunk.  The host
#: runtime implements it; on a CANN machine a shim over GE can, without any test hooks.
has_graph_api = _has("aiogeGraphCreate")

if has_host_hooks:
    _v = lib.aiogeHostVersion()
    if _v != HOST_RUNTIME_VERSION:
        raise BackendError(
            f"host runtime at {library_path} is version {_v}, aioge expects {HOST_RUNTIME_VERSION}: rebuild it"
        )


def recent_error() -> str:
    """Get-and-clear ``aclGetRecentErrMsg`` of the calling thread ("" when empty)."""
    p = lib.aclGetRecentErrMsg()
    return "" if p == ffi.NULL else ffi.string(p).decode("utf-8", "replace")


def check(rc: int, what: str) -> None:
    """Raise the :class:`~aioge.AclError` subclass for a non-zero code."""
    if rc:
        raise error_class(rc)(rc, recent_error(), what)


def contiguous(value: Any, dtype: Any = None) -> Any:
    """A C-contiguous numpy array of ``value`` (0-d stays 0-d, unlike np.ascontiguousarray)."""
    import numpy as np

    a = np.asarray(value, dtype)
    if a.flags.c_contiguous:
        return a
    if a.dtype.kind in "biuf" and not any(a.strides):  # a broadcast scalar (a folded fill): filled, not copied
        return np.full(a.shape, a[(0,) * a.ndim], a.dtype)
    return a.copy(order="C")


def host_ptr(arr: Any) -> Any:
    """A ``void *`` to a contiguous numpy array's bytes (the array must stay alive)."""
    try:
        return ffi.from_buffer(arr)
    except (TypeError, ValueError, BufferError):
        # dtypes without a buffer-protocol format (bfloat16): use the address
        return ffi.cast("void *", arr.ctypes.data)


# ---- per-thread current context -----------------------------------------------------------
_tls = threading.local()


def bind_context(ctx: Any) -> None:
    """Make ``ctx`` the calling thread's current context (a no-op if it is)."""
    if getattr(_tls, "ctx", None) is not ctx:
        check(lib.aclrtSetCurrentContext(ctx), "aclrtSetCurrentContext")
        _tls.ctx = ctx


def forget_context(ctx: Any = None) -> None:
    """Drop the cached binding (after the runtime changed the current context)."""
    if ctx is None or getattr(_tls, "ctx", None) is ctx:
        _tls.ctx = None


# ---- host runtime extras ----------------------------------------------------------------
def _load_blas() -> str:
    """Point the host runtime at the scipy-openblas32 wheel's library."""
    if not has_host_hooks:
        return ""

    def load() -> None:
        # OpenBLAS starts its worker threads when the library loads (importing
        # scipy_openblas32 loads it), and they inherit the loading thread's
        # priority: load it from a thread at the host runtime's background
        # priority, so device work never crowds out an event loop sharing the
        # cores (AIOGE_HOST_WORKER_NICE, as for stream workers)
        if nice > 0 and hasattr(os, "setpriority"):
            try:
                os.setpriority(os.PRIO_PROCESS, threading.get_native_id(), nice)
            except OSError:
                pass
        explicit = os.environ.get("AIOGE_BLAS_LIBRARY")
        candidates = [explicit] if explicit else []
        if not explicit:
            try:
                import scipy_openblas32  # type: ignore[import-untyped]

                libdir = pathlib.Path(scipy_openblas32.get_lib_dir())
                candidates += [str(p) for p in sorted(libdir.glob(f"lib{scipy_openblas32.get_library()}*.so*"))]
            except Exception:  # wheel missing or broken: the C fallback GEMM is used
                pass
        for c in candidates:
            if lib.aiogeHostSetBlasLibrary(c.encode()) == 0:
                break
            recent_error()  # clear the failure text; fall back

    nice = int(env_number("AIOGE_HOST_WORKER_NICE", 10, integer=True))  # checked here, not in the thread
    t = threading.Thread(target=load, name="aioge-blas-load")
    t.start()
    t.join()
    return blas_info()


def kernel_family() -> str:
    """The matrix-product kernel family the host runtime chose ("avx512", "avx2", "generic", or one
    forced by ``AIOGE_HOST_ISA``; "" on a real backend)."""
    if not _has("aiogeHostKernelFamily"):
        return ""
    return str(ffi.string(lib.aiogeHostKernelFamily()).decode())


def nchwc_kernel_family() -> str:
    """The family of the NCHWc8 conv and pool kernels, chosen by the same switch as
    :func:`kernel_family` ("avx512", "avx2" or "generic"; "" on a real backend)."""
    if not _has("aiogeHostNchwcKernelFamily"):
        return ""
    return str(ffi.string(lib.aiogeHostNchwcKernelFamily()).decode())


def kernel_families(*, supported: bool = True) -> list[str]:
    """The matrix-product kernel families built in, best first: those this CPU runs (``supported``)
    or all of them (``AIOGE_HOST_ISA`` names one; [] on a real backend)."""
    if not _has("aiogeHostKernelFamilyAt"):
        return []
    out, ok = [], ffi.new("int *")
    i = 0
    while (name := lib.aiogeHostKernelFamilyAt(i, ok)) != ffi.NULL:
        if ok[0] or not supported:
            out.append(str(ffi.string(name).decode()))
        i += 1
    return out


def blas_info() -> str:
    """What the host runtime uses for GEMM ("" on a real backend)."""
    if not has_host_hooks:
        return ""
    return str(ffi.string(lib.aiogeHostBlasInfo()).decode())


_load_blas()
logging.getLogger("aioge").debug("backend %s from %s (graph API: %s, host hooks: %s, BLAS: %s)", backend,
                                 library_path, has_graph_api, has_host_hooks, blas_info() or "n/a")  # fmt: skip

_COUNTER_FIELDS = (
    "contexts", "streams", "events", "tensor_descs", "data_buffers", "attrs",
    "device_allocations", "device_bytes", "host_allocations", "host_bytes", "deferred_frees",
    "op_cache_hits", "op_cache_misses", "op_cache_entries", "op_cache_evictions",
    "tasks_executed", "tasks_failed", "subscriptions", "graphs", "op_cache_max_entries",
    "op_cache_bytes", "op_cache_max_bytes", "captured_models",
)  # fmt: skip


def counters() -> dict[str, int]:
    """Live-handle, memory and op-cache counters of the host runtime.

    Raises:
        BackendError: on a backend without the host hooks.
    """
    if not has_host_hooks:
        raise BackendError(f"the {backend} backend has no aioge host counters")
    c = ffi.new("aiogeHostCounters *")
    check(lib.aiogeHostGetCounters(c), "aiogeHostGetCounters")
    return {f: int(getattr(c, f)) for f in _COUNTER_FIELDS}


def set_op_cache_bytes(max_bytes: int) -> None:
    """Bound the compiled-op cache in bytes of host memory (``aiogeHostSetOpCacheBytes``).

    Raises:
        BackendError: on a backend without the host hooks.
        InvalidParamError: ``max_bytes`` is 0.
    """
    if not has_host_hooks:
        raise BackendError(f"the {backend} backend has no bound on its op cache in bytes")
    check(lib.aiogeHostSetOpCacheBytes(max_bytes), "aiogeHostSetOpCacheBytes")


def op_types() -> list[str]:
    """The op types registered in the host runtime (``aiogeHostListOps``), sorted.

    Raises:
        BackendError: on a backend without the host hooks.
    """
    if not has_host_hooks:
        raise BackendError(f"the {backend} backend cannot list its op types")
    n = int(lib.aiogeHostListOps(ffi.NULL, 0))
    names = ffi.new("const char *[]", n)
    n = min(n, int(lib.aiogeHostListOps(names, n)))
    return sorted(ffi.string(names[i]).decode() for i in range(n))
