"""The packed float32 GEMM (cffi_build/hostrt/gemm_small.c, gemm_packed_tmpl.h) called directly,
against numpy in float64: a row block whose whole A fits in L2 runs panel by panel, a bigger one K
block by K block (row counts x K either side of that bound), ragged M (row panels of at most 6,
row blocks of 96), N (16-column panels) and K (256-row blocks), and A and C with row strides past
K and N -- the columns of C past N and the rows past M are left as they were.  Every kernel
family this CPU runs is checked."""

from __future__ import annotations

import ctypes

import numpy as np
import pytest

from aioge import _native
from tests.ops.opsutil import check

pytestmark = pytest.mark.skipif(_native.backend != "host", reason="the packed GEMM is the host runtime's")

#: floats of A a row block may hold and still run panel by panel (gemm_small.c's PB_A_L2)
A_L2 = 32 * 1024


def _c() -> ctypes.CDLL:
    so = ctypes.CDLL(_native.library_path)  # the loaded extension (dlopen counts references)
    so.hrt_sgemm_pack_b.restype = ctypes.c_void_p
    so.hrt_sgemm_pack_b.argtypes = [ctypes.c_bool, ctypes.c_int64, ctypes.c_int64, ctypes.c_void_p, ctypes.c_int64]
    so.hrt_sgemm_pb_free.restype = None
    so.hrt_sgemm_pb_free.argtypes = [ctypes.c_void_p]
    so.hrt_sgemm_packed_run.restype = ctypes.c_int
    so.hrt_sgemm_packed_run.argtypes = [ctypes.c_int64, ctypes.c_bool, ctypes.c_void_p, ctypes.c_int64, ctypes.c_void_p,
                                        ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int64]  # fmt: skip
    return so


def _families() -> list[str]:
    if _native.backend != "host":  # collected, then skipped
        return ["generic"]
    lib, ffi = _native.lib, _native.ffi
    found = [name for name in ("avx2", "generic") if lib.aiogeHostSetKernelFamily(name.encode()) == 0]
    assert lib.aiogeHostSetKernelFamily(ffi.NULL) == 0
    return found


def packed_product(m: int, k: int, n: int, *, tb: bool, pad_a: int, pad_c: int, seed: int) -> None:
    so = _c()
    rng = np.random.default_rng(seed)
    b = rng.standard_normal((n, k) if tb else (k, n)).astype(np.float32)
    a = rng.standard_normal((m, k + pad_a)).astype(np.float32)
    c = np.full((m + 1, n + pad_c), 7.0, np.float32)  # one row past M: never written
    pb = so.hrt_sgemm_pack_b(tb, n, k, b.ctypes.data, k if tb else n)
    assert pb
    try:
        rc = so.hrt_sgemm_packed_run(m, False, a.ctypes.data, k + pad_a, pb, None, c.ctypes.data, n + pad_c)
    finally:
        so.hrt_sgemm_pb_free(pb)
    assert rc == 0
    ref = a[:, :k].astype(np.float64) @ (b.T if tb else b).astype(np.float64)
    check(c[:m, :n], ref, rtol=1e-4, atol=1e-3 * max(1.0, np.sqrt(k) / 8))
    assert (c[:m, n:] == 7.0).all() and (c[m:] == 7.0).all()


# (m, k): rows x K either side of A_L2; m up to 96 rows is one row block
STRADDLE = [(8, A_L2 // 8), (8, A_L2 // 8 + 1), (13, A_L2 // 13), (13, A_L2 // 13 + 1), (96, A_L2 // 96),
            (96, A_L2 // 96 + 1), (7, 300)]  # fmt: skip


@pytest.mark.parametrize("family", _families())
@pytest.mark.parametrize(("m", "k"), STRADDLE)
def test_panel_and_k_block_orders_vs_numpy(family, m, k):
    lib, ffi = _native.lib, _native.ffi
    assert lib.aiogeHostSetKernelFamily(family.encode()) == 0
    try:
        packed_product(m, k, 37, tb=m % 2 == 1, pad_a=3, pad_c=5, seed=m + k)
    finally:
        lib.aiogeHostSetKernelFamily(ffi.NULL)


@pytest.mark.parametrize(("m", "k", "n", "pad_a", "pad_c"), [(2, 513, 16, 0, 0), (5, 1, 1, 2, 1), (11, 257, 48, 16, 0),
                                                            (97, 700, 33, 0, 16), (200, 130, 129, 1, 3)])  # fmt: skip
def test_strided_a_and_c_vs_numpy(m, k, n, pad_a, pad_c):
    packed_product(m, k, n, tb=False, pad_a=pad_a, pad_c=pad_c, seed=m * n)


def _pool_stats() -> tuple[int, int, int, int]:
    out = (ctypes.c_int64 * 4)()
    ctypes.CDLL(_native.library_path).hrt_pool_stats(out)
    return out[0], out[1], out[2], out[3]


@pytest.mark.parametrize(("m", "n"), [(8, 768), (33, 250)])
def test_pool_stats_count_the_products_split_over_two_threads(m, n):
    """hrt_pool_stats (what bench_graph.py --matmul prints as the helpers' share): each product
    split over 2 threads is a job of at least 2 chunks; helpers ran no more chunks than there were
    and woke for no more jobs than there were -- whichever thread got the cores."""
    lib = _native.lib
    threads = lib.aiogeHostGetNumThreads()
    assert lib.aiogeHostSetNumThreads(2) == 0
    try:
        before = _pool_stats()
        for seed in range(5):
            packed_product(m, 768, n, tb=False, pad_a=1, pad_c=3, seed=seed)
        after = _pool_stats()
    finally:
        assert lib.aiogeHostSetNumThreads(threads) == 0
    jobs, chunks, helped, woke = (a - b for a, b in zip(after, before, strict=True))
    assert jobs >= 5 and chunks >= 2 * jobs
    assert 0 <= helped <= chunks and 0 <= woke <= jobs
