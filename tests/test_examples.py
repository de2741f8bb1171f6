"""The examples run end to end (they assert their own results)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"


@pytest.mark.parametrize("script", ["quickstart.py", "onnx_inference.py", "pipeline.py"])
def test_example_runs(script):
    out = subprocess.run([sys.executable, str(EXAMPLES / script)], capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stdout[-2000:] + out.stderr[-2000:]
    if script == "onnx_inference.py":
        worst = float(out.stdout.rsplit("over all outputs:", 1)[1].split()[0])
        assert worst < 1e-3
