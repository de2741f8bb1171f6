"""The compiled-op cache's statistics and its bound in bytes (:func:`aioge.op_cache_info`).

The cache is process-wide, as in ACL: every device and stream shares it, keyed by
(op type, descs, const and host-placed values, attrs). It is a least-recently-used
cache bounded twice: in kernels (``aclopSetMaxOpQueueNum``, ACL's default 20000) and
in bytes of host memory the kernels hold (``AIOGE_OP_CACHE_BYTES``, default an eighth
of the device memory capacity ``AIOGE_HOST_DEVICE_MEMORY``; :func:`set_op_cache_max_bytes`).
"""

from __future__ import annotations

import operator
from typing import NamedTuple

from .. import _native

__all__ = ("OpCacheInfo", "op_cache_info", "set_op_cache_max_bytes")


class OpCacheInfo(NamedTuple):
    """Statistics of the compiled-op cache, shaped like ``functools``' ``CacheInfo``.

    Attributes:
        hits: launches that reused a compiled kernel (cumulative).
        misses: launches that had to compile one (cumulative; a launch the
            runtime refuses counts as a miss too).
        maxsize: the LRU bound in kernels (``aclopSetMaxOpQueueNum``, ACL's default 20000).
        currsize: compiled kernels cached now.
        evictions: kernels dropped to respect either bound (cumulative).
        nbytes: host memory the cached kernels hold now (their descs, copies of
            const and host-placed values, and what their plans report).
        max_bytes: the LRU bound in bytes (``AIOGE_OP_CACHE_BYTES``,
            :func:`set_op_cache_max_bytes`; default an eighth of the device memory capacity).
    """

    hits: int
    misses: int
    maxsize: int
    currsize: int
    evictions: int
    nbytes: int = 0
    max_bytes: int = 0


def op_cache_info() -> OpCacheInfo | None:
    """Hits, misses, size in kernels and in bytes of the runtime's compiled-op cache.

    Returns:
        An :class:`OpCacheInfo`, or ``None`` on a backend that does not expose
        these statistics (a real ``libascendcl.so`` has no call for them), so
        monitoring code runs unchanged on both backends.

    Example:
        >>> info = aioge.op_cache_info()
        >>> if info is not None:
        ...     print(f"{info.hits / max(info.hits + info.misses, 1):.0%} of launches hit, "
        ...           f"{info.nbytes / 2**20:.1f} MiB of {info.max_bytes / 2**20:.0f} MiB")
    """
    if not _native.has_host_hooks:
        return None
    c = _native.counters()
    return OpCacheInfo(
        c["op_cache_hits"], c["op_cache_misses"], c["op_cache_max_entries"], c["op_cache_entries"],
        c["op_cache_evictions"], c["op_cache_bytes"], c["op_cache_max_bytes"],
    )  # fmt: skip


def set_op_cache_max_bytes(max_bytes: int) -> None:
    """Bound the compiled-op cache to ``max_bytes`` of host memory (process-wide).

    Least recently used kernels are evicted at once to fit; a kernel larger than the
    bound by itself still runs, it is just not kept. The environment variable
    ``AIOGE_OP_CACHE_BYTES`` (``512M``, ``2G``, ...) sets the starting bound.

    Raises:
        ValueError: ``max_bytes`` is not a positive integer.
        BackendError: on a backend without the host hooks (a real ``libascendcl.so``
            manages its own op cache).
    """
    try:
        n = operator.index(max_bytes)
    except TypeError:
        n = 0
    if n < 1 or isinstance(max_bytes, bool):
        raise ValueError(f"max_bytes must be a positive integer, not {max_bytes!r}")
    _native.set_op_cache_bytes(n)
