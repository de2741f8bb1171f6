"""A new user's first hour: what goes wrong on a fresh clone says what to do."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def python(*args: str, cwd: Path | str | None = None, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, *args], capture_output=True, text=True, timeout=120, cwd=cwd,
                          env={**os.environ, **env})  # fmt: skip


def test_importing_from_an_unbuilt_source_tree_says_so(tmp_path):
    """Item 1: ``import aioge`` at the root of a checkout whose package is not built (the
    installed one is shadowed) names the source tree, not a "circular import"."""
    shutil.copytree(ROOT / "aioge", tmp_path / "aioge",
                    ignore=shutil.ignore_patterns("*.so", "_acl_abi.py", "_hostrt.c", "__pycache__"))  # fmt: skip
    shutil.copy(ROOT / "pyproject.toml", tmp_path)
    (tmp_path / "cffi_build").mkdir()
    out = python("-c", "import aioge", cwd=tmp_path)
    assert out.returncode != 0
    last = out.stderr.strip().splitlines()[-1]
    assert last.startswith("aioge.errors.BackendError: you are importing aioge from the source tree at"), last
    assert str(tmp_path) in last and "pip install -e ." in last and "circular" not in last


def test_a_bad_env_setting_fails_the_import_naming_it():
    """Item 8 (Python side): not silently ignored."""
    out = python("-c", "import aioge", AIOGE_AWAIT_SPIN_US="fast")
    assert out.returncode != 0
    last = out.stderr.strip().splitlines()[-1]
    assert last == "aioge.errors.BackendError: AIOGE_AWAIT_SPIN_US='fast' is not a number", last


def test_mypy_sees_aioge_through_the_install(tmp_path):
    """Item 14: the README's editable install is a path entry that type checkers follow
    (setuptools' default for this layout, an import hook, hid aioge from mypy)."""
    pytest.importorskip("mypy")
    (tmp_path / "user.py").write_text("import aioge\n")
    # finding the module is what failed ("Cannot find implementation or library stub"); skipping
    # its analysis keeps this quick
    out = python("-m", "mypy", "--no-incremental", "--follow-imports=skip", "user.py", cwd=tmp_path)
    assert out.returncode == 0 and "Success" in out.stdout, out.stdout
