"""The ``ascend`` backend's ABI-mode bindings, exercised on every run.

The host runtime's C sources are built as a standalone shared library that
exports the ACL symbols (as ``libascendcl.so`` does), and the tests marked
``abi`` run again in a subprocess with ``AIOGE_BACKEND=ascend`` pointing
``ffi.dlopen`` at it.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
SRC = ROOT / "cffi_build"


def build_standalone(out_dir: Path) -> Path:
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
        objs = list(pool.map(compile_one, sources))
    lib = out_dir / "libascendcl.so"
    subprocess.run([cc, "-shared", "-pthread", "-o", str(lib), *map(str, objs), "-ldl", "-lm"], check=True)
    return lib


@pytest.fixture(scope="module")
def standalone_lib(tmp_path_factory):
    return build_standalone(tmp_path_factory.mktemp("acl"))


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


def test_abi_suite_through_dlopen(standalone_lib):
    cmd = [sys.executable, "-m", "pytest", "-q", "-x", "-m", "abi", "-p", "no:cacheprovider",
           str(ROOT / "tests" / "test_runtime.py"), str(ROOT / "tests" / "test_core.py"),
           str(ROOT / "tests" / "test_graph_c.py")]  # fmt: skip
    out = subprocess.run(cmd, env=_env(standalone_lib), capture_output=True, text=True, cwd=ROOT)
    assert out.returncode == 0, out.stdout[-4000:] + out.stderr[-2000:]
    assert " passed" in out.stdout
