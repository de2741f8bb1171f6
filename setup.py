# cffi has no pyproject-only way to declare cffi_modules; everything else is in pyproject.toml.
from setuptools import setup

setup(cffi_modules=["cffi_build/build_hostrt.py:ffibuilder", "cffi_build/build_hostrt.py:abi_builder"])
