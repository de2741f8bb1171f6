"""The tree stays lint-clean and strictly typed (ruff, mypy --strict outside _native)."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def _run(*cmd: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=600)


@pytest.mark.skipif(shutil.which("ruff") is None and not (Path(sys.executable).parent / "ruff").exists(),
                    reason="ruff not installed")  # fmt: skip
def test_ruff():
    ruff = shutil.which("ruff") or str(Path(sys.executable).parent / "ruff")
    out = _run(ruff, "check", "aioge", "tests", "benchmarks", "examples", "tools")
    assert out.returncode == 0, out.stdout[-4000:]


def test_mypy_strict():
    pytest.importorskip("mypy")
    out = _run(sys.executable, "-m", "mypy")
    assert out.returncode == 0, out.stdout[-4000:]


def test_import_contracts():
    """The import-linter contracts of pyproject.toml: the layers, the pure graph compiler, and no
    import circle among the siblings of any package of aioge (type-only imports aside)."""
    pytest.importorskip("importlinter")
    cli = "import sys; from importlinter.cli import lint_imports_command; sys.exit(lint_imports_command())"
    out = _run(sys.executable, "-c", cli)
    assert out.returncode == 0, out.stdout[-4000:]
    assert "0 broken" in out.stdout, out.stdout[-4000:]
