"""The ``ascend`` backend's ABI-mode bindings, exercised on every run.

The host runtime's C sources are compiled once and linked twice as a
standalone ``libascendcl.so``: with every symbol, and with only the ACL
names exported (a linker version script hides ``aiogeHost*``,
``aiogeGraph*`` and the runtime's internals, as a real library lacks them).
In subprocesses with ``AIOGE_BACKEND=ascend`` pointing ``ffi.dlopen`` at
them, the tests marked ``abi`` run against the first (the hooks still drive
their error and timeout paths), and the tests marked ``ascend`` against the
second -- the code paths a real Ascend takes: completion-lane threads under
asyncio, models per op, no counters.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import anyio
import numpy as np
import pytest

import aioge

ROOT = Path(__file__).resolve().parents[2]
SRC = ROOT / "cffi_build"


def build_standalone(out_dir: Path) -> tuple[Path, Path]:
    """``(full, acl_only)``: the same objects linked with every symbol / with only ``acl*`` exported."""
    cc = os.environ.get("CC", "cc")
    if shutil.which(cc) is None:
        pytest.skip(f"no C compiler ({cc})")
    sources = sorted(SRC.glob("hostrt/*.c")) + sorted(SRC.glob("hostrt/kernels/*.c"))
    flags = ["-O1", "-fPIC", "-std=gnu11", "-fwrapv", "-pthread", f"-I{SRC}"]

    def compile_one(src: Path) -> Path:
        obj = out_dir / (src.parent.name + "_" + src.stem + ".o")
        subprocess.run([cc, *flags, "-c", str(src), "-o", str(obj)], check=True, capture_output=True)
        return obj

    with ThreadPoolExecutor(max_workers=os.cpu_count() or 2) as pool:
        objs = [str(o) for o in pool.map(compile_one, sources)]
    script = out_dir / "acl_only.map"
    script.write_text("{ global: acl*; local: *; };\n")
    libs = []
    for name, extra in (("full", []), ("acl_only", [f"-Wl,--version-script={script}"])):
        lib = out_dir / name / "libascendcl.so"
        lib.parent.mkdir()
        subprocess.run([cc, "-shared", "-pthread", *extra, "-o", str(lib), *objs, "-ldl", "-lm"], check=True)
        libs.append(lib)
    return libs[0], libs[1]


@pytest.fixture(scope="module")
def standalone_libs(tmp_path_factory):
    return build_standalone(tmp_path_factory.mktemp("acl"))


@pytest.fixture(scope="module")
def standalone_lib(standalone_libs):
    return standalone_libs[0]


@pytest.fixture(scope="module")
def acl_only_lib(standalone_libs):
    return standalone_libs[1]


def _env(lib: Path) -> dict[str, str]:
    return {**os.environ, "AIOGE_BACKEND": "ascend", "AIOGE_ACL_LIBRARY": str(lib)}


def test_dlopen_backend_loads_the_library(standalone_lib):
    code = (
        "import aioge, aioge._native as n\n"
        "assert aioge.backend == 'ascend', aioge.backend\n"
        "assert n.library_path.endswith('libascendcl.so')\n"
        "assert type(n.lib).__name__ == '_Libs'\n"
        "print(n.has_host_hooks)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], env=_env(standalone_lib), capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "True"


def test_missing_library_is_a_clear_backend_error(tmp_path):
    env = {**os.environ, "AIOGE_BACKEND": "ascend", "AIOGE_ACL_LIBRARY": str(tmp_path / "nope.so")}
    out = subprocess.run([sys.executable, "-c", "import aioge"], env=env, capture_output=True, text=True)
    assert out.returncode != 0 and "BackendError" in out.stderr and "nope.so" in out.stderr
    env = {k: v for k, v in os.environ.items() if k not in ("ASCEND_HOME_PATH", "ASCEND_TOOLKIT_HOME")}
    env.update(AIOGE_BACKEND="ascend", AIOGE_ACL_LIBRARY="")
    out = subprocess.run([sys.executable, "-c", "import aioge"], env=env, capture_output=True, text=True)
    assert out.returncode != 0 and "ASCEND_HOME_PATH" in out.stderr
    env["AIOGE_BACKEND"] = "tpu"
    out = subprocess.run([sys.executable, "-c", "import aioge"], env=env, capture_output=True, text=True)
    assert out.returncode != 0 and "unknown AIOGE_BACKEND" in out.stderr
    # a library that loads but is not ACL: a BackendError naming it and what it lacks,
    # at import (it was a bare AttributeError at the first call)
    import ctypes.util

    libm = ctypes.util.find_library("m") or "libm.so.6"
    env.update(AIOGE_BACKEND="ascend", AIOGE_ACL_LIBRARY=libm)
    out = subprocess.run([sys.executable, "-c", "import aioge"], env=env, capture_output=True, text=True)
    last = out.stderr.strip().splitlines()[-1]
    assert out.returncode != 0 and last.startswith(f"aioge.errors.BackendError: AIOGE_ACL_LIBRARY={libm} is not an "
                                                   "ACL library: missing aclInit,"), last  # fmt: skip


def test_abi_suite_through_dlopen(standalone_lib):
    cmd = [sys.executable, "-m", "pytest", "-q", "-x", "-m", "abi", "-p", "no:cacheprovider",
           *(str(ROOT / "tests" / f) for f in ("hostrt/test_hostrt.py", "runtime/test_core.py",
                                             "runtime/test_executable.py", "hostrt/test_hostrt_graph.py"))]  # fmt: skip
    out = subprocess.run(cmd, env=_env(standalone_lib), capture_output=True, text=True, cwd=ROOT)
    assert out.returncode == 0, out.stdout[-4000:] + out.stderr[-2000:]
    assert " passed" in out.stdout


def test_acl_only_library_has_no_aioge_symbols(acl_only_lib):
    code = (
        "import ctypes, sys\n"
        "lib = ctypes.CDLL(sys.argv[1])\n"
        "assert hasattr(lib, 'aclInit') and hasattr(lib, 'aclopCompileAndExecute')\n"
        "names = ('aiogeHostVersion', 'aiogeHostGetCounters', 'aiogeHostLaunchGate', 'aiogeGraphCreate',\n"
        "         'hrt_find_op')\n"
        "assert not [n for n in names if hasattr(lib, n)]\n"
        "import aioge, aioge._native as n\n"
        "assert aioge.backend == 'ascend' and n.library_path == sys.argv[1]\n"
        "print(n.has_host_hooks, n.has_graph_api, aioge.op_cache_info())\n"
    )
    out = subprocess.run([sys.executable, "-c", code, str(acl_only_lib)], env=_env(acl_only_lib),
                         capture_output=True, text=True)  # fmt: skip
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["False", "False", "None"]


def test_ascend_suite_through_the_acl_only_library(acl_only_lib, tmp_path):
    cmd = [sys.executable, "-m", "pytest", "-q", "-x", "-m", "ascend", "-p", "no:cacheprovider",
           str(ROOT / "tests/runtime/test_ascend_paths.py"), str(ROOT / "tests/runtime/test_core.py"),
           str(ROOT / "tests/runtime/test_capture.py")]  # fmt: skip
    # AIOGE_HOST_CANN_ONLY: the host-only kernels ("_Fused*") are hidden, as on a real Ascend
    env = {**_env(acl_only_lib), "AIOGE_TEST_DUMP_DIR": str(tmp_path), "AIOGE_HOST_CANN_ONLY": "1"}
    out = subprocess.run(cmd, env=env, capture_output=True, text=True, cwd=ROOT)
    assert out.returncode == 0, out.stdout[-4000:] + out.stderr[-2000:]
    assert " passed" in out.stdout and "skipped" not in out.stdout, out.stdout[-2000:]
    # the models ran per op there; here the host backend runs them (sunk): same results
    for name, got in anyio.run(_host_model_outputs).items():
        per_op = np.load(tmp_path / f"{name}.npz")
        assert set(per_op.files) == set(got)
        for k, v in got.items():
            np.testing.assert_allclose(per_op[k], v, rtol=1e-4, atol=1e-5, err_msg=f"{name}/{k}")


async def _host_model_outputs() -> dict[str, dict[str, np.ndarray]]:
    from tests.graph import models as M
    from tests.runtime.test_ascend_paths import MODELS

    outs = {}
    async with aioge.open_device(0) as dev:
        for name, build in MODELS.items():
            proto = build()
            async with await dev.compile(aioge.load_onnx(proto)) as model:
                assert model.mode == "sunk"
                outs[name] = await model.execute(M.sample_inputs(proto))
    return outs
