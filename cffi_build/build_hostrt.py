"""cffi build script: one set of declarations, two outputs.

- ``aioge._native._hostrt``: API mode, compiles the embedded host runtime
  (``hostrt/*.c``) against the declarations in ``acl.h`` + ``aioge_host.h``.
- ``aioge._native._acl_abi``: out-of-line ABI mode, the same declarations
  for ``ffi.dlopen()`` of a real ``libascendcl.so``.

Set ``AIOGE_PORTABLE=1`` to build without ``-march=native``.  ``AIOGE_SANITIZE`` (e.g.
``address,undefined`` or ``thread``) builds with that ``-fsanitize=`` at ``-O1`` for
``.ci/sanitize``; the process then needs the sanitizer runtime preloaded.  ``AIOGE_DEBUG_LOCKS=1``
builds with ``-DHRT_DEBUG_LOCKS``: every runtime lock taken out of the order written in
``hostrt/hrt.h`` aborts the process (``hostrt/hrt_lock.h``).
"""

from __future__ import annotations

import os
import pathlib

from cffi import FFI

HERE = pathlib.Path(__file__).resolve().parent
ROOT = HERE.parent


def cdef_text() -> str:
    """The declarations cffi sees: the ACL subset, the aioge host hooks, the graph API."""
    return "\n".join((HERE / h).read_text() for h in ("acl.h", "aioge_host.h", "aioge_graph.h"))


def _sources() -> list[str]:
    files = sorted(HERE.glob("hostrt/*.c")) + sorted(HERE.glob("hostrt/kernels/*.c"))
    # setuptools wants paths relative to the project root
    return [os.path.relpath(p, ROOT) for p in files]


def _sanitize() -> list[str]:
    kinds = os.environ.get("AIOGE_SANITIZE", "")
    if not kinds:
        return []
    # every report aborts (a sanitizer that only logs lets a test pass)
    return [f"-fsanitize={kinds}", "-fno-sanitize-recover=all", "-fno-omit-frame-pointer", "-g"]


def _cflags() -> list[str]:
    opt = "-O1" if _sanitize() else "-O3"
    # a call to a function whose header the file does not include is an error: the headers are the layers
    flags = [opt, "-std=gnu11", "-fwrapv", "-pthread", "-Wall", "-Wno-unused-function"]
    flags.append("-Werror=implicit-function-declaration")
    if os.environ.get("AIOGE_DEBUG_LOCKS", "") in ("1", "true", "yes"):
        flags.append("-DHRT_DEBUG_LOCKS")
    if os.environ.get("AIOGE_PORTABLE", "") not in ("1", "true", "yes"):
        flags.append("-march=native")
    return flags + _sanitize()


ffibuilder = FFI()
ffibuilder.cdef(cdef_text())
ffibuilder.set_source(
    "aioge._native._hostrt",
    '#include "hostrt/hrt.h"\n',
    sources=_sources(),
    include_dirs=[os.path.relpath(HERE, ROOT)],
    extra_compile_args=_cflags(),
    extra_link_args=_sanitize(),
    libraries=["pthread", "dl", "m"],
)

abi_builder = FFI()
abi_builder.cdef(cdef_text())
abi_builder.set_source("aioge._native._acl_abi", None)

if __name__ == "__main__":
    ffibuilder.compile(verbose=True)
