"""examples/serve_onnx.py runs end to end (it checks its own answers and the server's exit code)."""

from __future__ import annotations

import subprocess
import sys

from tests.support.paths import ROOT


def test_serve_onnx_example():
    out = subprocess.run([sys.executable, str(ROOT / "examples" / "serve_onnx.py")], capture_output=True, text=True,
                         timeout=300, cwd=ROOT)  # fmt: skip
    assert out.returncode == 0, out.stdout[-2000:] + out.stderr[-2000:]
    assert "tritonclient binary" in out.stdout and "server exited with 0" in out.stdout
