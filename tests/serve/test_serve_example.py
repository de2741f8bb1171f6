"""examples/serve_onnx.py runs end to end (it checks its own answers and the server's exit code)."""

from __future__ import annotations

import os
import subprocess
import sys

from tests.support.paths import ROOT


def test_serve_onnx_example():
    out = subprocess.run([sys.executable, str(ROOT / "examples" / "serve_onnx.py")], capture_output=True, text=True,
                         timeout=300, cwd=ROOT)  # fmt: skip
    assert out.returncode == 0, out.stdout[-2000:] + out.stderr[-2000:]
    assert "tritonclient binary" in out.stdout and "server exited with 0" in out.stdout


def test_serve_onnx_example_without_extras_says_what_to_install(tmp_path):
    blocked = tmp_path / "blocked"
    blocked.mkdir()
    (blocked / "httpx.py").write_text("raise ImportError(\"No module named 'httpx'\")\n")
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(blocked), str(ROOT)]), TMPDIR=str(tmp_path))
    out = subprocess.run([sys.executable, str(ROOT / "examples" / "serve_onnx.py")], capture_output=True, text=True,
                         timeout=300, cwd=ROOT, env=env)  # fmt: skip
    assert out.returncode == 1
    assert "needs httpx: pip install 'httpx'" in out.stderr and "Traceback" not in out.stderr, out.stderr


def test_serve_onnx_example_failed_start_leaks_no_temporary_directory(tmp_path):
    (tmp_path / "bad.onnx").write_bytes(b"not a model")
    env = dict(os.environ, TMPDIR=str(tmp_path))
    out = subprocess.run([sys.executable, str(ROOT / "examples" / "serve_onnx.py"), str(tmp_path / "bad.onnx")],
                         capture_output=True, text=True, timeout=300, cwd=ROOT, env=env)  # fmt: skip
    assert out.returncode == 1 and "the server did not start" in out.stderr, out.stderr
    assert "Traceback" not in out.stderr, out.stderr
    assert not list(tmp_path.glob("aioge-serve-*"))
