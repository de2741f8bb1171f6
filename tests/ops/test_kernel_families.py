"""The packed matrix products' kernel families (gemm_small.c's pb_families): every family this CPU
runs against numpy over the row counts around each family's micro-tile (6 and 14 rows), a ragged
last 16-column panel, K past one 256-row K block and not a multiple of it, the epilogues (alpha,
bias, Relu / Clip on the accumulators, Sigmoid / Gelu per tile, LeakyRelu after the block), GEMV
(M = 1) and two row blocks (M = 97) over the pool's threads.  One model a shape, run by each family
in turn (the packed B is the same for all).  ``avx2-w16`` is the ``avx512`` family's 16-lane source
built for AVX2: where the CPU has no AVX-512 it is what runs that code.  A family the CPU cannot
run is refused (AIOGE_HOST_ISA falls back to the best it runs)."""

from __future__ import annotations

import os
import subprocess
import sys

import numpy as np
import pytest

import aioge.errors
from aioge import _native
from tests.ops.opsutil import check
from tests.ops.test_packed_weights import gemm_layer

pytestmark = [
    pytest.mark.anyio,
    pytest.mark.skipif(not _native.has_host_hooks, reason="kernel families are the host runtime's"),
]

SUPPORTED = _native.kernel_families()
ALL = _native.kernel_families(supported=False)


def _family() -> str:
    return str(_native.ffi.string(_native.lib.aiogeHostKernelFamily()).decode())


def test_the_families_listed():
    assert SUPPORTED and set(SUPPORTED) <= set(ALL)
    assert ALL[-1] == "generic" and "generic" in SUPPORTED
    if "avx2" in ALL:  # x86-64: the 16-lane family and its AVX2 build are there too, never the default
        assert ALL == ["avx512", "avx2", "avx2-w16", "generic"]
        assert ALL.index("avx2-w16") > ALL.index("avx2")
    assert _native.kernel_family() == SUPPORTED[0]  # the default: the best this CPU runs


@pytest.mark.parametrize("act", ["none", "Relu", "Clip", "Sigmoid", "Gelu", "LeakyRelu"])
@pytest.mark.parametrize("m", [1, 2, 5, 13, 14, 15, 64, 97])
async def test_every_supported_family_vs_numpy(compiled, m, act):
    k, n = (300, 70) if m % 2 else (557, 131)  # K: 256 + 44, 2 x 256 + 45; N: 4 + 6/16, 8 + 3/16 panels
    g, feeds, ref = gemm_layer(m, k, n, ta=False, tb=m % 3 == 0, alpha=0.5, beta=2.0, c="N", act=act, seed=m * 7 + k)
    model = await compiled(g)
    assert model.plan.packed_weight_bytes == (n + 15) // 16 * 16 * k * 4
    lib, ffi = _native.lib, _native.ffi
    outs = {}
    try:
        for family in SUPPORTED:
            _native.check(lib.aiogeHostSetKernelFamily(family.encode()), "aiogeHostSetKernelFamily")
            assert _family() == family
            outs[family] = np.asarray(next(iter((await model.execute(feeds)).values())))
    finally:
        lib.aiogeHostSetKernelFamily(ffi.NULL)
    for family, got in outs.items():
        assert got.shape == ref.shape, family
        check(got, ref, rtol=1e-4, atol=1e-3 * max(1.0, np.sqrt(k) / 8))


def test_a_family_this_cpu_cannot_run_is_a_typed_error():
    missing = [f for f in ALL if f not in SUPPORTED]
    if not missing:
        pytest.skip("this CPU runs every family built in")
    before = _family()
    for name in missing:
        with pytest.raises(aioge.errors.InvalidParamError, match=name):
            _native.check(_native.lib.aiogeHostSetKernelFamily(name.encode()), "aiogeHostSetKernelFamily")
        assert _family() == before  # unchanged


def _family_with(isa: str) -> str:
    env = {**os.environ, "AIOGE_HOST_ISA": isa}
    code = "from aioge import _native; print(_native.kernel_family())"
    r = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120, check=True)
    return r.stdout.strip().splitlines()[-1]


def test_aioge_host_isa_forces_a_family_or_falls_back():
    # the best family this CPU runs when the name is unknown or not runnable here (avx512 without
    # AVX-512), the family itself otherwise (avx2-w16: only ever by name)
    names = ["avx512", "nonsense", *(["avx2-w16"] if "avx2-w16" in SUPPORTED else [])]
    for isa in names:
        want = isa if isa in SUPPORTED else SUPPORTED[0]
        assert _family_with(isa) == want, isa
