# cffi has no pyproject-only way to declare cffi_modules; everything else is in pyproject.toml.
# The host runtime (cffi, cffi_build/build_hostrt.py) and the launch extension (aioge/_native/_launch.c,
# a CPython extension: the prepared launch of aioge.op), both with build_hostrt's flags.
import importlib.util
import pathlib

from setuptools import Extension, setup

_spec = importlib.util.spec_from_file_location(
    "_aioge_build_hostrt", pathlib.Path(__file__).resolve().parent / "cffi_build" / "build_hostrt.py"
)
assert _spec is not None and _spec.loader is not None
_build = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_build)

setup(
    cffi_modules=["cffi_build/build_hostrt.py:ffibuilder", "cffi_build/build_hostrt.py:abi_builder"],
    ext_modules=[
        Extension(
            "aioge._native._launch",
            ["aioge/_native/_launch.c"],
            extra_compile_args=[f for f in _build._cflags() if f != "-std=gnu11"],
            extra_link_args=_build._sanitize(),
        )
    ],
)
